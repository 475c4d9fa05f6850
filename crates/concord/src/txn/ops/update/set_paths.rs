//! `SET a.b.c = expr`: an assignment to a struct's field, as an assignment to its
//! column that rebuilds the struct with every other field as it was.
//!
//! Invariant: the rebuilt value differs from the old one only at the assigned paths. A
//! NULL struct becomes a struct whose other fields are NULL (as SQL's composite field
//! assignment does); a field that takes no NULL then refuses the row, naming it.

use super::UpdatePlanError;
use crate::error::PredicateError;
use crate::format::manifest::Assignment;
use crate::format::schema::types::nested::split_path;
use crate::format::schema::{unquote, ColumnNameError, ColumnType, Schema};

/// `set` with assignments to struct fields folded into one assignment per column.
pub(crate) fn fold_struct_fields(schema: &Schema, set: &[Assignment]) -> Result<Vec<Assignment>, UpdatePlanError> {
    let mut out: Vec<Assignment> = Vec::new();
    // Column index -> (path below the column, expression).
    let mut nested: Vec<(usize, Vec<(Vec<String>, String)>)> = Vec::new();
    for a in set {
        let segments = split_path(&a.column);
        if schema.resolve(a.column.trim()).is_ok() || segments.len() < 2 {
            out.push(a.clone());
            continue;
        }
        schema.resolve_path(&a.column)?;
        let column = schema.resolve(&segments[0])?;
        let index = schema.fields.iter().position(|f| f.id == column.id).expect("resolved");
        // The path's names as the schema spells them (resolve_path matched them).
        let mut names = Vec::new();
        let mut at = &column.column_type;
        for segment in &segments[1..] {
            let wanted = unquote(segment).map_or_else(|| segment.clone(), |q| q.replace("\"\"", "\""));
            let ColumnType::Struct(fields) = at else {
                let known = "the fields of structs (SET reaches into structs, not lists or maps)".into();
                return Err(ColumnNameError::Unknown { name: a.column.clone(), known }.into());
            };
            let field = fields
                .iter()
                .find(|f| f.name == wanted)
                .or_else(|| fields.iter().find(|f| f.name.to_lowercase() == wanted.to_lowercase()))
                .expect("resolve_path matched it");
            names.push(field.name.clone());
            at = &field.column_type;
        }
        match nested.iter_mut().find(|(i, _)| *i == index) {
            Some((_, paths)) => {
                if paths.iter().any(|(p, _)| p.starts_with(&names) || names.starts_with(p)) {
                    return Err(PredicateError::Invalid {
                        sql: format!("{} = {}", a.column, a.expr),
                        reason: format!("'{}' is set twice (or with a struct around it)", a.column),
                    }
                    .into());
                }
                paths.push((names, a.expr.clone()))
            }
            None => nested.push((index, vec![(names, a.expr.clone())])),
        }
    }
    for (index, paths) in nested {
        let column = &schema.fields[index];
        let access = format!("\"{}\"", column.name.replace('"', "\"\""));
        out.push(Assignment { column: access.clone(), expr: rebuild(&column.column_type, &access, &[], &paths) });
    }
    Ok(out)
}

/// The struct of type `t` (its old value `access`, at `at` below the column) with the
/// fields at `paths` set to their expressions.
fn rebuild(t: &ColumnType, access: &str, at: &[String], paths: &[(Vec<String>, String)]) -> String {
    let ColumnType::Struct(fields) = t else { return access.to_string() };
    let parts: Vec<String> = fields
        .iter()
        .map(|f| {
            let literal = format!("'{}'", f.name.replace('\'', "''"));
            let old = format!("{access}[{literal}]");
            let path: Vec<String> = at.iter().cloned().chain([f.name.clone()]).collect();
            let value = match paths.iter().find(|(p, _)| *p == path) {
                Some((_, expr)) => format!("({expr})"),
                None if paths.iter().any(|(p, _)| p.starts_with(&path)) => rebuild(&f.column_type, &old, &path, paths),
                None => old,
            };
            format!("{literal}, {value}")
        })
        .collect();
    format!("named_struct({})", parts.join(", "))
}

//! Column names in queries follow the rule of every other command: a name means the
//! column of exactly that name, else the one column whose name matches it ignoring
//! case; if several do, it must be written in double quotes. (DataFusion alone lower-
//! cases unquoted names, so `CustomerId` would find no column `CustomerId`.)

use std::ops::ControlFlow;

use datafusion::sql::sqlparser::ast::{visit_expressions_mut, Expr, Ident, Statement};

use super::SqlError;
use crate::format::schema::{ColumnNameError, Schema};

/// Rewrites every unquoted column name of `statement` that names a column of `tables`
/// (registered name in lower case, schema) into that column's exact, quoted name. A
/// qualified name (`t.Id`) resolves in its table when the qualifier is a registered
/// name; an unqualified one in every table. Names matching no column (aliases, names
/// from subqueries) are left to DataFusion.
pub(crate) fn resolve_columns(statement: &mut Statement, tables: &[(String, Schema)]) -> Result<(), SqlError> {
    let outcome = visit_expressions_mut(statement, |e| {
        let resolved = match e {
            Expr::Identifier(ident) => resolve(ident, tables.iter().map(|(_, s)| s)),
            Expr::CompoundIdentifier(parts) if parts.len() >= 2 => {
                let qualifier = parts[parts.len() - 2].value.to_ascii_lowercase();
                let named: Vec<&Schema> = tables.iter().filter(|(n, _)| *n == qualifier).map(|(_, s)| s).collect();
                let last = parts.last_mut().expect("two parts or more");
                if named.is_empty() {
                    resolve(last, tables.iter().map(|(_, s)| s))
                } else {
                    resolve(last, named.into_iter())
                }
            }
            _ => Ok(()),
        };
        match resolved {
            Ok(()) => ControlFlow::Continue(()),
            Err(e) => ControlFlow::Break(e),
        }
    });
    match outcome {
        ControlFlow::Break(e) => Err(e),
        ControlFlow::Continue(()) => Ok(()),
    }
}

/// `ident` (if unquoted) as the exact, quoted name of the one column of `schemas` it
/// names; unchanged if it names none.
fn resolve<'s>(ident: &mut Ident, schemas: impl Iterator<Item = &'s Schema>) -> Result<(), SqlError> {
    if ident.quote_style.is_some() {
        return Ok(());
    }
    let mut exact = false;
    let mut candidates: Vec<String> = Vec::new();
    for schema in schemas {
        match schema.resolve(&ident.value) {
            Ok(field) if field.name == ident.value => exact = true,
            Ok(field) => candidates.push(field.name.clone()),
            Err(ColumnNameError::Ambiguous { candidates: more, .. }) => candidates.extend(more),
            Err(_) => {}
        }
    }
    candidates.sort();
    candidates.dedup();
    let name = match (exact, candidates.as_slice()) {
        (true, _) => ident.value.clone(),
        (false, [one]) => one.clone(),
        (false, []) => return Ok(()),
        (false, _) => return Err(SqlError::AmbiguousColumn { column: ident.value.clone(), candidates }),
    };
    *ident = Ident::with_quote('"', name);
    Ok(())
}

//! Schema changes, table properties and compaction.

use std::collections::BTreeMap;
use std::sync::Arc;

use arrow::array::{Array, RecordBatch, RecordBatchOptions};
use arrow::datatypes::Schema as ArrowSchema;
use chrono::{DateTime, Utc};

use super::{Table, WriteProgress};
use crate::error::{AlterError, DefaultProblem, PredicateError, WriteError};
use crate::format::manifest::{
    field_ids_left_for, IsolationLevel, NewColumn, Operation, FIELD_ID_BLOCK, PROPERTY_AUTO_COMPACT, PROPERTY_COOPERATIVE,
    PROPERTY_ICEBERG_PUBLISH, PROPERTY_ISOLATION,
};
use crate::format::schema::types::nested::split_path;
use crate::format::schema::{ColumnSpec, ColumnType, Field, Schema, SchemaParseError, MAX_COLUMNS};
use crate::io::predicate;
use crate::io::values::{self, CastFailure};
use crate::io::write::MAX_ROWS_PER_FILE;
use crate::txn::ops::compact;
use crate::txn::PreparedTransaction;

/// Compaction's default `target_rows`: one full data file.
pub const DEFAULT_COMPACT_TARGET_ROWS: u64 = MAX_ROWS_PER_FILE as u64;

/// Properties a table understands, and what their values may be.
const KNOWN_PROPERTIES: &[(&str, &str)] = &[
    (PROPERTY_ISOLATION, "serializable or snapshot"),
    (PROPERTY_COOPERATIVE, "true or false"),
    (PROPERTY_ICEBERG_PUBLISH, "true or false"),
    (PROPERTY_AUTO_COMPACT, "a number of small fragments, 1 or more"),
];

impl Table {
    /// Prepares an added column (`name type [not null] [default <SQL expression>]`), or
    /// an added struct field (`column.field type`, or deeper: `a.b.c type`; the name up
    /// to its last dot names a struct, when its first part names a nested column).
    pub(super) async fn prepare_add_column(&self, definition: &str) -> Result<PreparedTransaction, WriteError> {
        let base = self.write_base().await?;
        let spec = ColumnSpec::parse(definition).map_err(AlterError::from)?;
        let schema = base.schema();
        if schema.field(&spec.name).is_some() {
            return Err(AlterError::ColumnExists { name: spec.name }.into());
        }
        let segments = split_path(&spec.name);
        let quoted = definition.trim_start().starts_with('"');
        // A path into a nested column; a dotted name beside a flat column is a new
        // column of that name, as before nested types.
        if !quoted && segments.len() > 1 && schema.resolve(&segments[0]).is_ok_and(|f| f.column_type.is_nested()) {
            let column = new_struct_field(schema, &spec, &segments)?;
            ids_left_for(schema, &column)?;
            return Ok(base.transaction(Operation::AddColumn { column }, base.env.clock.now()));
        }
        let count = schema.fields.len() + 1;
        if count > MAX_COLUMNS {
            return Err(AlterError::Definition(SchemaParseError::TooManyColumns { count, limit: MAX_COLUMNS }).into());
        }
        let now = base.env.clock.now();
        let default = match &spec.default_sql {
            Some(sql) => evaluate_default(&spec, sql, now)?,
            None => None,
        };
        if !spec.nullable && default.is_none() {
            return Err(AlterError::RequiredWithoutDefault { name: spec.name }.into());
        }
        let column =
            NewColumn { name: spec.name, column_type: spec.column_type, nullable: spec.nullable, default, parent: None, field_id: None };
        ids_left_for(schema, &column)?;
        Ok(base.transaction(Operation::AddColumn { column }, now))
    }

    /// Prepares a dropped column or struct field.
    pub(super) async fn prepare_drop_column(&self, name: &str) -> Result<PreparedTransaction, WriteError> {
        let base = self.write_base().await?;
        let field = base.existing_column(name)?;
        let beside = struct_field_siblings(base.schema(), field, name, "dropped")?;
        if beside.len() == 1 {
            return Err(match base.schema().fields.iter().any(|f| f.id == field.id) {
                true => AlterError::LastColumn { name: name.to_string() },
                false => {
                    AlterError::NestedField { path: name.to_string(), why: "a struct keeps at least one field (add another first)".into() }
                }
            }
            .into());
        }
        Ok(base.transaction(Operation::DropColumn { field_id: field.id, name: field.name.clone() }, base.env.clock.now()))
    }

    /// Prepares a renamed column or struct field.
    pub(super) async fn prepare_rename_column(&self, from: &str, to: &str) -> Result<PreparedTransaction, WriteError> {
        let base = self.write_base().await?;
        let field = base.existing_column(from)?;
        // The new name as written, or in double quotes (`"Customer ID"`).
        let to = match crate::format::schema::unquote(to.trim()) {
            Some(quoted) => quoted.replace("\"\"", "\""),
            None => to.trim().to_string(),
        };
        crate::format::schema::check_column_name(&to).map_err(AlterError::from)?;
        if struct_field_siblings(base.schema(), field, from, "renamed")?.iter().any(|f| f.name == to) {
            return Err(AlterError::ColumnExists { name: to }.into());
        }
        Ok(base.transaction(Operation::RenameColumn { field_id: field.id, from: field.name.clone(), to }, base.env.clock.now()))
    }

    /// Prepares a widened column.
    pub(super) async fn prepare_widen_column(&self, name: &str, to: &str) -> Result<PreparedTransaction, WriteError> {
        let base = self.write_base().await?;
        let field = base.existing_column(name)?;
        let to: crate::format::schema::ColumnType = to.parse().map_err(AlterError::from)?;
        if !field.column_type.widens_to(&to) {
            return Err(AlterError::NotWider { name: field.name.clone(), from: field.column_type.clone(), to }.into());
        }
        let operation = Operation::WidenColumn { field_id: field.id, name: field.name.clone(), from: field.column_type.clone(), to };
        Ok(base.transaction(operation, base.env.clock.now()))
    }

    /// Prepares a change of table properties.
    pub(super) async fn prepare_set_properties(
        &self,
        set: &BTreeMap<String, String>,
        unset: &[String],
    ) -> Result<PreparedTransaction, WriteError> {
        let base = self.write_base().await?;
        let set = checked_properties(set, unset)?;
        Ok(base.transaction(Operation::SetProperties { set, unset: unset.to_vec() }, base.env.clock.now()))
    }

    /// Plans and rewrites the groups of a compaction (telling the handle's progress
    /// function as groups are rewritten); commits nothing.
    pub(super) async fn prepare_compact(&self, target_rows: u64) -> Result<PreparedTransaction, WriteError> {
        if target_rows == 0 {
            return Err(AlterError::BadTargetRows { given: target_rows }.into());
        }
        let base = self.write_base().await?;
        let plan = compact::plan(&base.fragments().await?, target_rows);
        let mut groups = Vec::with_capacity(plan.len());
        let report = |done: usize| {
            self.progress.report(WriteProgress { groups_rewritten: done as u64, groups: plan.len() as u64, ..WriteProgress::default() })
        };
        for (done, fragments) in plan.iter().enumerate() {
            report(done);
            groups.push(compact::rewrite(&base.store, &base.env, base.schema(), fragments).await?);
        }
        report(plan.len());
        Ok(base.transaction(Operation::Compact { target_rows, groups }, base.env.clock.now()))
    }

    fn existing_column(&self, name: &str) -> Result<&Field, AlterError> {
        Ok(self.schema().resolve_path(name)?)
    }
}

/// The fields beside `field` (the table's columns, or its struct's fields): those a
/// rename must not take the name of. Refused for a list's element or a map's key or
/// value, which are not named by users.
fn struct_field_siblings<'a>(schema: &'a Schema, field: &Field, path: &str, what: &str) -> Result<&'a [Field], AlterError> {
    schema.siblings_of(field.id).ok_or_else(|| AlterError::NestedField {
        path: path.to_string(),
        why: format!("only columns and struct fields are {what}; a list's element and a map's key and value stay as they are"),
    })
}

/// The struct field `spec` adds (its name a path of `segments`): nullable, without a
/// default (rows written before have no struct value to give it one).
fn new_struct_field(schema: &Schema, spec: &ColumnSpec, segments: &[String]) -> Result<NewColumn, AlterError> {
    let (leaf, parents) = segments.split_last().expect("a path has segments");
    let path = parents.join(".");
    let parent = schema.resolve_path(&path)?;
    let ColumnType::Struct(fields) = &parent.column_type else {
        return Err(AlterError::NestedField {
            path: spec.name.clone(),
            why: format!("'{path}' is {}, not a struct: fields are added to structs", parent.column_type),
        });
    };
    let name = crate::format::schema::unquote(leaf).map_or_else(|| leaf.clone(), |q| q.replace("\"\"", "\""));
    crate::format::schema::check_column_name(&name)?;
    if fields.iter().any(|f| f.name == name) {
        return Err(AlterError::ColumnExists { name: spec.name.clone() });
    }
    if !spec.nullable || spec.default_sql.is_some() {
        return Err(AlterError::NestedField {
            path: spec.name.clone(),
            why: "an added struct field is nullable and has no default (rows written before read it as NULL)".into(),
        });
    }
    Ok(NewColumn { name, column_type: spec.column_type.clone(), nullable: true, default: None, parent: Some(parent.id), field_id: None })
}

/// `set` checked (known properties, valid values) and normalised; `unset` checked.
pub(crate) fn checked_properties(set: &BTreeMap<String, String>, unset: &[String]) -> Result<BTreeMap<String, String>, AlterError> {
    for key in set.keys().chain(unset) {
        if !KNOWN_PROPERTIES.iter().any(|(k, _)| k == key) {
            let known = KNOWN_PROPERTIES.iter().map(|(k, _)| *k).collect::<Vec<_>>().join(", ");
            return Err(AlterError::UnknownProperty { key: key.clone(), known });
        }
    }
    for (key, value) in set {
        let valid = match key.as_str() {
            PROPERTY_ISOLATION => IsolationLevel::parse(value).is_some(),
            PROPERTY_COOPERATIVE | PROPERTY_ICEBERG_PUBLISH => ["true", "false"].contains(&value.trim().to_ascii_lowercase().as_str()),
            PROPERTY_AUTO_COMPACT => value.trim().parse::<u64>().is_ok_and(|n| n >= 1),
            _ => true,
        };
        if !valid {
            let expected = KNOWN_PROPERTIES.iter().find(|(k, _)| k == key).map_or("", |(_, e)| e).to_string();
            return Err(AlterError::BadPropertyValue { key: key.clone(), value: value.clone(), expected });
        }
    }
    Ok(set.iter().map(|(k, v)| (k.clone(), v.trim().to_ascii_lowercase())).collect())
}

/// Evaluates a default's SQL expression (which may not read columns; `now()` is `now`)
/// to its value as text castable to the column type; `None` for a NULL default. A value
/// that does not fit the column is refused (the rule of every write: see `io::cast`).
fn evaluate_default(spec: &ColumnSpec, sql: &str, now: DateTime<Utc>) -> Result<Option<String>, AlterError> {
    let bad = |problem: DefaultProblem| AlterError::BadDefault { name: spec.name.clone(), sql: sql.to_string(), problem };
    let failed =
        |e: &dyn std::fmt::Display| bad(DefaultProblem::Expression(PredicateError::Failed { sql: sql.to_string(), reason: e.to_string() }));
    let no_columns = Schema { fields: Vec::new(), next_field_id: 0 };
    let (expr, _) = predicate::compile_value(sql, &no_columns, now).map_err(|e| match e {
        PredicateError::UnknownColumn { column, .. } => bad(DefaultProblem::ReadsColumn { column }),
        other => bad(DefaultProblem::Expression(other)),
    })?;
    let one_row =
        RecordBatch::try_new_with_options(Arc::new(ArrowSchema::empty()), vec![], &RecordBatchOptions::new().with_row_count(Some(1)))
            .map_err(|e| failed(&e))?;
    let value = expr.evaluate(&one_row).and_then(|v| v.into_array(1)).map_err(|e| failed(&e))?;
    if value.is_null(0) {
        return Ok(None);
    }
    let expected = spec.column_type.clone();
    let typed = values::to_column(&value, &expected, values::Source::Any).map_err(|e| match e {
        CastFailure::Type { found } => bad(DefaultProblem::WrongType { found, expected: expected.clone() }),
        CastFailure::Value { value, .. } => bad(DefaultProblem::DoesNotFit { value, expected: expected.clone() }),
    })?;
    // Every value of a column type has a text form that casts back.
    let text = crate::io::values::display_value(typed.as_ref(), 0);
    let field =
        Field { id: 0, name: spec.name.clone(), column_type: expected, nullable: true, default: Some(text.clone()), widened_from: None };
    if field.default_array(1).as_ref() != typed.as_ref() {
        return Err(bad(DefaultProblem::NotStorable { text }));
    }
    Ok(Some(text))
}

/// Whether the chain's block of field ids (FORMAT.md §17: a branch's own) has ids left
/// for `column` and its nested fields.
fn ids_left_for(schema: &Schema, column: &NewColumn) -> Result<(), AlterError> {
    match field_ids_left_for(schema, &column.column_type) {
        true => Ok(()),
        false => Err(AlterError::FieldIdsExhausted { name: column.name.clone(), limit: FIELD_ID_BLOCK - 1 }),
    }
}

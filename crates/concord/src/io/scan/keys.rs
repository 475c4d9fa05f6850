//! Key sets for merge (upsert): which rows share a key with the source rows.
//! Keys compare by value through Arrow's row format (multi-column keys included); a
//! key with a NULL part matches nothing.

use std::collections::HashMap;
use std::sync::Arc;

use arrow::array::{Array, BooleanArray, RecordBatch};
use arrow::datatypes::SchemaRef;
use arrow::error::ArrowError;
use arrow::row::{OwnedRow, RowConverter, SortField};

use crate::format::schema::{ColumnNameError, Field, Schema};
use crate::io::predicate::RowTest;

pub(crate) struct KeySet {
    fields: Vec<Field>,
    schema: SchemaRef,
    converter: RowConverter,
    /// Key columns' indices in the table schema.
    indices: Vec<usize>,
    /// Each key, and where its row is: (batch, row) of the batches it was built from.
    keys: HashMap<OwnedRow, (usize, usize)>,
}

/// What to do with a key that occurs twice while building a key set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Duplicates {
    Refuse,
    /// The first row of a key is its row.
    KeepFirst,
}

/// A key that occurs twice in the rows a key set is built from.
#[derive(Debug)]
pub(crate) struct DuplicateKey(pub String);

impl KeySet {
    /// The key columns `names` (each resolved by [`Schema::resolve`]) of `table`, in
    /// table order.
    pub(crate) fn fields_for(table: &Schema, names: &[String]) -> Result<Vec<Field>, ColumnNameError> {
        let mut ids = Vec::with_capacity(names.len());
        for name in names {
            let field = table.resolve(name.trim())?;
            if field.column_type.is_nested() {
                return Err(ColumnNameError::NestedKey { name: field.name.clone(), column_type: field.column_type.sql_name() });
            }
            ids.push(field.id);
        }
        Ok(table.fields.iter().filter(|f| ids.contains(&f.id)).cloned().collect())
    }

    /// The keys of `batches` (table schema). Fails on a key that occurs twice, unless
    /// `duplicates` says to keep the first.
    pub(crate) fn from_rows(
        table: &Schema,
        fields: Vec<Field>,
        batches: &[RecordBatch],
        duplicates: Duplicates,
    ) -> Result<KeySet, DuplicateKey> {
        let full = table.arrow_schema();
        let indices: Vec<usize> = fields.iter().map(|f| full.index_of(&f.name).expect("key field")).collect();
        let schema: SchemaRef = Arc::new(full.project(&indices).expect("key fields"));
        let converter = RowConverter::new(fields.iter().map(|f| SortField::new(f.column_type.arrow_type())).collect())
            .expect("key types are row-convertible");
        let mut set = KeySet { fields, schema, converter, indices: indices.clone(), keys: HashMap::new() };
        for (b, batch) in batches.iter().enumerate() {
            let columns: Vec<_> = indices.iter().map(|i| batch.column(*i).clone()).collect();
            let rows = set.converter.convert_columns(&columns).expect("columns match the converter");
            for (i, row) in rows.iter().enumerate() {
                if set.keys.contains_key(&row.owned()) {
                    if duplicates == Duplicates::KeepFirst {
                        continue;
                    }
                    let shown: Vec<String> =
                        columns.iter().map(|c| arrow::util::display::array_value_to_string(c, i).unwrap_or_default()).collect();
                    return Err(DuplicateKey(shown.join(", ")));
                }
                set.keys.insert(row.owned(), (b, i));
            }
        }
        Ok(set)
    }

    /// The key of each row of `batch` (table schema), and where the key set's row with
    /// that key is, if it has one.
    pub(crate) fn locate(&self, batch: &RecordBatch) -> Result<Vec<(OwnedRow, Option<(usize, usize)>)>, ArrowError> {
        let columns: Vec<_> = self.indices.iter().map(|i| batch.column(*i).clone()).collect();
        let rows = self.converter.convert_columns(&columns)?;
        Ok(rows
            .iter()
            .map(|row| {
                let owned = row.owned();
                let at = self.keys.get(&owned).copied();
                (owned, at)
            })
            .collect())
    }
}

impl RowTest for KeySet {
    fn describe(&self) -> String {
        format!("the keys ({})", self.fields.iter().map(|f| f.name.as_str()).collect::<Vec<_>>().join(", "))
    }
    fn fields(&self) -> &[Field] {
        &self.fields
    }
    fn schema(&self) -> &SchemaRef {
        &self.schema
    }
    fn evaluate(&self, batch: &RecordBatch) -> Result<BooleanArray, ArrowError> {
        let rows = self.converter.convert_columns(batch.columns())?;
        let nulls = |i: usize| batch.columns().iter().any(|c| c.is_null(i));
        Ok(rows.iter().enumerate().map(|(i, row)| Some(!nulls(i) && self.keys.contains_key(&row.owned()))).collect())
    }
}

//! Key sets for merge (upsert): which rows share a key with the source rows.
//! Keys compare by value through Arrow's row format (multi-column keys included); a
//! key with a NULL part matches nothing.

use std::collections::HashSet;
use std::sync::Arc;

use arrow::array::{Array, BooleanArray, RecordBatch};
use arrow::datatypes::SchemaRef;
use arrow::error::ArrowError;
use arrow::row::{OwnedRow, RowConverter, SortField};

use super::predicate::RowTest;
use crate::format::schema::{Field, Schema};

pub(crate) struct KeySet {
    fields: Vec<Field>,
    schema: SchemaRef,
    converter: RowConverter,
    keys: HashSet<OwnedRow>,
}

/// A key that occurs twice in the rows a key set is built from.
#[derive(Debug)]
pub(crate) struct DuplicateKey(pub String);

impl KeySet {
    /// The key columns `names` of `table`, in table order.
    pub fn fields_for(table: &Schema, names: &[String]) -> Result<Vec<Field>, String> {
        if let Some(unknown) = names.iter().find(|n| table.field(n).is_none()) {
            return Err(unknown.clone());
        }
        Ok(table.fields.iter().filter(|f| names.contains(&f.name)).cloned().collect())
    }

    /// The keys of `batches` (table schema). Fails on a key that occurs twice.
    pub fn from_rows(table: &Schema, fields: Vec<Field>, batches: &[RecordBatch]) -> Result<KeySet, DuplicateKey> {
        let full = table.arrow_schema();
        let indices: Vec<usize> = fields.iter().map(|f| full.index_of(&f.name).expect("key field")).collect();
        let schema: SchemaRef = Arc::new(full.project(&indices).expect("key fields"));
        let converter = RowConverter::new(fields.iter().map(|f| SortField::new(f.column_type.arrow_type())).collect())
            .expect("key types are row-convertible");
        let mut set = KeySet { fields, schema, converter, keys: HashSet::new() };
        for batch in batches {
            let columns: Vec<_> = indices.iter().map(|i| batch.column(*i).clone()).collect();
            let rows = set.converter.convert_columns(&columns).expect("columns match the converter");
            for (i, row) in rows.iter().enumerate() {
                if !set.keys.insert(row.owned()) {
                    let shown: Vec<String> = columns
                        .iter()
                        .map(|c| arrow::util::display::array_value_to_string(c, i).unwrap_or_default())
                        .collect();
                    return Err(DuplicateKey(shown.join(", ")));
                }
            }
        }
        Ok(set)
    }
}

impl RowTest for KeySet {
    fn fields(&self) -> &[Field] {
        &self.fields
    }
    fn schema(&self) -> &SchemaRef {
        &self.schema
    }
    fn evaluate(&self, batch: &RecordBatch) -> Result<BooleanArray, ArrowError> {
        let rows = self.converter.convert_columns(batch.columns())?;
        let nulls = |i: usize| batch.columns().iter().any(|c| c.is_null(i));
        Ok(rows.iter().enumerate().map(|(i, row)| Some(!nulls(i) && self.keys.contains(&row.owned()))).collect())
    }
}

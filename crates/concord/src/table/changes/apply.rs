//! Applying a change feed to a version's rows: what a replica does, and how the tests
//! check a feed (the rows of version V with the changes of V..W applied are the rows
//! of W, row id by row id).

use std::collections::BTreeMap;
use std::sync::Arc;

use arrow::array::{AsArray, RecordBatch};
use arrow::datatypes::{Int64Type, SchemaRef};
use arrow::row::{OwnedRow, RowConverter, SortField};

use super::{DELETE, INSERT, POSTIMAGE, PREIMAGE};

/// The changes do not apply to the rows: a removed row that is not there or differs
/// from its preimage, or an added row already there.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the change of row {row_id} ({change}, version {version}) does not apply: {reason}")]
#[non_exhaustive]
pub struct ApplyError {
    /// The row.
    pub row_id: i64,
    /// Its change (`_change_type`).
    pub change: String,
    /// The version it is of.
    pub version: i64,
    /// Why.
    pub reason: String,
}

/// The rows of a version, by row id (each the same columns, in the same order).
#[derive(Debug)]
pub struct RowsById {
    schema: SchemaRef,
    converter: RowConverter,
    rows: BTreeMap<i64, OwnedRow>,
}

impl RowsById {
    /// `batches`: a scan with row ids (the table's columns, then `_row_id`).
    pub fn new(schema: SchemaRef, batches: &[RecordBatch]) -> Result<RowsById, arrow::error::ArrowError> {
        let columns = schema.fields().len() - 1;
        let table = Arc::new(schema.project(&(0..columns).collect::<Vec<_>>())?);
        let converter = RowConverter::new(table.fields().iter().map(|f| SortField::new(f.data_type().clone())).collect())?;
        let mut out = RowsById { schema: table, converter, rows: BTreeMap::new() };
        for batch in batches {
            let rows = out.converter.convert_columns(&batch.columns()[..columns])?;
            let ids = batch.column(columns).as_primitive::<Int64Type>();
            for (i, row) in rows.iter().enumerate() {
                out.rows.insert(ids.value(i), row.owned());
            }
        }
        Ok(out)
    }

    /// Rows by id.
    pub fn len(&self) -> usize {
        self.rows.len()
    }

    /// Whether it holds no row.
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// Applies `changes` (a feed of every column of the table, in order).
    pub fn apply(&mut self, changes: &[RecordBatch]) -> Result<(), ApplyError> {
        let columns = self.schema.fields().len();
        for batch in changes {
            let table = self.converter.convert_columns(&batch.columns()[..columns]).map_err(|e| failure(0, "", 0, e.to_string()))?;
            let kinds = batch.column(columns).as_string::<i32>();
            let ids = batch.column(columns + 1).as_primitive::<Int64Type>();
            let versions = batch.column(columns + 2).as_primitive::<Int64Type>();
            for i in 0..batch.num_rows() {
                let (id, kind, version) = (ids.value(i), kinds.value(i), versions.value(i));
                let row = table.row(i);
                match kind {
                    DELETE | PREIMAGE => match self.rows.remove(&id) {
                        Some(found) if found.row() == row => {}
                        Some(_) => return Err(failure(id, kind, version, "its preimage differs from the row".into())),
                        None => return Err(failure(id, kind, version, "no such row".into())),
                    },
                    INSERT | POSTIMAGE => {
                        if self.rows.insert(id, row.owned()).is_some() {
                            return Err(failure(id, kind, version, "a row of that id is there already".into()));
                        }
                    }
                    other => return Err(failure(id, other, version, "not a change type".into())),
                }
            }
        }
        Ok(())
    }

    /// Whether `other` holds the same rows under the same ids; else the first id that
    /// differs.
    pub fn first_difference(&self, other: &RowsById) -> Option<i64> {
        let ids = self.rows.keys().chain(other.rows.keys());
        ids.copied().find(|id| self.rows.get(id) != other.rows.get(id))
    }
}

fn failure(row_id: i64, change: &str, version: i64, reason: String) -> ApplyError {
    ApplyError { row_id, change: change.to_string(), version, reason }
}

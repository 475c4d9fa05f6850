//! Merge (upsert) on key columns: the live rows whose key matches a source row are
//! deleted and every source row is added, in one transaction (applied like an update).
//! A re-run re-matches the source keys against the fragments in scope.

use std::sync::Arc;

use crate::error::{CommitError, CorruptObject};
use crate::format::manifest::{Fragment, NewFragment};
use crate::format::schema::Schema;
use crate::io::keys::KeySet;
use crate::io::scan::{self, ScanPlan};
use crate::storage::TableStore;

/// The source keys of a prepared merge, read back from its own data files.
pub(crate) async fn source_keys(store: &TableStore, schema: &Schema, keys: &[String], source: &[NewFragment]) -> Result<KeySet, CommitError> {
    let corrupt = |reason: String| CorruptObject { path: "a merge's source data file".into(), reason };
    let fields = KeySet::fields_for(schema, keys).map_err(|k| corrupt(format!("key column '{k}' is no longer in the table")))?;
    let plan = Arc::new(ScanPlan { fields: schema.fields.clone(), output: schema.arrow_schema(), predicate: None });
    let mut batches = Vec::new();
    for new in source {
        let fragment = Fragment { id: 0, files: new.files.clone(), physical_rows: new.rows, deletion: None };
        batches.extend(scan::read_fragment(store, &fragment, plan.clone()).await.map_err(super::delete::scan_to_commit)?);
    }
    KeySet::from_rows(schema, fields, &batches).map_err(|d| corrupt(format!("duplicate key ({})", d.0)).into())
}

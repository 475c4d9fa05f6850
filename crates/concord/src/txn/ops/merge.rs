//! Merge (upsert) on key columns, in one transaction (applied like an update: the
//! matched live rows are deleted, new rows added).
//!
//! A source with every column replaces each matched key's rows by its row and inserts
//! the rest; a re-run re-matches the source keys against the fragments in scope.
//! A source lacking some columns (a *partial* merge, as Delta's `MERGE ... UPDATE SET`
//! of some columns) changes only the columns it has: each matched row is rewritten
//! with the source's values of those and keeps its own of the others; source rows
//! whose key matches no row are inserted with the missing columns at their default (or
//! NULL; a required column without default is then refused). A partial re-run merges
//! the rows in scope the same way, and a key it newly matches leaves the inserted rows.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use arrow::array::{ArrayRef, AsArray, BooleanArray, Int64Array, RecordBatch};
use arrow::compute::{filter_record_batch, interleave};
use arrow::datatypes::Int64Type;
use arrow::error::ArrowError;
use arrow::row::OwnedRow;

use super::delete;
use crate::env::Env;
use crate::error::{CommitError, InputError, WriteError};
use crate::format::manifest::{Fragment, FragmentDeletion, Manifest, NewFragment, Operation, PartialMerge, ROW_ID_COLUMN};
use crate::format::schema::Schema;
use crate::io::input::Rows;
use crate::io::scan::keys::{Duplicates, KeySet};
use crate::io::scan::{self, ScanPlan};
use crate::io::write;
use crate::storage::TableStore;
use crate::txn::conflict::RerunScope;

/// The merge of `input` (table schema) into `fragments` (the base version's) on `keys`.
pub(crate) async fn prepare(
    store: &TableStore,
    env: &Env,
    schema: &Schema,
    fragments: &[Fragment],
    input: Rows,
    keys: &[String],
    source: &str,
) -> Result<Operation, WriteError> {
    let fields = KeySet::fields_for(schema, keys)?;
    let key_names: Vec<String> = fields.iter().map(|f| f.name.clone()).collect();
    let key_ids: Vec<u32> = fields.iter().map(|f| f.id).collect();
    if let Some(missing) = fields.iter().find(|f| !input.present.contains(&f.id)) {
        return Err(InputError::MissingKey { file: source.to_string(), column: missing.name.clone() }.into());
    }
    let key_set = KeySet::from_rows(schema, fields, &input.batches, Duplicates::Refuse)
        .map_err(|d| InputError::DuplicateKey { file: source.to_string(), key: d.0 })?;
    if input.present.len() == schema.fields.len() {
        let deletions = delete::find(store, env, fragments, &key_set).await?;
        // A source row whose key matched a row keeps that row's id.
        let ids = ids_by_key(store, schema, fragments, &deletions, &key_set).await?;
        let rows = with_ids(&input.batches, &key_set, &ids).map_err(WriteError::encode)?;
        let fragments = write::write_fragments_keeping_ids(store, env, schema, &rows).await?;
        return Ok(Operation::Merge { keys: key_names, columns: key_ids, deletions, fragments, partial: None });
    }
    let source_rows = Source { keys: key_set, batches: input.batches, present: input.present.clone() };
    let matched = match_rows(store, env, schema, &source_rows, fragments).await?;
    let inserted = source_rows.unmatched(schema, &matched.keys).map_err(WriteError::encode)?;
    if let Some(e) = missing_for_insert(schema, &source_rows, &inserted, source) {
        return Err(e.into());
    }
    let mut added = write::write_fragments_keeping_ids(store, env, schema, &matched.rows).await?;
    let updated = added.len();
    added.extend(write::write_fragments(store, env, schema, &inserted).await?);
    let mut columns: Vec<u32> = key_ids.into_iter().chain(input.present.iter().copied()).collect();
    columns.sort_unstable();
    columns.dedup();
    Ok(Operation::Merge {
        keys: key_names,
        columns,
        deletions: matched.deletions,
        fragments: added,
        partial: Some(PartialMerge { present: input.present, updated }),
    })
}

/// A merge's source rows (table schema), by key.
pub(super) struct Source {
    keys: KeySet,
    batches: Vec<RecordBatch>,
    /// Field ids of the columns the source has.
    present: Vec<u32>,
}

impl Source {
    /// `existing` (rows whose keys are all in the source, table schema, then their row
    /// ids) with the source's values of its columns, each keeping its id.
    fn merged(&self, schema: &Schema, existing: &RecordBatch) -> Result<(RecordBatch, Vec<OwnedRow>), ArrowError> {
        let located = self.keys.locate(existing)?;
        let at: Vec<(usize, usize)> = located.iter().map(|(_, at)| at.expect("matched rows have source keys")).collect();
        let columns = schema
            .fields
            .iter()
            .enumerate()
            .map(|(j, f)| {
                if self.present.contains(&f.id) {
                    let sources: Vec<&dyn arrow::array::Array> = self.batches.iter().map(|b| b.column(j).as_ref()).collect();
                    interleave(&sources, &at)
                } else {
                    Ok(existing.column(j).clone())
                }
            })
            .collect::<Result<Vec<ArrayRef>, _>>()?;
        let columns = columns.into_iter().chain(existing.columns().get(schema.fields.len()).cloned()).collect();
        Ok((RecordBatch::try_new(existing.schema(), columns)?, located.into_iter().map(|(k, _)| k).collect()))
    }

    /// The source rows whose keys are not in `matched`, one per key (the first), the
    /// columns the source lacks at their default. (A re-run's source is read back from
    /// the merge's own rows, where a key matched twice has two rows carrying the matched
    /// rows' values of those columns: inserted, the key is one new row.)
    fn unmatched(&self, schema: &Schema, matched: &HashSet<OwnedRow>) -> Result<Vec<RecordBatch>, ArrowError> {
        let mut out = Vec::new();
        let mut seen = HashSet::new();
        for batch in &self.batches {
            let keep: BooleanArray =
                self.keys.locate(batch)?.into_iter().map(|(k, _)| Some(!matched.contains(&k) && seen.insert(k))).collect();
            let kept = filter_record_batch(batch, &keep)?;
            if kept.num_rows() == 0 {
                continue;
            }
            let columns = schema
                .fields
                .iter()
                .enumerate()
                .map(|(j, f)| if self.present.contains(&f.id) { kept.column(j).clone() } else { f.default_array(kept.num_rows()) })
                .collect();
            out.push(RecordBatch::try_new(kept.schema(), columns)?);
        }
        Ok(out)
    }
}

/// What matching the source against some fragments found.
struct Matched {
    deletions: Vec<FragmentDeletion>,
    /// The matched rows, merged.
    rows: Vec<RecordBatch>,
    keys: HashSet<OwnedRow>,
}

/// Matches `source` against the live rows of `fragments`: their deletions, and the
/// matched rows with the source's columns set.
async fn match_rows(
    store: &TableStore,
    env: &Env,
    schema: &Schema,
    source: &Source,
    fragments: &[Fragment],
) -> Result<Matched, WriteError> {
    let deletions = delete::find(store, env, fragments, &source.keys).await?;
    let plan = Arc::new(ScanPlan::all(schema).with_row_ids());
    let mut matched = Matched { deletions: Vec::new(), rows: Vec::new(), keys: HashSet::new() };
    let encode = WriteError::encode;
    for d in &deletions {
        let fragment = fragments.iter().find(|f| f.id == d.fragment_id).expect("deletions are of these fragments");
        for batch in scan::read_fragment(store, fragment, plan.clone()).await? {
            let hits = crate::io::predicate::RowTest::evaluate(&source.keys, &batch.project(&key_indices(schema, source)).map_err(encode)?)
                .map_err(encode)?;
            let rows = filter_record_batch(&batch, &hits).map_err(encode)?;
            if rows.num_rows() == 0 {
                continue;
            }
            let (merged, keys) = source.merged(schema, &rows).map_err(encode)?;
            matched.rows.push(merged);
            matched.keys.extend(keys);
        }
    }
    matched.deletions = deletions;
    Ok(matched)
}

fn key_indices(schema: &Schema, source: &Source) -> Vec<usize> {
    let keys: Vec<u32> = crate::io::predicate::RowTest::fields(&source.keys).iter().map(|f| f.id).collect();
    schema.fields.iter().enumerate().filter(|(_, f)| keys.contains(&f.id)).map(|(i, _)| i).collect()
}

/// Inserted rows lacking a column that is required (not null, no default): refused.
fn missing_for_insert(schema: &Schema, source: &Source, inserted: &[RecordBatch], name: &str) -> Option<InputError> {
    let first = inserted.first()?;
    let column = schema.fields.iter().find(|f| !f.nullable && f.default.is_none() && !source.present.contains(&f.id))?;
    let key = key_indices(schema, source)
        .iter()
        .map(|i| crate::io::values::display_value(first.column(*i).as_ref(), 0))
        .collect::<Vec<_>>()
        .join(", ");
    Some(InputError::MissingForInsert { file: name.to_string(), column: column.name.clone(), key })
}

/// The source keys of a prepared merge, read back from its own data files (a full
/// merge's are its source rows; a partial merge's hold every source key, the first
/// row of each with the source's values).
async fn source_keys(
    store: &TableStore,
    schema: &Schema,
    keys: &[String],
    source: &[NewFragment],
    version: u64,
) -> Result<Source, CommitError> {
    let fields = KeySet::fields_for(schema, keys).map_err(|e| CommitError::rerun(version, e))?;
    let plan = Arc::new(ScanPlan::all(schema));
    let mut batches = Vec::new();
    for new in source {
        let fragment = Fragment { id: 0, files: new.files.clone(), physical_rows: new.rows, deletion: None, first_row_id: None };
        batches.extend(scan::read_fragment(store, &fragment, plan.clone()).await.map_err(super::delete::scan_to_commit(version))?);
    }
    let keys = KeySet::from_rows(schema, fields, &batches, Duplicates::KeepFirst).expect("duplicates are kept, not refused");
    Ok(Source { keys, batches, present: schema.fields.iter().map(|f| f.id).collect() })
}

/// The parts of a merge operation a re-run changes.
pub(super) struct MergeParts<'a> {
    pub deletions: &'a mut Vec<FragmentDeletion>,
    pub fragments: &'a mut Vec<NewFragment>,
    pub partial: &'a mut Option<PartialMerge>,
}

/// Re-runs a merge on `base` over `scope`. `cached` holds the source read back (it
/// does not change between attempts).
pub(super) async fn rerun(
    store: &TableStore,
    env: &Env,
    base: &Manifest,
    keys: &[String],
    parts: MergeParts<'_>,
    scope: &RerunScope,
    cached: &mut Option<(Schema, Source)>,
) -> Result<(), CommitError> {
    let failed = |e: WriteError| CommitError::rerun(base.version, e);
    if cached.as_ref().is_none_or(|(schema, _)| *schema != base.schema) {
        let mut source = source_keys(store, &base.schema, keys, parts.fragments, base.version).await?;
        if let Some(p) = parts.partial.as_ref() {
            source.present = p.present.clone();
        }
        *cached = Some((base.schema.clone(), source));
    }
    let source = &cached.as_ref().expect("just set").1;
    let in_scope = delete::fragments_in_scope(store, base, scope).await?;
    let Some(partial) = parts.partial.as_mut() else {
        // A full merge: its rows stay as written; which rows they replace changes, and
        // a source row whose key now matches a row takes that row's id (rewritten).
        let found = delete::find(store, env, &in_scope, &source.keys).await.map_err(delete::scan_to_commit(base.version))?;
        let matched_more = !found.is_empty() || matches!(scope, RerunScope::Everything);
        match scope {
            RerunScope::Everything => *parts.deletions = found,
            RerunScope::Fragments(_) => parts.deletions.extend(found),
        }
        if matched_more {
            let all = delete::fragments_in_scope(store, base, &RerunScope::Everything).await?;
            let ids = ids_by_key(store, &base.schema, &all, parts.deletions, &source.keys).await.map_err(failed)?;
            let rows = with_ids(&source.batches, &source.keys, &ids).map_err(|e| failed(WriteError::encode(e)))?;
            *parts.fragments = write::write_fragments_keeping_ids(store, env, &base.schema, &rows).await.map_err(failed)?;
        }
        return Ok(());
    };
    let write_failed = failed;
    let matched = match_rows(store, env, &base.schema, source, &in_scope).await.map_err(write_failed)?;
    let merged = write::write_fragments_keeping_ids(store, env, &base.schema, &matched.rows).await.map_err(write_failed)?;
    let (updated, inserted) = match scope {
        // Everything was replaced: merge anew; source keys no row holds now are inserted.
        RerunScope::Everything => {
            *parts.deletions = matched.deletions;
            let inserted = source.unmatched(&base.schema, &matched.keys).map_err(|e| failed(WriteError::encode(e)))?;
            if let Some(e) = missing_for_insert(&base.schema, source, &inserted, "the merge source") {
                return Err(failed(e.into()));
            }
            (merged, write::write_fragments(store, env, &base.schema, &inserted).await.map_err(write_failed)?)
        }
        // Only rows the winners added are new: merge them; a key they hold is no longer
        // inserted (two upserts of one new key leave one row).
        RerunScope::Fragments(_) => {
            parts.deletions.extend(matched.deletions);
            let mut updated = parts.fragments[..partial.updated].to_vec();
            updated.extend(merged);
            let inserted = parts.fragments[partial.updated..].to_vec();
            let inserted = if matched.keys.is_empty() {
                inserted
            } else {
                without_keys(store, env, &base.schema, source, inserted, &matched.keys).await.map_err(failed)?
            };
            (updated, inserted)
        }
    };
    partial.updated = updated.len();
    *parts.fragments = updated.into_iter().chain(inserted).collect();
    Ok(())
}

/// The row ids of the rows `deletions` remove from `fragments`, by key (`keys`'s columns).
async fn ids_by_key(
    store: &TableStore,
    schema: &Schema,
    fragments: &[Fragment],
    deletions: &[FragmentDeletion],
    keys: &KeySet,
) -> Result<HashMap<OwnedRow, i64>, WriteError> {
    let plan = Arc::new(ScanPlan::all(schema).with_row_ids());
    let mut ids = HashMap::new();
    for d in deletions {
        let Some(fragment) = fragments.iter().find(|f| f.id == d.fragment_id) else { continue };
        let offsets = crate::io::deletion::read(store, &d.path).await?;
        for batch in scan::read_rows(store, fragment, plan.clone(), scan::Rows::At(offsets)).await? {
            let id = batch.column(schema.fields.len()).as_primitive::<Int64Type>().clone();
            for (row, (key, _)) in keys.locate(&batch).map_err(WriteError::encode)?.into_iter().enumerate() {
                ids.insert(key, id.value(row));
            }
        }
    }
    Ok(ids)
}

/// `batches` (table schema) each with a last column of row ids: the id `ids` holds for
/// the row's key, else NULL (a new row).
fn with_ids(batches: &[RecordBatch], keys: &KeySet, ids: &HashMap<OwnedRow, i64>) -> Result<Vec<RecordBatch>, ArrowError> {
    batches
        .iter()
        .map(|batch| {
            let column: Int64Array = keys.locate(batch)?.iter().map(|(key, _)| ids.get(key).copied()).collect();
            let mut fields: Vec<arrow::datatypes::FieldRef> = batch.schema().fields().iter().cloned().collect();
            fields.push(Arc::new(arrow::datatypes::Field::new(ROW_ID_COLUMN, arrow::datatypes::DataType::Int64, true)));
            let columns = batch.columns().iter().cloned().chain(std::iter::once(Arc::new(column) as ArrayRef)).collect();
            RecordBatch::try_new(Arc::new(arrow::datatypes::Schema::new(fields)), columns)
        })
        .collect()
}

/// `inserted` (fragments of this merge) rewritten without the rows whose keys are in
/// `keys`. The old files stay until vacuum: a staged transaction may still name them.
async fn without_keys(
    store: &TableStore,
    env: &Env,
    schema: &Schema,
    source: &Source,
    inserted: Vec<NewFragment>,
    keys: &HashSet<OwnedRow>,
) -> Result<Vec<NewFragment>, WriteError> {
    let plan = Arc::new(ScanPlan::all(schema));
    let mut kept = Vec::new();
    for new in &inserted {
        let fragment = Fragment { id: 0, files: new.files.clone(), physical_rows: new.rows, deletion: None, first_row_id: None };
        for batch in scan::read_fragment(store, &fragment, plan.clone()).await? {
            let keep: BooleanArray =
                source.keys.locate(&batch).map_err(WriteError::encode)?.iter().map(|(k, _)| Some(!keys.contains(k))).collect();
            let rows = filter_record_batch(&batch, &keep).map_err(WriteError::encode)?;
            if rows.num_rows() > 0 {
                kept.push(rows);
            }
        }
    }
    write::write_fragments(store, env, schema, &kept).await
}

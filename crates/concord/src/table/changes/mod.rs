//! The change feed: what changed between two versions, row by row, on stable row ids
//! (FORMAT.md §11, "Changes"). Always on: every version keeps its transactions, and
//! every row its id, so the feed is read from the history alone.
//!
//! Each transaction of the range gives, from its record (`replay.rs`), the rows it
//! removed and the rows it added; a row id in both is an update (`update_preimage`,
//! `update_postimage`), else a `delete` or an `insert`. A compaction gives nothing (its
//! rows keep their ids), nor does a schema or property change. Rows are read in the
//! schema of the range's last version (a column added since reads as its default in
//! older rows; a dropped one is absent).
//!
//! Invariant: the rows of version V, with each version's changes applied in order
//! (a delete or preimage removes its row id, an insert or postimage adds it), are the
//! rows of version W (the tests check it on random histories).

mod apply;
mod consumer;
mod net;
mod replay;

use std::collections::HashSet;
use std::sync::Arc;

use arrow::array::{ArrayRef, AsArray, BooleanArray, Int64Array, RecordBatch, StringArray, TimestampNanosecondArray, UInt32Array};
use arrow::datatypes::{DataType, Field as ArrowField, Int64Type, Schema as ArrowSchema, SchemaRef, TimeUnit};
use chrono::{DateTime, Utc};
use futures::stream::{self, BoxStream, StreamExt, TryStreamExt};
use uuid::Uuid;

pub use self::apply::{ApplyError, RowsById};
pub use self::consumer::ConsumerInfo;
use self::replay::{Replay, TxnRows};
use super::Table;
use crate::error::{ChangesError, CorruptObject, OpenError};
use crate::format::manifest::{Manifest, ROW_ID_COLUMN};
use crate::format::schema::Schema;
use crate::io::predicate::{self, Predicate};
use crate::io::scan::{self, Rows, ScanPlan};
use crate::storage::TableStore;

/// The feed's own columns, after the table's.
pub const CHANGE_COLUMNS: [&str; 5] = ["_change_type", ROW_ID_COLUMN, "_version", "_txn_id", "_committed_at"];

/// What a change feed reads.
#[derive(Debug, Clone, Default)]
pub struct ChangeOptions {
    /// The table columns to give (by name), in this order; all without.
    pub columns: Option<Vec<String>>,
    /// A SQL predicate on the table's columns (the range's last schema): rows that do
    /// not match it are left out (an update's two rows go together if either matches).
    pub filter: Option<String>,
    /// Each row's changes over the range collapsed into one: its first state before the
    /// range and its last state in it (an insert, a delete, or an update's two rows;
    /// nothing for a row inserted and deleted within the range).
    pub net: bool,
    /// Read the rows in the schema of this version, not the range's last (so that
    /// workers reading parts of a range give the same columns).
    pub schema_of: Option<u64>,
}

/// The changes of a range, as a stream of Arrow batches (version by version).
pub struct ChangeFeed {
    schema: SchemaRef,
    batches: BoxStream<'static, Result<RecordBatch, ChangesError>>,
}

impl std::fmt::Debug for ChangeFeed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChangeFeed").field("schema", &self.schema).finish_non_exhaustive()
    }
}

impl ChangeFeed {
    /// The schema of every batch: the table columns asked for, then [`CHANGE_COLUMNS`].
    pub fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }

    /// The batches, in version order.
    pub fn into_stream(self) -> BoxStream<'static, Result<RecordBatch, ChangesError>> {
        self.batches
    }

    /// Every batch.
    pub async fn collect(self) -> Result<Vec<RecordBatch>, ChangesError> {
        self.batches.try_collect().await
    }
}

/// The kinds of change, as `_change_type` names them.
const INSERT: &str = "insert";
const DELETE: &str = "delete";
const PREIMAGE: &str = "update_preimage";
const POSTIMAGE: &str = "update_postimage";

impl Table {
    /// The changes after version `from` up to `to` (the latest without), row by row; see
    /// the module docs. Every version of the range must be retained (a consumer keeps
    /// them from vacuum).
    pub async fn changes(&self, from: u64, to: Option<u64>, options: &ChangeOptions) -> Result<ChangeFeed, ChangesError> {
        self.changes_in(None, from, to, options).await
    }

    /// [`Table::changes`], the rows read in this handle's schema (its version's), not
    /// the range's last (SQL's `changes()`: its schema is known before it runs).
    pub(crate) async fn changes_in_own_schema(
        &self,
        from: u64,
        to: Option<u64>,
        options: &ChangeOptions,
    ) -> Result<ChangeFeed, ChangesError> {
        self.changes_in(Some(self.schema()), from, to, options).await
    }

    /// The schema of this handle's change feed with `options`.
    pub(crate) fn change_schema(&self, options: &ChangeOptions) -> Result<SchemaRef, ChangesError> {
        Ok(Reading::new(self.schema(), options, self.env.clock.now())?.output)
    }

    async fn changes_in(
        &self,
        schema: Option<&Schema>,
        from: u64,
        to: Option<u64>,
        options: &ChangeOptions,
    ) -> Result<ChangeFeed, ChangesError> {
        let to = match to {
            Some(to) => to,
            None => self.latest().await?.version(),
        };
        if from > to {
            return Err(ChangesError::FromAfterTo { from, to });
        }
        let last = self.retained(from, to, options.schema_of.unwrap_or(to)).await?;
        let read = Arc::new(Reading::new(schema.unwrap_or(&last.schema), options, self.env.clock.now())?);
        let schema = read.output.clone();
        let (store, base) = (self.store.clone(), self.retained(from, to, from).await?);
        let versions = stream::iter(from + 1..=to)
            .then({
                let store = store.clone();
                move |v| {
                    let store = store.clone();
                    async move { (v, store.read_manifest(v).await) }
                }
            })
            .boxed();
        let feed = feed(store, base, versions, read.clone());
        let batches = if options.net { net::collapse(feed, read) } else { feed };
        Ok(ChangeFeed { schema, batches })
    }

    /// The changes between the versions current at two times (UTC; `to` the latest
    /// without): after the version current at `from`, up to the one current at `to`.
    pub async fn changes_between(
        &self,
        from: DateTime<Utc>,
        to: Option<DateTime<Utc>>,
        options: &ChangeOptions,
    ) -> Result<ChangeFeed, ChangesError> {
        let from = self.checkout_as_of(from).await?.version();
        let to = match to {
            Some(to) => Some(self.checkout_as_of(to).await?.version()),
            None => None,
        };
        self.changes(from, to, options).await
    }

    /// Version `version` of the range `from..=to`, which must be retained (read from the
    /// store, not the handle's cache: vacuum may have removed it since).
    async fn retained(&self, from: u64, to: u64, version: u64) -> Result<Arc<Manifest>, ChangesError> {
        if let Some(m) = self.store.read_manifest_now(version).await? {
            return Ok(m);
        }
        let versions = self.store.list_versions().await.map_err(OpenError::from)?;
        let (oldest, latest) = (versions.first().copied().unwrap_or(0), versions.last().copied().unwrap_or(0));
        Err(ChangesError::VersionNotRetained { from, missing: version, oldest, latest: latest.max(to) })
    }
}

/// What a feed reads and gives: the table columns (the range's last schema), the
/// columns given, the filter.
struct Reading {
    schema: Schema,
    /// Indices of the columns given, in the table's columns.
    given: Vec<usize>,
    filter: Option<Predicate>,
    output: SchemaRef,
}

impl Reading {
    /// `now`: what `now()` in the filter means (the handle's clock).
    fn new(schema: &Schema, options: &ChangeOptions, now: DateTime<Utc>) -> Result<Reading, ChangesError> {
        if let Some(f) = schema.fields.iter().find(|f| CHANGE_COLUMNS.contains(&f.name.as_str())) {
            return Err(ChangesError::ReservedColumn { column: f.name.clone() });
        }
        let given = match &options.columns {
            None => (0..schema.fields.len()).collect(),
            Some(names) => {
                let mut given = Vec::with_capacity(names.len());
                for name in names {
                    let field = schema.resolve(name)?;
                    given.push(schema.fields.iter().position(|f| f.id == field.id).expect("resolved"));
                }
                given
            }
        };
        let filter = options.filter.as_deref().map(|sql| predicate::compile(sql, schema, now)).transpose()?;
        let table = schema.arrow_schema();
        let mut fields: Vec<ArrowField> = given.iter().map(|&i| table.field(i).clone()).collect();
        fields.extend([
            ArrowField::new("_change_type", DataType::Utf8, false),
            ArrowField::new(ROW_ID_COLUMN, DataType::Int64, false),
            ArrowField::new("_version", DataType::Int64, false),
            ArrowField::new("_txn_id", DataType::Utf8, false),
            ArrowField::new("_committed_at", DataType::Timestamp(TimeUnit::Nanosecond, Some("UTC".into())), false),
        ]);
        Ok(Reading { schema: schema.clone(), given, filter, output: Arc::new(ArrowSchema::new(fields)) })
    }
}

type Versions = BoxStream<'static, (u64, Result<Option<Arc<Manifest>>, OpenError>)>;

/// The changes of `versions` (in order, each after the one before, the first after
/// `base`), one version at a time.
fn feed(
    store: Arc<TableStore>,
    base: Arc<Manifest>,
    versions: Versions,
    read: Arc<Reading>,
) -> BoxStream<'static, Result<RecordBatch, ChangesError>> {
    let replay = Replay::new(store.clone(), base);
    stream::try_unfold((replay, versions, store, read), |(mut replay, mut versions, store, read)| async move {
        let Some((v, manifest)) = versions.next().await else { return Ok::<_, ChangesError>(None) };
        let manifest = manifest?.ok_or(OpenError::Removed { version: v })?;
        let mut out = Vec::new();
        for t in &manifest.transactions {
            let rows = replay.apply(&t.operation).await?;
            if let Some(batch) = txn_changes(&store, &read, &manifest, t.id, rows).await? {
                out.push(Ok(batch));
            }
        }
        replay.verify(&manifest).await?;
        Ok(Some((stream::iter(out), (replay, versions, store, read))))
    })
    .try_flatten()
    .boxed()
}

/// The changes of one transaction (`txn` of `version`), `None` if it changed no row
/// the feed gives.
async fn txn_changes(
    store: &TableStore,
    read: &Reading,
    version: &Manifest,
    txn: Uuid,
    rows: TxnRows,
) -> Result<Option<RecordBatch>, ChangesError> {
    let plan = Arc::new(ScanPlan::all(&read.schema).with_row_ids());
    let removed = read_all(store, &plan, &rows.removed).await?;
    let added = read_all(store, &plan, &rows.added).await?;
    let Some(changes) = classify(&plan.schema(), removed, added, rows.restore)? else { return Ok(None) };
    let changes = match &read.filter {
        Some(filter) => keep_matching(&changes, filter, &read.schema)?,
        None => changes,
    };
    if changes.num_rows() == 0 {
        return Ok(None);
    }
    Ok(Some(output(read, &changes, version.version, txn, version.timestamp)?))
}

/// The rows `at` (each fragment's, by offset), with their ids.
async fn read_all(store: &TableStore, plan: &Arc<ScanPlan>, at: &[replay::At]) -> Result<Vec<RecordBatch>, ChangesError> {
    let mut batches = Vec::new();
    for (fragment, offsets) in at {
        batches.extend(scan::read_rows(store, fragment, plan.clone(), Rows::At(Arc::new(offsets.clone()))).await?);
    }
    Ok(batches)
}

/// The rows removed and added, as one batch sorted by row id, each with its kind (a
/// last `_change_type` column): an id in both is an update, its preimage first. In a
/// restore, a row removed and added again with the same values is no change.
fn classify(
    schema: &SchemaRef,
    removed: Vec<RecordBatch>,
    added: Vec<RecordBatch>,
    restore: bool,
) -> Result<Option<RecordBatch>, ChangesError> {
    let failed = |e: arrow::error::ArrowError| ChangesError::from(CorruptObject { path: "change feed".into(), reason: e.to_string() });
    let removed = arrow::compute::concat_batches(schema, &removed).map_err(failed)?;
    let added = arrow::compute::concat_batches(schema, &added).map_err(failed)?;
    if removed.num_rows() + added.num_rows() == 0 {
        return Ok(None);
    }
    let id_column = schema.fields().len() - 1;
    let ids = |b: &RecordBatch| b.column(id_column).as_primitive::<Int64Type>().values().iter().copied().collect::<HashSet<i64>>();
    let (removed_ids, added_ids) = (ids(&removed), ids(&added));
    let all = arrow::compute::concat_batches(schema, [&removed, &added]).map_err(failed)?;
    let side: UInt32Array = (0..all.num_rows()).map(|i| u32::from(i >= removed.num_rows())).collect();
    let kinds: StringArray = (0..all.num_rows())
        .map(|i| {
            let id = all.column(id_column).as_primitive::<Int64Type>().value(i);
            Some(match i < removed.num_rows() {
                true if added_ids.contains(&id) => PREIMAGE,
                true => DELETE,
                false if removed_ids.contains(&id) => POSTIMAGE,
                false => INSERT,
            })
        })
        .collect();
    let sort = [
        arrow::compute::SortColumn { values: all.column(id_column).clone(), options: None },
        arrow::compute::SortColumn { values: Arc::new(side), options: None },
    ];
    let order = arrow::compute::lexsort_to_indices(&sort, None).map_err(failed)?;
    let mut columns: Vec<ArrayRef> = all.columns().to_vec();
    columns.push(Arc::new(kinds));
    let columns = columns.iter().map(|c| arrow::compute::take(c, &order, None)).collect::<Result<Vec<_>, _>>().map_err(failed)?;
    let mut fields: Vec<arrow::datatypes::FieldRef> = schema.fields().iter().cloned().collect();
    fields.push(Arc::new(ArrowField::new("_change_type", DataType::Utf8, false)));
    let sorted = RecordBatch::try_new(Arc::new(ArrowSchema::new(fields)), columns).map_err(failed)?;
    if !restore {
        return Ok(Some(sorted));
    }
    let keep = unchanged_pairs(&sorted, id_column).map_err(failed)?;
    Ok(Some(arrow::compute::filter_record_batch(&sorted, &keep).map_err(failed)?))
}

/// In `sorted` (by row id, a pair's preimage first): false for both rows of a pair
/// whose table columns (those before `id_column`) are equal.
fn unchanged_pairs(sorted: &RecordBatch, id_column: usize) -> Result<BooleanArray, arrow::error::ArrowError> {
    let kinds = sorted.column(id_column + 1).as_string::<i32>();
    let table = sorted.project(&(0..id_column).collect::<Vec<_>>())?;
    let converter =
        arrow::row::RowConverter::new(table.schema().fields().iter().map(|f| arrow::row::SortField::new(f.data_type().clone())).collect())?;
    let rows = converter.convert_columns(table.columns())?;
    let mut keep = vec![true; sorted.num_rows()];
    for i in 0..sorted.num_rows().saturating_sub(1) {
        if kinds.value(i) == PREIMAGE && kinds.value(i + 1) == POSTIMAGE && rows.row(i) == rows.row(i + 1) {
            keep[i] = false;
            keep[i + 1] = false;
        }
    }
    Ok(BooleanArray::from(keep))
}

/// The rows of `changes` whose row matches `filter`, with their pair.
fn keep_matching(changes: &RecordBatch, filter: &Predicate, schema: &Schema) -> Result<RecordBatch, ChangesError> {
    let failed = |e: arrow::error::ArrowError| ChangesError::from(CorruptObject { path: "change feed".into(), reason: e.to_string() });
    let indices: Vec<usize> =
        filter.fields.iter().map(|f| schema.fields.iter().position(|t| t.id == f.id).expect("a table field")).collect();
    let input =
        RecordBatch::try_new(filter.schema.clone(), indices.iter().map(|&i| changes.column(i).clone()).collect()).map_err(failed)?;
    let hits =
        filter.evaluate(&input).map_err(|e| crate::error::PredicateError::Failed { sql: filter.sql.clone(), reason: e.to_string() })?;
    let ids = changes.column(schema.fields.len()).as_primitive::<Int64Type>();
    let hit_ids: HashSet<i64> = (0..hits.len()).filter(|&i| hits.value(i)).map(|i| ids.value(i)).collect();
    let keep: BooleanArray = (0..ids.len()).map(|i| Some(hit_ids.contains(&ids.value(i)))).collect();
    arrow::compute::filter_record_batch(changes, &keep).map_err(failed)
}

/// `changes` (table columns, row id, kind) as the feed gives them: the columns asked
/// for, then the feed's own.
fn output(read: &Reading, changes: &RecordBatch, version: u64, txn: Uuid, at: DateTime<Utc>) -> Result<RecordBatch, ChangesError> {
    let rows = changes.num_rows();
    let n = read.schema.fields.len();
    let mut columns: Vec<ArrayRef> = read.given.iter().map(|&i| changes.column(i).clone()).collect();
    columns.push(changes.column(n + 1).clone());
    columns.push(changes.column(n).clone());
    columns.push(Arc::new(Int64Array::from(vec![version as i64; rows])));
    columns.push(Arc::new(StringArray::from(vec![txn.to_string(); rows])));
    // The version's time exactly (nanoseconds, as stored): given back as `--from-time`
    // it names this version.
    let nanos = at
        .timestamp_nanos_opt()
        .ok_or_else(|| CorruptObject { path: format!("version {version}"), reason: format!("its time {at} is outside 1677-2262") })?;
    columns.push(Arc::new(TimestampNanosecondArray::from(vec![nanos; rows]).with_timezone("UTC")));
    RecordBatch::try_new(read.output.clone(), columns)
        .map_err(|e| CorruptObject { path: format!("version {version}"), reason: e.to_string() }.into())
}

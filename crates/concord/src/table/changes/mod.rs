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
mod classify;
mod consumer;
mod net;
mod replay;

use std::collections::HashSet;
use std::sync::Arc;

use arrow::array::{AsArray, BooleanArray, RecordBatch};
use arrow::datatypes::{DataType, Field as ArrowField, Int64Type, Schema as ArrowSchema, SchemaRef, TimeUnit};
use chrono::{DateTime, Utc};
use futures::stream::{self, BoxStream, StreamExt, TryStreamExt};
use uuid::Uuid;

pub use self::apply::{ApplyError, RowsById};
pub(crate) use self::consumer::records_name as consumer_records;
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
        let base = self.retained(from, to, from).await?;
        // A start that does not count is the version before it (FORMAT.md §18).
        let store = self.store.clone();
        let replay = Replay::new(store.clone(), crate::txn::multi::visible(&store, base.clone()).await?).ids_taken(base.next_ids());
        let versions = stream::iter(from + 1..=to)
            .then({
                let store = store.clone();
                move |v| {
                    let store = store.clone();
                    async move { (v, store.read_manifest(v).await) }
                }
            })
            .boxed();
        let feed = feed(replay, versions, read.clone());
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

/// Transactions whose changes a feed reads at once (their rows are read and paired
/// while the replay goes on).
const READ_AHEAD: usize = 4;

/// The changes of `versions` (in order, each after the one before, the first after
/// `replay`'s base). The replay goes one version at a time (cheap: records and manifests); the
/// rows of up to [`READ_AHEAD`] transactions are read at once, in order.
fn feed(
    replay: Replay,
    versions: Versions,
    read: Arc<Reading>,
) -> BoxStream<'static, Result<RecordBatch, ChangesError>> {
    let store = replay.store.clone();
    let replayed = stream::try_unfold((replay, versions), |(mut replay, mut versions)| async move {
        let Some((v, manifest)) = versions.next().await else { return Ok::<_, ChangesError>(None) };
        let manifest = manifest?.ok_or(OpenError::Removed { version: v })?;
        let mut out = Vec::new();
        // A multi-table transaction's part that did not commit changes nothing (its
        // undo, a restore of the version before it, then changes nothing either).
        if !crate::txn::multi::counts(&replay.store, &manifest).await? {
            replay.passed_over(&manifest);
            return Ok(Some((stream::iter(out), (replay, versions))));
        }
        for t in &manifest.transactions {
            let rows = replay.apply(&t.operation).await?;
            out.push(Ok((manifest.clone(), t.id, rows)));
        }
        replay.verify(&manifest).await?;
        Ok(Some((stream::iter(out), (replay, versions))))
    })
    .try_flatten();
    replayed
        .map_ok(move |(manifest, txn, rows)| {
            let (store, read) = (store.clone(), read.clone());
            // A task of its own: the transactions read ahead decode on every core.
            let task = tokio::spawn(async move { txn_changes(store, &read, &manifest, txn, rows).await });
            async move { task.await.unwrap_or_else(|e| std::panic::resume_unwind(e.into_panic())) }
        })
        .try_buffered(READ_AHEAD)
        .map_ok(|batches| stream::iter(batches.into_iter().map(Ok)))
        .try_flatten()
        .boxed()
}

/// The changes of one transaction (`txn` of `version`): the rows it removed, then the
/// rows it added, as the feed gives them (none if it changed no row the feed gives).
async fn txn_changes(
    store: Arc<TableStore>,
    read: &Reading,
    version: &Manifest,
    txn: Uuid,
    rows: TxnRows,
) -> Result<Vec<RecordBatch>, ChangesError> {
    let plan = Arc::new(ScanPlan::all(&read.schema).with_row_ids());
    let (removed, added) = futures::try_join!(read_all(&store, &plan, rows.removed), read_all(&store, &plan, rows.added))?;
    let failed = |e: arrow::error::ArrowError| {
        ChangesError::from(CorruptObject { path: format!("version {}", version.version), reason: e.to_string() })
    };
    let changes = classify::classify(&plan.schema(), removed, added, rows.restore).map_err(failed)?;
    let changes = match &read.filter {
        Some(filter) => keep_matching(changes, filter, &read.schema)?,
        None => changes,
    };
    // The version's time exactly (nanoseconds, as stored): given back as `--from-time`
    // it names this version.
    let at = version.timestamp;
    let nanos = at.timestamp_nanos_opt().ok_or_else(|| CorruptObject {
        path: format!("version {}", version.version),
        reason: format!("its time {at} is outside 1677-2262"),
    })?;
    let stamp = classify::Stamp { version: version.version, txn: &txn.to_string(), nanos };
    changes.iter().filter(|b| b.num_rows() > 0).map(|b| classify::stamped(&read.output, &read.given, b, &stamp).map_err(failed)).collect()
}

/// Fragments whose rows a transaction's feed reads at once (each on a task of its own).
const FRAGMENTS_AT_ONCE: usize = 2;

/// The rows `at` (each fragment's, by offset), with their ids, in order.
async fn read_all(store: &Arc<TableStore>, plan: &Arc<ScanPlan>, at: Vec<replay::At>) -> Result<Vec<RecordBatch>, ChangesError> {
    let reads = at.into_iter().map(|(fragment, offsets)| {
        let (store, plan) = (store.clone(), plan.clone());
        let task = tokio::spawn(async move { scan::read_rows(&store, &fragment, plan, Rows::At(Arc::new(offsets))).await });
        async move { task.await.unwrap_or_else(|e| std::panic::resume_unwind(e.into_panic())) }
    });
    let batches: Vec<Vec<RecordBatch>> = stream::iter(reads).buffered(FRAGMENTS_AT_ONCE).try_collect().await?;
    Ok(batches.into_iter().flatten().collect())
}

/// The rows of `changes` whose row matches `filter`, with their pair (an update's two
/// rows go together if either matches).
fn keep_matching(changes: Vec<RecordBatch>, filter: &Predicate, schema: &Schema) -> Result<Vec<RecordBatch>, ChangesError> {
    let failed = |e: arrow::error::ArrowError| ChangesError::from(CorruptObject { path: "change feed".into(), reason: e.to_string() });
    let indices: Vec<usize> =
        filter.fields.iter().map(|f| schema.fields.iter().position(|t| t.id == f.id).expect("a table field")).collect();
    let id = |b: &RecordBatch| b.column(schema.fields.len()).as_primitive::<Int64Type>().clone();
    let mut hit_ids: HashSet<i64> = HashSet::new();
    for batch in &changes {
        let input =
            RecordBatch::try_new(filter.schema.clone(), indices.iter().map(|&i| batch.column(i).clone()).collect()).map_err(failed)?;
        let hits =
            filter.evaluate(&input).map_err(|e| crate::error::PredicateError::Failed { sql: filter.sql.clone(), reason: e.to_string() })?;
        let ids = id(batch);
        hit_ids.extend((0..hits.len()).filter(|&i| hits.value(i)).map(|i| ids.value(i)));
    }
    changes
        .iter()
        .map(|batch| {
            let keep: BooleanArray = id(batch).values().iter().map(|i| Some(hit_ids.contains(i))).collect();
            arrow::compute::filter_record_batch(batch, &keep).map_err(failed)
        })
        .collect()
}

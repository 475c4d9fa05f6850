//! Reading a version: scan, count, fragments, history.

use std::sync::{Arc, Mutex};

use arrow::array::RecordBatch;
use arrow::datatypes::SchemaRef;
use chrono::{DateTime, Utc};
use futures::stream::BoxStream;
use futures::{StreamExt, TryStreamExt};
use serde::Serialize;
use uuid::Uuid;

use super::Table;
use crate::error::{OpenError, ScanError};
use crate::format::manifest::{Fragment, Manifest};
use crate::format::schema::Field;
use crate::io::predicate;
use crate::io::scan::{prune, scan_fragments, Ahead, ScanMetrics, ScanPlan};

/// What a scan reads.
#[derive(Debug, Clone, Default)]
pub struct ScanOptions {
    /// Output columns in this order; `None` for all.
    pub columns: Option<Vec<String>>,
    /// SQL predicate, e.g. `score > 0.5 AND name LIKE 'a%'`.
    pub filter: Option<String>,
    /// At most this many rows.
    pub limit: Option<usize>,
    /// Each row's id follows its columns (a last column, `_row_id`: see
    /// [`crate::manifest::ROW_ID_FIELD`]).
    pub row_ids: bool,
}

/// A running scan: its output schema, its batches, and what it skipped.
pub struct TableScan {
    schema: SchemaRef,
    stream: BoxStream<'static, Result<RecordBatch, ScanError>>,
    metrics: Arc<Mutex<ScanMetrics>>,
}

impl TableScan {
    /// The schema of its batches.
    pub fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }

    /// Its batches, as they are read.
    pub fn into_stream(self) -> BoxStream<'static, Result<RecordBatch, ScanError>> {
        self.stream
    }

    /// Row groups read and skipped so far.
    pub fn metrics_handle(&self) -> Arc<Mutex<ScanMetrics>> {
        self.metrics.clone()
    }

    /// All its batches.
    pub async fn collect(self) -> Result<Vec<RecordBatch>, ScanError> {
        self.stream.try_collect().await
    }
}

/// One version in the history (field names are part of the CLI's JSON contract).
/// The transaction fields are the first transaction's; `transactions` lists them all
/// (more than one in a shared version).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[non_exhaustive]
pub struct VersionInfo {
    /// The version.
    pub version: u64,
    /// When it was committed (UTC).
    pub timestamp: DateTime<Utc>,
    /// Its operation's name (its transactions', if they share one; else `mixed`).
    pub operation: String,
    /// The version its first transaction was prepared against.
    pub read_version: Option<u64>,
    /// Its first transaction.
    pub transaction_id: Uuid,
    /// Commit attempts it took (the most any of its transactions took).
    pub attempts: u32,
    /// Versions its first transaction rebased over.
    pub rebased_over: Vec<u64>,
    /// Whether part of a transaction was re-run on a winner's changes.
    pub rerun: bool,
    /// Its first transaction's idempotency key, if any.
    pub idempotency_key: Option<String>,
    /// Rows it added.
    pub rows_written: u64,
    /// Rows it removed.
    pub rows_deleted: u64,
    /// Live rows in the table at this version.
    pub rows: u64,
    /// Its transactions, in the order they apply.
    pub transactions: Vec<TransactionInfo>,
}

/// One transaction of a version, in the history.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[non_exhaustive]
pub struct TransactionInfo {
    /// The transaction.
    pub transaction_id: Uuid,
    /// Its operation's name.
    pub operation: String,
    /// The version it was prepared against.
    pub read_version: Option<u64>,
    /// Its idempotency key, if any.
    pub idempotency_key: Option<String>,
    /// The idempotency key of the job commit it was part of, if any.
    pub job_idempotency_key: Option<String>,
    /// Set when another writer's commit carried it (cooperative commits): that
    /// writer's transaction in the version.
    pub carried_by: Option<Uuid>,
    /// Rows it added.
    pub rows_written: u64,
    /// Rows it removed.
    pub rows_deleted: u64,
    /// Commit attempts it took.
    pub attempts: u32,
    /// Whether part of it was re-run on a winner's changes.
    pub rerun: bool,
}

impl VersionInfo {
    /// The entry of `manifest`'s version.
    pub fn of(manifest: &Manifest) -> Self {
        let transactions: Vec<TransactionInfo> = manifest
            .transactions
            .iter()
            .map(|t| TransactionInfo {
                transaction_id: t.id,
                operation: t.operation.name().to_string(),
                read_version: t.read_version,
                idempotency_key: t.idempotency_key.clone(),
                job_idempotency_key: t.job_idempotency_key.clone(),
                carried_by: t.carried_by,
                rows_written: t.operation.rows_written(),
                rows_deleted: t.rows_deleted,
                attempts: t.attempts,
                rerun: t.rerun,
            })
            .collect();
        let first = manifest.transaction();
        let operation = if transactions.iter().all(|t| t.operation == transactions[0].operation) {
            transactions[0].operation.clone()
        } else {
            "mixed".to_string()
        };
        VersionInfo {
            version: manifest.version,
            timestamp: manifest.timestamp,
            operation,
            read_version: first.read_version,
            transaction_id: first.id,
            attempts: transactions.iter().map(|t| t.attempts).max().unwrap_or(1),
            rebased_over: first.rebased_over.clone(),
            rerun: transactions.iter().any(|t| t.rerun),
            idempotency_key: first.idempotency_key.clone(),
            rows_written: transactions.iter().map(|t| t.rows_written).sum(),
            rows_deleted: transactions.iter().map(|t| t.rows_deleted).sum(),
            rows: manifest.live_rows(),
            transactions,
        }
    }
}

impl Table {
    /// All fragments of this version, in fragment-id order.
    pub async fn fragments(&self) -> Result<Vec<Fragment>, OpenError> {
        let mut fragments = Vec::with_capacity(self.manifest.fragment_count() as usize);
        for segment in &self.manifest.segments {
            fragments.extend(self.store.read_segment(segment).await?.fragments.iter().cloned());
        }
        Ok(fragments)
    }

    /// The fragments of this version whose statistics do not rule out `filter` (a SQL
    /// predicate; all of them without one), in fragment-id order: what a scan with that
    /// filter would read, for engines that give each worker a share.
    pub async fn fragments_matching(&self, filter: Option<&str>) -> Result<Vec<Fragment>, ScanError> {
        let fragments = self.fragments().await?;
        let Some(filter) = filter else { return Ok(fragments) };
        let predicate = predicate::compile(filter, self.schema(), self.env.clock.now())?;
        let plan = ScanPlan::new(Vec::new(), Arc::new(arrow::datatypes::Schema::empty()), Some(predicate));
        Ok(prune(fragments, &plan, &Mutex::new(ScanMetrics::default())))
    }

    /// The live rows of one fragment of this version (all columns, this version's
    /// schema). With [`Table::fragments`], lets a checker read each immutable
    /// (fragment, deletion vector) pair once across many versions.
    pub async fn read_fragment(&self, fragment: &Fragment) -> Result<Vec<RecordBatch>, ScanError> {
        self.read_fragment_as(fragment, self.schema().arrow_schema()).await
    }

    /// [`Table::read_fragment`] decoded as SQL decodes it (strings as `Utf8View`): the
    /// fuzz target and its corpus hold both decoders to the same guards.
    #[doc(hidden)]
    pub async fn read_fragment_as_sql(&self, fragment: &Fragment) -> Result<Vec<RecordBatch>, ScanError> {
        self.read_fragment_as(fragment, Arc::new(crate::io::scan::adapt::with_string_views(&self.schema().arrow_schema()))).await
    }

    async fn read_fragment_as(&self, fragment: &Fragment, output: arrow::datatypes::SchemaRef) -> Result<Vec<RecordBatch>, ScanError> {
        let plan = Arc::new(crate::io::scan::ScanPlan::new(self.schema().fields.clone(), output, None));
        crate::io::scan::read_fragment(&self.store, fragment, plan).await
    }

    /// Reads rows of this version (columns, filter and limit as `options` say), as a stream.
    pub async fn scan(&self, options: ScanOptions) -> Result<TableScan, ScanError> {
        self.scan_of(None, options).await
    }

    /// Reads rows of some of this version's fragments (from [`Table::fragments`]) as
    /// [`Table::scan`] reads all of them: so that workers each read their share.
    pub async fn scan_fragments(&self, fragments: Vec<Fragment>, options: ScanOptions) -> Result<TableScan, ScanError> {
        self.scan_of(Some(fragments), options).await
    }

    /// [`Table::scan`] of `fragments`, or of all of this version's.
    async fn scan_of(&self, fragments: Option<Vec<Fragment>>, options: ScanOptions) -> Result<TableScan, ScanError> {
        let schema = self.schema();
        let fields: Vec<Field> = match &options.columns {
            None => schema.fields.clone(),
            Some(names) => names.iter().map(|n| schema.resolve(n.trim()).cloned()).collect::<Result<_, _>>()?,
        };
        let full = schema.arrow_schema();
        let indices: Vec<usize> = fields.iter().map(|f| full.index_of(&f.name).expect("field exists")).collect();
        let output: SchemaRef = Arc::new(full.project(&indices).expect("indices are valid"));
        let now = self.env.clock.now();
        let predicate = options.filter.as_deref().map(|sql| predicate::compile(sql, schema, now)).transpose()?;
        let mut plan = ScanPlan::new(fields, output, predicate);
        if options.row_ids {
            plan = plan.with_row_ids();
        }
        let plan = Arc::new(plan);
        let output = plan.schema();
        let metrics = Arc::new(Mutex::new(ScanMetrics::default()));
        let fragments = match fragments {
            Some(fragments) => fragments,
            None => self.fragments().await?,
        };
        let fragments = prune(fragments, &plan, &metrics);
        let ahead = if options.limit.is_some() { Ahead::Batch } else { Ahead::Files };
        let stream = scan_fragments(self.store.clone(), fragments, plan, metrics.clone(), ahead);
        let stream = match options.limit {
            None => stream,
            Some(limit) => limit_rows(stream, limit),
        };
        Ok(TableScan { schema: output, stream, metrics })
    }

    /// Rows matching `filter` (all live rows without one; then no data is read). The
    /// fragments its statistics do not rule out are counted in parallel, one task each.
    pub async fn count(&self, filter: Option<&str>) -> Result<u64, ScanError> {
        let Some(filter) = filter else { return Ok(self.row_count()) };
        let predicate = predicate::compile(filter, self.schema(), self.env.clock.now())?;
        let plan = Arc::new(ScanPlan::new(Vec::new(), Arc::new(arrow::datatypes::Schema::empty()), Some(predicate)));
        let metrics = Arc::new(Mutex::new(ScanMetrics::default()));
        let fragments = prune(self.fragments().await?, &plan, &metrics);
        let tasks = fragments.into_iter().map(|fragment| {
            let (store, plan, metrics) = (self.store.clone(), plan.clone(), metrics.clone());
            tokio::spawn(async move {
                let mut rows = 0u64;
                let mut stream = scan_fragments(store, vec![fragment], plan, metrics, Ahead::Files);
                while let Some(batch) = stream.try_next().await? {
                    rows += batch.num_rows() as u64;
                }
                Ok::<u64, ScanError>(rows)
            })
        });
        let parallel = std::thread::available_parallelism().map_or(2, |n| n.get());
        let mut counts = futures::stream::iter(tasks).buffer_unordered(parallel);
        let mut rows = 0u64;
        while let Some(count) = counts.next().await {
            // A panic in a task is a bug, not a data problem: pass it on.
            rows += count.unwrap_or_else(|e| std::panic::resume_unwind(e.into_panic()))?;
        }
        Ok(rows)
    }

    /// Every retained version up to this one, oldest first. Costs one read per version.
    pub async fn history(&self) -> Result<Vec<VersionInfo>, OpenError> {
        self.history_newest(usize::MAX).await
    }

    /// The newest `limit` retained versions up to this one, oldest first. Costs one
    /// listing and one read per version returned.
    pub async fn history_newest(&self, limit: usize) -> Result<Vec<VersionInfo>, OpenError> {
        let versions = self.store.list_versions().await?;
        let mut wanted: Vec<u64> = versions.into_iter().filter(|v| *v <= self.version()).collect();
        wanted.drain(..wanted.len().saturating_sub(limit));
        let store = self.store.clone();
        let manifests: Vec<Option<Arc<Manifest>>> = futures::stream::iter(wanted)
            .map(|v| {
                let store = store.clone();
                async move { store.read_manifest(v).await }
            })
            .buffered(16)
            .try_collect()
            .await?;
        Ok(manifests.iter().flatten().map(|m| VersionInfo::of(m)).collect())
    }
}

fn limit_rows(
    stream: BoxStream<'static, Result<RecordBatch, ScanError>>,
    limit: usize,
) -> BoxStream<'static, Result<RecordBatch, ScanError>> {
    stream
        .scan(limit, |left, batch| {
            let out = match batch {
                Err(e) => Some(Err(e)),
                Ok(_) if *left == 0 => None,
                Ok(b) => {
                    let take = b.num_rows().min(*left);
                    *left -= take;
                    Some(Ok(b.slice(0, take)))
                }
            };
            futures::future::ready(out)
        })
        .boxed()
}

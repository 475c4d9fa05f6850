//! Scanning fragments: projection and filter pushed into the Parquet reader.
//!
//! Per data file: row groups whose statistics prove the filter false are skipped
//! (DataFusion's `PruningPredicate`); the filter's columns are decoded first and the
//! other projected columns only for matching rows (Parquet `RowFilter`).

pub(crate) mod adapt;
pub(crate) mod keys;

use std::collections::HashSet;
use std::ops::Range;
use std::sync::Arc;

use arrow::array::{ArrayRef, BooleanArray, RecordBatch, UInt64Array};
use arrow::compute::cast;
use arrow::datatypes::SchemaRef;
use datafusion::common::pruning::PruningStatistics;
use datafusion::common::{Column, ScalarValue};
use futures::stream::{self, BoxStream};
use futures::{future, StreamExt, TryStreamExt};
use parquet::arrow::arrow_reader::statistics::StatisticsConverter;
use parquet::arrow::arrow_reader::{ArrowPredicateFn, ArrowReaderMetadata, ArrowReaderOptions, RowFilter};
use parquet::arrow::{ParquetRecordBatchStreamBuilder, ProjectionMask};
use parquet::file::metadata::ParquetMetaData;

use roaring::RoaringBitmap;

use crate::error::{CorruptObject, PredicateError, ScanError};
use crate::format::manifest::{Fragment, ROW_ID_COLUMN, ROW_ID_FIELD};
use crate::format::schema::Field;
use crate::io::deletion;
use crate::io::parquet::file_reader::DataFileReader;
use crate::io::parquet::guard::Guarded;
use crate::io::predicate::{Predicate, RowTest};
use crate::io::scan::adapt::{file_column, has_string_views, to_table_columns, with_string_views};
use crate::io::write::stats::FragmentPruning;
use crate::storage::TableStore;

pub(crate) const BATCH_ROWS: usize = 8192;

/// What to read: output columns (table fields, in output order), an optional filter,
/// and whether each row's id follows them (a last column, `_row_id`).
#[derive(Debug)]
pub(crate) struct ScanPlan {
    pub fields: Vec<Field>,
    /// The table columns' Arrow schema (without the row id).
    pub output: SchemaRef,
    pub predicate: Option<Predicate>,
    pub row_ids: bool,
}

impl ScanPlan {
    /// Reads `fields` (their Arrow schema `output`), filtered by `predicate`.
    pub(crate) fn new(fields: Vec<Field>, output: SchemaRef, predicate: Option<Predicate>) -> ScanPlan {
        ScanPlan { fields, output, predicate, row_ids: false }
    }

    /// Every column of `schema`, unfiltered.
    pub(crate) fn all(schema: &crate::format::schema::Schema) -> ScanPlan {
        ScanPlan::new(schema.fields.clone(), schema.arrow_schema(), None)
    }

    /// This plan, each row's id following its columns.
    pub(crate) fn with_row_ids(mut self) -> ScanPlan {
        self.row_ids = true;
        self
    }

    /// The schema of the batches it yields.
    pub(crate) fn schema(&self) -> SchemaRef {
        if !self.row_ids {
            return self.output.clone();
        }
        let mut fields: Vec<arrow::datatypes::FieldRef> = self.output.fields().iter().cloned().collect();
        fields.push(Arc::new(arrow::datatypes::Field::new(ROW_ID_COLUMN, arrow::datatypes::DataType::Int64, false)));
        Arc::new(arrow::datatypes::Schema::new(fields))
    }
}

/// Which rows of a fragment a read yields.
#[derive(Debug, Clone)]
pub(crate) enum Rows {
    /// Its live rows (its deletion vector applied).
    Live,
    /// The rows at these offsets, deleted or not.
    At(Arc<RoaringBitmap>),
}

/// What one scan read and skipped, for pruning checks and reports.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct ScanMetrics {
    /// Row groups in the files opened.
    pub row_groups_total: u64,
    /// Row groups read (the rest were pruned by statistics).
    pub row_groups_read: u64,
    /// Fragments of the version the scan considered.
    pub fragments_total: u64,
    /// Data files opened (the other fragments were skipped by their statistics).
    pub files_opened: u64,
}

/// The fragments whose statistics do not rule out `plan`'s filter (all without one),
/// in the order given; counts them in `metrics`.
pub(crate) fn prune(fragments: Vec<Fragment>, plan: &ScanPlan, metrics: &std::sync::Mutex<ScanMetrics>) -> Vec<Fragment> {
    metrics.lock().unwrap_or_else(|e| e.into_inner()).fragments_total += fragments.len() as u64;
    let with_leaves = plan.predicate.as_ref().and_then(|p| match &p.leaf_pruning {
        Some((pruning, leaves)) => Some((p, pruning.clone(), leaves.clone())),
        None => Some((p, p.pruning.clone()?, Vec::new())),
    });
    match with_leaves {
        Some((predicate, pruning, leaves)) => match pruning.prune(&FragmentPruning::new(&fragments, &predicate.fields, &leaves)) {
            Ok(keep) => fragments.into_iter().zip(keep).filter_map(|(f, keep)| keep.then_some(f)).collect(),
            // Pruning is an optimisation: statistics it cannot use prune nothing.
            Err(_) => fragments,
        },
        None => fragments,
    }
}

/// Fragments opened and decoded ahead of the one being read, so that a scan rarely
/// waits for a request and the runtime's threads decode several files at once.
const OPEN_AHEAD: usize = 4;

/// How much a fragment opened ahead decodes before the scan reaches it (one batch more
/// when a single batch is larger). A scan holds at most [`OPEN_AHEAD`] times this ahead.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Ahead {
    /// 64 MiB of Arrow data, a whole file: the files opened ahead decode at once.
    Files,
    /// One batch: a scan with a row limit decodes little that it does not return, and
    /// SQL's scans (one per partition, on their own threads) hold little each.
    Batch,
}

impl Ahead {
    /// The budget in KiB.
    fn kib(self) -> u32 {
        match self {
            Ahead::Files => 64 << 10,
            Ahead::Batch => 1,
        }
    }
}

type Batches = BoxStream<'static, Result<RecordBatch, ScanError>>;

/// Streams the rows of `fragments` in fragment order (callers prune them first).
///
/// On a runtime, the next [`OPEN_AHEAD`] fragments are each opened and decoded by a task
/// of their own as soon as the scan reaches the one before them; the batches still come
/// out in fragment order, so the rows do not depend on timing.
pub(crate) fn scan_fragments(
    store: Arc<TableStore>,
    fragments: Vec<Fragment>,
    plan: Arc<ScanPlan>,
    metrics: Arc<std::sync::Mutex<ScanMetrics>>,
    ahead: Ahead,
) -> Batches {
    stream::iter(fragments)
        .map(move |fragment| {
            let (store, plan, metrics) = (store.clone(), plan.clone(), metrics.clone());
            // Started here, when `buffered` takes the fragment in, not when it is read.
            future::ready(decode_ahead(async move { open_fragment(&store, &fragment, plan, &metrics, Rows::Live).await }, ahead))
        })
        .buffered(OPEN_AHEAD)
        .flatten()
        .boxed()
}

/// The batches of the stream `open` yields, opened and decoded by a task of their own
/// (when there is a runtime to run it), up to `ahead` ahead of the consumer; a failure to open is the stream's one item. The task stops when the
/// consumer goes away; a panic in it reaches the consumer as it would have without the
/// task (a scan never ends early without saying why).
fn decode_ahead(open: impl std::future::Future<Output = Result<Batches, ScanError>> + Send + 'static, ahead: Ahead) -> Batches {
    let Ok(runtime) = tokio::runtime::Handle::try_current() else { return stream::once(open).try_flatten().boxed() };
    // Budget in KiB: the task takes a batch's worth before sending it (the whole budget
    // at most, so that any batch goes once nothing is ahead); the consumer gives it back.
    let all = ahead.kib();
    let budget = Arc::new(tokio::sync::Semaphore::new(all as usize));
    let kib = move |batch: &Result<RecordBatch, ScanError>| match batch {
        Ok(b) => u32::try_from(b.get_array_memory_size() >> 10).unwrap_or(all).clamp(1, all),
        Err(_) => 1,
    };
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    let taken = budget.clone();
    let task = DecodeTask(Some(runtime.spawn(async move {
        let mut batches = match open.await {
            Ok(batches) => batches,
            Err(e) => {
                let _ = tx.send((Err(e), 1));
                return;
            }
        };
        while let Some(batch) = batches.next().await {
            let failed = batch.is_err();
            let n = kib(&batch);
            let Ok(permits) = taken.acquire_many(n).await else { return };
            permits.forget();
            if tx.send((batch, n)).is_err() || failed {
                return;
            }
        }
    })));
    stream::unfold((rx, task, budget), |(mut rx, mut task, budget)| async move {
        match rx.recv().await {
            Some((item, n)) => {
                budget.add_permits(n as usize);
                Some((item, (rx, task, budget)))
            }
            None => {
                if let Some(Err(e)) = task.finished().await {
                    if e.is_panic() {
                        std::panic::resume_unwind(e.into_panic());
                    }
                }
                None
            }
        }
    })
    .boxed()
}

/// The decoding task, aborted when the consumer drops its stream.
struct DecodeTask(Option<tokio::task::JoinHandle<()>>);

impl DecodeTask {
    /// How the task ended (once it has: its channel is closed).
    async fn finished(&mut self) -> Option<Result<(), tokio::task::JoinError>> {
        Some(self.0.take()?.await)
    }
}

impl Drop for DecodeTask {
    fn drop(&mut self) {
        if let Some(task) = &self.0 {
            task.abort();
        }
    }
}

/// Turns a decoding failure into an error naming the data file.
type CorruptFile = Arc<dyn Fn(&dyn std::fmt::Display) -> ScanError + Send + Sync>;

/// A fragment's data file, opened: reader builder, its Arrow schema, the field id of
/// each of its columns, and each row group's range of row offsets.
struct OpenedFile {
    builder: ParquetRecordBatchStreamBuilder<DataFileReader>,
    file_schema: SchemaRef,
    file_fields: Arc<Vec<u32>>,
    row_groups: Vec<Range<u64>>,
    corrupt: CorruptFile,
}

/// The name of the reader's row-number column (Parquet's virtual column).
const ROW_NUMBER: &str = "_concord_row_number";

/// Opens `fragment`'s data file; with `views`, its string columns decode as `Utf8View`;
/// with `row_numbers`, each batch ends with the file offset of each row ([`ROW_NUMBER`]).
async fn open_file(store: &TableStore, fragment: &Fragment, views: bool, row_numbers: bool) -> Result<OpenedFile, ScanError> {
    let [file] = fragment.files.as_slice() else {
        let reason = format!("fragment {} has {} data files; this concord reads exactly one", fragment.id, fragment.files.len());
        return Err(CorruptObject { path: format!("fragment {}", fragment.id), reason }.into());
    };
    let shown = store.display(&file.path);
    let corrupt: CorruptFile = Arc::new(move |e| ScanError::Corrupt(CorruptObject { path: shown.clone(), reason: e.to_string() }));
    let (object_store, path) = store.ranged_reads(&file.path);
    let mut reader = DataFileReader::new(object_store, path, file.size_bytes);
    // Types come from the Parquet schema, not the embedded Arrow schema: arrow-ipc can
    // panic on a corrupt one (found by the data_file fuzz target), and columns are
    // matched by field id and cast to the table's types anyway.
    let mut options = ArrowReaderOptions::new().with_skip_arrow_metadata(true);
    if row_numbers {
        let field = arrow::datatypes::Field::new(ROW_NUMBER, arrow::datatypes::DataType::Int64, false)
            .with_extension_type(parquet::arrow::RowNumber);
        options = options.with_virtual_columns(vec![Arc::new(field)]).map_err(|e| corrupt(&e))?;
    }
    let mut metadata = ArrowReaderMetadata::load_async(&mut reader, options.clone()).await.map_err(|e| corrupt(&e))?;
    if views {
        let schema = Arc::new(with_string_views(metadata.schema()));
        metadata = ArrowReaderMetadata::try_new(metadata.metadata().clone(), options.with_schema(schema)).map_err(|e| corrupt(&e))?;
    }
    let builder = ParquetRecordBatchStreamBuilder::new_with_metadata(reader, metadata).with_batch_size(BATCH_ROWS);
    let mut row_groups = Vec::with_capacity(builder.metadata().num_row_groups());
    let mut start = 0u64;
    for rg in builder.metadata().row_groups() {
        row_groups.push(start..start + rg.num_rows() as u64);
        start += rg.num_rows() as u64;
    }
    Ok(OpenedFile { file_schema: builder.schema().clone(), file_fields: Arc::new(file.fields.clone()), builder, row_groups, corrupt })
}

impl OpenedFile {
    /// Row groups the predicate may match, and the predicate's file columns (empty when
    /// the file has none of them; then every row reads them as NULL).
    fn plan_filter(&self, test: &dyn RowTest) -> Result<(Vec<usize>, Vec<usize>), ScanError> {
        let mut keep: Vec<usize> = (0..self.row_groups.len()).collect();
        let columns: Vec<usize> = test.fields().iter().filter_map(|f| file_column(&self.file_fields, f.id)).collect();
        if columns.is_empty() {
            if !test.constant_value().map_err(|e| (self.corrupt)(&e))? {
                keep.clear();
            }
        } else if let Some(pruning) = test.pruning() {
            let metadata = self.builder.metadata();
            let stats = RowGroupStats::new(metadata, &self.file_schema, self.builder.parquet_schema(), &self.file_fields, test.fields());
            if let Ok(mask) = pruning.prune(&stats) {
                keep.retain(|i| mask[*i]);
            }
        }
        Ok((keep, columns))
    }

    fn ranges(&self, row_groups: &[usize]) -> Vec<Range<u64>> {
        row_groups.iter().map(|i| self.row_groups[*i].clone()).collect()
    }
}

async fn open_fragment(
    store: &TableStore,
    fragment: &Fragment,
    plan: Arc<ScanPlan>,
    metrics: &std::sync::Mutex<ScanMetrics>,
    rows: Rows,
) -> Result<BoxStream<'static, Result<RecordBatch, ScanError>>, ScanError> {
    let views = has_string_views(&plan.output) || plan.predicate.as_ref().is_some_and(|p| has_string_views(&p.schema));
    let file = open_file(store, fragment, views, plan.row_ids).await?;
    metrics.lock().unwrap_or_else(|e| e.into_inner()).files_opened += 1;
    let mut out_columns: Vec<usize> = plan.fields.iter().filter_map(|f| file_column(&file.file_fields, f.id)).collect();
    let id_column = file_column(&file.file_fields, ROW_ID_FIELD).filter(|_| plan.row_ids);
    // The predicate failing on a value (e.g. an explicit CAST the text does not fit) is
    // the expression's failure, not the file's: the reader only passes on its text.
    let failure: Arc<std::sync::Mutex<Option<String>>> = Arc::default();
    let Filtering { mut keep, eager, columns, row_filter } = filtering(&file, &plan, &failure)?;
    if let Some(columns) = columns {
        out_columns = columns;
    }
    {
        let mut m = metrics.lock().unwrap_or_else(|e| e.into_inner());
        m.row_groups_total += file.row_groups.len() as u64;
        m.row_groups_read += keep.len() as u64;
    }
    let skipped = skipped_rows(store, fragment, &rows, &file.row_groups, &mut keep).await?;
    if keep.is_empty() {
        return Ok(stream::empty().boxed());
    }
    let ranges = file.ranges(&keep);
    let OpenedFile { mut builder, file_schema, file_fields, corrupt, .. } = file;
    out_columns.extend(id_column);
    let projection = ProjectionMask::roots(builder.parquet_schema(), out_columns);
    builder = builder.with_projection(projection).with_row_groups(keep);
    if !skipped.is_empty() {
        builder = builder.with_row_selection(deletion::selection(&ranges, &skipped));
    }
    if let Some(filter) = row_filter {
        builder = builder.with_row_filter(RowFilter::new(vec![filter]));
    }
    let stream = Guarded::new(builder.build().map_err(|e| corrupt(&e))?);
    let (output, fields) = (plan.output.clone(), plan.fields.clone());
    let ids = plan.row_ids.then(|| (fragment.first_row_id(), plan.schema()));
    let sql = plan.predicate.as_ref().map(|p| p.sql.clone()).unwrap_or_default();
    Ok(stream
        .map(move |batch| {
            let batch = batch.map_err(|e| match failure.lock().unwrap_or_else(|p| p.into_inner()).take() {
                Some(reason) => ScanError::Predicate(PredicateError::Failed { sql: sql.clone(), reason }),
                None => corrupt(&e),
            })?;
            let mut rows = to_table_columns(&batch, &file_schema, &file_fields, &fields, &output).map_err(|e| corrupt(&e))?;
            if let Some((first_row_id, schema)) = &ids {
                rows = with_row_ids(&rows, &batch, &file_schema, &file_fields, *first_row_id, schema).map_err(|e| corrupt(&e))?;
            }
            match plan.predicate.as_ref().filter(|_| eager) {
                None => Ok(rows),
                Some(predicate) => {
                    let adapted = to_table_columns(&batch, &file_schema, &file_fields, &predicate.fields, &predicate.schema)
                        .map_err(|e| corrupt(&e))?;
                    let hits = predicate
                        .evaluate(&adapted)
                        .map_err(|e| ScanError::Predicate(PredicateError::Failed { sql: sql.clone(), reason: e.to_string() }))?;
                    filter_rows(&rows, &hits).map_err(|e| corrupt(&e))
                }
            }
        })
        .boxed())
}

/// How a read of a file applies a plan's filter.
struct Filtering {
    /// The row groups its statistics do not rule out.
    keep: Vec<usize>,
    /// Whether the filter is evaluated on decoded batches (when every output column is a
    /// filter column, nothing is left to decode late, and a row filter would only add
    /// the cost of building row selections); else inside the reader, output columns
    /// decoded only for matching rows (`row_filter`).
    eager: bool,
    /// The columns to decode, when eager.
    columns: Option<Vec<usize>>,
    row_filter: Option<Box<dyn parquet::arrow::arrow_reader::ArrowPredicate>>,
}

/// How `file` is read under `plan`'s filter; a failure of the filter on a value is
/// kept in `failure`.
fn filtering(file: &OpenedFile, plan: &Arc<ScanPlan>, failure: &Arc<std::sync::Mutex<Option<String>>>) -> Result<Filtering, ScanError> {
    let all = (0..file.row_groups.len()).collect();
    let Some(predicate) = &plan.predicate else { return Ok(Filtering { keep: all, eager: false, columns: None, row_filter: None }) };
    let (keep, columns) = file.plan_filter(predicate)?;
    let eager = !columns.is_empty() && !plan.row_ids && plan.fields.iter().all(|f| predicate.fields.iter().any(|p| p.id == f.id));
    if eager {
        return Ok(Filtering { keep, eager, columns: Some(columns), row_filter: None });
    }
    if columns.is_empty() {
        return Ok(Filtering { keep, eager, columns: None, row_filter: None });
    }
    let mask = ProjectionMask::roots(file.builder.parquet_schema(), columns);
    let plan_for_filter = plan.clone();
    let (fs, ff, slot) = (file.file_schema.clone(), file.file_fields.clone(), failure.clone());
    let filter = ArrowPredicateFn::new(mask, move |batch: RecordBatch| {
        let predicate = plan_for_filter.predicate.as_ref().expect("filter has a predicate");
        let adapted = to_table_columns(&batch, &fs, &ff, &predicate.fields, &predicate.schema)?;
        predicate.evaluate(&adapted).inspect_err(|e| *slot.lock().unwrap_or_else(|p| p.into_inner()) = Some(e.to_string()))
    });
    Ok(Filtering { keep, eager, columns: None, row_filter: Some(Box::new(filter)) })
}

/// The rows of the row groups `keep` a read of `rows` skips: the deleted ones, or all
/// but the offsets asked for (then only the row groups holding some are kept).
async fn skipped_rows(
    store: &TableStore,
    fragment: &Fragment,
    rows: &Rows,
    row_groups: &[Range<u64>],
    keep: &mut Vec<usize>,
) -> Result<Arc<RoaringBitmap>, ScanError> {
    let offsets = match rows {
        Rows::Live => return Ok(deletion::of_fragment(store, fragment.deletion.as_ref()).await?),
        Rows::At(offsets) => offsets,
    };
    let span = |r: &Range<u64>| r.start.min(u32::MAX as u64) as u32..r.end.min(u32::MAX as u64) as u32;
    keep.retain(|&i| offsets.range_cardinality(span(&row_groups[i])) > 0);
    let mut others = RoaringBitmap::new();
    for &i in keep.iter() {
        others.insert_range(span(&row_groups[i]));
    }
    Ok(Arc::new(others - offsets.as_ref()))
}

/// `rows` (read from `batch`) with each row's id last: the file's row-id value where
/// it has one, else the fragment's first row id plus the row's offset.
fn with_row_ids(
    rows: &RecordBatch,
    batch: &RecordBatch,
    file_schema: &SchemaRef,
    file_fields: &[u32],
    first_row_id: u64,
    schema: &SchemaRef,
) -> Result<RecordBatch, arrow::error::ArrowError> {
    use arrow::array::{Array, AsArray, Int64Array};
    use arrow::datatypes::Int64Type;
    let numbers = batch.column_by_name(ROW_NUMBER).ok_or_else(|| arrow::error::ArrowError::SchemaError("no row numbers".into()))?;
    let numbers = numbers.as_primitive::<Int64Type>();
    let explicit = batch
        .schema()
        .fields()
        .iter()
        .position(|f| file_schema.index_of(f.name()).ok().and_then(|i| file_fields.get(i)).copied() == Some(ROW_ID_FIELD));
    let explicit = explicit.map(|i| batch.column(i).as_primitive::<Int64Type>().clone());
    let ids: Int64Array = (0..batch.num_rows())
        .map(|i| match &explicit {
            Some(column) if column.is_valid(i) => column.value(i),
            _ => (first_row_id + numbers.value(i) as u64) as i64,
        })
        .collect();
    let mut columns = rows.columns().to_vec();
    columns.push(Arc::new(ids));
    RecordBatch::try_new_with_options(
        schema.clone(),
        columns,
        &arrow::array::RecordBatchOptions::new().with_row_count(Some(rows.num_rows())),
    )
}

/// The rows of `batch` where `hits` is true (a batch without columns keeps its count).
fn filter_rows(batch: &RecordBatch, hits: &BooleanArray) -> Result<RecordBatch, arrow::error::ArrowError> {
    if batch.num_columns() == 0 {
        let options = arrow::array::RecordBatchOptions::new().with_row_count(Some(hits.true_count()));
        return RecordBatch::try_new_with_options(batch.schema(), Vec::new(), &options);
    }
    arrow::compute::filter_record_batch(batch, hits)
}

/// The live rows of one fragment as `plan` selects them, in row-offset order.
pub(crate) async fn read_fragment(store: &TableStore, fragment: &Fragment, plan: Arc<ScanPlan>) -> Result<Vec<RecordBatch>, ScanError> {
    read_rows(store, fragment, plan, Rows::Live).await
}

/// The rows `rows` of one fragment as `plan` selects them, in row-offset order.
pub(crate) async fn read_rows(
    store: &TableStore,
    fragment: &Fragment,
    plan: Arc<ScanPlan>,
    rows: Rows,
) -> Result<Vec<RecordBatch>, ScanError> {
    let metrics = std::sync::Mutex::new(ScanMetrics::default());
    open_fragment(store, fragment, plan, &metrics, rows).await?.try_collect().await
}

/// Offsets of the live rows of `fragment` for which `test` holds.
pub(crate) async fn fragment_matches(store: &TableStore, fragment: &Fragment, test: &dyn RowTest) -> Result<RoaringBitmap, ScanError> {
    if let Some(pruning) = test.pruning() {
        if pruning.prune(&FragmentPruning::new(std::slice::from_ref(fragment), test.fields(), &[])).is_ok_and(|keep| keep == [false]) {
            return Ok(RoaringBitmap::new());
        }
    }
    let file = open_file(store, fragment, false, false).await?;
    let (keep, columns) = file.plan_filter(test)?;
    let mut matches = RoaringBitmap::new();
    if columns.is_empty() {
        for i in &keep {
            let r = &file.row_groups[*i];
            matches.insert_range(r.start as u32..r.end as u32);
        }
    } else if !keep.is_empty() {
        let ranges = file.ranges(&keep);
        let OpenedFile { builder, file_schema, file_fields, corrupt, .. } = file;
        let projection = ProjectionMask::roots(builder.parquet_schema(), columns);
        let mut stream = Guarded::new(builder.with_projection(projection).with_row_groups(keep).build().map_err(|e| corrupt(&e))?);
        // Position p in the concatenation of the kept row groups -> file row offset.
        let (mut range, mut range_start) = (0usize, 0u64);
        let mut position = 0u64;
        while let Some(batch) = stream.next().await {
            let batch = batch.map_err(|e| corrupt(&e))?;
            let adapted = to_table_columns(&batch, &file_schema, &file_fields, test.fields(), test.schema()).map_err(|e| corrupt(&e))?;
            let hits = test
                .evaluate(&adapted)
                .map_err(|e| ScanError::Predicate(PredicateError::Failed { sql: test.describe(), reason: e.to_string() }))?;
            for i in 0..hits.len() {
                if hits.value(i) {
                    let p = position + i as u64;
                    while p >= range_start + (ranges[range].end - ranges[range].start) {
                        range_start += ranges[range].end - ranges[range].start;
                        range += 1;
                    }
                    matches.insert((ranges[range].start + (p - range_start)) as u32);
                }
            }
            position += hits.len() as u64;
        }
    }
    matches -= deletion::of_fragment(store, fragment.deletion.as_ref()).await?.as_ref();
    Ok(matches)
}

/// Row-group statistics of one file, keyed by the predicate's (table) column names.
struct RowGroupStats<'a> {
    metadata: &'a ParquetMetaData,
    converters: Vec<(String, StatisticsConverter<'a>, arrow::datatypes::DataType)>,
}

impl<'a> RowGroupStats<'a> {
    fn new(
        metadata: &'a ParquetMetaData,
        file_schema: &'a SchemaRef,
        parquet_schema: &'a parquet::schema::types::SchemaDescriptor,
        file_fields: &[u32],
        fields: &[Field],
    ) -> Self {
        let converters = fields
            .iter()
            .filter_map(|f| {
                let column = file_column(file_fields, f.id)?;
                let name = file_schema.field(column).name();
                let converter = StatisticsConverter::try_new(name, file_schema, parquet_schema).ok()?;
                Some((f.name.clone(), converter, f.column_type.arrow_type()))
            })
            .collect();
        RowGroupStats { metadata, converters }
    }

    fn converted(&self, column: &Column, pick: impl Fn(&StatisticsConverter<'a>) -> Option<ArrayRef>) -> Option<ArrayRef> {
        let (_, converter, table_type) = self.converters.iter().find(|(name, ..)| *name == column.name)?;
        let array = pick(converter)?;
        if array.data_type() == table_type {
            Some(array)
        } else {
            cast(&array, table_type).ok()
        }
    }
}

impl PruningStatistics for RowGroupStats<'_> {
    fn min_values(&self, column: &Column) -> Option<ArrayRef> {
        self.converted(column, |c| c.row_group_mins(self.metadata.row_groups().iter()).ok())
    }
    fn max_values(&self, column: &Column) -> Option<ArrayRef> {
        self.converted(column, |c| c.row_group_maxes(self.metadata.row_groups().iter()).ok())
    }
    fn num_containers(&self) -> usize {
        self.metadata.num_row_groups()
    }
    fn null_counts(&self, column: &Column) -> Option<ArrayRef> {
        let (_, converter, _) = self.converters.iter().find(|(name, ..)| *name == column.name)?;
        converter.row_group_null_counts(self.metadata.row_groups().iter()).ok().map(|a| Arc::new(a) as ArrayRef)
    }
    fn row_counts(&self) -> Option<ArrayRef> {
        let counts: UInt64Array = self.metadata.row_groups().iter().map(|rg| Some(rg.num_rows() as u64)).collect();
        Some(Arc::new(counts))
    }
    fn contained(&self, _column: &Column, _values: &HashSet<ScalarValue>) -> Option<BooleanArray> {
        None
    }
}

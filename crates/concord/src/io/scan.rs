//! Scanning fragments: projection and filter pushed into the Parquet reader.
//!
//! Per data file: row groups whose statistics prove the filter false are skipped
//! (DataFusion's `PruningPredicate`); the filter's columns are decoded first and the
//! other projected columns only for matching rows (Parquet `RowFilter`).

use std::collections::HashSet;
use std::sync::Arc;

use arrow::array::{ArrayRef, BooleanArray, RecordBatch, UInt64Array};
use arrow::compute::cast;
use arrow::datatypes::SchemaRef;
use datafusion::common::pruning::PruningStatistics;
use datafusion::common::{Column, ScalarValue};
use futures::stream::{self, BoxStream};
use futures::{StreamExt, TryStreamExt};
use parquet::arrow::arrow_reader::statistics::StatisticsConverter;
use parquet::arrow::arrow_reader::{ArrowPredicateFn, RowFilter};
use parquet::arrow::{ParquetRecordBatchStreamBuilder, ProjectionMask};
use parquet::file::metadata::ParquetMetaData;

use super::adapt::{file_column, to_table_columns};
use super::file_reader::DataFileReader;
use super::predicate::Predicate;
use crate::error::{CorruptObject, ScanError};
use crate::format::manifest::Fragment;
use crate::format::schema::Field;
use crate::storage::TableStore;

pub const BATCH_ROWS: usize = 8192;

/// What to read: output columns (table fields, in output order) and an optional filter.
#[derive(Debug)]
pub(crate) struct ScanPlan {
    pub fields: Vec<Field>,
    pub output: SchemaRef,
    pub predicate: Option<Predicate>,
}

/// Row-group counts of one scan, for pruning checks and reports.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct ScanMetrics {
    pub row_groups_total: u64,
    pub row_groups_read: u64,
}

/// Streams the rows of `fragments` in fragment order.
pub(crate) fn scan_fragments(
    store: Arc<TableStore>,
    fragments: Vec<Fragment>,
    plan: Arc<ScanPlan>,
    metrics: Arc<std::sync::Mutex<ScanMetrics>>,
) -> BoxStream<'static, Result<RecordBatch, ScanError>> {
    stream::iter(fragments)
        .then(move |fragment| {
            let (store, plan, metrics) = (store.clone(), plan.clone(), metrics.clone());
            async move { open_fragment(&store, &fragment, plan, &metrics).await }
        })
        .try_flatten()
        .boxed()
}

async fn open_fragment(
    store: &TableStore,
    fragment: &Fragment,
    plan: Arc<ScanPlan>,
    metrics: &std::sync::Mutex<ScanMetrics>,
) -> Result<BoxStream<'static, Result<RecordBatch, ScanError>>, ScanError> {
    let [file] = fragment.files.as_slice() else {
        let reason = format!("fragment {} has {} data files; this concord reads exactly one", fragment.id, fragment.files.len());
        return Err(CorruptObject { path: format!("fragment {}", fragment.id), reason }.into());
    };
    let path = store.path(&file.path);
    let corrupt = {
        let path = store.location.display(&path);
        move |e: &dyn std::fmt::Display| ScanError::Corrupt(CorruptObject { path: path.clone(), reason: e.to_string() })
    };
    let reader = DataFileReader::new(store.location.store.clone(), path.clone(), file.size_bytes);
    let mut builder = ParquetRecordBatchStreamBuilder::new(reader).await.map_err(|e| corrupt(&e))?.with_batch_size(BATCH_ROWS);
    let file_schema = builder.schema().clone();
    let file_fields = Arc::new(file.fields.clone());
    let row_groups = builder.metadata().num_row_groups();
    let out_columns: Vec<usize> = plan.fields.iter().filter_map(|f| file_column(&file_fields, f.id)).collect();
    let projection = ProjectionMask::roots(builder.parquet_schema(), out_columns);
    builder = builder.with_projection(projection);

    let mut keep: Vec<usize> = (0..row_groups).collect();
    if let Some(predicate) = &plan.predicate {
        let filter_columns: Vec<usize> = predicate.fields.iter().filter_map(|f| file_column(&file_fields, f.id)).collect();
        if filter_columns.is_empty() {
            // The file has none of the filter's columns: they all read as NULL.
            if !predicate.constant_value().map_err(|e| corrupt(&e))? {
                keep.clear();
            }
        } else {
            if let Some(pruning) = &predicate.pruning {
                let stats = RowGroupStats::new(builder.metadata(), &file_schema, builder.parquet_schema(), &file_fields, predicate);
                if let Ok(mask) = pruning.prune(&stats) {
                    keep.retain(|i| mask[*i]);
                }
            }
            let mask = ProjectionMask::roots(builder.parquet_schema(), filter_columns);
            let plan_for_filter = plan.clone();
            let (fs, ff) = (file_schema.clone(), file_fields.clone());
            let filter = ArrowPredicateFn::new(mask, move |batch: RecordBatch| {
                let predicate = plan_for_filter.predicate.as_ref().expect("filter has a predicate");
                let adapted = to_table_columns(&batch, &fs, &ff, &predicate.fields, &predicate.schema)?;
                predicate.evaluate(&adapted)
            });
            builder = builder.with_row_filter(RowFilter::new(vec![Box::new(filter)]));
        }
    }
    {
        let mut m = metrics.lock().unwrap_or_else(|e| e.into_inner());
        m.row_groups_total += row_groups as u64;
        m.row_groups_read += keep.len() as u64;
    }
    if keep.is_empty() {
        return Ok(stream::empty().boxed());
    }
    let stream = builder.with_row_groups(keep).build().map_err(|e| corrupt(&e))?;
    let output = plan.output.clone();
    let fields = plan.fields.clone();
    Ok(stream
        .map(move |batch| {
            let batch = batch.map_err(|e| corrupt(&e))?;
            to_table_columns(&batch, &file_schema, &file_fields, &fields, &output).map_err(|e| corrupt(&e))
        })
        .boxed())
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
        predicate: &Predicate,
    ) -> Self {
        let converters = predicate
            .fields
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
        if array.data_type() == table_type { Some(array) } else { cast(&array, table_type).ok() }
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

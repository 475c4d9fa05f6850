//! Appending a Parquet file of the table's own column types copies its encoded column
//! chunks (FORMAT.md §4): the table reads back exactly the rows an append of the same
//! rows as batches gives, checked the same way; any other file is read as rows.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use concord::arrow::array::{ArrayRef, Float64Array, Int32Array, Int64Array, RecordBatch, StringArray};
use concord::arrow::datatypes::{DataType, Field, Schema as ArrowSchema};
use concord::StoreResolver;
use concord::{CommitOptions, ErrorKind, ScanOptions, Table, WriteError};
use parquet::file::metadata::ParquetMetaDataReader;
use parquet::file::properties::WriterProperties;

use crate::common::*;

/// `batch` as a Parquet file of row groups of `group_rows` rows (the parquet crate's
/// defaults otherwise: dictionaries, statistics and page indexes).
fn write_groups(path: &Path, batch: &RecordBatch, group_rows: usize) {
    let props = WriterProperties::builder().set_max_row_group_row_count(Some(group_rows)).build();
    let mut writer = parquet::arrow::ArrowWriter::try_new(std::fs::File::create(path).unwrap(), batch.schema(), Some(props)).unwrap();
    writer.write(batch).unwrap();
    writer.close().unwrap();
}

/// The data files of the table's latest version, with their field ids.
async fn data_files(table: &Table, root: &Path) -> Vec<(PathBuf, Vec<u32>)> {
    let table = table.latest().await.unwrap();
    let fragments = table.fragments().await.unwrap();
    fragments.iter().flat_map(|f| f.files.iter().map(|d| (root.join(&d.path), d.fields.clone()))).collect()
}

/// A data file's row groups and whether any of its column chunks has statistics (the
/// writer's files all do; a spliced file's none).
fn shape(path: &Path) -> (usize, bool) {
    let metadata = ParquetMetaDataReader::new().parse_and_finish(&std::fs::File::open(path).unwrap()).unwrap();
    let stats = metadata.row_groups().iter().flat_map(|g| g.columns()).any(|c| c.statistics().is_some());
    (metadata.num_row_groups(), stats)
}

async fn read(table: &Table, filter: Option<&str>) -> RecordBatch {
    let table = table.latest().await.unwrap();
    let scan = table.scan(ScanOptions { filter: filter.map(Into::into), ..Default::default() }).await.unwrap();
    let schema = scan.schema();
    concord::arrow::compute::concat_batches(&schema, &scan.collect().await.unwrap()).unwrap()
}

/// Every column type (a NULL, each type's extremes) as a file written by the parquet
/// crate reads back as the same rows appended as a batch.
#[tokio::test]
async fn every_type_spliced_reads_back_as_its_rows() {
    let dir = tempfile::tempdir().unwrap();
    let schema = concord::Schema::parse(&crate::types::every_type()).unwrap();
    let rows = crate::types::every_type_rows(&schema);
    let input = dir.path().join("rows.parquet");
    write_parquet(&input, &rows);
    let (spliced_root, batch_root) = (dir.path().join("spliced"), dir.path().join("batches"));
    let resolver = StoreResolver::new();
    let spliced = create_table(&resolver, spliced_root.to_str().unwrap(), &schema.definition()).await;
    spliced.append(input, &CommitOptions::default()).await.unwrap();
    let batches = create_table(&resolver, batch_root.to_str().unwrap(), &schema.definition()).await;
    batches.append(rows.clone(), &CommitOptions::default()).await.unwrap();
    let files = data_files(&spliced, &spliced_root).await;
    assert_eq!(files.len(), 1);
    assert_eq!(shape(&files[0].0), (1, false), "spliced: no statistics copied");
    assert_eq!(shape(&data_files(&batches, &batch_root).await[0].0), (1, true));
    assert_eq!(read(&spliced, None).await, rows);
    assert_eq!(read(&batches, None).await, rows);
}

/// A file in pyarrow's shape: several row groups, columns in another order than the
/// table's, a table column it lacks, one that is NULL in every row. Spliced, its
/// columns come in table order with the table's field ids, the all-NULL one left out as
/// the writer leaves it out, and its fragment statistics prune as a written file's do.
#[tokio::test]
async fn a_file_in_another_shape_is_spliced_in_table_order() {
    let dir = tempfile::tempdir().unwrap();
    let n = 5_000i64;
    let input_schema = Arc::new(ArrowSchema::new(vec![
        Field::new("name", DataType::Utf8, true),
        Field::new("ID", DataType::Int64, true),
        Field::new("gone", DataType::Float64, true),
        Field::new("v", DataType::Float64, true),
    ]));
    let columns: Vec<ArrayRef> = vec![
        Arc::new(StringArray::from_iter((0..n).map(|i| (i % 3 != 0).then(|| format!("name {}", i % 10))))),
        Arc::new(Int64Array::from_iter_values(0..n)),
        Arc::new(Float64Array::from(vec![None; n as usize])),
        Arc::new(Float64Array::from_iter_values((0..n).map(|i| i as f64 / 4.0))),
    ];
    let batch = RecordBatch::try_new(input_schema, columns).unwrap();
    let input = dir.path().join("in.parquet");
    write_groups(&input, &batch, 1_000);
    let root = dir.path().join("t");
    let definition = "id bigint not null, v double, extra varchar, name varchar, gone double";
    let table = create_table(&StoreResolver::new(), root.to_str().unwrap(), definition).await;
    table.append(input, &CommitOptions::default()).await.unwrap();
    let files = data_files(&table, &root).await;
    assert_eq!(files.len(), 1);
    assert_eq!(shape(&files[0].0), (5, false), "the input's row groups, spliced");
    let ids = |names: &[&str]| names.iter().map(|n| table.schema().field(n).unwrap().id).collect::<Vec<_>>();
    assert_eq!(files[0].1, ids(&["id", "v", "name"]));

    let expected = create_table(&StoreResolver::new(), dir.path().join("e").to_str().unwrap(), definition).await;
    expected.append(batch, &CommitOptions::default()).await.unwrap();
    assert_eq!(read(&table, None).await, read(&expected, None).await);
    assert_eq!(read(&table, Some("name = 'name 4' and v > 1000")).await, read(&expected, Some("name = 'name 4' and v > 1000")).await);
    // The fragment's statistics are the decoded rows': out of range, nothing is opened.
    let scan = table.latest().await.unwrap().scan(ScanOptions { filter: Some("id >= 5000".into()), ..Default::default() }).await.unwrap();
    let metrics = scan.metrics_handle();
    assert_eq!(scan.collect().await.unwrap().iter().map(|b| b.num_rows()).sum::<usize>(), 0);
    assert_eq!(metrics.lock().unwrap().files_opened, 0);
}

/// Spliced rows are checked as decoded rows are: a NULL in a not-null column refuses
/// the file, naming the row (in its third row group), and nothing is committed or left.
#[tokio::test]
async fn a_null_in_a_not_null_column_refuses_a_spliced_file() {
    let dir = tempfile::tempdir().unwrap();
    let ids = Int64Array::from_iter((0..5_000i64).map(|i| (i != 2_500).then_some(i)));
    let batch = RecordBatch::try_from_iter([("id", Arc::new(ids) as ArrayRef)]).unwrap();
    let input = dir.path().join("in.parquet");
    write_groups(&input, &batch, 1_000);
    let root = dir.path().join("t");
    let table = create_table(&StoreResolver::new(), root.to_str().unwrap(), "id bigint not null").await;
    let err = table.append(input, &CommitOptions::default()).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidInput, "{err}");
    assert!(matches!(&err, WriteError::Input(concord::InputError::NullInNonNullable { row: 2_501, .. })), "{err:?}");
    assert_eq!(table.latest().await.unwrap().version(), 0);
    assert_eq!(files_under(&root, "data"), Vec::<PathBuf>::new(), "the files spliced before the NULL are removed");
}

/// A column of another Parquet type than its table column's (an `int` file column for
/// a `bigint`) is read as rows: widened value by value and written by the writer.
#[tokio::test]
async fn another_parquet_type_is_read_as_rows() {
    let dir = tempfile::tempdir().unwrap();
    let batch = RecordBatch::try_from_iter([("id", Arc::new(Int32Array::from_iter_values(0..3_000)) as ArrayRef)]).unwrap();
    let input = dir.path().join("in.parquet");
    write_groups(&input, &batch, 1_000);
    let root = dir.path().join("t");
    let table = create_table(&StoreResolver::new(), root.to_str().unwrap(), "id bigint not null").await;
    table.append(input, &CommitOptions::default()).await.unwrap();
    let files = data_files(&table, &root).await;
    assert_eq!(shape(&files[0].0), (1, true), "written by the writer");
    assert_eq!(ids(&table.latest().await.unwrap()).await, (0..3_000).collect::<Vec<i64>>());
}

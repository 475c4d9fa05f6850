//! A fragment's deletion vector as an Iceberg position delete file: one Parquet file
//! per deletion vector (so one data file each, as every reader handles), `file_path`
//! then `pos` (DuckDB reads them by position), sorted by position.

use std::sync::Arc;

use arrow::array::{Int64Array, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Schema};
use parquet::arrow::ArrowWriter;

use super::avro::{Entry, Seqs};
use super::{put, uri, PublishError, DIR};
use crate::format::schema::PARQUET_FIELD_ID_KEY;
use crate::storage::TableStore;

/// Iceberg's reserved field ids of a position delete file's columns.
const FILE_PATH_ID: i32 = 2_147_483_546;
const POS_ID: i32 = 2_147_483_545;

/// The position delete file of the deletion vector at `deletion`.
pub(crate) fn file_name(deletion: &str) -> String {
    let stem = deletion.rsplit('/').next().unwrap_or(deletion).split('.').next().unwrap_or(deletion);
    format!("{DIR}/pd-{stem}.parquet")
}

/// Writes (if absent) the position delete file of the deletion vector `deletion` of the
/// data file at `data_uri`; returns its manifest entry.
pub(super) async fn publish(store: &TableStore, deletion: &str, data_uri: &str, seqs: Seqs) -> Result<Entry, PublishError> {
    let rows = crate::io::deletion::read(store, deletion).await?;
    let name = file_name(deletion);
    let field = |name: &str, t: DataType, id: i32| {
        Field::new(name, t, false).with_metadata([(PARQUET_FIELD_ID_KEY.to_string(), id.to_string())].into())
    };
    let schema = Arc::new(Schema::new(vec![field("file_path", DataType::Utf8, FILE_PATH_ID), field("pos", DataType::Int64, POS_ID)]));
    let positions: Vec<i64> = rows.iter().map(i64::from).collect();
    let count = positions.len();
    let batch = RecordBatch::try_new(
        schema.clone(),
        vec![Arc::new(StringArray::from(vec![data_uri; count])), Arc::new(Int64Array::from(positions))],
    )
    .map_err(|e| PublishError::Encode { what: store.display(&name), reason: e.to_string() })?;
    let encode = |e: parquet::errors::ParquetError| PublishError::Encode { what: store.display(&name), reason: e.to_string() };
    let mut writer = ArrowWriter::try_new(Vec::new(), schema, None).map_err(encode)?;
    writer.write(&batch).map_err(encode)?;
    let bytes = writer.into_inner().map_err(encode)?;
    let size = put(store, &name, bytes).await?;
    let path_bound = data_uri.as_bytes().to_vec();
    Ok(Entry {
        content: 1,
        file_path: uri(store, &name),
        record_count: count as i64,
        file_size_in_bytes: size,
        value_counts: Vec::new(),
        null_value_counts: Vec::new(),
        // Equal bounds on the path: pyiceberg then ties the file to that data file alone.
        lower_bounds: vec![(FILE_PATH_ID, path_bound.clone())],
        upper_bounds: vec![(FILE_PATH_ID, path_bound)],
        referenced_data_file: Some(data_uri.to_string()),
        seqs,
        first_row_id: None,
    })
}

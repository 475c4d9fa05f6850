//! Writes rows as new Parquet data files (fresh UUID names, created once).

use arrow::array::RecordBatch;
use bytes::Bytes;
use parquet::arrow::ArrowWriter;
use parquet::basic::Compression;
use parquet::file::properties::{EnabledStatistics, WriterProperties};

use crate::env::Env;
use crate::error::WriteError;
use crate::format::manifest::{DataFile, NewFragment};
use crate::format::naming;
use crate::format::schema::Schema;
use crate::storage::TableStore;

/// Rows per data file (one fragment each).
pub const MAX_ROWS_PER_FILE: usize = 1 << 20;
/// Rows per Parquet row group: the unit of statistics pruning.
pub const ROW_GROUP_ROWS: usize = 64 * 1024;

/// Writes `batches` (already conforming to `schema`) as fragments of at most
/// `MAX_ROWS_PER_FILE` rows, one data file each.
///
/// A nullable column without a default that is NULL in every row is not written: it
/// reads back as NULL all the same, and a write that carries no values for a column
/// does not conflict with a concurrent drop of it.
pub(crate) async fn write_fragments(
    store: &TableStore,
    env: &Env,
    schema: &Schema,
    batches: &[RecordBatch],
) -> Result<Vec<NewFragment>, WriteError> {
    let mut keep: Vec<usize> = (0..schema.fields.len())
        .filter(|&i| {
            let f = &schema.fields[i];
            !(f.nullable && f.default.is_none() && batches.iter().all(|b| b.column(i).null_count() == b.num_rows()))
        })
        .collect();
    if keep.is_empty() {
        keep.push(0); // a data file needs a column to carry its row count
    }
    let file_schema = std::sync::Arc::new(schema.arrow_schema_with_field_ids().project(&keep).map_err(WriteError::encode)?);
    let fields: Vec<u32> = keep.iter().map(|&i| schema.fields[i].id).collect();
    let props = WriterProperties::builder()
        .set_compression(Compression::SNAPPY)
        .set_max_row_group_row_count(Some(ROW_GROUP_ROWS))
        .set_statistics_enabled(EnabledStatistics::Page)
        .build();
    let encode = WriteError::encode;
    let mut encoded: Vec<(Vec<u8>, u64)> = Vec::new();
    let mut current: Option<(ArrowWriter<Vec<u8>>, u64)> = None;
    for batch in batches {
        let batch = RecordBatch::try_new(file_schema.clone(), keep.iter().map(|&i| batch.column(i).clone()).collect())
            .map_err(WriteError::encode)?;
        let mut offset = 0;
        while offset < batch.num_rows() {
            let (writer, rows) = match &mut current {
                Some(open) => open,
                None => current.insert((ArrowWriter::try_new(Vec::new(), file_schema.clone(), Some(props.clone())).map_err(encode)?, 0)),
            };
            let take = (MAX_ROWS_PER_FILE - *rows as usize).min(batch.num_rows() - offset);
            writer.write(&batch.slice(offset, take)).map_err(encode)?;
            *rows += take as u64;
            offset += take;
            if *rows as usize == MAX_ROWS_PER_FILE {
                let (writer, rows) = current.take().expect("just used");
                encoded.push((writer.into_inner().map_err(encode)?, rows));
            }
        }
    }
    if let Some((writer, rows)) = current {
        encoded.push((writer.into_inner().map_err(encode)?, rows));
    }
    let mut fragments = Vec::with_capacity(encoded.len());
    for (bytes, rows) in encoded {
        let path = naming::data_file_name(env.new_uuid());
        let size_bytes = bytes.len() as u64;
        store.put_new(&path, Bytes::from(bytes)).await?;
        fragments.push(NewFragment { files: vec![DataFile { path, fields: fields.clone(), size_bytes }], rows });
    }
    Ok(fragments)
}

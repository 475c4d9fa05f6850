//! Writes rows as new Parquet data files (fresh UUID names, created once), one
//! fragment per file of at most [`MAX_ROWS_PER_FILE`] rows, as the rows arrive: memory
//! stays bounded by one file's rows whatever the input's size.

use arrow::array::RecordBatch;
use bytes::Bytes;
use parquet::arrow::ArrowWriter;
use parquet::basic::Compression;
use parquet::file::properties::{EnabledStatistics, WriterProperties};

use crate::env::Env;
use crate::error::WriteError;
use crate::format::manifest::{ColumnStats, DataFile, NewFragment};
use crate::format::naming;
use crate::format::schema::Schema;
use crate::storage::TableStore;
use crate::table::{ProgressFn, WriteProgress};

/// Rows per data file (one fragment each).
pub(crate) const MAX_ROWS_PER_FILE: usize = 1 << 20;
/// Rows per Parquet row group: the unit of statistics pruning.
pub(crate) const ROW_GROUP_ROWS: usize = 64 * 1024;

/// Writes `batches` (already conforming to `schema`) as fragments.
pub(crate) async fn write_fragments(
    store: &TableStore,
    env: &Env,
    schema: &Schema,
    batches: &[RecordBatch],
) -> Result<Vec<NewFragment>, WriteError> {
    let mut writer = FragmentWriter::new(store, env, schema);
    for batch in batches {
        writer.push(batch).await?;
    }
    writer.finish().await
}

/// Data files written as rows are pushed: a file is encoded and written once it holds
/// [`MAX_ROWS_PER_FILE`] rows (and the rest at `finish`).
pub(crate) struct FragmentWriter<'a> {
    store: &'a TableStore,
    env: &'a Env,
    schema: &'a Schema,
    pending: Vec<RecordBatch>,
    pending_rows: usize,
    written: Vec<NewFragment>,
    /// Told the rows pushed and bytes written so far.
    progress: Option<ProgressFn>,
    reported: WriteProgress,
}

impl<'a> FragmentWriter<'a> {
    pub(crate) fn new(store: &'a TableStore, env: &'a Env, schema: &'a Schema) -> Self {
        let reported = WriteProgress::default();
        FragmentWriter { store, env, schema, pending: Vec::new(), pending_rows: 0, written: Vec::new(), progress: None, reported }
    }

    /// This writer, telling `progress` how it is going.
    pub(crate) fn with_progress(mut self, progress: Option<ProgressFn>) -> Self {
        self.progress = progress;
        self
    }

    fn report(&self) {
        if let Some(progress) = &self.progress {
            progress(self.reported);
        }
    }

    /// Takes `batch` (conforming to the schema), writing every file it completes.
    pub(crate) async fn push(&mut self, batch: &RecordBatch) -> Result<(), WriteError> {
        let mut offset = 0;
        while offset < batch.num_rows() {
            let take = (MAX_ROWS_PER_FILE - self.pending_rows).min(batch.num_rows() - offset);
            self.pending.push(batch.slice(offset, take));
            self.pending_rows += take;
            offset += take;
            if self.pending_rows == MAX_ROWS_PER_FILE {
                self.flush().await?;
            }
        }
        self.reported.rows += batch.num_rows() as u64;
        self.report();
        Ok(())
    }

    /// Writes the last file; returns every fragment written, in order.
    pub(crate) async fn finish(mut self) -> Result<Vec<NewFragment>, WriteError> {
        if self.pending_rows > 0 {
            self.flush().await?;
        }
        Ok(std::mem::take(&mut self.written))
    }

    /// Fragments written so far (to remove if the write is abandoned).
    pub(crate) fn written(&self) -> &[NewFragment] {
        &self.written
    }

    async fn flush(&mut self) -> Result<(), WriteError> {
        let batches = std::mem::take(&mut self.pending);
        let rows = std::mem::take(&mut self.pending_rows) as u64;
        let (bytes, fields, stats) = encode(self.schema, &batches)?;
        let path = naming::data_file_name(self.env.new_uuid());
        let size_bytes = bytes.len() as u64;
        self.store.put_new(&path, Bytes::from(bytes)).await?;
        self.reported.bytes_written += size_bytes;
        self.report();
        self.written.push(NewFragment { files: vec![DataFile { path, fields, size_bytes, stats }], rows });
        Ok(())
    }
}

/// One data file holding `batches`, the field ids of its columns, and their statistics.
///
/// A nullable column without a default that is NULL in every row is not written: it
/// reads back as NULL all the same, and a write that carries no values for a column
/// does not conflict with a concurrent drop of it.
fn encode(schema: &Schema, batches: &[RecordBatch]) -> Result<(Vec<u8>, Vec<u32>, Vec<ColumnStats>), WriteError> {
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
    let props = WriterProperties::builder()
        .set_compression(Compression::SNAPPY)
        .set_max_row_group_row_count(Some(ROW_GROUP_ROWS))
        .set_statistics_enabled(EnabledStatistics::Page)
        .build();
    let mut writer = ArrowWriter::try_new(Vec::new(), file_schema.clone(), Some(props)).map_err(WriteError::encode)?;
    for batch in batches {
        let batch = RecordBatch::try_new(file_schema.clone(), keep.iter().map(|&i| batch.column(i).clone()).collect())
            .map_err(WriteError::encode)?;
        writer.write(&batch).map_err(WriteError::encode)?;
    }
    let fields = keep.iter().map(|&i| schema.fields[i].id).collect();
    let stats = super::stats::file_stats(&schema.fields, &keep, batches);
    Ok((writer.into_inner().map_err(WriteError::encode)?, fields, stats))
}

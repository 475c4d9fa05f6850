//! Writes rows as new Parquet data files (fresh UUID names, created once), one
//! fragment per file of at most [`MAX_ROWS_PER_FILE`] rows and about
//! [`MAX_FILE_BYTES`] of Arrow data, as the rows arrive: memory stays bounded by one
//! file's bytes whatever the input's size or the width of its rows (a 768-float vector
//! is 3 KiB a row: 2^20 of them would be 3 GiB).

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
/// Arrow bytes a data file holds at most (one row more only when a single row is
/// larger): the writer buffers a file's rows and its encoded bytes, so this bounds its
/// memory.
pub(crate) const MAX_FILE_BYTES: usize = 128 << 20;
/// Rows per Parquet row group: the unit of statistics pruning.
pub(crate) const ROW_GROUP_ROWS: usize = 64 * 1024;
/// Arrow bytes a row group holds at most (likewise), so that a reader decodes wide rows
/// in bounded pieces too.
pub(crate) const ROW_GROUP_BYTES: usize = 32 << 20;

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
    /// Arrow bytes of `pending` (estimated per row from each pushed batch).
    pending_bytes: usize,
    written: Vec<NewFragment>,
    /// Told the rows pushed and bytes written so far.
    progress: Option<ProgressFn>,
    reported: WriteProgress,
}

impl<'a> FragmentWriter<'a> {
    pub(crate) fn new(store: &'a TableStore, env: &'a Env, schema: &'a Schema) -> Self {
        let reported = WriteProgress::default();
        FragmentWriter {
            store,
            env,
            schema,
            pending: Vec::new(),
            pending_rows: 0,
            pending_bytes: 0,
            written: Vec::new(),
            progress: None,
            reported,
        }
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
        let row_bytes = row_bytes(batch);
        let mut offset = 0;
        while offset < batch.num_rows() {
            // At least one row a file, however wide.
            let room = (MAX_FILE_BYTES.saturating_sub(self.pending_bytes) / row_bytes).max(usize::from(self.pending_rows == 0));
            let take = (MAX_ROWS_PER_FILE - self.pending_rows).min(room).min(batch.num_rows() - offset);
            if take > 0 {
                self.pending.push(batch.slice(offset, take));
                self.pending_rows += take;
                self.pending_bytes += take * row_bytes;
                offset += take;
            }
            if self.pending_rows == MAX_ROWS_PER_FILE || self.pending_bytes + row_bytes > MAX_FILE_BYTES {
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
        let (bytes, fields, stats) = encode(self.schema, batches, std::mem::take(&mut self.pending_bytes))?;
        let path = naming::data_file_name(self.env.new_uuid());
        let size_bytes = bytes.len() as u64;
        self.store.put_new(&path, Bytes::from(bytes)).await?;
        self.reported.bytes_written += size_bytes;
        self.report();
        self.written.push(NewFragment { files: vec![DataFile { path, fields, size_bytes, stats }], rows });
        Ok(())
    }
}

/// Arrow bytes per row of `batch` (at least 1): the bytes of its rows (a slice counts
/// only its part of the buffers) over its rows.
fn row_bytes(batch: &RecordBatch) -> usize {
    let bytes: usize =
        batch.columns().iter().map(|c| c.to_data().get_slice_memory_size().unwrap_or_else(|_| c.get_array_memory_size())).sum();
    (bytes / batch.num_rows().max(1)).max(1)
}

/// One data file holding `batches`, the field ids of its columns, and their statistics.
///
/// A nullable column without a default that is NULL in every row is not written: it
/// reads back as NULL all the same, and a write that carries no values for a column
/// does not conflict with a concurrent drop of it.
///
/// Memory: each batch is dropped once encoded, and the output is allocated once at
/// `size_hint` (the batches' Arrow bytes), so the peak stays near one file's bytes.
fn encode(schema: &Schema, batches: Vec<RecordBatch>, size_hint: usize) -> Result<(Vec<u8>, Vec<u32>, Vec<ColumnStats>), WriteError> {
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
    let mut props = WriterProperties::builder()
        .set_compression(Compression::SNAPPY)
        .set_max_row_group_row_count(Some(ROW_GROUP_ROWS))
        .set_statistics_enabled(EnabledStatistics::Page);
    // Floats inside lists and vectors (embeddings): no dictionary (their values hardly
    // repeat: hashing them is wasted) and no statistics (nothing prunes on elements).
    let parquet_schema = parquet::arrow::ArrowSchemaConverter::new().convert(&file_schema).map_err(WriteError::encode)?;
    for leaf in parquet_schema.columns() {
        if leaf.max_rep_level() > 0 && matches!(leaf.physical_type(), parquet::basic::Type::FLOAT | parquet::basic::Type::DOUBLE) {
            props = props
                .set_column_dictionary_enabled(leaf.path().clone(), false)
                .set_column_statistics_enabled(leaf.path().clone(), EnabledStatistics::None);
        }
    }
    let props = props.build();
    let fields = keep.iter().map(|&i| schema.fields[i].id).collect();
    let stats = super::stats::file_stats(&schema.fields, &keep, &batches);
    let mut writer =
        ArrowWriter::try_new(Vec::with_capacity(size_hint + (1 << 20)), file_schema.clone(), Some(props)).map_err(WriteError::encode)?;
    for batch in batches {
        // Nested columns get their fields' ids (the same arrays, relabelled).
        let columns = keep
            .iter()
            .zip(file_schema.fields())
            .map(|(&i, f)| super::nested::relabel(batch.column(i), f.data_type()))
            .collect::<Result<Vec<_>, _>>()
            .map_err(WriteError::encode)?;
        let batch = RecordBatch::try_new(file_schema.clone(), columns).map_err(WriteError::encode)?;
        // Row groups end at ROW_GROUP_ROWS rows (the writer's setting) or ROW_GROUP_BYTES
        // of Arrow data, whichever comes first.
        let row_bytes = row_bytes(&batch);
        let mut offset = 0;
        while offset < batch.num_rows() {
            let room = (ROW_GROUP_BYTES.saturating_sub(writer.in_progress_rows() * row_bytes) / row_bytes).max(1);
            let take = room.min(batch.num_rows() - offset);
            writer.write(&batch.slice(offset, take)).map_err(WriteError::encode)?;
            offset += take;
            if (writer.in_progress_rows() + 1) * row_bytes > ROW_GROUP_BYTES {
                writer.flush().map_err(WriteError::encode)?;
            }
        }
    }
    Ok((writer.into_inner().map_err(WriteError::encode)?, fields, stats))
}

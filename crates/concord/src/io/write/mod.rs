//! Writes rows as new Parquet data files (fresh UUID names, created once), one
//! fragment per file of at most [`MAX_ROWS_PER_FILE`] rows and about
//! [`MAX_FILE_BYTES`] of Arrow data, as the rows arrive: memory stays bounded by two
//! files' bytes (one encoding while the one before it uploads) whatever the input's size
//! or the width of its rows (a 768-float vector is 3 KiB a row: 2^20 of them would be
//! 3 GiB).

mod encode;
pub(crate) mod stats;

use arrow::array::{Array, RecordBatch};
use bytes::Bytes;

use self::encode::encode;
use crate::env::Env;
use crate::error::WriteError;
use crate::format::manifest::{ColumnStats, DataFile, NewFragment};
use crate::format::naming;
use crate::format::schema::Schema;
use crate::storage::{Durable, TableStore};

/// How far a write has come: rows taken from the input (checked and encoded) and
/// bytes of data files written; for a compaction, groups of fragments rewritten.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct WriteProgress {
    /// Rows taken from the input so far.
    pub rows: u64,
    /// Bytes of data files written so far.
    pub bytes_written: u64,
    /// Compaction: groups rewritten so far, of `groups`.
    pub groups_rewritten: u64,
    /// Compaction: groups to rewrite.
    pub groups: u64,
}

/// A function told a write's [`WriteProgress`] as it goes (see `Table::with_progress`).
pub type ProgressFn = std::sync::Arc<dyn Fn(WriteProgress) + Send + Sync>;

/// An optional [`ProgressFn`].
#[derive(Clone, Default)]
pub(crate) struct Progress(pub(crate) Option<ProgressFn>);

impl Progress {
    /// Tells the function, if any.
    pub(crate) fn report(&self, progress: WriteProgress) {
        if let Some(f) = &self.0 {
            f(progress);
        }
    }
}

impl std::fmt::Debug for Progress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_some() { "Progress(reported)" } else { "Progress(none)" })
    }
}

/// One data file made of copied column chunks (see `io/input/splice.rs`), ready to be
/// stored as it is.
pub(crate) struct Spliced {
    pub bytes: Vec<u8>,
    /// Field ids of its columns, in column order.
    pub fields: Vec<u32>,
    pub stats: Vec<ColumnStats>,
    pub rows: u64,
}

/// Rows per data file (one fragment each).
pub(crate) const MAX_ROWS_PER_FILE: usize = 1 << 20;
/// Arrow bytes a data file holds at most (one row more only when a single row is
/// larger): the writer buffers a file's rows and its encoding while the file before it
/// uploads, so this bounds its memory (two files' worth).
pub(crate) const MAX_FILE_BYTES: usize = 64 << 20;
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

/// Writes rows that keep the ids of the rows they rewrite: `batches` conform to
/// `schema` plus a last column of row ids (`Int64`; NULL: a row of its own, whose id
/// is derived at commit), written as the files' row-id column (`ROW_ID_FIELD`).
pub(crate) async fn write_fragments_keeping_ids(
    store: &TableStore,
    env: &Env,
    schema: &Schema,
    batches: &[RecordBatch],
) -> Result<Vec<NewFragment>, WriteError> {
    let mut writer = FragmentWriter::new(store, env, schema).with_row_ids();
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
    /// The last file encoded, to upload while the next one encodes.
    uploading: Option<Upload>,
    /// Files written whose fsync runs in the background (local disk): all are waited
    /// for before `finish` returns, so a fragment handed out is durable.
    syncing: Vec<Durable>,
    /// Told the rows pushed and bytes written so far.
    progress: Option<ProgressFn>,
    reported: WriteProgress,
    /// Pushed batches end with a row-id column (see [`write_fragments_keeping_ids`]).
    row_ids: bool,
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
            uploading: None,
            syncing: Vec::new(),
            progress: None,
            reported,
            row_ids: false,
        }
    }

    /// This writer, taking batches that end with a row-id column.
    pub(crate) fn with_row_ids(mut self) -> Self {
        self.row_ids = true;
        self
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

    /// Takes a data file already encoded (spliced from an input file), after the rows
    /// pushed before it.
    pub(crate) async fn push_encoded(&mut self, file: Spliced) -> Result<(), WriteError> {
        if self.pending_rows > 0 {
            self.flush().await?;
        }
        self.upload().await?;
        self.reported.rows += file.rows;
        self.uploading = Some(self.upload_of(file.bytes, file.fields, file.stats, file.rows));
        self.report();
        Ok(())
    }

    /// Writes the last file and waits until every file is durable; returns every
    /// fragment written, in order.
    pub(crate) async fn finish(mut self) -> Result<Vec<NewFragment>, WriteError> {
        if self.pending_rows > 0 {
            self.flush().await?;
        }
        self.upload().await?;
        for durable in std::mem::take(&mut self.syncing) {
            durable.wait().await?;
        }
        Ok(std::mem::take(&mut self.written))
    }

    /// Fragments written so far (to remove if the write is abandoned).
    pub(crate) fn written(&self) -> &[NewFragment] {
        &self.written
    }

    /// Encodes the pending rows as a file, to upload at the next flush or at `finish`.
    ///
    /// While a file uploads, the next one encodes on a thread of its own, joined without
    /// yielding to other tasks: the writer's requests and names come in the same order
    /// whatever the threads' timing, so a seeded simulation replays exactly. (The first
    /// file, with nothing to upload beside it, encodes here.)
    async fn flush(&mut self) -> Result<(), WriteError> {
        let batches = std::mem::take(&mut self.pending);
        let rows = std::mem::take(&mut self.pending_rows) as u64;
        let size_hint = std::mem::take(&mut self.pending_bytes);
        let row_ids = self.row_ids;
        let encoded = if self.uploading.is_some() {
            let schema = self.schema.clone();
            let encoding = std::thread::Builder::new()
                .name("concord-encode".into())
                .spawn(move || encode(&schema, batches, size_hint, row_ids))
                .map_err(WriteError::encode)?;
            let uploaded = self.upload().await;
            let encoded = encoding.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic));
            uploaded?;
            encoded
        } else {
            encode(self.schema, batches, size_hint, row_ids)
        };
        let (bytes, fields, stats) = encoded?;
        self.uploading = Some(self.upload_of(bytes, fields, stats, rows));
        Ok(())
    }

    /// An encoded file under a fresh name, ready to upload.
    fn upload_of(&self, bytes: Vec<u8>, fields: Vec<u32>, stats: Vec<ColumnStats>, rows: u64) -> Upload {
        let path = naming::data_file_name(self.env.new_uuid());
        let size_bytes = bytes.len() as u64;
        let fragment = NewFragment { files: vec![DataFile { path, fields, size_bytes, stats }], rows, first_row_id: None };
        Upload { fragment, bytes: Bytes::from(bytes) }
    }

    /// Uploads the last file encoded, if any.
    async fn upload(&mut self) -> Result<(), WriteError> {
        if let Some(Upload { fragment, bytes }) = self.uploading.take() {
            self.syncing.push(self.store.put_new_synced_later(&fragment.files[0].path, bytes).await?);
            self.reported.bytes_written += fragment.files[0].size_bytes;
            self.report();
            self.written.push(fragment);
        }
        Ok(())
    }
}

/// An encoded file, not yet uploaded.
struct Upload {
    fragment: NewFragment,
    bytes: Bytes,
}

/// Arrow bytes per row of `batch` (at least 1): the bytes of its rows (a slice counts
/// only its part of the buffers) over its rows.
pub(super) fn row_bytes(batch: &RecordBatch) -> usize {
    let bytes: usize =
        batch.columns().iter().map(|c| c.to_data().get_slice_memory_size().unwrap_or_else(|_| c.get_array_memory_size())).sum();
    (bytes / batch.num_rows().max(1)).max(1)
}

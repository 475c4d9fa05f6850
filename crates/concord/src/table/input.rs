//! What a write takes: [`Input`], one type for record batches, local files and streams,
//! turned into the table's schema as the rows arrive (files are read on blocking
//! threads).

use std::path::PathBuf;
use std::sync::Arc;

use arrow::array::RecordBatch;
use arrow::error::ArrowError;
use futures::stream::{self, BoxStream};
use futures::StreamExt;

use crate::error::{InputError, WriteError};
use crate::format::schema::Schema;
use crate::io::input::{self, Required};
use crate::io::write::Spliced;

/// Rows to write, from any source. Every entry point takes one (`impl Into<Input>`):
/// a batch or batches, a file path or paths, or a stream of batches, which is written
/// as it comes, in bounded memory.
#[non_exhaustive]
pub enum Input {
    /// Batches in memory, matched to the table by column name.
    Batches(Vec<RecordBatch>),
    /// Local files: `.csv` (header row), `.json`/`.jsonl`/`.ndjson`, `.parquet`.
    Files(Vec<PathBuf>),
    /// Batches as they are produced (e.g. read from a stream or another engine).
    Stream(BoxStream<'static, Result<RecordBatch, ArrowError>>),
}

impl std::fmt::Debug for Input {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Input::Batches(b) => write!(f, "Input::Batches({} batches)", b.len()),
            Input::Files(files) => f.debug_tuple("Input::Files").field(files).finish(),
            Input::Stream(_) => f.write_str("Input::Stream(..)"),
        }
    }
}

impl From<RecordBatch> for Input {
    fn from(batch: RecordBatch) -> Self {
        Input::Batches(vec![batch])
    }
}

impl From<Vec<RecordBatch>> for Input {
    fn from(batches: Vec<RecordBatch>) -> Self {
        Input::Batches(batches)
    }
}

impl From<&[RecordBatch]> for Input {
    fn from(batches: &[RecordBatch]) -> Self {
        Input::Batches(batches.to_vec())
    }
}

impl<const N: usize> From<&[RecordBatch; N]> for Input {
    fn from(batches: &[RecordBatch; N]) -> Self {
        Input::Batches(batches.to_vec())
    }
}

impl From<PathBuf> for Input {
    fn from(file: PathBuf) -> Self {
        Input::Files(vec![file])
    }
}

impl From<Vec<PathBuf>> for Input {
    fn from(files: Vec<PathBuf>) -> Self {
        Input::Files(files)
    }
}

impl From<&[PathBuf]> for Input {
    fn from(files: &[PathBuf]) -> Self {
        Input::Files(files.to_vec())
    }
}

impl From<BoxStream<'static, Result<RecordBatch, ArrowError>>> for Input {
    fn from(stream: BoxStream<'static, Result<RecordBatch, ArrowError>>) -> Self {
        Input::Stream(stream)
    }
}

/// A batch in the table's schema, and where it came from.
pub(crate) struct Chunk {
    /// The file or batch it came from, for messages.
    pub source: Arc<str>,
    /// Its first row's number in its source (0-based).
    pub first_row: u64,
    pub batch: RecordBatch,
    /// Field ids of the table columns the source has.
    pub present: Arc<[u32]>,
    /// A data file made of the source's own column chunks (`batch` is then empty).
    pub spliced: Option<Spliced>,
}

/// Batches of files in flight between the blocking reader and the write.
const FILE_CHANNEL_BATCHES: usize = 2;

/// `input`'s rows in `schema`, checked as they arrive. For a merge, every source must
/// have the same columns (matched rows keep the columns it lacks); other writes fill
/// each source's missing columns with their defaults.
pub(crate) fn chunks(input: Input, schema: &Schema, required: Required) -> BoxStream<'static, Result<Chunk, WriteError>> {
    rows_or_files(input, schema, required, false)
}

/// [`chunks`] of new rows (an append or an overwrite that checks no rows), where a
/// Parquet file of the table's own column types comes as data files of its own column
/// chunks ([`Chunk::spliced`]), its rows checked all the same.
pub(crate) fn new_rows(input: Input, schema: &Schema) -> BoxStream<'static, Result<Chunk, WriteError>> {
    rows_or_files(input, schema, Required::Always, true)
}

fn rows_or_files(input: Input, schema: &Schema, required: Required, splice: bool) -> BoxStream<'static, Result<Chunk, WriteError>> {
    let chunks = match input {
        Input::Batches(batches) => caller_chunks(stream::iter(batches.into_iter().map(Ok)).boxed(), schema.clone(), required),
        Input::Stream(batches) => caller_chunks(batches, schema.clone(), required),
        Input::Files(files) => file_chunks(files, schema.clone(), required, splice),
    };
    match required {
        Required::WhenInserted => same_columns(chunks, schema.clone()),
        Required::Always => chunks,
    }
}

fn caller_chunks(
    batches: BoxStream<'static, Result<RecordBatch, ArrowError>>,
    schema: Schema,
    required: Required,
) -> BoxStream<'static, Result<Chunk, WriteError>> {
    batches
        .enumerate()
        .map(move |(i, batch)| {
            let source: Arc<str> = format!("batch {i}").into();
            let batch = batch.map_err(|e| InputError::Unparsable { file: source.to_string(), reason: e.to_string() })?;
            let conformed = input::conform_batch(&batch, &schema, &source, required)?;
            let present: Arc<[u32]> = conformed.present.into();
            let batch = conformed.batches.into_iter().next().expect("one batch in, one out");
            Ok(Chunk { source, first_row: 0, batch, present, spliced: None })
        })
        .filter(|c| futures::future::ready(!matches!(c, Ok(c) if c.batch.num_rows() == 0)))
        .boxed()
}

/// Files read one after another on a blocking thread, their batches handed over a
/// small channel (the reader waits while the write is busy).
fn file_chunks(files: Vec<PathBuf>, schema: Schema, required: Required, splice: bool) -> BoxStream<'static, Result<Chunk, WriteError>> {
    let (tx, rx) = tokio::sync::mpsc::channel::<Result<Chunk, WriteError>>(FILE_CHANNEL_BATCHES);
    tokio::task::spawn_blocking(move || {
        for file in files {
            let source: Arc<str> = file.display().to_string().into();
            let mut first_row = 0u64;
            // The write stopped (it failed elsewhere): stop reading.
            let send = |chunk: Chunk| {
                tx.blocking_send(Ok(chunk))
                    .map_err(|_| InputError::Io { file: source.to_string(), source: std::io::Error::other("the write stopped") })
            };
            let spliced = match splice {
                true => input::splice_parquet(&file, &schema, &mut |spliced, present| {
                    let (batch, rows) = (RecordBatch::new_empty(schema.arrow_schema()), spliced.rows);
                    let chunk = Chunk { source: source.clone(), first_row, batch, present: present.into(), spliced: Some(spliced) };
                    first_row += rows;
                    send(chunk)
                }),
                false => Ok(None),
            };
            let read = match spliced {
                Ok(None) => input::read_file_each(&file, &schema, required, &mut |batch, present| {
                    let rows = batch.num_rows() as u64;
                    let chunk = Chunk { source: source.clone(), first_row, batch, present: present.into(), spliced: None };
                    first_row += rows;
                    send(chunk)
                }),
                Ok(Some(present)) => Ok(present),
                Err(e) => Err(e),
            };
            match read {
                Ok(present) if first_row == 0 => {
                    // A file without rows still says which columns it has.
                    let empty = RecordBatch::new_empty(schema.arrow_schema());
                    if tx
                        .blocking_send(Ok(Chunk {
                            source: source.clone(),
                            first_row: 0,
                            batch: empty,
                            present: present.into(),
                            spliced: None,
                        }))
                        .is_err()
                    {
                        return;
                    }
                }
                Ok(_) => {}
                Err(e) => {
                    let _ = tx.blocking_send(Err(e.into()));
                    return;
                }
            }
        }
    });
    stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|item| (item, rx)) }).boxed()
}

/// Refuses a chunk whose source has other columns than the first chunk's.
fn same_columns(chunks: BoxStream<'static, Result<Chunk, WriteError>>, schema: Schema) -> BoxStream<'static, Result<Chunk, WriteError>> {
    let mut first: Option<(Arc<[u32]>, usize)> = None;
    let mut sources = 0usize;
    let mut last_source: Option<Arc<str>> = None;
    chunks
        .map(move |chunk| {
            let chunk = chunk?;
            if last_source.as_ref() != Some(&chunk.source) {
                sources += 1;
                last_source = Some(chunk.source.clone());
            }
            match &first {
                None => first = Some((chunk.present.clone(), sources)),
                Some((present, _)) if *present != chunk.present => {
                    let names = |ids: &[u32]| {
                        ids.iter().filter_map(|id| schema.field_by_id(*id)).map(|f| f.name.as_str()).collect::<Vec<_>>().join(", ")
                    };
                    return Err(InputError::ColumnsDiffer {
                        file: chunk.source.to_string(),
                        batch: sources - 1,
                        expected: names(present),
                        found: names(&chunk.present),
                    }
                    .into());
                }
                Some(_) => {}
            }
            Ok(chunk)
        })
        .boxed()
}

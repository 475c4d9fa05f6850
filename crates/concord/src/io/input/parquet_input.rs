//! Decoding a Parquet input file with its columns shared out between threads.
//!
//! An input file of one large row group (pyarrow writes row groups of 2^20 rows) would
//! otherwise decode on one core while the other waits for its rows. Each thread reads
//! a group of the file's top-level columns, of about equal compressed bytes, with the
//! same batch size over the same row groups, so their batches line up row for row and
//! are put back together in the file's column order: the batches are the same as one
//! reader's, whatever the threads' timing.

use std::fs::File;
use std::io::{BufReader, Read};
use std::sync::{mpsc, Arc};

use bytes::Bytes;
use parquet::errors::ParquetError;
use parquet::file::reader::{ChunkReader, Length};

use arrow::array::{ArrayRef, RecordBatch};
use parquet::arrow::arrow_reader::{ArrowReaderMetadata, ParquetRecordBatchReader, ParquetRecordBatchReaderBuilder};
use parquet::arrow::ProjectionMask;

use crate::io::parquet::guard;

/// Batches decoded ahead by each helper thread.
const AHEAD: usize = 2;

/// Compressed bytes below which a file decodes on one thread (threads cost more than
/// they save).
const MIN_PARALLEL_BYTES: i64 = 4 << 20;

/// Hands `emit` every batch of `source` (of row groups `row_groups`, all without;
/// `batch_size` rows each, the last one fewer), in order. A decoding failure (or panic:
/// a corrupt file) is passed to `failed`; an error from `emit` stops the reading.
pub(crate) fn read_batches<R: ChunkReader + Clone + 'static, E>(
    source: R,
    metadata: &ArrowReaderMetadata,
    row_groups: Option<&[usize]>,
    batch_size: usize,
    emit: &mut dyn FnMut(RecordBatch) -> Result<(), E>,
    failed: &dyn Fn(String) -> E,
) -> Result<(), E> {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let groups = column_groups(metadata, cores);
    let reader = |columns: Option<&[usize]>| -> Result<ParquetRecordBatchReader, String> {
        let builder = ParquetRecordBatchReaderBuilder::new_with_metadata(source.clone(), metadata.clone()).with_batch_size(batch_size);
        let builder = match row_groups {
            Some(row_groups) => builder.with_row_groups(row_groups.to_vec()),
            None => builder,
        };
        let builder = match columns {
            Some(columns) => builder.with_projection(ProjectionMask::roots(metadata.parquet_schema(), columns.iter().copied())),
            None => builder,
        };
        builder.build().map_err(|e| e.to_string())
    };
    if groups.len() < 2 {
        let mut reader = reader(None).map_err(failed)?;
        while let Some(batch) = next(&mut reader).map_err(failed)? {
            emit(batch)?;
        }
        return Ok(());
    }
    let mut readers = groups.iter().map(|g| reader(Some(g))).collect::<Result<Vec<_>, _>>().map_err(failed)?;
    let schema = metadata.schema().clone();
    std::thread::scope(|scope| {
        // The first group decodes here, the others on a thread each; a thread stops
        // when its receiver goes (this function returned early).
        let helpers: Vec<mpsc::Receiver<Result<Option<RecordBatch>, String>>> = readers
            .drain(1..)
            .map(|mut reader| {
                let (tx, rx) = mpsc::sync_channel(AHEAD);
                scope.spawn(move || loop {
                    let item = next(&mut reader);
                    let more = matches!(item, Ok(Some(_)));
                    if tx.send(item).is_err() || !more {
                        break;
                    }
                });
                rx
            })
            .collect();
        let mut main = readers.pop().expect("the first group's reader");
        loop {
            let first = next(&mut main).map_err(failed)?;
            let mut parts = vec![first];
            for rx in &helpers {
                parts.push(rx.recv().map_err(|_| "a decoding thread stopped".to_string()).and_then(|r| r).map_err(failed)?);
            }
            if parts.iter().all(Option::is_none) {
                return Ok(());
            }
            let mut columns: Vec<Option<ArrayRef>> = vec![None; schema.fields().len()];
            for (group, part) in groups.iter().zip(parts) {
                let part = part.ok_or_else(|| failed("the file's columns have different numbers of rows".into()))?;
                for (&root, column) in group.iter().zip(part.columns()) {
                    columns[root] = Some(column.clone());
                }
            }
            let columns = columns.into_iter().map(|c| c.expect("every column in one group")).collect();
            emit(RecordBatch::try_new(schema.clone(), columns).map_err(|e| failed(e.to_string()))?)?;
        }
    })
}

/// A file read at explicit offsets (`pread`), so that readers on several threads share
/// it without sharing a file position.
#[derive(Clone)]
pub(crate) struct Positioned {
    file: Arc<File>,
    len: u64,
}

impl Positioned {
    pub(crate) fn new(file: &File) -> std::io::Result<Self> {
        Ok(Positioned { len: file.metadata()?.len(), file: Arc::new(file.try_clone()?) })
    }
}

impl Length for Positioned {
    fn len(&self) -> u64 {
        self.len
    }
}

impl ChunkReader for Positioned {
    /// Buffered: the decoder reads a page header (the only thing it reads this way)
    /// a byte or two at a time.
    type T = BufReader<PositionedRead>;

    fn get_read(&self, start: u64) -> parquet::errors::Result<Self::T> {
        Ok(BufReader::new(PositionedRead { file: self.file.clone(), at: start }))
    }

    fn get_bytes(&self, start: u64, length: usize) -> parquet::errors::Result<Bytes> {
        let mut buffer = Vec::with_capacity(length);
        let read = PositionedRead { file: self.file.clone(), at: start }
            .take(length as u64)
            .read_to_end(&mut buffer)
            .map_err(|e| ParquetError::External(Box::new(e)))?;
        if read != length {
            return Err(ParquetError::EOF(format!("expected {length} bytes at {start}, read {read}")));
        }
        Ok(buffer.into())
    }
}

/// Reads from `at` on.
pub(crate) struct PositionedRead {
    file: Arc<File>,
    at: u64,
}

impl Read for PositionedRead {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        #[cfg(unix)]
        let n = std::os::unix::fs::FileExt::read_at(self.file.as_ref(), buf, self.at)?;
        #[cfg(windows)]
        let n = std::os::windows::fs::FileExt::seek_read(self.file.as_ref(), buf, self.at)?;
        self.at += n as u64;
        Ok(n)
    }
}

/// The next batch; a panic of the decoder (a corrupt file) is an error.
fn next(reader: &mut ParquetRecordBatchReader) -> Result<Option<RecordBatch>, String> {
    guard::catch_panic(|| reader.next())?.transpose().map_err(|e| e.to_string())
}

/// The file's top-level columns in at most `threads` groups of about equal compressed
/// bytes, each in column order; one group for a small file or a single column.
fn column_groups(metadata: &ArrowReaderMetadata, threads: usize) -> Vec<Vec<usize>> {
    let schema = metadata.parquet_schema();
    let roots = schema.root_schema().get_fields().len();
    let mut bytes = vec![0i64; roots];
    for row_group in metadata.metadata().row_groups() {
        for (leaf, chunk) in row_group.columns().iter().enumerate() {
            bytes[schema.get_column_root_idx(leaf)] += chunk.compressed_size().max(0);
        }
    }
    let total: i64 = bytes.iter().sum();
    let threads = threads.min(roots).max(1);
    if threads < 2 || total < MIN_PARALLEL_BYTES {
        return vec![(0..roots).collect()];
    }
    // Largest first, each to the lightest group.
    let mut order: Vec<usize> = (0..roots).collect();
    order.sort_by_key(|&r| std::cmp::Reverse(bytes[r]));
    let mut groups: Vec<(i64, Vec<usize>)> = vec![(0, Vec::new()); threads];
    for root in order {
        let lightest = groups.iter_mut().min_by_key(|(b, _)| *b).expect("at least one group");
        lightest.0 += bytes[root];
        lightest.1.push(root);
    }
    let mut groups: Vec<Vec<usize>> = groups
        .into_iter()
        .map(|(_, mut g)| {
            g.sort_unstable();
            g
        })
        .filter(|g| !g.is_empty())
        .collect();
    groups.sort_unstable();
    groups
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow::array::{Int64Array, StringArray};
    use parquet::arrow::arrow_reader::ArrowReaderOptions;
    use parquet::arrow::ArrowWriter;

    use super::*;

    /// A file of several columns reads back as one reader reads it, batch for batch,
    /// on as many threads as there are columns (here up to 3).
    #[test]
    fn columns_decoded_on_several_threads_line_up() {
        let rows = 300_000i64;
        let batch = RecordBatch::try_from_iter([
            ("id", Arc::new(Int64Array::from_iter_values(0..rows)) as ArrayRef),
            ("name", Arc::new(StringArray::from_iter_values((0..rows).map(|i| format!("row {i}")))) as ArrayRef),
            ("x", Arc::new(Int64Array::from_iter((0..rows).map(|i| (i % 5 != 0).then_some(i * 31 % 977)))) as ArrayRef),
        ])
        .unwrap();
        let mut file = tempfile::tempfile().unwrap();
        let props = parquet::file::properties::WriterProperties::builder().set_dictionary_enabled(false).build();
        let mut writer = ArrowWriter::try_new(&mut file, batch.schema(), Some(props)).unwrap();
        writer.write(&batch).unwrap();
        writer.close().unwrap();
        let metadata = ArrowReaderMetadata::load(&file, ArrowReaderOptions::new()).unwrap();
        assert_eq!(column_groups(&metadata, 1), [vec![0, 1, 2]]);
        let groups = column_groups(&metadata, 3);
        assert_eq!(groups.len(), 3, "{groups:?}");
        let mut read = Vec::new();
        let mut keep = |b| {
            read.push(b);
            Ok::<_, String>(())
        };
        read_batches(Positioned::new(&file).unwrap(), &metadata, None, 8192, &mut keep, &|e| e).unwrap();
        assert_eq!(read.len(), (rows as usize).div_ceil(8192));
        assert!(read.iter().all(|b| b.schema() == batch.schema()));
        let read = arrow::compute::concat_batches(&batch.schema(), &read).unwrap();
        assert_eq!(read, batch);
        // An error from the consumer stops the reading (the threads end).
        let mut seen = 0;
        let mut two = |_| {
            seen += 1;
            if seen > 2 {
                Err("enough")
            } else {
                Ok(())
            }
        };
        let stopped = read_batches(Positioned::new(&file).unwrap(), &metadata, None, 8192, &mut two, &|_| "failed");
        assert_eq!(stopped, Err("enough"));
    }
}

//! Parquet reads through `object_store`: byte ranges of a data file whose size the
//! manifest already records (so opening a file costs one footer read, no HEAD).
//! Before the parquet crate decodes anything, the footer (`footer_check`) and every
//! page header of each fetched column chunk (`page_check`) pass a bounded check.

use std::collections::HashMap;
use std::ops::Range;
use std::sync::Arc;

use bytes::Bytes;
use futures::future::BoxFuture;
use futures::FutureExt;
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt};
use parquet::arrow::arrow_reader::ArrowReaderOptions;
use parquet::arrow::async_reader::AsyncFileReader;
use parquet::errors::{ParquetError, Result};
use parquet::file::metadata::{ParquetMetaData, ParquetMetaDataReader};

use crate::io::parquet::footer_check;
use crate::io::parquet::page_check::{self, ChunkType};

/// Footer bytes fetched in the first request; most footers fit.
const FOOTER_PREFETCH: usize = 64 * 1024;

pub(crate) struct DataFileReader {
    store: Arc<dyn ObjectStore>,
    path: Path,
    size: u64,
    /// Column chunk start -> its type: a chunk's page headers are checked when its bytes
    /// arrive. Filled by `get_metadata`.
    chunk_starts: HashMap<u64, ChunkType>,
    /// The file's last bytes, checked, from which the parquet crate reads the footer.
    footer: Option<(u64, Bytes)>,
}

impl DataFileReader {
    pub(crate) fn new(store: Arc<dyn ObjectStore>, path: Path, size: u64) -> Self {
        DataFileReader { store, path, size, chunk_starts: HashMap::new(), footer: None }
    }

    fn check_pages(&self, range: &Range<u64>, bytes: &Bytes) -> Result<()> {
        match self.chunk_starts.get(&range.start) {
            Some(chunk) => page_check::check_chunk(bytes, *chunk)
                .map_err(|reason| ParquetError::General(format!("corrupt column chunk at byte {}: {reason}", range.start))),
            None => Ok(()),
        }
    }

    /// Fetches the file's last bytes (one request when the footer fits the prefetch, as
    /// the parquet crate would) and checks the footer's metadata.
    async fn fetch_footer(&mut self) -> Result<()> {
        let size = self.size;
        let mut start = size.saturating_sub(FOOTER_PREFETCH as u64);
        let mut tail = self.store.get_range(&self.path, start..size).await.map_err(to_parquet_error)?;
        let Some(len) = footer_check::metadata_len(&tail).filter(|len| len + footer_check::TAIL_BYTES <= size) else {
            // Not a Parquet tail: the parquet crate reports it.
            return Ok(());
        };
        let needed = len + footer_check::TAIL_BYTES;
        if needed > tail.len() as u64 {
            start = size - needed;
            tail = self.store.get_range(&self.path, start..size).await.map_err(to_parquet_error)?;
        }
        let metadata = &tail[tail.len() - needed as usize..tail.len() - footer_check::TAIL_BYTES as usize];
        footer_check::check_metadata_bytes(metadata).map_err(|reason| ParquetError::General(format!("corrupt footer: {reason}")))?;
        self.footer = Some((start, tail));
        Ok(())
    }

    /// The bytes of `range` if the checked footer holds them.
    fn cached(&self, range: &Range<u64>) -> Option<Bytes> {
        let (start, tail) = self.footer.as_ref()?;
        let from = usize::try_from(range.start.checked_sub(*start)?).ok()?;
        let to = usize::try_from(range.end.checked_sub(*start)?).ok()?;
        (from <= to && to <= tail.len()).then(|| tail.slice(from..to))
    }
}

fn to_parquet_error(e: object_store::Error) -> ParquetError {
    ParquetError::External(Box::new(e))
}

impl AsyncFileReader for DataFileReader {
    fn get_bytes(&mut self, range: Range<u64>) -> BoxFuture<'_, Result<Bytes>> {
        async move {
            if let Some(bytes) = self.cached(&range) {
                return Ok(bytes);
            }
            let bytes = self.store.get_range(&self.path, range.clone()).await.map_err(to_parquet_error)?;
            self.check_pages(&range, &bytes)?;
            Ok(bytes)
        }
        .boxed()
    }

    fn get_byte_ranges(&mut self, ranges: Vec<Range<u64>>) -> BoxFuture<'_, Result<Vec<Bytes>>> {
        async move {
            let all = self.store.get_ranges(&self.path, &ranges).await.map_err(to_parquet_error)?;
            for (range, bytes) in ranges.iter().zip(&all) {
                self.check_pages(range, bytes)?;
            }
            Ok(all)
        }
        .boxed()
    }

    fn get_metadata<'a>(&'a mut self, options: Option<&'a ArrowReaderOptions>) -> BoxFuture<'a, Result<Arc<ParquetMetaData>>> {
        async move {
            let size = self.size;
            self.fetch_footer().await?;
            let prefetch = self.footer.as_ref().map_or(FOOTER_PREFETCH, |(_, tail)| tail.len());
            let metadata = ParquetMetaDataReader::new()
                .with_arrow_reader_options(options)
                .with_prefetch_hint(Some(prefetch))
                .load_and_finish(&mut *self, size)
                .await?;
            self.footer = None;
            check_metadata(&metadata, size)?;
            for column in metadata.row_groups().iter().flat_map(|g| g.columns()) {
                self.chunk_starts.insert(column.byte_range().0, ChunkType::of(column));
            }
            Ok(Arc::new(metadata))
        }
        .boxed()
    }
}

/// Refuses footers whose column chunks lie outside the file. The parquet crate asserts
/// (panics) on negative offsets when it reads such a chunk (found by the `data_file`
/// fuzz target); a corrupt file must be an error instead.
pub(crate) fn check_metadata(metadata: &ParquetMetaData, file_size: u64) -> Result<()> {
    for (g, group) in metadata.row_groups().iter().enumerate() {
        if group.num_rows() < 0 {
            return Err(ParquetError::General(format!("row group {g} has {} rows", group.num_rows())));
        }
        for (c, column) in group.columns().iter().enumerate() {
            let start = column.dictionary_page_offset().unwrap_or(column.data_page_offset());
            let (offset, length) = (column.data_page_offset(), column.compressed_size());
            let end = u64::try_from(start).ok().zip(u64::try_from(length).ok()).and_then(|(s, l)| s.checked_add(l));
            if offset < 0 || end.is_none_or(|end| end > file_size) {
                return Err(ParquetError::General(format!(
                    "column chunk {c} of row group {g} (offset {start}, length {length}) lies outside the {file_size}-byte file"
                )));
            }
        }
    }
    Ok(())
}

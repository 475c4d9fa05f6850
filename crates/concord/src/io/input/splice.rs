//! Appending a Parquet file by copying its encoded column chunks into the table's data
//! files ("splicing") instead of encoding its decoded rows again: the CLI's append of
//! a Parquet file then costs a decode, not a decode and an encode.
//!
//! Taken only where the copy reads back as exactly the rows ingest would have written
//! ([`plan`]): every input column is flat and stored as its table column's own Parquet
//! type (physical and logical, so the same bytes mean the same values), every table
//! column the file lacks is nullable without a default (it reads as NULL, as a column
//! the writer leaves out), every codec is one the table's readers and Iceberg engines
//! read, and every row group fits a data file. Otherwise the file is read as rows.
//!
//! Invariants: the rows are still decoded and checked as ingest checks them (`conform`:
//! NULLs in not-null columns), and their decoded values give the fragment statistics;
//! the bytes copied are the bytes decoded (each data file's row groups are read into
//! memory once, their page headers checked, then decoded and copied from there). The
//! input writer's own statistics, page indexes and bloom filters are not copied (they
//! are its word, unchecked): a spliced file prunes by its fragment statistics only. A
//! file's columns are in table order, named and numbered (field ids) as the table's.

use std::ops::Range;
use std::sync::Arc;

use arrow::array::{Array, RecordBatch};
use arrow::datatypes::{Field as ArrowField, Schema as ArrowSchema};
use bytes::{Buf, Bytes};
use parquet::arrow::arrow_reader::ArrowReaderMetadata;
use parquet::arrow::{add_encoded_arrow_schema_to_metadata, ArrowSchemaConverter};
use parquet::basic::Compression;
use parquet::column::writer::ColumnCloseResult;
use parquet::errors::ParquetError;
use parquet::file::metadata::{ColumnChunkMetaData, ParquetMetaData};
use parquet::file::properties::WriterProperties;
use parquet::file::reader::{ChunkReader, Length};
use parquet::file::writer::SerializedFileWriter;
use parquet::schema::types::ColumnDescriptor;

use crate::format::schema::Schema;
use crate::io::parquet::page_check::{self, ChunkType};
use crate::io::write::{Spliced, MAX_FILE_BYTES, MAX_ROWS_PER_FILE};

/// How an input file becomes data files.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Plan {
    /// The input's columns in table order.
    columns: Vec<Column>,
    /// The input's row groups, a data file's worth at a time.
    files: Vec<Vec<usize>>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Column {
    /// Its table column (index in the schema's fields).
    field: usize,
    /// Its input column (a flat column: its leaf).
    leaf: usize,
    /// Whether the input may hold NULLs in it (the file column says so too).
    optional: bool,
}

/// Codecs every reader of a table reads (Concord, DuckDB, pyiceberg and Spark through
/// the Iceberg metadata).
fn readable(codec: Compression) -> bool {
    matches!(codec, Compression::UNCOMPRESSED | Compression::SNAPPY | Compression::GZIP(_) | Compression::ZSTD(_) | Compression::LZ4_RAW)
}

/// How the input (whose columns are table columns `names`, by position) is spliced,
/// or `None` if it must be read as rows.
pub(crate) fn plan(schema: &Schema, names: &[String], metadata: &ArrowReaderMetadata) -> Option<Plan> {
    let input = metadata.parquet_schema();
    let roots = input.root_schema().get_fields().len();
    if roots != names.len() || input.num_columns() != roots {
        return None;
    }
    let mut columns = Vec::new();
    for (field, f) in schema.fields.iter().enumerate() {
        let Some(leaf) = names.iter().position(|n| *n == f.name) else {
            if f.nullable && f.default.is_none() {
                continue;
            }
            return None;
        };
        let found = input.column(leaf);
        if f.column_type.is_nested() || found.max_rep_level() != 0 || found.path().parts().len() != 1 {
            return None;
        }
        let optional = found.max_def_level() == 1;
        let wanted = file_schema(schema, &[Column { field, leaf, optional }]).ok()?;
        if !same_type(wanted.column(0).as_ref(), found.as_ref()) {
            return None;
        }
        columns.push(Column { field, leaf, optional });
    }
    let row_groups = metadata.metadata().row_groups();
    for group in row_groups {
        if !group.columns().iter().all(|c| readable(c.compression())) {
            return None;
        }
    }
    let sizes: Vec<(u64, u64)> = row_groups.iter().map(|g| (g.num_rows().max(0) as u64, g.total_byte_size().max(0) as u64)).collect();
    let files = files_of(&sizes, MAX_ROWS_PER_FILE as u64, MAX_FILE_BYTES as u64)?;
    Some(Plan { columns, files })
}

/// Whether values stored as `found` read back as `wanted`'s: the same physical and
/// logical type, and the same levels (`wanted` takes the input's nullability).
fn same_type(wanted: &ColumnDescriptor, found: &ColumnDescriptor) -> bool {
    wanted.physical_type() == found.physical_type()
        && wanted.logical_type_ref() == found.logical_type_ref()
        && wanted.converted_type() == found.converted_type()
        && wanted.type_length() == found.type_length()
        && wanted.type_precision() == found.type_precision()
        && wanted.type_scale() == found.type_scale()
        && wanted.max_def_level() == found.max_def_level()
        && wanted.max_rep_level() == found.max_rep_level()
}

/// Consecutive row groups (rows, uncompressed bytes) grouped into files of at most
/// `max_rows` rows and about `max_bytes`; `None` if one row group alone is larger.
fn files_of(sizes: &[(u64, u64)], max_rows: u64, max_bytes: u64) -> Option<Vec<Vec<usize>>> {
    let mut files: Vec<Vec<usize>> = Vec::new();
    let (mut rows, mut bytes) = (0, 0);
    for (i, &(r, b)) in sizes.iter().enumerate() {
        if r > max_rows || b > max_bytes {
            return None;
        }
        if files.is_empty() || rows + r > max_rows || bytes + b > max_bytes {
            files.push(Vec::new());
            (rows, bytes) = (0, 0);
        }
        files.last_mut().expect("a file").push(i);
        (rows, bytes) = (rows + r, bytes + b);
    }
    Some(files)
}

/// The Parquet schema of a data file of `columns`: the table's names, types and field
/// ids, each column as nullable as the input's.
fn file_arrow_schema(schema: &Schema, columns: &[Column]) -> Arc<ArrowSchema> {
    let table = schema.arrow_schema_with_field_ids();
    let fields: Vec<ArrowField> = columns.iter().map(|c| table.field(c.field).clone().with_nullable(c.optional)).collect();
    Arc::new(ArrowSchema::new(fields))
}

fn file_schema(schema: &Schema, columns: &[Column]) -> Result<parquet::schema::types::SchemaDescriptor, ParquetError> {
    ArrowSchemaConverter::new().convert(&file_arrow_schema(schema, columns))
}

/// The input file being spliced: its footer, its length, how to read its bytes, how
/// its decoded batches are checked (returned in the table's schema, given their first
/// row) and how a reason becomes the caller's error.
pub(crate) struct Source<'a, E> {
    pub metadata: &'a ArrowReaderMetadata,
    pub len: u64,
    pub read: &'a dyn Fn(Range<u64>) -> Result<Vec<u8>, E>,
    pub conform: &'a dyn Fn(RecordBatch, usize) -> Result<RecordBatch, E>,
    pub failed: &'a dyn Fn(String) -> E,
}

/// Splices `source` by `plan`: for each data file, its row groups' bytes are read,
/// checked, decoded and conformed batch by batch, then copied; `emit` takes each data
/// file.
pub(crate) fn splice<E>(
    plan: &Plan,
    schema: &Schema,
    source: &Source<'_, E>,
    emit: &mut dyn FnMut(Spliced) -> Result<(), E>,
) -> Result<(), E> {
    let Source { metadata, len: file_len, read, conform, failed } = *source;
    let row_groups = metadata.metadata().row_groups();
    let mut first_row = 0usize;
    for groups in &plan.files {
        let chunks = || groups.iter().flat_map(|&g| row_groups[g].columns());
        let start = chunks().map(|c| c.byte_range().0).min().unwrap_or(0);
        let end = chunks().map(|c| c.byte_range().0.saturating_add(c.byte_range().1)).max().unwrap_or(0);
        let window = Window { start, bytes: Bytes::from(read(start..end)?), len: file_len };
        for chunk in chunks() {
            let (at, length) = chunk.byte_range();
            let bytes = window.get_bytes(at, length as usize).map_err(|e| failed(e.to_string()))?;
            page_check::check_chunk(&bytes, ChunkType::of(chunk)).map_err(|e| failed(format!("column chunk at byte {at}: {e}")))?;
        }
        let mut batches = Vec::new();
        let mut each = |batch: RecordBatch| {
            let rows = batch.num_rows();
            batches.push(conform(batch, first_row)?);
            first_row += rows;
            Ok(())
        };
        crate::io::input::parquet_input::read_batches(
            window.clone(),
            metadata,
            Some(groups),
            crate::io::input::BATCH_SIZE,
            &mut each,
            failed,
        )?;
        let rows: u64 = groups.iter().map(|&g| row_groups[g].num_rows() as u64).sum();
        emit(write_file(plan, schema, metadata.metadata(), groups, &window, &batches, rows).map_err(|e| failed(e.to_string()))?)?;
    }
    Ok(())
}

/// One data file of row groups `groups`, whose decoded rows (in the table's schema)
/// are `batches`. A nullable column without a default that is NULL in every row is
/// left out, as the writer leaves it out (at least one column stays: it carries the
/// row count).
fn write_file(
    plan: &Plan,
    schema: &Schema,
    metadata: &ParquetMetaData,
    groups: &[usize],
    window: &Window,
    batches: &[RecordBatch],
    rows: u64,
) -> Result<Spliced, ParquetError> {
    let all_null = |c: &Column| {
        let f = &schema.fields[c.field];
        f.nullable && f.default.is_none() && batches.iter().all(|b| b.column(c.field).null_count() == b.num_rows())
    };
    let mut kept: Vec<Column> = plan.columns.iter().filter(|c| !all_null(c)).cloned().collect();
    if kept.is_empty() {
        kept.extend(plan.columns.first().cloned());
    }
    let arrow_schema = file_arrow_schema(schema, &kept);
    let parquet_schema = ArrowSchemaConverter::new().convert(&arrow_schema)?;
    let mut props = WriterProperties::builder().build();
    add_encoded_arrow_schema_to_metadata(&arrow_schema, &mut props);
    let size: u64 = groups.iter().flat_map(|&g| metadata.row_group(g).columns()).map(|c| c.byte_range().1).sum();
    let mut writer =
        SerializedFileWriter::new(Vec::with_capacity(size as usize + (1 << 16)), parquet_schema.root_schema_ptr(), Arc::new(props))?;
    for &g in groups {
        let group = metadata.row_group(g);
        let mut row_group = writer.next_row_group()?;
        for (k, c) in kept.iter().enumerate() {
            let chunk = group.column(c.leaf);
            let close = ColumnCloseResult {
                bytes_written: chunk.compressed_size() as u64,
                rows_written: group.num_rows() as u64,
                metadata: relabelled(chunk, parquet_schema.column(k))?,
                bloom_filter: None,
                column_index: None,
                offset_index: None,
            };
            row_group.append_column(window, close)?;
        }
        row_group.close()?;
    }
    let bytes = writer.into_inner()?;
    let field_indices: Vec<usize> = kept.iter().map(|c| c.field).collect();
    let stats = crate::io::write::stats::file_stats(&schema.fields, &field_indices, batches);
    Ok(Spliced { bytes, fields: kept.iter().map(|c| schema.fields[c.field].id).collect(), stats, rows })
}

/// `chunk`'s layout under the data file's column `column` (its name and field id),
/// without the input writer's statistics.
fn relabelled(chunk: &ColumnChunkMetaData, column: Arc<ColumnDescriptor>) -> Result<ColumnChunkMetaData, ParquetError> {
    ColumnChunkMetaData::builder(column)
        .set_compression_codec(chunk.compression_codec())
        .set_encodings_mask(*chunk.encodings_mask())
        .set_total_compressed_size(chunk.compressed_size())
        .set_total_uncompressed_size(chunk.uncompressed_size())
        .set_num_values(chunk.num_values())
        .set_data_page_offset(chunk.data_page_offset())
        .set_dictionary_page_offset(chunk.dictionary_page_offset())
        .build()
}

/// Bytes `start..start + bytes.len()` of a file of `len` bytes, held in memory.
#[derive(Clone)]
struct Window {
    start: u64,
    bytes: Bytes,
    len: u64,
}

impl Window {
    fn slice(&self, start: u64, length: Option<usize>) -> Result<Bytes, ParquetError> {
        let from = start.checked_sub(self.start).and_then(|f| usize::try_from(f).ok()).filter(|&f| f <= self.bytes.len());
        let from = from.ok_or_else(|| ParquetError::General(format!("byte {start} lies outside the row groups read")))?;
        let to = match length {
            Some(length) => from.checked_add(length).filter(|&t| t <= self.bytes.len()),
            None => Some(self.bytes.len()),
        };
        let to = to.ok_or_else(|| ParquetError::EOF(format!("{length:?} bytes at {start} lie outside the row groups read")))?;
        Ok(self.bytes.slice(from..to))
    }
}

impl Length for Window {
    fn len(&self) -> u64 {
        self.len
    }
}

impl ChunkReader for Window {
    type T = bytes::buf::Reader<Bytes>;

    fn get_read(&self, start: u64) -> Result<Self::T, ParquetError> {
        Ok(self.slice(start, None)?.reader())
    }

    fn get_bytes(&self, start: u64, length: usize) -> Result<Bytes, ParquetError> {
        self.slice(start, Some(length))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn row_groups_are_grouped_into_files_within_both_limits() {
        assert_eq!(files_of(&[], 10, 100), Some(vec![]));
        assert_eq!(files_of(&[(4, 10), (4, 10), (4, 10)], 10, 100), Some(vec![vec![0, 1], vec![2]]));
        assert_eq!(files_of(&[(1, 60), (1, 60), (1, 30)], 10, 100), Some(vec![vec![0], vec![1, 2]]));
        assert_eq!(files_of(&[(10, 100), (10, 100)], 10, 100), Some(vec![vec![0], vec![1]]));
        // A row group larger than a file: read as rows (the writer cuts it).
        assert_eq!(files_of(&[(4, 10), (11, 10)], 10, 100), None);
        assert_eq!(files_of(&[(4, 101)], 10, 100), None);
    }
}

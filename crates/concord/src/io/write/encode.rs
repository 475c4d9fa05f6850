//! Encoding one data file: the columns kept, their encodings and compression judged
//! on samples of their values, the row groups encoded a few at a time, and the
//! statistics computed beside it.

use arrow::array::{Array, ArrayRef, RecordBatch};
use arrow::row::{RowConverter, SortField};
use parquet::arrow::arrow_writer::{compute_leaves, ArrowColumnChunk, ArrowRowGroupWriterFactory};
use parquet::arrow::ArrowWriter;
use parquet::basic::{Compression, Encoding};
use parquet::file::properties::{EnabledStatistics, WriterProperties};

use super::{row_bytes, ROW_GROUP_BYTES, ROW_GROUP_ROWS};
use crate::error::WriteError;
use crate::format::manifest::{ColumnStats, ROW_ID_COLUMN, ROW_ID_FIELD};
use crate::format::schema::{Schema, PARQUET_FIELD_ID_KEY};

/// One data file holding `batches`, the field ids of its columns, and their statistics.
///
/// A nullable column without a default that is NULL in every row is not written: it
/// reads back as NULL all the same, and a write that carries no values for a column
/// does not conflict with a concurrent drop of it.
///
/// With `row_ids`, each batch ends with a row-id column: written (as the file's last
/// column, field id [`ROW_ID_FIELD`]) unless it is NULL in every row.
///
/// Memory: the rows are held until the file is encoded (its statistics read them
/// beside the encoding), and the output is allocated once at `size_hint` (the batches'
/// Arrow bytes), so the peak stays near twice one file's bytes plus one row group per
/// thread.
pub(super) fn encode(
    schema: &Schema,
    batches: Vec<RecordBatch>,
    size_hint: usize,
    row_ids: bool,
) -> Result<(Vec<u8>, Vec<u32>, Vec<ColumnStats>), WriteError> {
    let mut keep: Vec<usize> = (0..schema.fields.len())
        .filter(|&i| {
            let f = &schema.fields[i];
            !(f.nullable && f.default.is_none() && batches.iter().all(|b| b.column(i).null_count() == b.num_rows()))
        })
        .collect();
    if keep.is_empty() {
        keep.push(0); // a data file needs a column to carry its row count
    }
    let id_column = schema.fields.len();
    let with_ids = row_ids && batches.iter().any(|b| b.column(id_column).null_count() < b.num_rows());
    let mut file_schema = schema.arrow_schema_with_field_ids().project(&keep).map_err(WriteError::encode)?;
    if with_ids {
        file_schema = row_id_file_schema(schema, &file_schema);
    }
    let file_schema = std::sync::Arc::new(file_schema);
    let mut props = properties(schema, &file_schema, &keep, &batches)?;
    let mut fields: Vec<u32> = keep.iter().map(|&i| schema.fields[i].id).collect();
    if with_ids {
        fields.push(ROW_ID_FIELD);
        // Row ids of rows rewritten together mostly step by little: delta-encoded, a
        // few bits each.
        let path = parquet::schema::types::ColumnPath::from(file_schema.field(file_schema.fields().len() - 1).name().as_str());
        props = props.set_column_dictionary_enabled(path.clone(), false).set_column_encoding(path, Encoding::DELTA_BINARY_PACKED);
    }
    // Nested columns get their fields' ids (the same arrays, relabelled).
    let relabelled = batches
        .iter()
        .map(|batch| {
            let mut columns = keep
                .iter()
                .zip(file_schema.fields())
                .map(|(&i, f)| crate::io::values::nested::relabel(batch.column(i), f.data_type()))
                .collect::<Result<Vec<_>, _>>()?;
            if with_ids {
                columns.push(batch.column(id_column).clone());
            }
            RecordBatch::try_new(file_schema.clone(), columns)
        })
        .collect::<Result<Vec<_>, _>>()
        .map_err(WriteError::encode)?;
    // The statistics are computed beside the encoding (a pure function of the rows:
    // the file is the same whatever the threads' timing).
    let (bytes, stats) = std::thread::scope(|scope| {
        let stats = scope.spawn(|| crate::io::write::stats::file_stats(&schema.fields, &keep, &batches));
        let bytes = write_row_groups(&file_schema, props.build(), relabelled, size_hint);
        (bytes, stats.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic)))
    });
    Ok((bytes?, fields, stats))
}

/// The writer settings of a file of `batches` (their columns `keep`, as `file_schema`),
/// each column's encoding and compression judged on a sample of its values.
fn properties(
    schema: &Schema,
    file_schema: &arrow::datatypes::Schema,
    keep: &[usize],
    batches: &[RecordBatch],
) -> Result<parquet::file::properties::WriterPropertiesBuilder, WriteError> {
    let mut props = WriterProperties::builder().set_compression(Compression::LZ4_RAW).set_statistics_enabled(EnabledStatistics::Page);
    // Floats inside lists and vectors (embeddings): no dictionary (their values hardly
    // repeat: hashing them is wasted) and no statistics (nothing prunes on elements);
    // those of a list or vector column that LZ4 hardly shrinks, no compression.
    let parquet_schema = parquet::arrow::ArrowSchemaConverter::new().convert(file_schema).map_err(WriteError::encode)?;
    for leaf in parquet_schema.columns() {
        if leaf.max_rep_level() > 0 && matches!(leaf.physical_type(), parquet::basic::Type::FLOAT | parquet::basic::Type::DOUBLE) {
            props = props
                .set_column_dictionary_enabled(leaf.path().clone(), false)
                .set_column_statistics_enabled(leaf.path().clone(), EnabledStatistics::None);
            // Judged on the first batch's rows (their first bytes: see `compresses`).
            let column = schema.fields.iter().position(|f| leaf.path().parts().first() == Some(&f.name));
            let first = column.and_then(|i| batches.first().map(|b| b.column(i).slice(0, b.num_rows().min(SAMPLE_ROWS))));
            let elements = first.and_then(|rows| elements(&rows));
            if elements.is_some_and(|e| !compresses(&e)) {
                props = props.set_column_compression(leaf.path().clone(), Compression::UNCOMPRESSED);
            }
        }
    }
    // Flat columns whose values hardly repeat (ids, names, measurements): no dictionary.
    // Parquet writers try one by default and give up only once it outgrows a page, so
    // every value of a row group is hashed for nothing (a third of an append's time),
    // and readers then look each value up in it.
    // Of those, integers that step by narrow amounts (sequential ids, timestamps) are
    // delta-encoded: a few bits a value instead of 4 or 8, and nothing for a reader
    // to decompress.
    for &i in keep {
        let field = &schema.fields[i];
        if !field.column_type.is_nested() {
            let Some(sample) = sample(batches, i) else { continue };
            if !repeats(&sample) {
                let path = parquet::schema::types::ColumnPath::from(field.name.as_str());
                props = props.set_column_dictionary_enabled(path.clone(), false);
                if narrow_steps(&sample) {
                    props = props.set_column_encoding(path, Encoding::DELTA_BINARY_PACKED);
                } else if !compresses(&sample) {
                    props = props.set_column_compression(path, Compression::UNCOMPRESSED);
                }
            }
        }
    }
    Ok(props)
}

/// `file_schema` with the row-id column last: named `_row_id` (or, where the table has
/// a column of that name, `_row_id_<field id>`; readers match columns by field id).
fn row_id_file_schema(schema: &Schema, file_schema: &arrow::datatypes::Schema) -> arrow::datatypes::Schema {
    let name = if schema.fields.iter().any(|f| f.name == ROW_ID_COLUMN) {
        format!("{ROW_ID_COLUMN}_{ROW_ID_FIELD}")
    } else {
        ROW_ID_COLUMN.to_string()
    };
    let metadata = std::collections::HashMap::from([(PARQUET_FIELD_ID_KEY.to_string(), ROW_ID_FIELD.to_string())]);
    let id = arrow::datatypes::Field::new(name, arrow::datatypes::DataType::Int64, true).with_metadata(metadata);
    let mut fields: Vec<arrow::datatypes::FieldRef> = file_schema.fields().iter().cloned().collect();
    fields.push(std::sync::Arc::new(id));
    arrow::datatypes::Schema::new_with_metadata(fields, file_schema.metadata().clone())
}

/// A Parquet file of `batches` (conforming to `file_schema`), its row groups encoded
/// a few at a time, one thread each (as many as the machine has cores), and appended
/// in order: the file's bytes are the same whatever the threads' timing, so a seeded
/// simulation replays exactly.
fn write_row_groups(
    file_schema: &arrow::datatypes::SchemaRef,
    props: WriterProperties,
    batches: Vec<RecordBatch>,
    size_hint: usize,
) -> Result<Vec<u8>, WriteError> {
    let writer =
        ArrowWriter::try_new(Vec::with_capacity(size_hint + (1 << 20)), file_schema.clone(), Some(props)).map_err(WriteError::encode)?;
    let (mut file, factory) = writer.into_serialized_writer().map_err(WriteError::encode)?;
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut groups = RowGroups { batches: batches.into(), offset: 0 };
    let mut index = 0;
    loop {
        let wave: Vec<Vec<RecordBatch>> = std::iter::from_fn(|| groups.next()).take(threads).collect();
        if wave.is_empty() {
            break;
        }
        let encoded = if wave.len() == 1 {
            vec![encode_row_group(&factory, index, &wave[0])]
        } else {
            std::thread::scope(|scope| {
                let running: Vec<_> = wave
                    .iter()
                    .enumerate()
                    .map(|(k, group)| {
                        let factory = &factory;
                        scope.spawn(move || encode_row_group(factory, index + k, group))
                    })
                    .collect();
                running.into_iter().map(|t| t.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic))).collect::<Vec<_>>()
            })
        };
        drop(wave);
        for chunks in encoded {
            let mut row_group = file.next_row_group().map_err(WriteError::encode)?;
            for chunk in chunks.map_err(WriteError::encode)? {
                chunk.append_to_row_group(&mut row_group).map_err(WriteError::encode)?;
            }
            row_group.close().map_err(WriteError::encode)?;
            index += 1;
        }
    }
    file.into_inner().map_err(WriteError::encode)
}

/// Rows sampled to judge a column's encoding.
const SAMPLE_ROWS: usize = 8192;

/// The first [`SAMPLE_ROWS`] rows of column `i`, in one array.
fn sample(batches: &[RecordBatch], i: usize) -> Option<ArrayRef> {
    let mut parts: Vec<ArrayRef> = Vec::new();
    let mut rows = 0;
    for batch in batches {
        if rows == SAMPLE_ROWS {
            break;
        }
        let take = (SAMPLE_ROWS - rows).min(batch.num_rows());
        parts.push(batch.column(i).slice(0, take));
        rows += take;
    }
    let parts: Vec<&dyn Array> = parts.iter().map(|a| a.as_ref()).collect();
    arrow::compute::concat(&parts).ok()
}

/// Whether a column's values repeat enough for a dictionary: at most half of the
/// sample's non-NULL values are distinct (a column of few values, such as a category
/// or a small integer, keeps its dictionary; a column of ids or free text does not).
fn repeats(sample: &ArrayRef) -> bool {
    let Ok(converter) = RowConverter::new(vec![SortField::new(sample.data_type().clone())]) else { return true };
    let Ok(converted) = converter.convert_columns(std::slice::from_ref(sample)) else { return true };
    let values = sample.len() - sample.null_count();
    let distinct: std::collections::HashSet<_> =
        converted.iter().enumerate().filter(|(k, _)| sample.is_valid(*k)).map(|(_, r)| r).collect();
    distinct.len() * 2 <= values
}

/// Whether LZ4 saves at least an eighth of the bytes of a plain-encoded column of
/// these values (judged on the first [`JUDGED_BYTES`] of the sample's value bytes).
/// Measurements and random ids hardly compress: written uncompressed, they cost no
/// compression to write and no decompression to read, for at most an eighth more
/// bytes. Types other than flat values of fixed width or text and binary are always
/// compressed.
fn compresses(sample: &ArrayRef) -> bool {
    use arrow::array::AsArray;
    use arrow::datatypes::DataType::*;
    fn text<T: arrow::datatypes::ByteArrayType>(a: &arrow::array::GenericByteArray<T>) -> &[u8] {
        use arrow::datatypes::ArrowNativeType as _;
        let offsets = a.value_offsets();
        &a.values()[offsets[0].as_usize()..offsets[offsets.len() - 1].as_usize()]
    }
    let data = sample.to_data();
    let fixed = |width: usize| &data.buffers()[0].as_slice()[data.offset() * width..(data.offset() + data.len()) * width];
    let values: &[u8] = match sample.data_type() {
        t if t.is_primitive() => fixed(t.primitive_width().expect("a primitive's width")),
        FixedSizeBinary(width) => fixed(usize::try_from(*width).unwrap_or(0)),
        Utf8 => text(sample.as_string::<i32>()),
        LargeUtf8 => text(sample.as_string::<i64>()),
        Binary => text(sample.as_binary::<i32>()),
        LargeBinary => text(sample.as_binary::<i64>()),
        _ => return true,
    };
    compresses_bytes(values)
}

/// The elements of a list or vector column's rows (`None` for other types).
fn elements(sample: &ArrayRef) -> Option<ArrayRef> {
    use arrow::array::AsArray;
    use arrow::datatypes::DataType::*;
    fn list<O: arrow::array::OffsetSizeTrait>(list: &arrow::array::GenericListArray<O>) -> (&ArrayRef, usize, usize) {
        let offsets = list.value_offsets();
        (list.values(), offsets[0].as_usize(), offsets[offsets.len() - 1].as_usize())
    }
    let (values, start, end) = match sample.data_type() {
        List(_) => list(sample.as_list::<i32>()),
        LargeList(_) => list(sample.as_list::<i64>()),
        FixedSizeList(_, width) => {
            let list = sample.as_fixed_size_list();
            let width = usize::try_from(*width).ok()?;
            let start = usize::try_from(list.value_offset(0)).ok()?;
            (list.values(), start, start + list.len() * width)
        }
        _ => return None,
    };
    Some(values.slice(start, end - start))
}

/// Bytes of a sample that LZ4 compresses to judge a column (text or vectors
/// can make a sample of megabytes).
const JUDGED_BYTES: usize = 256 << 10;

/// See [`compresses`]: judged on the first [`JUDGED_BYTES`] of `values`.
fn compresses_bytes(values: &[u8]) -> bool {
    if values.len() < 1024 {
        return true;
    }
    let values = &values[..values.len().min(JUDGED_BYTES)];
    lz4_flex::block::compress(values).len() * 8 <= values.len() * 7
}

/// Whether an integer column (or a date, time or timestamp, stored as one) steps by
/// narrow amounts: the spread between the sample's largest and smallest step between
/// consecutive non-NULL values fits in half the stored width, so delta encoding takes
/// at most half the bytes before compression. Other types are never delta-encoded.
fn narrow_steps(sample: &ArrayRef) -> bool {
    use arrow::datatypes::DataType::*;
    let width = match sample.data_type() {
        Int8 | Int16 | Int32 | UInt8 | UInt16 | UInt32 | Date32 | Time32(_) => 32,
        Int64 | UInt64 | Date64 | Time64(_) | Timestamp(..) | Duration(_) => 64,
        _ => return false,
    };
    // As i128 (the temporal types through their i64 values), so no step wraps.
    let integers = if sample.data_type().is_integer() { Ok(sample.clone()) } else { arrow::compute::cast(sample, &Int64) };
    let Ok(values) = integers.and_then(|a| arrow::compute::cast(&a, &Decimal128(38, 0))) else { return false };
    let values = values.as_any().downcast_ref::<arrow::array::Decimal128Array>().expect("cast to decimal128");
    let mut values = values.iter().flatten();
    let Some(mut previous) = values.next() else { return false };
    let (mut low, mut high) = (i128::MAX, i128::MIN);
    for value in values {
        let step = value - previous;
        (low, high) = (low.min(step), high.max(step));
        previous = value;
    }
    high >= low && 128 - (high - low).leading_zeros() <= width / 2
}

/// The column chunks of row group `index`, holding the rows of `slices`.
fn encode_row_group(
    factory: &ArrowRowGroupWriterFactory,
    index: usize,
    slices: &[RecordBatch],
) -> parquet::errors::Result<Vec<ArrowColumnChunk>> {
    let mut writers = factory.create_column_writers(index)?;
    for batch in slices {
        let mut leaves_writers = writers.iter_mut();
        for (field, column) in batch.schema_ref().fields().iter().zip(batch.columns()) {
            for leaf in compute_leaves(field, column)? {
                let writer = leaves_writers.next().expect("one writer per leaf column");
                writer.write(&leaf)?;
            }
        }
    }
    writers.into_iter().map(|w| w.close()).collect()
}

/// Batches cut into row groups of at most [`ROW_GROUP_ROWS`] rows and
/// [`ROW_GROUP_BYTES`] of Arrow data (at least one row, however wide); a batch is
/// dropped once its last rows are taken.
struct RowGroups {
    batches: std::collections::VecDeque<RecordBatch>,
    /// Rows of the first batch already taken.
    offset: usize,
}

impl RowGroups {
    fn next(&mut self) -> Option<Vec<RecordBatch>> {
        let (mut rows, mut bytes, mut group) = (0, 0, Vec::new());
        while let Some(batch) = self.batches.front() {
            let row_bytes = row_bytes(batch);
            let room = (ROW_GROUP_BYTES.saturating_sub(bytes) / row_bytes).max(usize::from(rows == 0));
            let take = (ROW_GROUP_ROWS - rows).min(room).min(batch.num_rows() - self.offset);
            if take > 0 {
                group.push(batch.slice(self.offset, take));
                (rows, bytes, self.offset) = (rows + take, bytes + take * row_bytes, self.offset + take);
            }
            if self.offset == batch.num_rows() {
                self.batches.pop_front();
                self.offset = 0;
            } else {
                break;
            }
        }
        (!group.is_empty()).then_some(group)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow::array::{Int64Array, StringArray};
    use parquet::file::metadata::ColumnChunkMetaData;
    use parquet::file::reader::{FileReader, SerializedFileReader};

    use bytes::Bytes;

    use super::*;

    /// `batch` encoded as one file, read back and compared column by column; the
    /// column chunks of its first row group (encodings, sizes).
    fn round_trip(schema: &Schema, batch: &RecordBatch) -> Vec<ColumnChunkMetaData> {
        let (bytes, _, _) = encode(schema, vec![batch.clone()], 1 << 20, false).unwrap();
        let reader = SerializedFileReader::new(Bytes::from(bytes.clone())).unwrap();
        let chunks = reader.metadata().row_group(0).columns().to_vec();
        let read = parquet::arrow::arrow_reader::ParquetRecordBatchReader::try_new(Bytes::from(bytes), 1 << 20).unwrap();
        let read: Vec<RecordBatch> = read.collect::<Result<_, _>>().unwrap();
        let read = arrow::compute::concat_batches(&read[0].schema(), &read).unwrap();
        for c in 0..batch.num_columns() {
            // Nested fields read back with their field ids: compared as the batch's type.
            let column = crate::io::values::nested::relabel(read.column(c), batch.column(c).data_type()).unwrap();
            assert_eq!(column.to_data(), batch.column(c).to_data(), "column {c}");
        }
        chunks
    }

    fn uses(chunk: &ColumnChunkMetaData, encoding: Encoding) -> bool {
        chunk.encodings().any(|e| e == encoding)
    }

    /// A column of few values keeps its dictionary; ids and free text are written
    /// without one, sequential ids delta-encoded (and every value reads back).
    #[test]
    fn dictionaries_only_for_columns_whose_values_repeat() {
        let schema = Schema::parse("id bigint not null, kind varchar, name varchar, x bigint").unwrap();
        let rows = 100_000i64;
        let batch = RecordBatch::try_new(
            schema.arrow_schema(),
            vec![
                Arc::new(Int64Array::from_iter_values(0..rows)),
                Arc::new(StringArray::from_iter_values((0..rows).map(|i| ["a", "b", "c"][(i % 3) as usize]))),
                Arc::new(StringArray::from_iter_values((0..rows).map(|i| format!("name {i}")))),
                Arc::new(Int64Array::from_iter((0..rows).map(|i| (i % 7 != 0).then_some(i * 7919 % 1000)))),
            ],
        )
        .unwrap();
        let chunks = round_trip(&schema, &batch);
        let dictionary: Vec<bool> = chunks.iter().map(|c| uses(c, Encoding::RLE_DICTIONARY)).collect();
        assert_eq!(dictionary, [false, true, false, true]);
        // The sequential ids are delta-encoded: a few bytes a page.
        assert!(uses(&chunks[0], Encoding::DELTA_BINARY_PACKED));
        assert!(chunks[0].compressed_size() < 4096, "{}", chunks[0].compressed_size());
    }

    /// Columns LZ4 hardly shrinks (random measurements, hashed ids, random bytes,
    /// the floats of random vectors) are written uncompressed; text and lists that
    /// repeat themselves are compressed; every value reads back.
    #[test]
    fn columns_are_compressed_only_where_it_pays() {
        use arrow::array::{BinaryArray, FixedSizeListArray, Float32Array, Float64Array, ListArray};
        use arrow::buffer::OffsetBuffer;
        use arrow::datatypes::DataType;
        use parquet::basic::Compression;
        let schema = Schema::parse("v double, h bigint, b blob, name varchar, kind varchar, e float[16], p list<double>").unwrap();
        let rows = 50_000u64;
        let mix = |i: u64| i.wrapping_mul(0x9E37_79B9_7F4A_7C15).rotate_left(17) ^ 0xD1B5_4A32_D192_ED03;
        let arrow_schema = schema.arrow_schema();
        let child = |i: usize| match arrow_schema.field(i).data_type() {
            DataType::FixedSizeList(f, _) | DataType::List(f) => f.clone(),
            other => panic!("{other}"),
        };
        let vectors = Float32Array::from_iter_values((0..rows * 16).map(|i| (mix(i) >> 40) as f32 / (1u64 << 24) as f32));
        let lists = Float64Array::from_iter_values((0..rows * 3).map(|i| (i % 3) as f64));
        let batch = RecordBatch::try_new(
            arrow_schema.clone(),
            vec![
                Arc::new(Float64Array::from_iter_values((0..rows).map(|i| (mix(i) >> 11) as f64 / (1u64 << 53) as f64))),
                Arc::new(Int64Array::from_iter_values((0..rows).map(|i| mix(i) as i64))),
                Arc::new(BinaryArray::from_iter_values((0..rows).map(|i| mix(i).to_le_bytes()))),
                Arc::new(StringArray::from_iter_values((0..rows).map(|i| format!("customer name {i}")))),
                Arc::new(StringArray::from_iter_values((0..rows).map(|i| ["a", "b", "c"][(i % 3) as usize]))),
                Arc::new(FixedSizeListArray::new(child(5), 16, Arc::new(vectors), None)),
                Arc::new(ListArray::new(child(6), OffsetBuffer::from_lengths(vec![3; rows as usize]), Arc::new(lists), None)),
            ],
        )
        .unwrap();
        let compressions: Vec<Compression> = round_trip(&schema, &batch).iter().map(|c| c.compression()).collect();
        let (plain, lz4) = (Compression::UNCOMPRESSED, Compression::LZ4_RAW);
        assert_eq!(compressions, [plain, plain, plain, lz4, lz4, plain, lz4]);
        // Small samples are not judged: compressed.
        assert!(compresses(&(Arc::new(Int64Array::from_iter_values((0..100).map(|i| mix(i) as i64))) as ArrayRef)));
        // A slice is judged on its own values, not its whole buffer.
        let halves: ArrayRef = Arc::new(Int64Array::from_iter_values((0..20_000u64).map(|i| if i < 10_000 { 7 } else { mix(i) as i64 })));
        assert!(compresses(&halves.slice(0, 10_000)));
        assert!(!compresses(&halves.slice(10_000, 10_000)));
        // A sliced list or vector gives the elements of its own rows.
        for (column, width) in [(batch.column(5), 16), (batch.column(6), 3)] {
            let all = elements(column).unwrap();
            assert_eq!(all.len(), rows as usize * width);
            assert_eq!(elements(&column.slice(10, 5)).unwrap().to_data(), all.slice(10 * width, 5 * width).to_data());
        }
    }

    #[test]
    fn repeats_counts_distinct_values_of_a_sample_ignoring_nulls() {
        let column = |values: Vec<Option<i64>>| -> ArrayRef { Arc::new(Int64Array::from(values)) };
        let batch = |values: Vec<Option<i64>>| {
            let schema =
                Arc::new(arrow::datatypes::Schema::new(vec![arrow::datatypes::Field::new("a", arrow::datatypes::DataType::Int64, true)]));
            RecordBatch::try_new(schema, vec![column(values)]).unwrap()
        };
        assert!(repeats(&column(vec![Some(1), Some(1), None, None, None])));
        assert!(!repeats(&column(vec![Some(1), Some(2), None, None, None])));
        assert!(repeats(&column(vec![None, None])));
        // The sample spans batches and stops at SAMPLE_ROWS rows.
        let many = batch(vec![Some(5); SAMPLE_ROWS]);
        let unique = batch((0..SAMPLE_ROWS as i64).map(Some).collect());
        let sampled = sample(&[many.slice(0, 10), many, unique.clone()], 0).unwrap();
        assert_eq!(sampled.len(), SAMPLE_ROWS);
        assert!(repeats(&sampled));
        assert!(!repeats(&sample(&[unique], 0).unwrap()));
    }

    /// Delta-encoded columns of every integer and temporal type read back as written,
    /// at the ends of their ranges too (unsigned values past the signed maximum).
    #[test]
    fn delta_encoded_columns_read_back_unchanged() {
        use arrow::array::{
            Date32Array, Int16Array, Int32Array, Int8Array, Time64MicrosecondArray, TimestampMicrosecondArray, UInt16Array, UInt32Array,
            UInt64Array, UInt8Array,
        };
        let schema = Schema::parse(
            "a tinyint, b smallint, c int, d bigint, e utinyint, f usmallint, g uint, h ubigint, i date, j time, k timestamp, l timestamp_ntz",
        )
        .unwrap();
        let rows = 20_000i64;
        let at = |base: i64, i: i64| base + i * 3 + i % 2;
        let columns: Vec<ArrayRef> = vec![
            Arc::new(Int8Array::from_iter_values((0..rows).map(|i| [i8::MIN, i8::MAX][(i % 2) as usize]))),
            Arc::new(Int16Array::from_iter_values((0..rows).map(|i| i16::MIN + (i % 100) as i16))),
            Arc::new(Int32Array::from_iter_values((0..rows).map(|i| i32::MAX - 4 * i as i32))),
            Arc::new(Int64Array::from_iter((0..rows).map(|i| (i % 5 != 0).then_some(at(i64::MIN, i))))),
            Arc::new(UInt8Array::from_iter_values((0..rows).map(|i| u8::MAX - (i % 7) as u8))),
            Arc::new(UInt16Array::from_iter_values((0..rows).map(|i| u16::MAX - (i % 300) as u16))),
            Arc::new(UInt32Array::from_iter_values((0..rows).map(|i| u32::MAX - 2 * i as u32))),
            Arc::new(UInt64Array::from_iter_values((0..rows).map(|i| u64::MAX - 3 * i as u64))),
            Arc::new(Date32Array::from_iter_values((0..rows).map(|i| -719_162 + i as i32))),
            Arc::new(Time64MicrosecondArray::from_iter_values((0..rows).map(|i| at(0, i) * 1_000_000 % 86_400_000_000))),
            Arc::new(TimestampMicrosecondArray::from_iter_values((0..rows).map(|i| at(1_700_000_000_000_000, i))).with_timezone("UTC")),
            Arc::new(TimestampMicrosecondArray::from_iter_values((0..rows).map(|i| at(-62_135_596_800_000_000, i)))),
        ];
        let batch = RecordBatch::try_new(schema.arrow_schema(), columns).unwrap();
        let delta: Vec<bool> = round_trip(&schema, &batch).iter().map(|c| uses(c, Encoding::DELTA_BINARY_PACKED)).collect();
        // The 8-bit columns and the small-range 16-bit ones repeat: dictionaries.
        assert_eq!(delta, [false, false, true, true, false, false, true, true, true, true, true, true]);
    }

    #[test]
    fn narrow_steps_are_judged_on_the_spread_of_steps_between_values() {
        use arrow::array::{Date32Array, Float64Array, Int32Array, TimestampMicrosecondArray, UInt64Array};
        let narrow = |a: ArrayRef| narrow_steps(&a);
        // Sequential, evenly spaced or jittered by a few bits: narrow, whatever the
        // values' size; NULLs are skipped.
        assert!(narrow(Arc::new(Int64Array::from_iter_values(1 << 60..(1 << 60) + 1000))));
        assert!(narrow(Arc::new(Int64Array::from(vec![Some(10), None, Some(-5), Some(7), None, Some(100)]))));
        assert!(narrow(Arc::new(UInt64Array::from_iter_values((0..1000).map(|i| u64::MAX - 3 * i)))));
        assert!(narrow(Arc::new(TimestampMicrosecondArray::from_iter_values(
            (0..1000).map(|i| 1_700_000_000_000_000 + i * 1_000 + i % 7)
        ))));
        assert!(narrow(Arc::new(Date32Array::from_iter_values(19_000..20_000))));
        // Steps spread over more than half the width: plain.
        assert!(!narrow(Arc::new(Int64Array::from_iter_values((0..1000i64).map(|i| i.wrapping_mul(0x9E37_79B9_7F4A_7C15u64 as i64))))));
        assert!(!narrow(Arc::new(Int32Array::from_iter_values([0, 1 << 20, -(1 << 20), 5]))));
        assert!(!narrow(Arc::new(UInt64Array::from_iter_values([0, u64::MAX, 0]))));
        // Fewer than two values, or not integers: plain.
        assert!(!narrow(Arc::new(Int64Array::from(vec![None, Some(1), None]))));
        assert!(!narrow(Arc::new(Float64Array::from_iter_values((0..1000).map(f64::from)))));
    }
}

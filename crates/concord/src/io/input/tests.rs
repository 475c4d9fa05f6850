//! Tests of `io/input`: reading CSV, JSON and Parquet input into a table's schema.

use super::*;
use arrow::array::{AsArray, Int32Array, Int64Array};
use arrow::datatypes::Int64Type;
use arrow::datatypes::TimestampMicrosecondType;
use parquet::arrow::ArrowWriter;

fn write(dir: &tempfile::TempDir, name: &str, contents: &str) -> std::path::PathBuf {
    let path = dir.path().join(name);
    std::fs::write(&path, contents).unwrap();
    path
}

fn write_parquet(dir: &tempfile::TempDir, name: &str, batch: &RecordBatch) -> std::path::PathBuf {
    let path = dir.path().join(name);
    let mut writer = ArrowWriter::try_new(File::create(&path).unwrap(), batch.schema(), None).unwrap();
    writer.write(batch).unwrap();
    writer.close().unwrap();
    path
}

fn read(path: &Path, schema: &Schema) -> Result<Vec<RecordBatch>, InputError> {
    read_file(path, schema, Required::Always).map(|input| input.batches)
}

fn schema() -> Schema {
    Schema::parse("id bigint not null, name varchar, score double, note varchar").unwrap()
}

#[test]
fn detects_formats_by_extension() {
    assert_eq!(detect_format(Path::new("a.CSV")).unwrap(), InputFormat::Csv);
    assert_eq!(detect_format(Path::new("a.ndjson")).unwrap(), InputFormat::Json);
    assert_eq!(detect_format(Path::new("a.parq")).unwrap(), InputFormat::Parquet);
    assert!(matches!(detect_format(Path::new("a.txt")), Err(InputError::UnsupportedFileType { .. })));
}

#[test]
fn csv_happy_path_fills_missing_nullable_column() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(&dir, "in.csv", "name,id,score\na,1,1.5\n,2,\n");
    let batches = read(&path, &schema()).unwrap();
    assert_eq!(batches.len(), 1);
    let b = &batches[0];
    assert_eq!(b.schema(), schema().arrow_schema());
    assert_eq!(b.column(0).as_primitive::<Int64Type>().values(), &[1, 2]);
    assert_eq!(b.column(1).as_string::<i32>(), &StringArray::from(vec![Some("a"), None]));
    assert!(b.column(2).is_null(1));
    assert_eq!(b.column(3).null_count(), 2);
}

#[test]
fn csv_unknown_column() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(&dir, "in.csv", "id,bogus\n1,x\n");
    match read(&path, &schema()) {
        Err(InputError::UnknownColumn { file, column, known }) => {
            assert_eq!(file, path.display().to_string());
            assert_eq!(column, "bogus");
            assert_eq!(known, "id, name, score, note");
        }
        other => panic!("unexpected {other:?}"),
    }
}

#[test]
fn csv_bad_bigint_names_line_3() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(&dir, "in.csv", "id,name\n1,a\nx2,b\n");
    match read(&path, &schema()) {
        Err(InputError::InvalidValue { line, column, value, expected, .. }) => {
            assert_eq!((line, column.as_str(), value.as_str(), expected.as_str()), (3, "id", "x2", "bigint"));
        }
        other => panic!("unexpected {other:?}"),
    }
}

#[test]
fn csv_null_in_not_null_column() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(&dir, "in.csv", "id,name\n1,a\n,b\n");
    match read(&path, &schema()) {
        Err(InputError::NullInNonNullable { column, row, .. }) => assert_eq!((column.as_str(), row), ("id", 2)),
        other => panic!("unexpected {other:?}"),
    }
}

#[test]
fn csv_missing_required_empty_and_ragged() {
    let dir = tempfile::tempdir().unwrap();
    let missing = write(&dir, "m.csv", "name\na\n");
    assert!(matches!(read(&missing, &schema()), Err(InputError::MissingColumn { column, .. }) if column == "id"));
    let empty = write(&dir, "e.csv", "");
    assert!(matches!(read(&empty, &schema()), Err(InputError::Unparsable { reason, .. }) if reason == "no header row"));
    let ragged = write(&dir, "r.csv", "id,name\n1,a,extra\n");
    assert!(matches!(read(&ragged, &schema()), Err(InputError::Unparsable { .. })));
    let header_only = write(&dir, "h.csv", "id,name\n");
    assert!(read(&header_only, &schema()).unwrap().is_empty());
    let io = read(&dir.path().join("nope.csv"), &schema());
    assert!(matches!(io, Err(InputError::Io { .. })));
}

#[test]
fn csv_timestamps_dates_booleans_binary() {
    let dir = tempfile::tempdir().unwrap();
    let schema = Schema::parse("at timestamp, day date, ok boolean, raw binary").unwrap();
    let csv = "at,day,ok,raw\n2024-01-02T03:04:05Z,2024-01-02,true,6162\n2024-01-02 03:04:05,,false,\n";
    let path = write(&dir, "t.csv", csv);
    let b = &read(&path, &schema).unwrap()[0];
    assert_eq!(b.schema(), schema.arrow_schema());
    let at = b.column(0).as_primitive::<TimestampMicrosecondType>();
    assert_eq!(at.values(), &[1_704_164_645_000_000, 1_704_164_645_000_000]);
    assert_eq!(b.column(1).as_primitive::<arrow::datatypes::Date32Type>().value(0), 19724);
    assert!(b.column(2).as_boolean().value(0) && !b.column(2).as_boolean().value(1));
    assert_eq!(b.column(3).as_binary::<i32>().value(0), b"ab");
    let bad = write(&dir, "bad.csv", "at\nyesterday\n");
    assert!(matches!(read(&bad, &schema), Err(InputError::InvalidValue { line: 2, .. })));
    let not_hex = write(&dir, "hex.csv", "raw\n00\nabc\n");
    assert!(matches!(read(&not_hex, &schema), Err(InputError::InvalidValue { line: 3, column, .. }) if column == "raw"));
}

#[test]
fn ndjson_happy_path() {
    let dir = tempfile::tempdir().unwrap();
    let schema = Schema::parse("id bigint not null, n int, score double, name varchar, at timestamp, ok boolean").unwrap();
    let json = "{\"id\": 1, \"n\": 7, \"score\": 2, \"name\": \"a\", \"at\": \"2024-01-02T03:04:05Z\", \"ok\": true}\n\n{\"id\": 2, \"score\": 2.5, \"name\": null}\n";
    let path = write(&dir, "in.jsonl", json);
    let batches = read(&path, &schema).unwrap();
    assert_eq!(batches.len(), 1);
    let b = &batches[0];
    assert_eq!(b.schema(), schema.arrow_schema());
    assert_eq!(b.column(0).as_primitive::<Int64Type>().values(), &[1, 2]);
    assert_eq!(b.column(1).as_primitive::<arrow::datatypes::Int32Type>().value(0), 7);
    assert_eq!(b.column(2).as_primitive::<arrow::datatypes::Float64Type>().values(), &[2.0, 2.5]);
    assert_eq!(b.column(4).as_primitive::<TimestampMicrosecondType>().value(0), 1_704_164_645_000_000);
    assert!(b.column(3).is_null(1) && b.column(5).is_null(1));
}

#[test]
fn ndjson_type_mismatch_and_bad_values() {
    let dir = tempfile::tempdir().unwrap();
    let schema = Schema::parse("id bigint, n int, name varchar, x double").unwrap();
    let path = write(&dir, "s.json", "{\"id\": 2}\n{\"id\": \"1\"}\n");
    match read(&path, &schema) {
        Err(InputError::InvalidValue { line, column, value, expected, .. }) => {
            assert_eq!((line, column.as_str(), value.as_str()), (2, "id", "\"1\""));
            assert!(expected.starts_with("bigint"), "{expected}");
        }
        other => panic!("unexpected {other:?}"),
    }
    let float = write(&dir, "f.json", "{\"id\": 1.5}\n");
    assert!(matches!(read(&float, &schema), Err(InputError::InvalidValue { line: 1, value, .. }) if value == "1.5"));
    let overflow = write(&dir, "o.json", "{\"n\": 1}\n\n{\"n\": 3000000000}\n");
    assert!(matches!(read(&overflow, &schema), Err(InputError::InvalidValue { line: 3, column, .. }) if column == "n"));
    let mixed = write(&dir, "x.json", "{\"name\": \"a\"}\n{\"name\": 5}\n");
    assert!(matches!(read(&mixed, &schema), Err(InputError::InvalidValue { line: 2, value, .. }) if value == "5"));
    let unknown = write(&dir, "u.json", "{\"zzz\": 1}\n");
    assert!(matches!(read(&unknown, &schema), Err(InputError::UnknownColumn { .. })));
    // A syntax error names its own line, not the first.
    let syntax = write(&dir, "y.json", "{\"id\": 1}\n{\"id\": 2}\n{\"id\": 3,,}\n");
    assert!(matches!(read(&syntax, &schema), Err(InputError::Unparsable { reason, .. }) if reason.starts_with("line 3:")));
    // Infinities and NaN as strings, into float columns only.
    let special = write(&dir, "i.json", "{\"x\": \"NaN\"}\n{\"x\": \"Infinity\"}\n{\"x\": \"-Infinity\"}\n");
    let b = &read(&special, &schema).unwrap()[0];
    let x = b.column(3).as_primitive::<arrow::datatypes::Float64Type>();
    assert!(x.value(0).is_nan() && x.value(1) == f64::INFINITY && x.value(2) == f64::NEG_INFINITY);
    let not_float = write(&dir, "j.json", "{\"id\": \"Infinity\"}\n");
    assert!(matches!(read(&not_float, &schema), Err(InputError::InvalidValue { line: 1, .. })));
}

#[test]
fn parquet_integers_fit_by_value() {
    let dir = tempfile::tempdir().unwrap();
    let input = RecordBatch::try_from_iter([("id", Arc::new(Int32Array::from(vec![1, 2, 3])) as ArrayRef)]).unwrap();
    let path = write_parquet(&dir, "in.parquet", &input);
    let batches = read(&path, &schema()).unwrap();
    assert_eq!(batches[0].schema(), schema().arrow_schema());
    assert_eq!(batches[0].column(0).as_primitive::<Int64Type>().values(), &[1, 2, 3]);
    assert_eq!(batches[0].column(1).null_count(), 3);
    // pandas' int64 into an int column: each value checked, the first that does not fit named.
    let narrow = Schema::parse("id bigint not null, n int").unwrap();
    let input = RecordBatch::try_from_iter([
        ("id", Arc::new(Int64Array::from(vec![1, 2, 3])) as ArrayRef),
        ("n", Arc::new(Int64Array::from(vec![1, 2, 3])) as ArrayRef),
    ])
    .unwrap();
    let path = write_parquet(&dir, "fits.parquet", &input);
    assert_eq!(read(&path, &narrow).unwrap()[0].column(1).as_primitive::<arrow::datatypes::Int32Type>().values(), &[1, 2, 3]);
    let input = RecordBatch::try_from_iter([
        ("id", Arc::new(Int64Array::from(vec![1, 2])) as ArrayRef),
        ("n", Arc::new(Int64Array::from(vec![1, 5_000_000_000])) as ArrayRef),
    ])
    .unwrap();
    let path = write_parquet(&dir, "big.parquet", &input);
    assert!(
        matches!(read(&path, &narrow), Err(InputError::InvalidValue { line: 2, column, value, .. }) if column == "n" && value == "5000000000")
    );
}

/// Other tools compress with zstd (Polars' default), gzip, lz4 or brotli: all are read.
#[test]
fn parquet_of_every_common_codec_is_read() {
    use parquet::basic::{Compression, GzipLevel, ZstdLevel};
    use parquet::file::properties::WriterProperties;
    let dir = tempfile::tempdir().unwrap();
    let input = RecordBatch::try_from_iter([("id", Arc::new(Int64Array::from_iter_values(0..1000)) as ArrayRef)]).unwrap();
    let codecs = [
        Compression::SNAPPY,
        Compression::ZSTD(ZstdLevel::default()),
        Compression::GZIP(GzipLevel::default()),
        Compression::LZ4_RAW,
        Compression::BROTLI(Default::default()),
        Compression::UNCOMPRESSED,
    ];
    for codec in codecs {
        let path = dir.path().join(format!("{codec}.parquet"));
        let props = WriterProperties::builder().set_compression(codec).build();
        let mut writer = ArrowWriter::try_new(File::create(&path).unwrap(), input.schema(), Some(props)).unwrap();
        writer.write(&input).unwrap();
        writer.close().unwrap();
        let batches = read(&path, &schema()).unwrap_or_else(|e| panic!("{codec}: {e}"));
        assert_eq!(batches.iter().map(RecordBatch::num_rows).sum::<usize>(), 1000, "{codec}");
    }
}

#[test]
fn parquet_utf8_for_double_is_type_mismatch() {
    let dir = tempfile::tempdir().unwrap();
    let input = RecordBatch::try_from_iter([
        ("id", Arc::new(arrow::array::Int64Array::from(vec![1])) as ArrayRef),
        ("score", Arc::new(StringArray::from(vec!["1.5"])) as ArrayRef),
    ])
    .unwrap();
    let path = write_parquet(&dir, "in.parquet", &input);
    match read(&path, &schema()) {
        Err(InputError::TypeMismatch { column, expected, found, .. }) => {
            assert_eq!((column.as_str(), expected.as_str(), found.as_str()), ("score", "double", "varchar"))
        }
        other => panic!("unexpected {other:?}"),
    }
}

#[test]
fn parquet_timestamps_of_any_unit_become_utc_micros_exactly() {
    let dir = tempfile::tempdir().unwrap();
    let nanos = arrow::array::TimestampNanosecondArray::from(vec![1_704_164_645_000_000_000]);
    let secs = arrow::array::TimestampSecondArray::from(vec![1_704_164_645]).with_timezone("+01:00");
    let input = RecordBatch::try_from_iter([("a", Arc::new(nanos) as ArrayRef), ("b", Arc::new(secs) as ArrayRef)]).unwrap();
    let path = write_parquet(&dir, "ts.parquet", &input);
    let schema = Schema::parse("a timestamp, b timestamp").unwrap();
    let b = &read(&path, &schema).unwrap()[0];
    assert_eq!(b.schema(), schema.arrow_schema());
    assert_eq!(b.column(0).as_primitive::<TimestampMicrosecondType>().value(0), 1_704_164_645_000_000);
    assert_eq!(b.column(1).as_primitive::<TimestampMicrosecondType>().value(0), 1_704_164_645_000_000);
    // Nanoseconds a microsecond column cannot hold are refused, not cut off.
    let nanos = arrow::array::TimestampNanosecondArray::from(vec![1_700_000_000_123_456_789]);
    let input = RecordBatch::try_from_iter([("a", Arc::new(nanos) as ArrayRef)]).unwrap();
    let path = write_parquet(&dir, "ns.parquet", &input);
    assert!(matches!(read(&path, &schema), Err(InputError::InvalidValue { line: 1, column, .. }) if column == "a"));
}

#[test]
fn ndjson_empty_objects_and_no_rows() {
    let dir = tempfile::tempdir().unwrap();
    let schema = Schema::parse("name varchar").unwrap();
    let path = write(
        &dir, "e.ndjson", "{}
{}
",
    );
    assert_eq!(read(&path, &schema).unwrap()[0].num_rows(), 2);
    let empty = write(&dir, "z.json", "");
    assert!(read(&empty, &schema).unwrap().is_empty());
}

#[test]
fn conform_batch_applies_widening_rules() {
    let input = RecordBatch::try_from_iter([("id", Arc::new(Int32Array::from(vec![5])) as ArrayRef)]).unwrap();
    let out = conform_batch(&input, &schema(), "batch 0", Required::Always).unwrap().batches.remove(0);
    assert_eq!(out.schema(), schema().arrow_schema());
    let text = RecordBatch::try_from_iter([("id", Arc::new(StringArray::from(vec!["5"])) as ArrayRef)]).unwrap();
    assert!(
        matches!(conform_batch(&text, &schema(), "batch 0", Required::Always), Err(InputError::TypeMismatch { file, .. }) if file == "batch 0")
    );
}

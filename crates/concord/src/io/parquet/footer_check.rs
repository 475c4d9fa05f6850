//! A check of a Parquet footer (the Thrift `FileMetaData`) before the parquet crate
//! decodes it: see `thrift.rs` for what the walk guarantees. A 1 KB footer claiming 2^31
//! booleans in an unknown field of a column's `encoding_stats` kept a reader busy for
//! longer than libFuzzer's 20 s limit (found by the `data_file` fuzz target).
//!
//! The shapes below are parquet-format's `parquet.thrift`, as far as parquet 59.3.2
//! reads them; fields it does not know are skipped by the walk the way it skips them.

use crate::io::parquet::thrift::{walk_struct, Ty, WalkError};

/// The footer's last 8 bytes: the metadata length (little-endian u32), then `PAR1`.
pub(crate) const TAIL_BYTES: u64 = 8;

/// The metadata length a file's last 8 bytes declare, or `None` if they are not a
/// Parquet tail (the parquet crate then reports the file).
pub(crate) fn metadata_len(tail: &[u8]) -> Option<u64> {
    let tail: &[u8; 8] = tail.get(tail.len().checked_sub(8)?..)?.try_into().ok()?;
    (&tail[4..] == b"PAR1").then(|| u64::from(u32::from_le_bytes([tail[0], tail[1], tail[2], tail[3]])))
}

/// Refuses footer metadata the parquet crate would misread or loop on.
pub(crate) fn check_metadata_bytes(metadata: &[u8]) -> Result<(), String> {
    match walk_struct(metadata, &FILE_METADATA, &mut |_, _| {}) {
        Ok(_) => Ok(()),
        Err(WalkError::Truncated) => Err(format!("the footer's metadata ends early ({} bytes)", metadata.len())),
        Err(WalkError::Refused(reason)) => Err(format!("the footer's metadata is malformed: {reason}")),
    }
}

/// Checks the footer of a local file (`append` input): reads its metadata bytes.
pub(crate) fn check_file(file: &std::fs::File, size: u64) -> Result<(), String> {
    use std::os::unix::fs::FileExt;
    if size < TAIL_BYTES {
        return Ok(());
    }
    let mut tail = [0u8; 8];
    file.read_exact_at(&mut tail, size - TAIL_BYTES).map_err(|e| format!("reading the footer: {e}"))?;
    let Some(len) = metadata_len(&tail).filter(|len| len + TAIL_BYTES <= size) else {
        return Ok(());
    };
    let mut metadata = vec![0u8; len as usize];
    file.read_exact_at(&mut metadata, size - TAIL_BYTES - len).map_err(|e| format!("reading the footer: {e}"))?;
    check_metadata_bytes(&metadata)
}

const EMPTY: [(i16, Ty); 0] = [];
const KEY_VALUE: [(i16, Ty); 2] = [(1, Ty::Binary), (2, Ty::Binary)];
const DECIMAL: [(i16, Ty); 2] = [(1, Ty::I32), (2, Ty::I32)];
const TIME_UNIT: [(i16, Ty); 3] = [(1, Ty::Struct(&EMPTY)), (2, Ty::Struct(&EMPTY)), (3, Ty::Struct(&EMPTY))];
const TIME: [(i16, Ty); 2] = [(1, Ty::Bool), (2, Ty::Struct(&TIME_UNIT))];
const INTEGER: [(i16, Ty); 2] = [(1, Ty::Byte), (2, Ty::Bool)];
const VARIANT: [(i16, Ty); 1] = [(1, Ty::Byte)];
const GEOMETRY: [(i16, Ty); 1] = [(1, Ty::Binary)];
const GEOGRAPHY: [(i16, Ty); 2] = [(1, Ty::Binary), (2, Ty::I32)];
const LOGICAL_TYPE: [(i16, Ty); 17] = [
    (1, Ty::Struct(&EMPTY)),
    (2, Ty::Struct(&EMPTY)),
    (3, Ty::Struct(&EMPTY)),
    (4, Ty::Struct(&EMPTY)),
    (5, Ty::Struct(&DECIMAL)),
    (6, Ty::Struct(&EMPTY)),
    (7, Ty::Struct(&TIME)),
    (8, Ty::Struct(&TIME)),
    (10, Ty::Struct(&INTEGER)),
    (11, Ty::Struct(&EMPTY)),
    (12, Ty::Struct(&EMPTY)),
    (13, Ty::Struct(&EMPTY)),
    (14, Ty::Struct(&EMPTY)),
    (15, Ty::Struct(&EMPTY)),
    (16, Ty::Struct(&VARIANT)),
    (17, Ty::Struct(&GEOMETRY)),
    (18, Ty::Struct(&GEOGRAPHY)),
];
const SCHEMA_ELEMENT: [(i16, Ty); 10] = [
    (1, Ty::I32),
    (2, Ty::I32),
    (3, Ty::I32),
    (4, Ty::Binary),
    (5, Ty::I32),
    (6, Ty::I32),
    (7, Ty::I32),
    (8, Ty::I32),
    (9, Ty::I32),
    (10, Ty::Struct(&LOGICAL_TYPE)),
];
pub(crate) const STATISTICS: [(i16, Ty); 8] =
    [(1, Ty::Binary), (2, Ty::Binary), (3, Ty::I64), (4, Ty::I64), (5, Ty::Binary), (6, Ty::Binary), (7, Ty::Bool), (8, Ty::Bool)];
const PAGE_ENCODING_STATS: [(i16, Ty); 3] = [(1, Ty::I32), (2, Ty::I32), (3, Ty::I32)];
const SIZE_STATISTICS: [(i16, Ty); 3] = [(1, Ty::I64), (2, Ty::List(&Ty::I64)), (3, Ty::List(&Ty::I64))];
const BOUNDING_BOX: [(i16, Ty); 8] = [
    (1, Ty::Double),
    (2, Ty::Double),
    (3, Ty::Double),
    (4, Ty::Double),
    (5, Ty::Double),
    (6, Ty::Double),
    (7, Ty::Double),
    (8, Ty::Double),
];
const GEOSPATIAL_STATISTICS: [(i16, Ty); 2] = [(1, Ty::Struct(&BOUNDING_BOX)), (2, Ty::List(&Ty::I32))];
const COLUMN_METADATA: [(i16, Ty); 17] = [
    (1, Ty::I32),
    (2, Ty::List(&Ty::I32)),
    (3, Ty::List(&Ty::Binary)),
    (4, Ty::I32),
    (5, Ty::I64),
    (6, Ty::I64),
    (7, Ty::I64),
    (8, Ty::List(&Ty::Struct(&KEY_VALUE))),
    (9, Ty::I64),
    (10, Ty::I64),
    (11, Ty::I64),
    (12, Ty::Struct(&STATISTICS)),
    (13, Ty::List(&Ty::Struct(&PAGE_ENCODING_STATS))),
    (14, Ty::I64),
    (15, Ty::I32),
    (16, Ty::Struct(&SIZE_STATISTICS)),
    (17, Ty::Struct(&GEOSPATIAL_STATISTICS)),
];
const COLUMN_KEY: [(i16, Ty); 2] = [(1, Ty::List(&Ty::Binary)), (2, Ty::Binary)];
const COLUMN_CRYPTO: [(i16, Ty); 2] = [(1, Ty::Struct(&EMPTY)), (2, Ty::Struct(&COLUMN_KEY))];
const COLUMN_CHUNK: [(i16, Ty); 9] = [
    (1, Ty::Binary),
    (2, Ty::I64),
    (3, Ty::Struct(&COLUMN_METADATA)),
    (4, Ty::I64),
    (5, Ty::I32),
    (6, Ty::I64),
    (7, Ty::I32),
    (8, Ty::Struct(&COLUMN_CRYPTO)),
    (9, Ty::Binary),
];
const SORTING_COLUMN: [(i16, Ty); 3] = [(1, Ty::I32), (2, Ty::Bool), (3, Ty::Bool)];
const ROW_GROUP: [(i16, Ty); 7] = [
    (1, Ty::List(&Ty::Struct(&COLUMN_CHUNK))),
    (2, Ty::I64),
    (3, Ty::I64),
    (4, Ty::List(&Ty::Struct(&SORTING_COLUMN))),
    (5, Ty::I64),
    (6, Ty::I64),
    (7, Ty::I16),
];
const AES_GCM: [(i16, Ty); 3] = [(1, Ty::Binary), (2, Ty::Binary), (3, Ty::Bool)];
const ENCRYPTION_ALGORITHM: [(i16, Ty); 2] = [(1, Ty::Struct(&AES_GCM)), (2, Ty::Struct(&AES_GCM))];
const COLUMN_ORDER: [(i16, Ty); 1] = [(1, Ty::Struct(&EMPTY))];
static FILE_METADATA: [(i16, Ty); 9] = [
    (1, Ty::I32),
    (2, Ty::List(&Ty::Struct(&SCHEMA_ELEMENT))),
    (3, Ty::I64),
    (4, Ty::List(&Ty::Struct(&ROW_GROUP))),
    (5, Ty::List(&Ty::Struct(&KEY_VALUE))),
    (6, Ty::Binary),
    (7, Ty::List(&Ty::Struct(&COLUMN_ORDER))),
    (8, Ty::Struct(&ENCRYPTION_ALGORITHM)),
    (9, Ty::Binary),
];

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    use arrow::array::{BinaryArray, Int64Array, RecordBatch, StringArray, TimestampMicrosecondArray};
    use arrow::datatypes::{DataType, Field, Schema, TimeUnit};
    use parquet::arrow::ArrowWriter;
    use parquet::file::properties::{EnabledStatistics, WriterProperties};

    fn footer_of(file: &[u8]) -> &[u8] {
        let len = metadata_len(file).unwrap() as usize;
        &file[file.len() - 8 - len..file.len() - 8]
    }

    /// Footers and page headers written by the parquet crate (every statistic on, several
    /// types, random binary statistics, key-value metadata) pass; the fuzz input that
    /// looped does not.
    #[test]
    fn real_footers_pass_and_the_looping_one_is_refused() {
        let schema = Arc::new(Schema::new(vec![
            Field::new("id", DataType::Int64, false),
            Field::new("name", DataType::Utf8, true),
            Field::new("blob", DataType::Binary, true),
            Field::new("at", DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())), true),
        ]));
        let blobs: Vec<Vec<u8>> = (0u64..200).map(|i| i.wrapping_mul(0x9E37_79B9_7F4A_7C15).to_le_bytes().repeat(3)).collect();
        let batch = RecordBatch::try_new(
            schema.clone(),
            vec![
                Arc::new(Int64Array::from_iter_values(0..200)),
                Arc::new(StringArray::from_iter_values((0..200).map(|i| format!("name {i} ñ 😀")))),
                Arc::new(BinaryArray::from_iter_values(blobs.iter())),
                Arc::new(TimestampMicrosecondArray::from_iter_values(0..200).with_timezone("UTC")),
            ],
        )
        .unwrap();
        let props = WriterProperties::builder().set_statistics_enabled(EnabledStatistics::Page).set_data_page_row_count_limit(16).build();
        let mut file = Vec::new();
        let mut writer = ArrowWriter::try_new(&mut file, schema, Some(props)).unwrap();
        writer.write(&batch).unwrap();
        writer.append_key_value_metadata(parquet::file::metadata::KeyValue::new("k".into(), "v".to_string()));
        writer.close().unwrap();
        assert_eq!(check_metadata_bytes(footer_of(&file)), Ok(()));
        // Their page headers (pages of 16 rows, after a dictionary page) pass too.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("real.parquet");
        std::fs::write(&path, &file).unwrap();
        let local = std::fs::File::open(&path).unwrap();
        assert_eq!(check_file(&local, file.len() as u64), Ok(()));
        let metadata = parquet::file::metadata::ParquetMetaDataReader::new().parse_and_finish(&local).unwrap();
        assert_eq!(crate::io::parquet::page_check::check_file(&local, &metadata), Ok(()));

        let looping = std::fs::read(concat!(env!("CARGO_MANIFEST_DIR"), "/../../fuzz/corpus/data_file/timeout-1")).unwrap();
        let refused = check_metadata_bytes(footer_of(&looping)).unwrap_err();
        assert!(refused.contains("booleans"), "{refused}");
    }
}

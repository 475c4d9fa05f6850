//! The coverage-guided fuzz targets (`fuzz/`, nightly) call the library's decoders;
//! their kept corpus is replayed here on stable, so every input that once crashed a
//! target stays a regression test.

use std::path::Path;

use concord::{StoreResolver, Table};

use crate::common::*;

/// Every input of the kept fuzz corpus (`fuzz/corpus/<target>`), decoded as its fuzz
/// target does: no panic.
#[test]
fn the_fuzz_corpus_decodes_without_panics() {
    let corpus = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus");
    let mut replayed = 0;
    for target in ["manifest", "segment", "transaction", "announcement", "deletion_vector"] {
        for file in files_under(&corpus, target) {
            let data = std::fs::read(&file).unwrap();
            let first = data.first().copied().map(u64::from).unwrap_or(0);
            let rest = data.get(1..).unwrap_or_default();
            match target {
                "manifest" => drop(concord::decode::manifest("fuzz", first, rest)),
                "segment" => drop(concord::decode::segment("fuzz", first, rest)),
                "transaction" => drop(concord::decode::transaction("fuzz", &data)),
                "announcement" => {
                    drop(concord::decode::announcement("fuzz", &data));
                    if let Ok(name) = std::str::from_utf8(&data) {
                        drop(concord::decode::inline_announcement("fuzz", name));
                    }
                }
                _ => drop(concord::decode::deletion_vector("fuzz", &data)),
            }
            replayed += 1;
        }
    }
    assert!(replayed >= 20, "the corpus is kept in the repository ({replayed} inputs found)");
    // Its name seed was written by another encoder (Python's zlib, raw DEFLATE): any
    // standard DEFLATE stream in a name decodes.
    let name = std::fs::read_to_string(corpus.join("announcement/seed-1")).unwrap();
    // (Decoded only if it announces the transaction the name gives.)
    let carried = concord::decode::inline_announcement("fuzz", &name).unwrap();
    assert!(carried.is_some(), "the name carries its announcement");
}

/// The kept Parquet corpus, read as the `data_file` fuzz target does: each input is
/// the one file of a fragment, read through the table.
#[tokio::test]
async fn the_fuzz_corpus_of_data_files_reads_without_panics() {
    use concord::manifest::{DataFile, Fragment};
    use concord::object_store::{ObjectStoreExt, PutPayload};
    let location = StoreResolver::new().resolve("memory://fuzz").unwrap();
    let (store, path) = (location.store().clone(), location.root().clone().join("data").join("fuzz.parquet"));
    let table = Table::create(location, concord::Env::system(), concord::Schema::parse(SCHEMA).unwrap()).await.unwrap();
    let corpus = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus");
    let (mut read, mut refused) = (0, 0);
    for file in files_under(&corpus, "data_file") {
        let data = std::fs::read(&file).unwrap();
        // As a manifest would describe it (the format's objects are built from their JSON).
        let described: DataFile =
            serde_json::from_value(serde_json::json!({"path": "data/fuzz.parquet", "fields": [0, 1, 2], "size_bytes": data.len()}))
                .unwrap();
        store.put(&path, PutPayload::from(data)).await.unwrap();
        let name = file.file_name().unwrap().to_string_lossy().into_owned();
        let crash = name.starts_with("crash-") || name.starts_with("timeout-");
        let fragment: Fragment = serde_json::from_value(serde_json::json!({"id": 0, "files": [described], "physical_rows": 0})).unwrap();
        // SQL's decoder (strings as views) reads the same rows or refuses the same file.
        let plain = table.read_fragment(&fragment).await;
        match (&plain, table.read_fragment_as_sql(&fragment).await) {
            (Ok(rows), Ok(as_sql)) => assert_eq!(rows, &as_plain_strings(&as_sql), "{}", file.display()),
            (Err(_), Err(e)) => assert!(matches!(e, concord::ScanError::Corrupt(_)), "{}: {e}", file.display()),
            (a, b) => panic!("{}: the decoders disagree: {a:?} / {b:?}", file.display()),
        }
        match plain {
            Ok(_) => read += 1,
            // Inputs that once panicked, exhausted memory or looped inside the parquet
            // crate are corrupt data files.
            Err(e) => {
                assert!(!crash || matches!(e, concord::ScanError::Corrupt(_)), "{}: {e}", file.display());
                refused += 1
            }
        }
    }
    assert!(read >= 1, "the seed files read ({read} read, {refused} refused)");
}

/// `batches` with their string views as strings.
fn as_plain_strings(batches: &[concord::arrow::array::RecordBatch]) -> Vec<concord::arrow::array::RecordBatch> {
    use concord::arrow::datatypes::{DataType, Field, Schema};
    batches
        .iter()
        .map(|b| {
            let fields: Vec<Field> = b
                .schema()
                .fields()
                .iter()
                .map(|f| {
                    if f.data_type() == &DataType::Utf8View {
                        f.as_ref().clone().with_data_type(DataType::Utf8)
                    } else {
                        f.as_ref().clone()
                    }
                })
                .collect();
            let columns = b.columns().iter().zip(&fields).map(|(c, f)| concord::arrow::compute::cast(c, f.data_type()).unwrap()).collect();
            concord::arrow::array::RecordBatch::try_new(std::sync::Arc::new(Schema::new(fields)), columns).unwrap()
        })
        .collect()
}

/// A `varchar` column whose bytes are not UTF-8 refuses the file as corrupt, through
/// both decoders (SQL reads strings as views), never handing back an invalid string.
#[tokio::test]
async fn strings_that_are_not_utf8_are_corrupt_files() {
    use concord::arrow::array::{Float64Array, Int64Array, RecordBatch, StringArray};
    use concord::arrow::buffer::{Buffer, OffsetBuffer};
    use concord::manifest::{DataFile, Fragment};
    use concord::object_store::{ObjectStoreExt, PutPayload};
    use std::sync::Arc;
    let location = StoreResolver::new().resolve("memory://not-utf8").unwrap();
    let (store, path) = (location.store().clone(), location.root().clone().join("data").join("bad.parquet"));
    let table = Table::create(location, concord::Env::system(), concord::Schema::parse(SCHEMA).unwrap()).await.unwrap();
    // SAFETY (of the test's purpose): an invalid string array, as a foreign writer could store.
    let names =
        unsafe { StringArray::new_unchecked(OffsetBuffer::new(vec![0, 2, 4].into()), Buffer::from(vec![b'o', b'k', 0xff, 0xfe]), None) };
    let schema = table.schema().arrow_schema();
    let batch = RecordBatch::try_new(
        schema.clone(),
        vec![Arc::new(Int64Array::from(vec![1, 2])), Arc::new(names), Arc::new(Float64Array::from(vec![1.0, 2.0]))],
    )
    .unwrap();
    let mut bytes = Vec::new();
    let mut writer = parquet::arrow::ArrowWriter::try_new(&mut bytes, schema, None).unwrap();
    writer.write(&batch).unwrap();
    writer.close().unwrap();
    let described: DataFile =
        serde_json::from_value(serde_json::json!({"path": "data/bad.parquet", "fields": [0, 1, 2], "size_bytes": bytes.len()})).unwrap();
    store.put(&path, PutPayload::from(bytes)).await.unwrap();
    let fragment: Fragment = serde_json::from_value(serde_json::json!({"id": 0, "files": [described], "physical_rows": 2})).unwrap();
    for read in [table.read_fragment(&fragment).await, table.read_fragment_as_sql(&fragment).await] {
        assert!(matches!(read, Err(concord::ScanError::Corrupt(_))), "{read:?}");
    }
}

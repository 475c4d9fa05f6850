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
    for target in ["manifest", "segment", "transaction", "deletion_vector"] {
        for file in files_under(&corpus, target) {
            let data = std::fs::read(&file).unwrap();
            let first = data.first().copied().map(u64::from).unwrap_or(0);
            let rest = data.get(1..).unwrap_or_default();
            match target {
                "manifest" => drop(concord::decode::manifest("fuzz", first, rest)),
                "segment" => drop(concord::decode::segment("fuzz", first, rest)),
                "transaction" => drop(concord::decode::transaction("fuzz", &data)),
                _ => drop(concord::decode::deletion_vector("fuzz", &data)),
            }
            replayed += 1;
        }
    }
    assert!(replayed >= 20, "the corpus is kept in the repository ({replayed} inputs found)");
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
        match table.read_fragment(&fragment).await {
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

//! Seeded corruption of every kind of object a table holds (root manifests, segments,
//! deletion vectors, Parquet data files, staged transactions): truncation, flipped
//! bytes, garbage, and hand-edited JSON. Reading must never panic: every outcome is a
//! value or a typed error naming an object, and versions that do not use the
//! corrupted object stay readable.
//!
//! The fuzz corpus is replayed by the library's tests (`corpus.rs`).

use std::panic::AssertUnwindSafe;
use std::path::PathBuf;

use concord::{RandomSource, StdRandom, StoreResolver, Table};
use futures::{FutureExt, TryStreamExt};

use crate::common::*;

const ITERATIONS: u64 = 400;

/// A mutation of `bytes`, chosen by `r`.
fn mutate(bytes: &[u8], r: &StdRandom) -> Vec<u8> {
    let pick = |n: u64| (r.next_u64() % n.max(1)) as usize;
    let mut b = bytes.to_vec();
    match pick(7) {
        0 => b.truncate(pick(b.len() as u64)),
        1 => {
            for _ in 0..1 + pick(8) {
                if !b.is_empty() {
                    let i = pick(b.len() as u64);
                    b[i] ^= 1 << pick(8);
                }
            }
        }
        2 => b = (0..pick(200)).map(|_| r.next_u64() as u8).collect(),
        3 => b.clear(),
        4 => {
            let i = pick(b.len() as u64 + 1);
            b.splice(i..i, std::iter::repeat_n(b'9', 1 + pick(30)));
        }
        // Hand edits of JSON values: numbers, strings, nesting.
        5 => {
            let text = String::from_utf8_lossy(&b).into_owned();
            let edits = [
                ("\"version\":", "\"version\":-"),
                ("\"rows\":", "\"rows\":1e308,\"x\":"),
                ("[", "[[[[[[[["),
                ("\"", "\\u0000\""),
                ("true", "null"),
                ("{", "{\"a\":{"),
            ];
            let (from, to) = edits[pick(edits.len() as u64)];
            b = text.replacen(from, to, 1 + pick(3)).into_bytes();
        }
        _ => b.extend((0..pick(100)).map(|_| r.next_u64() as u8)),
    }
    b
}

async fn read_everything(uri: &str) -> Result<u64, String> {
    let table = Table::open(StoreResolver::new().resolve(uri).unwrap(), concord::Env::system()).await.map_err(|e| e.to_string())?;
    let mut rows = 0;
    for v in table.history().await.map_err(|e| e.to_string())? {
        let version = table.checkout(v.version).await.map_err(|e| e.to_string())?;
        rows += version.count(Some("id % 2 = 0")).await.map_err(|e| e.to_string())?;
        let batches: Vec<_> = version
            .scan(Default::default())
            .await
            .map_err(|e| e.to_string())?
            .into_stream()
            .try_collect()
            .await
            .map_err(|e| e.to_string())?;
        rows += batches.iter().map(|b| b.num_rows() as u64).sum::<u64>();
    }
    Ok(rows)
}

#[test]
fn corrupted_objects_give_typed_errors_never_panics() {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let t = TempTable::create();
    ok(&["append", &t.uri, &t.file("a.csv", &csv_rows(0, 20))]);
    ok(&["delete", &t.uri, "--where", "id % 3 = 0"]);
    ok(&["append", &t.uri, &t.file("b.csv", &csv_rows(20, 5))]);
    let staged = ok(&["delete", &t.uri, "--where", "id = 1", "--stage"]).trim().to_string();
    ok(&["update", &t.uri, "--set", "score = score * 2", "--where", "id < 5"]);
    let root = t.path();
    let targets: Vec<PathBuf> =
        ["_versions", "_segments", "_deletions", "data", "_transactions"].iter().flat_map(|d| files_under(&root, d)).collect();
    let r = StdRandom::seeded(0xC0FFEE);
    let (mut errors, mut fine) = (0, 0);
    for i in 0..ITERATIONS {
        let target = &targets[(r.next_u64() % targets.len() as u64) as usize];
        let original = std::fs::read(target).unwrap();
        std::fs::write(target, mutate(&original, &r)).unwrap();
        let outcome = runtime.block_on(
            AssertUnwindSafe(async {
                let read = read_everything(&t.uri).await;
                let table = Table::open(StoreResolver::new().resolve(&t.uri).unwrap(), concord::Env::system()).await;
                if let Ok(table) = table {
                    let _ = table.load_staged(&staged).await;
                }
                read
            })
            .catch_unwind(),
        );
        std::fs::write(target, &original).unwrap();
        match outcome {
            Err(panic) => {
                let message = panic.downcast_ref::<String>().cloned().or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()));
                panic!("iteration {i}: corrupting {} panicked: {message:?}", target.display());
            }
            Ok(Ok(_)) => fine += 1,
            Ok(Err(e)) => {
                assert!(!e.is_empty(), "iteration {i}: an empty error");
                errors += 1;
            }
        }
    }
    eprintln!("{ITERATIONS} corruptions of {} objects: {errors} typed errors, {fine} still readable, no panic", targets.len());
    // Untouched again: everything reads.
    let table =
        runtime.block_on(async { Table::open(StoreResolver::new().resolve(&t.uri).unwrap(), concord::Env::system()).await.unwrap() });
    assert_eq!(runtime.block_on(table.count(None)).unwrap(), 25 - 7);
}

//! Vacuum: old versions and unreferenced files go; nothing a retained version, a staged
//! transaction within the retention, or a concurrent writer needs is touched.

use std::collections::BTreeSet;
use std::time::Duration;

use concord::{CommitOptions, StoreResolver};

use crate::common::*;

#[test]
fn vacuum_keeps_the_latest_and_removes_the_rest() {
    let t = TempTable::create();
    for start in [0, 10, 20] {
        ok(&["append", &t.uri, &t.file(&format!("a{start}.csv"), &csv_rows(start, 10))]);
    }
    ok(&["delete", &t.uri, "--where", "id % 2 = 0"]);
    ok(&["overwrite", &t.uri, &t.file("o.csv", &csv_rows(100, 5))]);
    let staged = ok(&["append", &t.uri, &t.file("s.csv", &csv_rows(200, 3)), "--stage"]).trim().to_string();
    let (code, _, err) = run(&["vacuum", &t.uri, "--older-than", "10m"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--allow-short-retention"), "{err}");
    let before = tree(&t.path()).len();
    std::thread::sleep(Duration::from_millis(50));
    let out: serde_json::Value = serde_json::from_str(&ok(&["vacuum", &t.uri, "--older-than", "0s", "--allow-short-retention", "--json"])).unwrap();
    assert_eq!(out["versions_removed"], 5, "{out}");
    assert_eq!(out["oldest_retained"], 5, "{out}");
    assert!(out["objects_removed"].as_u64().unwrap() > 0, "{out}");
    eprintln!("vacuum: {out}; objects before {before}, after {}", tree(&t.path()).len());
    assert_eq!(t.count(), 5, "the latest version is intact");
    let history = t.history();
    assert_eq!(history.len(), 1);
    let (code, _, err) = run(&["count", &t.uri, "--version", "2"]);
    assert_ne!(code, 0, "a removed version is a clean error: {err}");
    assert!(err.contains("version 2"), "{err}");
    // A staged transaction is part of what the retention covers: its record and files
    // went with it, and committing it now says so.
    let (code, _, err) = run(&["commit", &t.uri, &staged]);
    assert_eq!(code, 2, "{err}");
    ok(&["append", &t.uri, &t.file("b.csv", &csv_rows(300, 2))]);
    assert_eq!(t.count(), 7, "the table stays writable");
}

#[test]
fn staged_transactions_within_the_retention_keep_their_files() {
    let t = TempTable::create();
    ok(&["append", &t.uri, &t.file("a.csv", &csv_rows(0, 5))]);
    let staged = ok(&["append", &t.uri, &t.file("s.csv", &csv_rows(10, 3)), "--stage"]).trim().to_string();
    ok(&["vacuum", &t.uri, "--older-than", "1h"]);
    ok(&["commit", &t.uri, &staged]);
    assert_eq!(t.count(), 8);
}

/// Writers append and delete while vacuum runs again and again with a retention longer
/// than any write takes: every acknowledged append's rows are there, every retained
/// version reads.
#[test]
fn vacuum_running_with_writers_loses_nothing() {
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(3).enable_all().build().unwrap();
    runtime.block_on(async {
        let resolver = StoreResolver::new();
        let t = TempTable::uncreated();
        let table = create_table(&resolver, &t.uri, SCHEMA).await;
        let deadline = std::time::Instant::now() + Duration::from_secs(6);
        let writers: Vec<_> = (0..3i64)
            .map(|w| {
                let table = table.clone();
                tokio::spawn(async move {
                    let mut acknowledged = BTreeSet::new();
                    let mut i = 0i64;
                    while std::time::Instant::now() < deadline {
                        let ids: Vec<i64> = (0..3).map(|k| 1000 + w * 100_000 + i * 10 + k).collect();
                        table.append(&[rows(table.schema(), ids.iter().copied())], &CommitOptions::default()).await.unwrap();
                        acknowledged.extend(ids);
                        if i % 5 == 4 {
                            // Removes nothing appended above (ids >= 1000 are never < 0).
                            table.delete("id < 0", &CommitOptions::default()).await.unwrap();
                        }
                        i += 1;
                    }
                    acknowledged
                })
            })
            .collect();
        let vacuum = {
            let table = table.clone();
            tokio::spawn(async move {
                let (mut runs, mut removed) = (0, 0);
                while std::time::Instant::now() < deadline {
                    let r = table.vacuum(Duration::from_secs(2), true).await.unwrap();
                    removed += r.versions_removed;
                    runs += 1;
                    tokio::time::sleep(Duration::from_millis(300)).await;
                }
                (runs, removed)
            })
        };
        let mut expected = BTreeSet::new();
        for w in writers {
            expected.extend(w.await.unwrap());
        }
        let (runs, removed) = vacuum.await.unwrap();
        let latest = table.latest().await.unwrap();
        let actual: BTreeSet<i64> = ids(&latest).await.into_iter().collect();
        assert_eq!(actual, expected, "every acknowledged append is in the latest version");
        let history = latest.history().await.unwrap();
        for v in &history {
            all_rows(&latest.checkout(v.version).await.unwrap()).await;
        }
        eprintln!("{runs} vacuums removed {removed} versions while 3 writers committed {} versions; {} retained, all readable", latest.version(), history.len());
        assert!(removed > 0, "vacuum removed versions");
    });
}

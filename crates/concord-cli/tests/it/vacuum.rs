//! Vacuum: old versions and unreferenced files go; nothing a retained version, a staged
//! transaction within the retention, or a concurrent writer needs is touched.

use std::collections::BTreeSet;
use std::time::Duration;

use concord::{CommitError, CommitOptions, RetryPolicy, StoreResolver, WriteError};

use crate::common::*;
use crate::servers::{self, ok_with, run_with};

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
    let out: serde_json::Value =
        serde_json::from_str(&ok(&["vacuum", &t.uri, "--older-than", "0s", "--allow-short-retention", "--json"])).unwrap();
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
/// than any write takes (`retention`: a write slower than it may lose its files, which
/// is why vacuum wants an hour unless told otherwise): every acknowledged append's rows
/// are there, every retained version reads. On every commit coordinator: put-if-absent
/// on local disk and on S3, and DynamoDB (where vacuum removes a version through the
/// coordinator).
async fn vacuum_with_writers(resolver: StoreResolver, uri: &str, label: &str, retention: Duration, run: Duration) {
    let table = create_table(&resolver, uri, SCHEMA).await;
    let deadline = std::time::Instant::now() + run;
    let writers: Vec<_> = (0..3i64)
        .map(|w| {
            let table = table.clone();
            tokio::spawn(async move {
                // The premise, by construction: a write that cannot commit within a
                // third of the retention gives up (its files are younger than the
                // retention until then). A writer that kept losing races was seen to
                // take 6 s on moto, and vacuum removed its data file before it landed.
                let retry = RetryPolicy { timeout: retention / 3, ..RetryPolicy::default() };
                let options = CommitOptions { retry, ..CommitOptions::default() };
                let gave_up = |e: &WriteError| matches!(e, WriteError::Commit(CommitError::TooMuchContention { .. }));
                let mut acknowledged = BTreeSet::new();
                let (mut i, mut slowest, mut gave_up_count) = (0i64, Duration::ZERO, 0);
                while std::time::Instant::now() < deadline {
                    let ids: Vec<i64> = (0..3).map(|k| 1000 + w * 100_000 + i * 10 + k).collect();
                    let started = std::time::Instant::now();
                    match table.append(&[rows(table.schema(), ids.iter().copied())], &options).await {
                        Ok(_) => acknowledged.extend(ids),
                        Err(e) if gave_up(&e) => gave_up_count += 1,
                        Err(e) => panic!("append: {e}"),
                    }
                    slowest = slowest.max(started.elapsed());
                    if i % 5 == 4 {
                        // A row this writer appended four appends ago.
                        let old = 1000 + w * 100_000 + (i - 4) * 10;
                        match table.delete(&format!("id = {old}"), &options).await {
                            Ok(_) => {
                                acknowledged.remove(&old);
                            }
                            Err(e) if gave_up(&e) => gave_up_count += 1,
                            Err(e) => panic!("delete: {e}"),
                        }
                    }
                    i += 1;
                }
                (acknowledged, slowest, gave_up_count)
            })
        })
        .collect();
    let vacuum = {
        let table = table.clone();
        // Runs until the deadline, and at least once when the first versions are older
        // than the retention (on a slow server a run can take seconds, and the last one
        // could otherwise start before anything is old enough to remove).
        let old_enough = std::time::Instant::now() + retention + Duration::from_secs(2);
        tokio::spawn(async move {
            let (mut runs, mut removed) = (0, 0);
            while std::time::Instant::now() < deadline.max(old_enough) {
                let r = table.vacuum(retention, true).await.unwrap();
                removed += r.versions_removed;
                runs += 1;
                tokio::time::sleep(Duration::from_millis(300)).await;
            }
            (runs, removed)
        })
    };
    let (mut expected, mut slowest, mut gave_up) = (BTreeSet::new(), Duration::ZERO, 0);
    for w in writers {
        let (acknowledged, slow, gave) = w.await.unwrap();
        expected.extend(acknowledged);
        slowest = slowest.max(slow);
        gave_up += gave;
    }
    let (runs, removed) = vacuum.await.unwrap();
    let latest = table.latest().await.unwrap();
    let actual: BTreeSet<i64> = ids(&latest).await.into_iter().collect();
    assert_eq!(actual, expected, "{label}: every acknowledged append is in the latest version");
    let history = latest.history().await.unwrap();
    // Every retained version opens with all its fragments; the rows of each are read on
    // local disk, of the oldest, middle and latest on servers (reading a hundred
    // versions' data files from moto takes minutes).
    let everything = label == "local";
    for (i, v) in history.iter().enumerate() {
        let version = latest.checkout(v.version).await.unwrap();
        version.fragments().await.unwrap();
        if everything || i == 0 || i == history.len() / 2 || i + 1 == history.len() {
            all_rows(&version).await;
        }
    }
    // A removed version is simply not there (never a half-done commit to finish).
    let oldest = history.first().unwrap().version;
    if oldest > 0 {
        match latest.checkout(oldest - 1).await {
            Err(concord::OpenError::VersionNotFound { oldest: o, .. }) => assert_eq!(o, oldest, "{label}"),
            other => panic!("{label}: reading removed version {}: {other:?}", oldest - 1),
        }
    }
    eprintln!(
        "{label}: {runs} vacuums removed {removed} versions while 3 writers committed {} versions (slowest append {:.1} s, retention {} s, {gave_up} writes gave up); {} retained, all readable",
        latest.version(),
        slowest.as_secs_f64(),
        retention.as_secs(),
        history.len()
    );
    assert!(removed > 0, "{label}: vacuum removed versions");
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread().worker_threads(3).enable_all().build().unwrap()
}

#[test]
fn vacuum_running_with_writers_loses_nothing() {
    let t = TempTable::uncreated();
    runtime().block_on(vacuum_with_writers(StoreResolver::new(), &t.uri, "local", Duration::from_secs(2), Duration::from_secs(6)));
}

#[test]
fn vacuum_running_with_writers_loses_nothing_on_s3_and_through_dynamodb() {
    for server in [servers::moto_s3(), servers::moto_s3_dynamodb()].into_iter().flatten() {
        runtime().block_on(async {
            server.prepare().await;
            // moto serves one request at a time (vacuum's listings among them): writes
            // are slower there, so the retention is longer.
            vacuum_with_writers(
                server.resolver(),
                &server.fresh_uri("vacuum"),
                server.name,
                Duration::from_secs(15),
                Duration::from_secs(20),
            )
            .await
        });
    }
}

/// Through DynamoDB, a version vacuum removed reads as missing (exit 2), as on local
/// disk; it was: "the commit row names a staging manifest that is gone" (exit 1).
#[test]
fn a_version_vacuum_removed_through_dynamodb_is_a_clean_error() {
    let Some(server) = servers::moto_s3_dynamodb() else { return };
    runtime().block_on(server.prepare());
    let env = server.env();
    let uri = server.fresh_uri("vacuumed");
    ok_with(&env, &["create", &uri, "--schema", SCHEMA]);
    let dir = tempfile::tempdir().unwrap();
    for start in [0, 10, 20] {
        let file = dir.path().join(format!("a{start}.csv"));
        std::fs::write(&file, csv_rows(start, 10)).unwrap();
        ok_with(&env, &["append", &uri, file.to_str().unwrap()]);
    }
    std::thread::sleep(Duration::from_millis(50));
    ok_with(&env, &["vacuum", &uri, "--older-than", "0s", "--allow-short-retention"]);
    let (code, _, err) = run_with(&env, &["count", &uri, "--version", "1"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("version 1 does not exist; versions run from 3 to 3"), "{err}");
    assert_eq!(ok_with(&env, &["count", &uri]).trim(), "30");
}

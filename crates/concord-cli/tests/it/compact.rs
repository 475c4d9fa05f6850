//! Compaction: fewer fragments, same rows; it yields to concurrent writers and never
//! loses their deletions or updates.

use std::collections::BTreeMap;

use concord::arrow::array::AsArray;
use concord::arrow::datatypes::{Float64Type, Int64Type};
use concord::manifest::Operation;
use concord::{Assignment, CommitOptions, StoreResolver, Table};

use crate::common::*;

/// id -> score of one version; panics on a duplicated id (a resurrected row).
async fn scores(table: &Table) -> BTreeMap<i64, f64> {
    let mut out = BTreeMap::new();
    for b in all_rows(table).await {
        let ids = b.column_by_name("id").unwrap().as_primitive::<Int64Type>();
        let scores = b.column_by_name("score").unwrap().as_primitive::<Float64Type>();
        for i in 0..b.num_rows() {
            assert!(out.insert(ids.value(i), scores.value(i)).is_none(), "row {} appears twice", ids.value(i));
        }
    }
    out
}

/// Replays every version from its predecessor: appends add their rows (score = id),
/// deletes remove matching rows, updates add 1 to matching scores, compactions and
/// everything else change nothing a reader can see.
async fn assert_replay(table: &Table, appended: &BTreeMap<uuid::Uuid, Vec<i64>>) -> BTreeMap<&'static str, usize> {
    let latest = table.latest().await.unwrap();
    let mut previous: BTreeMap<i64, f64> = BTreeMap::new();
    let mut counts = BTreeMap::new();
    for info in latest.history().await.unwrap() {
        let version = latest.checkout(info.version).await.unwrap();
        let mut expected = previous.clone();
        // A shared version (group commit) is its transactions applied in order.
        for record in &version.manifest().transactions {
            match &record.operation {
                Operation::Append { .. } => expected.extend(appended[&record.id].iter().map(|id| (*id, *id as f64))),
                Operation::Delete { predicate, .. } => {
                    let matches = oracle_predicate(predicate);
                    expected.retain(|id, _| !matches(*id));
                }
                Operation::Update { predicate, .. } => {
                    let matches = oracle_predicate(predicate.as_deref().unwrap());
                    expected.iter_mut().filter(|(id, _)| matches(**id)).for_each(|(_, s)| *s += 1.0);
                }
                // Counted per transaction: a compaction may share a version (group commit).
                Operation::Compact { .. } => *counts.entry("compact").or_default() += 1,
                Operation::Create => {}
                other => panic!("unexpected operation {}", other.name()),
            }
        }
        let actual = scores(&version).await;
        assert_eq!(actual, expected, "version {} is not version {} + its {}", info.version, info.version - 1, info.operation);
        previous = actual;
        *counts.entry(if info.rerun { "rerun" } else { "plain" }).or_default() += 1;
    }
    counts
}

/// Named regression: compaction racing deletes, updates and appends loses no deletion
/// and no update; every data write commits; the compactor gives way where it must.
#[test]
fn compaction_racing_deletes_and_updates_loses_no_deletion() {
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(4).enable_all().build().unwrap();
    runtime.block_on(async {
        let resolver = StoreResolver::new();
        let table = create_table(&resolver, "memory://compact-race", SCHEMA).await;
        let opts = CommitOptions::default();
        let mut appended = BTreeMap::new();
        for start in (0..200).step_by(5) {
            let info = table.append(&[rows(table.schema(), start..start + 5)], &opts).await.unwrap();
            appended.insert(info.transaction_id, (start..start + 5).collect::<Vec<_>>());
        }
        let compactor = {
            let table = table.clone();
            tokio::spawn(async move {
                let (mut committed, mut gave_way) = (0, 0);
                for round in 0..12u64 {
                    let info = table.compact(10 + round * 5, &CommitOptions::default()).await.expect("compaction never fails");
                    if info.abandoned.is_some() {
                        gave_way += 1
                    } else {
                        committed += 1
                    }
                    tokio::task::yield_now().await;
                }
                (committed, gave_way)
            })
        };
        let deleter = {
            let table = table.clone();
            tokio::spawn(async move {
                for sql in ["id % 7 = 0", "id % 3 = 1", "id < 20", "id >= 80", "id = 4"] {
                    table.delete(sql, &CommitOptions::default()).await.expect("deletes never fail");
                }
            })
        };
        let updater = {
            let table = table.clone();
            tokio::spawn(async move {
                let set = [Assignment { column: "score".into(), expr: "score + 1".into() }];
                for sql in ["id % 2 = 0", "id >= 5", "id % 2 = 0", "id < 20"] {
                    table.update(&set, Some(sql), &CommitOptions::default()).await.expect("updates never fail");
                }
            })
        };
        let appender = {
            let table = table.clone();
            tokio::spawn(async move {
                let mut written = BTreeMap::new();
                for start in (1000..1040).step_by(4) {
                    let info = table.append(&[rows(table.schema(), start..start + 4)], &CommitOptions::default()).await.unwrap();
                    written.insert(info.transaction_id, (start..start + 4).collect::<Vec<_>>());
                }
                written
            })
        };
        deleter.await.unwrap();
        updater.await.unwrap();
        appended.extend(appender.await.unwrap());
        let (committed, gave_way) = compactor.await.unwrap();
        // Liveness: racing, every compaction may give way (1 run in 30 did); alone, one
        // that has small fragments to rewrite commits.
        let last = table.compact(1_000, &CommitOptions::default()).await.expect("compaction never fails");
        let committed = committed + usize::from(last.abandoned.is_none());
        let counts = assert_replay(&table, &appended).await;
        eprintln!("compactions committed {committed}, gave way {gave_way}; versions {counts:?}");
        assert!(committed >= 1, "at least one compaction committed");
        assert_eq!(counts.get("compact").copied().unwrap_or(0), committed);
    });
}

#[test]
fn cli_compact_rewrites_small_fragments_and_keeps_rows() {
    let t = TempTable::create();
    for start in (0..40).step_by(4) {
        let f = t.file(&format!("a{start}.csv"), &csv_rows(start, 4));
        ok(&["append", &t.uri, &f]);
    }
    ok(&["delete", &t.uri, "--where", "id % 5 = 0"]);
    let before = ok(&["scan", &t.uri, "--format", "json"]);
    let out = ok(&["compact", &t.uri, "--target-rows", "16", "--json"]);
    let info: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!((info["operation"].as_str(), info["abandoned"].is_null()), (Some("compact"), true), "{out}");
    assert_eq!(ok(&["scan", &t.uri, "--format", "json"]), before, "same rows, same order");
    assert_eq!(t.count(), 32);
    let fragments = |version: &str| -> usize {
        let manifest =
            std::fs::read_to_string(t.path().join("_versions").join(concord::manifest::version_file_name(version.parse().unwrap())))
                .unwrap();
        let manifest: serde_json::Value = serde_json::from_str(&manifest).unwrap();
        manifest["segments"].as_array().unwrap().iter().map(|s| s["fragments"].as_u64().unwrap() as usize).sum()
    };
    let compacted = t.latest_version().to_string();
    assert_eq!(
        (fragments(&(t.latest_version() - 1).to_string()), fragments(&compacted)),
        (10, 2),
        "10 fragments of <=4 rows into 2 of <=16"
    );
    let again = ok(&["compact", &t.uri, "--target-rows", "16"]);
    assert!(again.contains("nothing committed"), "{again}");
    assert_eq!(t.latest_version().to_string(), compacted, "nothing to do: no new version");
    let (code, _, stderr) = run(&["compact", &t.uri, "--target-rows", "0"]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("--target-rows"), "{stderr}");
}

//! Shared versions: group commit (tasks sharing one table handle) and job commit
//! (staged transactions committed together, all or none).

use std::sync::Arc;
use std::time::Duration;

use concord::object_store::memory::InMemory;
use concord::object_store::path::Path;
use concord::store::{LatestLookup, ObjectStoreCoordinator, StoreKind};
use concord::{Clock, CommitError, CommitOptions, Env, Schema, StdRandom, Table, TableLocation, Write, WriteError};

use crate::common::*;
use crate::fairness::{SlowStore, VirtualClock};

/// A table on a store whose requests take 1-3 ms of virtual time (tokio's paused
/// clock), so that tasks really overlap, deterministically.
async fn slow_table(seed: u64) -> (Table, TableLocation, Env) {
    let store = Arc::new(SlowStore { inner: InMemory::new(), latency: 1_000..3_000, random: StdRandom::seeded(seed) });
    let coordinator = Arc::new(ObjectStoreCoordinator::new(store.clone(), Path::from("t"), LatestLookup::OrderedListing));
    let location = TableLocation::builder("memory://shared/t", store, Path::from("t"), StoreKind::Memory).coordinator(coordinator).build();
    let clock: Arc<dyn Clock> = Arc::new(VirtualClock { origin: tokio::time::Instant::now() });
    let env = Env { clock, random: Arc::new(StdRandom::seeded(seed + 1)) };
    let table = Table::create(location.clone(), env.clone(), Schema::parse(SCHEMA).unwrap()).await.unwrap();
    (table, location, env)
}

fn paused_runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread().enable_time().start_paused(true).build().unwrap()
}

/// 32 tasks appending through one handle at once: each gets its own outcome, they
/// share a few versions, and every transaction is in the history exactly once.
#[test]
fn tasks_sharing_a_handle_share_versions() {
    paused_runtime().block_on(async {
        let (table, _, _) = slow_table(1).await;
        let tasks: Vec<_> = (0..32i64)
            .map(|i| {
                let table = table.clone();
                tokio::spawn(
                    async move { table.append(rows(table.schema(), [i * 10, i * 10 + 1]), &CommitOptions::default()).await.unwrap() },
                )
            })
            .collect();
        let mut infos = Vec::new();
        for t in tasks {
            infos.push(t.await.unwrap());
        }
        let latest = table.latest().await.unwrap();
        let history = latest.history().await.unwrap();
        let versions = latest.version();
        assert!(versions < 32 / 4, "32 transactions in {versions} versions");
        let mut ids: Vec<uuid::Uuid> = history.iter().flat_map(|v| v.transactions.iter().map(|t| t.transaction_id)).collect();
        ids.sort();
        let mut expected: Vec<uuid::Uuid> = infos.iter().map(|i| i.transaction_id).chain([history[0].transaction_id]).collect();
        expected.sort();
        assert_eq!(ids, expected, "every acknowledged transaction once, nothing else");
        for info in &infos {
            let v = &history[info.version as usize];
            assert!(v.transactions.iter().any(|t| t.transaction_id == info.transaction_id), "each at the version it reported");
            assert_eq!(info.rows_written, 2, "its own outcome");
        }
        assert_eq!(crate::common::ids(&latest).await.len(), 64);
    });
}

/// In one group, a transaction made impossible by a winner fails alone with its own
/// typed error; the others commit.
#[test]
fn an_incompatible_member_of_a_group_fails_alone() {
    paused_runtime().block_on(async {
        let (table, location, env) = slow_table(2).await;
        // Prepared while `name` exists: these appends write it.
        let mut early = Vec::new();
        for i in 0..4i64 {
            early.push(table.prepare(Write::Append { input: rows(table.schema(), [i]).into() }).await.unwrap());
        }
        // Another process drops `name`.
        let other = Table::open(location, env).await.unwrap();
        other.drop_column("name", &CommitOptions::default()).await.unwrap();
        tokio::time::sleep(Duration::from_secs(2)).await; // the handle's knowledge goes stale
        let late_schema = table.latest().await.unwrap().schema().clone();
        let late: Vec<_> = (0..4i64)
            .map(|i| {
                use concord::arrow::array::{Float64Array, Int64Array, RecordBatch};
                RecordBatch::try_new(
                    late_schema.arrow_schema(),
                    vec![Arc::new(Int64Array::from(vec![100 + i])), Arc::new(Float64Array::from(vec![1.0]))],
                )
                .unwrap()
            })
            .collect();
        let mut tasks = Vec::new();
        for txn in early {
            let table = table.clone();
            tasks.push(tokio::spawn(async move { (true, table.commit(&txn, &CommitOptions::default()).await) }));
        }
        for batch in late {
            let table = table.clone();
            tasks.push(tokio::spawn(async move { (false, table.append(batch, &CommitOptions::default()).await) }));
        }
        for t in tasks {
            match t.await.unwrap() {
                (true, Err(WriteError::Commit(CommitError::Incompatible { winner_version, winner_operation, .. }))) => {
                    assert_eq!((winner_version, winner_operation.as_str()), (1, "drop_column"));
                }
                (true, other) => panic!("an append of a dropped column: {other:?}"),
                (false, result) => assert_eq!(result.unwrap().rows_written, 1),
            }
        }
        let latest = table.latest().await.unwrap();
        assert_eq!(ids(&latest).await, vec![100, 101, 102, 103]);
        let history = latest.history().await.unwrap();
        assert!(
            history.iter().any(|v| v.transactions.len() > 1),
            "the others shared a version: {:?}",
            history.iter().map(|v| v.transactions.len()).collect::<Vec<_>>()
        );
    });
}

/// A transaction with an expected version commits in a version of its own.
#[test]
fn compare_and_swap_commits_alone() {
    paused_runtime().block_on(async {
        let (table, _, _) = slow_table(3).await;
        let mut tasks = Vec::new();
        for i in 0..8i64 {
            let table = table.clone();
            tasks.push(tokio::spawn(async move { table.append(rows(table.schema(), [i]), &CommitOptions::default()).await.unwrap() }));
        }
        let cas = {
            let table = table.clone();
            tokio::spawn(async move {
                let options = CommitOptions { expect_version: Some(0), ..CommitOptions::default() };
                table.append(rows(table.schema(), [99]), &options).await
            })
        };
        for t in tasks {
            t.await.unwrap();
        }
        let history = table.latest().await.unwrap().history().await.unwrap();
        match cas.await.unwrap() {
            Ok(info) => assert_eq!((info.version, history[1].transactions.len()), (1, 1), "alone in version 1"),
            Err(WriteError::Commit(CommitError::VersionMoved { expected: 0, .. })) => {}
            Err(e) => panic!("{e}"),
        }
    });
}

/// Idempotency keys inside a group: two tasks retrying with the same key at the same
/// moment never share a version; one writes, the other reports the first's commit.
#[test]
fn a_key_given_twice_in_one_group_commits_once() {
    paused_runtime().block_on(async {
        let (table, _, _) = slow_table(4).await;
        let tasks: Vec<_> = (0..16i64)
            .map(|i| {
                let table = table.clone();
                let key = format!("load-{}", i / 2);
                tokio::spawn(async move {
                    let options = CommitOptions { idempotency_key: Some(key.clone()), ..CommitOptions::default() };
                    (key, table.append(rows(table.schema(), [i / 2]), &options).await.unwrap())
                })
            })
            .collect();
        let mut by_key = std::collections::BTreeMap::<String, Vec<concord::CommitInfo>>::new();
        for t in tasks {
            let (key, info) = t.await.unwrap();
            by_key.entry(key).or_default().push(info);
        }
        for (key, infos) in &by_key {
            let written: Vec<_> = infos.iter().filter(|i| !i.idempotent_replay).collect();
            assert_eq!(written.len(), 1, "{key}: one of the two writes: {infos:?}");
            assert!(
                infos.iter().all(|i| i.version == written[0].version && i.transaction_id == written[0].transaction_id),
                "{key}: both report the one commit: {infos:?}"
            );
        }
        let latest = table.latest().await.unwrap();
        assert_eq!(ids(&latest).await, (0..8).collect::<Vec<_>>(), "each key's rows once");
        let history = latest.history().await.unwrap();
        assert!(history.iter().any(|v| v.transactions.len() > 1), "keyed transactions still share versions");
    });
}

/// Re-runs inside a group: a delete racing appends that share versions removes exactly
/// the rows committed before it (earlier versions, or earlier in its own version), as if
/// the transactions had run one after the other in the history's order.
#[test]
fn a_delete_racing_a_group_of_appends_re_runs_on_exactly_the_earlier_ones() {
    paused_runtime().block_on(async {
        let (table, _, _) = slow_table(5).await;
        let spawn_append = |i: i64| {
            let table = table.clone();
            tokio::spawn(async move { table.append(rows(table.schema(), [i]), &CommitOptions::default()).await.unwrap() })
        };
        let mut appends: Vec<_> = (0..12).map(spawn_append).collect();
        tokio::time::sleep(Duration::from_millis(2)).await; // appends in flight
        let delete = {
            let table = table.clone();
            tokio::spawn(async move { table.delete("id >= 0", &CommitOptions::default()).await.unwrap() })
        };
        appends.extend((12..24).map(spawn_append));
        let mut appended = Vec::new();
        for (i, t) in appends.into_iter().enumerate() {
            appended.push((i as i64, t.await.unwrap()));
        }
        let deleted = delete.await.unwrap();
        let latest = table.latest().await.unwrap();
        let history = latest.history().await.unwrap();
        let position = |info: &concord::CommitInfo| {
            let v = &history[info.version as usize];
            (info.version, v.transactions.iter().position(|t| t.transaction_id == info.transaction_id).expect("in its version"))
        };
        let after_delete: Vec<i64> = appended.iter().filter(|(_, info)| position(info) > position(&deleted)).map(|(i, _)| *i).collect();
        assert_eq!(ids(&latest).await, after_delete, "the rows committed after the delete, no other");
        assert_eq!(deleted.rows_deleted, 24 - after_delete.len() as u64);
        assert!(deleted.rerun, "the delete re-ran on appends that beat it: {deleted:?}");
        assert!(history.iter().any(|v| v.transactions.len() > 1), "appends shared versions");
    });
}

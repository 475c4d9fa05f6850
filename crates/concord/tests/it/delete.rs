//! Deletes: deletion vectors, and their conflict resolution against every winner that
//! exists so far (row "delete" and column "delete" of the contract's matrix), forced
//! with staged transactions and raced for real. A replay oracle checks every version.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use concord::{CommitOptions, IsolationLevel, StoreResolver, Table, Write};

use crate::common::*;

fn with_isolation(isolation: IsolationLevel) -> CommitOptions {
    CommitOptions { isolation: Some(isolation), ..CommitOptions::default() }
}

/// What each transaction wrote, by transaction id (the oracle's input).
pub(crate) type Written = HashMap<uuid::Uuid, Vec<i64>>;

/// The replay oracle: every version's ids equal its transaction applied to the
/// previous version's ids, by an obviously correct reference over plain sets
/// (serializable: a delete removes every matching row of the previous version).
pub(crate) async fn assert_replay_serializable(table: &Table, written: &Written) {
    let latest = table.latest().await.unwrap();
    let mut states: Vec<Vec<i64>> = Vec::new();
    for info in latest.history().await.unwrap() {
        let version = latest.checkout(info.version).await.unwrap();
        // A shared version is its transactions applied in order.
        let mut expected = states.last().cloned().unwrap_or_default();
        for t in &version.manifest().transactions {
            expected = crate::replay::replay(expected, t, written, &states);
        }
        let expected: BTreeSet<i64> = expected.into_iter().collect();
        let actual: BTreeSet<i64> = ids(&version).await.into_iter().collect();
        assert_eq!(actual, expected, "version {} = version {} + its {}", info.version, info.version.saturating_sub(1), info.operation);
        states.push(actual.into_iter().collect());
    }
}

/// A table holding `ids` (version 1), and the oracle's record of that append.
async fn table_with(ids: std::ops::Range<i64>) -> (Table, StoreResolver, Written) {
    let resolver = StoreResolver::new();
    let table = create_table(&resolver, "memory://delete", SCHEMA).await;
    let info = table.append(&[rows(table.schema(), ids.clone())], &CommitOptions::default()).await.unwrap();
    (table.latest().await.unwrap(), resolver, HashMap::from([(info.transaction_id, ids.collect())]))
}

#[tokio::test]
async fn delete_removes_matching_rows_and_keeps_history() {
    let (table, _r, written) = table_with(0..10).await;
    let info = table.delete("id % 2 = 0", &CommitOptions::default()).await.unwrap();
    assert_eq!((info.version, info.rows_deleted, info.operation.name()), (2, 5, "delete"));
    let latest = table.latest().await.unwrap();
    assert_eq!(ids(&latest).await, vec![1, 3, 5, 7, 9]);
    assert_eq!(latest.count(None).await.unwrap(), 5);
    assert_eq!(latest.count(Some("id > 4")).await.unwrap(), 3, "filters and deletion vectors compose");
    assert_eq!(ids(&latest.checkout(1).await.unwrap()).await, (0..10).collect::<Vec<_>>(), "time travel sees deleted rows");
    let none = table.delete("id > 100", &CommitOptions::default()).await.unwrap();
    assert_eq!((none.version, none.rows_deleted, none.abandoned.is_some()), (2, 0, true), "a delete matching nothing commits nothing");
    table.delete("id >= 5", &CommitOptions::default()).await.unwrap();
    table.delete("id < 5", &CommitOptions::default()).await.unwrap();
    let emptied = table.latest().await.unwrap();
    assert_eq!(emptied.manifest().fragment_count(), 0, "a fully deleted fragment leaves the version");
    assert_replay_serializable(&emptied, &written).await;
}

/// One forced interleaving: T is prepared at the current version, W commits, then T.
struct Case {
    name: &'static str,
    isolation: IsolationLevel,
    /// T's predicate (T is a delete).
    ours: &'static str,
    winner: Winner,
    expect_rerun: bool,
    expect_ids: Vec<i64>,
}

enum Winner {
    Append(Vec<i64>),
    Delete(&'static str),
    Overwrite(Vec<i64>),
    Restore(u64),
}

async fn commit_winner(table: &Table, winner: &Winner, written: &mut Written) {
    let options = CommitOptions::default();
    let info = match winner {
        Winner::Append(ids) => table.append(&[rows(table.schema(), ids.clone())], &options).await,
        Winner::Delete(sql) => table.delete(sql, &options).await,
        Winner::Overwrite(ids) => table.overwrite(&[rows(table.schema(), ids.clone())], None, &options).await,
        Winner::Restore(v) => table.restore(*v, &options).await,
    }
    .unwrap();
    if let Winner::Append(ids) | Winner::Overwrite(ids) = winner {
        written.insert(info.transaction_id, ids.clone());
    }
}

/// Row "delete" of the contract's matrix, for the winners that exist so far.
#[tokio::test]
async fn delete_over_each_winner_rebases_or_reruns() {
    use IsolationLevel::{Serializable as S, Snapshot as N};
    let cases = vec![
        Case {
            name: "append, serializable: re-run on the appended rows",
            isolation: S,
            ours: "id % 2 = 0",
            winner: Winner::Append(vec![10, 11, 12]),
            expect_rerun: true,
            expect_ids: vec![1, 3, 5, 7, 9, 11],
        },
        Case {
            name: "append, snapshot: appended rows are kept",
            isolation: N,
            ours: "id % 2 = 0",
            winner: Winner::Append(vec![10, 11, 12]),
            expect_rerun: false,
            expect_ids: vec![1, 3, 5, 7, 9, 10, 11, 12],
        },
        Case {
            name: "disjoint delete on the same fragment: both apply",
            isolation: S,
            ours: "id = 3",
            winner: Winner::Delete("id = 4"),
            expect_rerun: false,
            expect_ids: vec![0, 1, 2, 5, 6, 7, 8, 9],
        },
        Case {
            name: "overlapping deletes: union",
            isolation: S,
            ours: "id < 5",
            winner: Winner::Delete("id % 2 = 0"),
            expect_rerun: false,
            expect_ids: vec![5, 7, 9],
        },
        Case {
            name: "overwrite, serializable: re-run on the new table",
            isolation: S,
            ours: "id % 2 = 0",
            winner: Winner::Overwrite(vec![20, 21, 22]),
            expect_rerun: true,
            expect_ids: vec![21],
        },
        Case {
            name: "overwrite, snapshot: the rows it saw are gone",
            isolation: N,
            ours: "id % 2 = 0",
            winner: Winner::Overwrite(vec![20, 21, 22]),
            expect_rerun: false,
            expect_ids: vec![20, 21, 22],
        },
        Case {
            name: "restore, serializable: re-run on the restored (empty) table finds nothing to delete",
            isolation: S,
            ours: "id >= 5",
            winner: Winner::Restore(0),
            expect_rerun: true,
            expect_ids: vec![],
        },
    ];
    for case in cases {
        let (table, _r, mut written) = table_with(0..10).await;
        let staged = table.prepare(Write::Delete { filter: case.ours.into() }).await.unwrap();
        commit_winner(&table, &case.winner, &mut written).await;
        let info = table.commit(&staged, &with_isolation(case.isolation)).await.unwrap_or_else(|e| panic!("{}: {e}", case.name));
        assert_eq!(info.rerun, case.expect_rerun, "{}", case.name);
        if case.expect_ids.is_empty() && case.expect_rerun {
            // The re-run found nothing left to delete: no version is made.
            assert!(info.abandoned.is_some(), "{}: {info:?}", case.name);
            assert_eq!(info.version, 2, "{}", case.name);
        } else {
            assert_eq!(info.rebased_over, vec![2], "{}: rebased over the winner", case.name);
        }
        let latest = table.latest().await.unwrap();
        assert_eq!(ids(&latest).await, case.expect_ids, "{}", case.name);
        if case.isolation == S {
            assert_replay_serializable(&latest, &written).await;
        }
    }
}

/// Column "delete" of the matrix: append, overwrite and restore rebase over a delete.
#[tokio::test]
async fn writes_over_a_winning_delete_rebase() {
    let (table, _r, _) = table_with(0..10).await;
    let append = table.prepare(Write::Append { input: (&[rows(table.schema(), [4, 40])]).into() }).await.unwrap();
    table.delete("id = 4", &CommitOptions::default()).await.unwrap();
    let info = table.commit(&append, &CommitOptions::default()).await.unwrap();
    assert_eq!((info.rebased_over.clone(), info.rerun), (vec![2], false));
    assert_eq!(
        ids(&table.latest().await.unwrap()).await,
        vec![0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 40],
        "the appended 4 survives: it came after the delete"
    );

    let overwrite = table.prepare(Write::Overwrite { input: (&[rows(table.schema(), [100])]).into(), filter: None }).await.unwrap();
    table.delete("id = 3", &CommitOptions::default()).await.unwrap();
    table.commit(&overwrite, &CommitOptions::default()).await.unwrap();
    assert_eq!(ids(&table.latest().await.unwrap()).await, vec![100]);

    let restore = table.prepare(Write::Restore { version: 1 }).await.unwrap();
    table.delete("id > 100", &CommitOptions::default()).await.unwrap();
    table.commit(&restore, &CommitOptions::default()).await.unwrap();
    assert_eq!(ids(&table.latest().await.unwrap()).await, (0..10).collect::<Vec<_>>());
}

/// Regression for a peer's failure: deletes racing appends all commit, and under
/// serializable every matching row appended before a delete's version is gone.
/// (The 30-second, multi-process version of this run is `concord`-driven; see the
/// issue's closing note.)
#[test]
fn deletes_racing_appends_all_succeed_and_delete_appended_matches() {
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(4).enable_all().build().unwrap();
    runtime.block_on(async {
        for isolation in [IsolationLevel::Serializable, IsolationLevel::Snapshot] {
            let resolver = Arc::new(StoreResolver::new());
            let table = create_table(&resolver, "memory://race-delete", SCHEMA).await;
            let appending = Arc::new(std::sync::atomic::AtomicUsize::new(4));
            let appenders: Vec<_> = (0..4i64)
                .map(|w| {
                    let (table, appending) = (table.clone(), appending.clone());
                    tokio::spawn(async move {
                        let mut written = Written::new();
                        for n in 0..12i64 {
                            let ids: Vec<i64> = (0..5).map(|i| w * 1_000_000 + n * 5 + i).collect();
                            let info = table.append(&[rows(table.schema(), ids.clone())], &CommitOptions::default()).await;
                            written.insert(info.expect("appends never fail").transaction_id, ids);
                            // Paced, so deletes interleave with appends rather than follow them.
                            tokio::time::sleep(std::time::Duration::from_millis(15)).await;
                        }
                        appending.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
                        written
                    })
                })
                .collect();
            let deleter = {
                let (table, appending) = (table.clone(), appending.clone());
                tokio::spawn(async move {
                    let (mut committed, mut last) = (0, 0);
                    while appending.load(std::sync::atomic::Ordering::SeqCst) > 0 {
                        let info = table.delete("id % 2 = 0", &with_isolation(isolation)).await.expect("deletes never fail");
                        committed += 1;
                        last = info.version;
                        // The memory store never makes a task wait, so yield: appenders woken
                        // on this worker would otherwise never run.
                        tokio::time::sleep(std::time::Duration::from_millis(2)).await;
                    }
                    (committed, last)
                })
            };
            let mut written = Written::new();
            for a in appenders {
                written.extend(a.await.unwrap());
            }
            let (deletes, last_delete) = deleter.await.unwrap();
            assert!(deletes >= 3, "deletes interleaved with appends: {deletes}");
            let latest = table.latest().await.unwrap();
            let history = latest.history().await.unwrap();
            let even_at_last_delete = latest.checkout(last_delete).await.unwrap().count(Some("id % 2 = 0")).await.unwrap();
            if isolation == IsolationLevel::Serializable {
                assert_eq!(even_at_last_delete, 0, "the last delete removed every even row committed before it");
                assert_replay_serializable(&latest, &written).await;
            }
            let reruns = history.iter().filter(|v| v.rerun).count();
            eprintln!("{isolation:?}: {deletes} deletes committed, {reruns} re-ran; {} versions; even rows left at last delete: {even_at_last_delete}", history.len());
        }
    });
}

/// `overwrite --where`: the matching rows are replaced; against a winning append it
/// re-runs like a delete (serializable) so appended matching rows are replaced too.
#[tokio::test]
async fn overwrite_where_replaces_matching_rows_and_reruns_over_appends() {
    let (table, _r, mut written) = table_with(0..10).await;
    let info = table.overwrite(&[rows(table.schema(), [0, 3])], Some("id < 5"), &CommitOptions::default()).await.unwrap();
    written.insert(info.transaction_id, vec![0, 3]);
    assert_eq!((info.operation.name(), info.rows_written, info.rows_deleted), ("overwrite", 2, 5));
    assert_eq!(ids(&table.latest().await.unwrap()).await, vec![0, 3, 5, 6, 7, 8, 9]);

    for isolation in [IsolationLevel::Serializable, IsolationLevel::Snapshot] {
        let (table, _r, mut written) = table_with(0..10).await;
        let staged = table
            .prepare(Write::Overwrite { input: (&[rows(table.schema(), [200])]).into(), filter: Some("id % 2 = 0".into()) })
            .await
            .unwrap();
        let appended = table.append(&[rows(table.schema(), [20, 21])], &CommitOptions::default()).await.unwrap();
        written.insert(appended.transaction_id, vec![20, 21]);
        let info = table.commit(&staged, &with_isolation(isolation)).await.unwrap();
        written.insert(info.transaction_id, vec![200]);
        let got = ids(&table.latest().await.unwrap()).await;
        match isolation {
            IsolationLevel::Serializable => {
                assert!(info.rerun);
                assert_eq!(got, vec![1, 3, 5, 7, 9, 21, 200], "the appended even row 20 is replaced too");
                assert_replay_serializable(&table, &written).await;
            }
            IsolationLevel::Snapshot => {
                assert!(!info.rerun);
                assert_eq!(got, vec![1, 3, 5, 7, 9, 20, 21, 200], "snapshot keeps the concurrently appended 20");
            }
            other => panic!("no case for {other}"),
        }
    }
}

/// A re-run reads only what the winner changed: a delete prepared over 100 fragments,
/// re-run after a one-fragment append, reads that fragment's data, not the table's.
#[tokio::test]
async fn a_rerun_reads_only_the_winners_fragments() {
    use concord::object_store::memory::InMemory;
    use concord::object_store::path::Path;
    use concord::store::StoreKind;
    use concord::{Env, Schema, TableLocation};
    let counting = Arc::new(crate::counting::CountingStore::new(Arc::new(InMemory::new())));
    let location = TableLocation::on_store("memory://reread", counting.clone(), Path::from("t"), StoreKind::Memory);
    let table = Table::create(location, Env::system(), Schema::parse(SCHEMA).unwrap()).await.unwrap();
    for start in (0..1000).step_by(10) {
        table.append(&[rows(table.schema(), start..start + 10)], &CommitOptions::default()).await.unwrap();
    }
    let (staged, prepare) = counting.measure(table.prepare(Write::Delete { filter: "id % 2 = 0".into() })).await;
    let staged = staged.unwrap();
    table.append(&[rows(table.schema(), 1000..1010)], &CommitOptions::default()).await.unwrap();
    let (info, commit) = counting.measure(table.commit(&staged, &CommitOptions::default())).await;
    let info = info.unwrap();
    assert!(info.rerun);
    assert_eq!(table.latest().await.unwrap().count(Some("id % 2 = 0")).await.unwrap(), 0);
    eprintln!(
        "delete over 100 fragments: prepare read {} bytes in {} GETs; re-run after a 1-fragment append, commit read {} bytes in {} GETs",
        prepare.bytes_read, prepare.gets, commit.bytes_read, commit.gets
    );
    assert!(commit.bytes_read * 10 < prepare.bytes_read, "the re-run read {commit:?}, the prepare {prepare:?}");
}

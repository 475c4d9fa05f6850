//! Updates: values, and conflict resolution against concurrent writers (row "update"
//! and column "update" of the contract's matrix, for the operations that exist).

use std::collections::BTreeMap;
use std::sync::Arc;

use concord::arrow::array::{AsArray, Int64Array, RecordBatch};
use concord::arrow::datatypes::Int64Type;
use concord::{Assignment, CommitOptions, IsolationLevel, StoreResolver, Table, Write};

use crate::common::*;

const ID_X: &str = "id bigint not null, x bigint not null";

fn rows(table: &Table, pairs: &[(i64, i64)]) -> RecordBatch {
    RecordBatch::try_new(
        table.schema().arrow_schema(),
        vec![
            Arc::new(Int64Array::from(pairs.iter().map(|p| p.0).collect::<Vec<_>>())),
            Arc::new(Int64Array::from(pairs.iter().map(|p| p.1).collect::<Vec<_>>())),
        ],
    )
    .unwrap()
}

fn set(column: &str, expr: &str) -> Vec<Assignment> {
    vec![Assignment { column: column.into(), expr: expr.into() }]
}

/// id -> x of the latest version; panics on a duplicated id (a resurrected row).
async fn values(table: &Table) -> BTreeMap<i64, i64> {
    let mut out = BTreeMap::new();
    for b in all_rows(&table.latest().await.unwrap()).await {
        let (ids, xs) = (b.column(0).as_primitive::<Int64Type>(), b.column(1).as_primitive::<Int64Type>());
        for i in 0..b.num_rows() {
            assert!(out.insert(ids.value(i), xs.value(i)).is_none(), "row {} appears twice", ids.value(i));
        }
    }
    out
}

async fn table_of(pairs: &[(i64, i64)]) -> (Table, StoreResolver) {
    let resolver = StoreResolver::new();
    let table = create_table(&resolver, "memory://update", ID_X).await;
    table.append(&[rows(&table, pairs)], &CommitOptions::default()).await.unwrap();
    (table, resolver)
}

fn isolation(level: IsolationLevel) -> CommitOptions {
    CommitOptions { isolation: Some(level), ..CommitOptions::default() }
}

#[tokio::test]
async fn update_sets_values_on_matching_rows() {
    let (table, _r) = table_of(&[(1, 10), (2, 20), (3, 30)]).await;
    let info = table.update(&set("x", "x * 2 + id"), Some("id >= 2"), &CommitOptions::default()).await.unwrap();
    assert_eq!((info.operation.name(), info.rows_written, info.rows_deleted), ("update", 2, 2));
    assert_eq!(values(&table).await, BTreeMap::from([(1, 10), (2, 42), (3, 63)]));
    let all = table.update(&set("x", "0"), None, &CommitOptions::default()).await.unwrap();
    assert_eq!(all.rows_written, 3, "no predicate: every row");
    assert_eq!(ids(&table.latest().await.unwrap().checkout(1).await.unwrap()).await, vec![1, 2, 3]);
    let err = table.update(&set("x", "NULL"), None, &CommitOptions::default()).await.unwrap_err();
    assert!(err.to_string().contains("'x' is not null"), "{err}");
}

/// Regression for a peer's failure: two concurrent `x = x + 1` of the same row both
/// take effect (the later one re-runs on the earlier one's result).
#[tokio::test]
async fn concurrent_increments_of_one_row_both_take_effect() {
    let (table, _r) = table_of(&[(1, 10), (2, 20)]).await;
    let first = table.prepare(Write::Update { set: set("x", "x + 1"), filter: Some("id = 1".into()) }).await.unwrap();
    let second = table.prepare(Write::Update { set: set("x", "x + 1"), filter: Some("id = 1".into()) }).await.unwrap();
    table.commit(&first, &CommitOptions::default()).await.unwrap();
    let info = table.commit(&second, &CommitOptions::default()).await.unwrap();
    assert!(info.rerun);
    assert_eq!(values(&table).await, BTreeMap::from([(1, 12), (2, 20)]));
}

/// The same, raced for real: N writers each increment every row K times.
#[test]
fn racing_increments_are_never_lost() {
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(4).enable_all().build().unwrap();
    runtime.block_on(async {
        let (table, _r) = table_of(&[(1, 0), (2, 0)]).await;
        let tasks: Vec<_> = (0..4)
            .map(|_| {
                let table = table.clone();
                tokio::spawn(async move {
                    for _ in 0..5 {
                        table.update(&set("x", "x + 1"), None, &CommitOptions::default()).await.expect("updates never fail");
                        tokio::task::yield_now().await;
                    }
                })
            })
            .collect();
        for t in tasks {
            t.await.unwrap();
        }
        assert_eq!(values(&table).await, BTreeMap::from([(1, 20), (2, 20)]), "4 writers x 5 increments");
    });
}

/// One forced interleaving per case: T (an update) prepared, W committed, then T.
#[tokio::test]
async fn update_over_each_winner() {
    type Winner = fn(&Table) -> std::pin::Pin<Box<dyn std::future::Future<Output = ()> + '_>>;
    fn append(t: &Table) -> std::pin::Pin<Box<dyn std::future::Future<Output = ()> + '_>> {
        Box::pin(async move {
            t.append(&[rows(t, &[(3, 30), (4, 40)])], &CommitOptions::default()).await.unwrap();
        })
    }
    fn delete_one(t: &Table) -> std::pin::Pin<Box<dyn std::future::Future<Output = ()> + '_>> {
        Box::pin(async move {
            t.delete("id = 1", &CommitOptions::default()).await.unwrap();
        })
    }
    fn overwrite(t: &Table) -> std::pin::Pin<Box<dyn std::future::Future<Output = ()> + '_>> {
        Box::pin(async move {
            t.overwrite(&[rows(t, &[(1, 100), (5, 500)])], None, &CommitOptions::default()).await.unwrap();
        })
    }
    use IsolationLevel::{Serializable as S, Snapshot as N};
    /// (name, winner, isolation, expect a re-run, expected rows)
    type Case = (&'static str, Winner, IsolationLevel, bool, Vec<(i64, i64)>);
    let cases: Vec<Case> = vec![
        ("append, serializable: appended rows updated too", append, S, true, vec![(1, 11), (2, 21), (3, 31), (4, 41)]),
        ("append, snapshot: appended rows kept as they were", append, N, false, vec![(1, 11), (2, 21), (3, 30), (4, 40)]),
        ("delete of an updated row: it stays deleted", delete_one, S, true, vec![(2, 21)]),
        ("delete of an updated row, snapshot: it stays deleted", delete_one, N, true, vec![(2, 21)]),
        ("overwrite: re-run on the new table", overwrite, S, true, vec![(1, 101), (5, 501)]),
    ];
    for (name, winner, level, rerun, expected) in cases {
        let (table, _r) = table_of(&[(1, 10), (2, 20)]).await;
        let staged = table.prepare(Write::Update { set: set("x", "x + 1"), filter: None }).await.unwrap();
        winner(&table).await;
        let info = table.commit(&staged, &isolation(level)).await.unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(info.rerun, rerun, "{name}");
        assert_eq!(values(&table).await, expected.into_iter().collect::<BTreeMap<_, _>>(), "{name}");
    }
}

/// A delete in a fragment the update did not touch: plain rebase.
#[tokio::test]
async fn update_over_a_delete_elsewhere_rebases() {
    let (table, _r) = table_of(&[(1, 10), (2, 20)]).await;
    table.append(&[rows(&table, &[(9, 90)])], &CommitOptions::default()).await.unwrap();
    let staged = table.prepare(Write::Update { set: set("x", "x + 1"), filter: Some("id <= 2".into()) }).await.unwrap();
    table.delete("id = 9", &CommitOptions::default()).await.unwrap();
    let info = table.commit(&staged, &CommitOptions::default()).await.unwrap();
    assert!(!info.rerun);
    assert_eq!(values(&table).await, BTreeMap::from([(1, 11), (2, 21)]));
}

/// Column "update": a delete over a winning update re-runs on the rows it rewrote.
#[tokio::test]
async fn delete_over_a_winning_update_sees_the_new_values() {
    let (table, _r) = table_of(&[(1, 10), (2, 20)]).await;
    let staged = table.prepare(Write::Delete { filter: "x > 15".into() }).await.unwrap();
    table.update(&set("x", "x + 10"), Some("id = 1"), &CommitOptions::default()).await.unwrap();
    let info = table.commit(&staged, &CommitOptions::default()).await.unwrap();
    assert!(info.rerun);
    assert_eq!(values(&table).await, BTreeMap::new(), "row 1 became 20 > 15 before the delete, so it is deleted too");
}

//! The change feed (FORMAT.md §11): stable row ids through every operation, the feed
//! of each kind of write, net changes, schema changes in the range, consumers and
//! vacuum, and bad input. Random histories with concurrent writers are checked in
//! `histories.rs` and the seeded simulation (`common::check_feed`).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use concord::arrow::array::{Array, AsArray, Float64Array, Int64Array, RecordBatch, StringArray};
use concord::arrow::datatypes::{Float64Type, Int64Type};
use concord::{Assignment, ChangeOptions, ChangesError, CommitOptions, ConsumerError, ErrorKind, ScanOptions, StoreResolver, Table};
use futures::TryStreamExt;

use crate::common::*;

/// One change as the tests read it: (kind, row id, id column, score).
type Change = (String, i64, i64, Option<f64>);

async fn changes(table: &Table, from: u64, to: Option<u64>, options: &ChangeOptions) -> Vec<Change> {
    let batches = table.changes(from, to, options).await.expect("changes").collect().await.expect("read");
    let mut out = Vec::new();
    for b in batches {
        let kind = b.column_by_name("_change_type").unwrap().as_string::<i32>().clone();
        let row_id = b.column_by_name("_row_id").unwrap().as_primitive::<Int64Type>().clone();
        let id = b.column_by_name("id").unwrap().as_primitive::<Int64Type>().clone();
        let score = b.column_by_name("score").map(|c| c.as_primitive::<Float64Type>().clone());
        for i in 0..b.num_rows() {
            let score = score.as_ref().and_then(|s| s.is_valid(i).then(|| s.value(i)));
            out.push((kind.value(i).to_string(), row_id.value(i), id.value(i), score));
        }
    }
    out
}

/// The row ids of the live rows, by `id`.
async fn row_ids(table: &Table) -> BTreeMap<i64, i64> {
    let scan = table.latest().await.unwrap().scan(ScanOptions { row_ids: true, ..ScanOptions::default() }).await.unwrap();
    let batches: Vec<RecordBatch> = scan.into_stream().try_collect().await.unwrap();
    let mut out = BTreeMap::new();
    for b in batches {
        let id = b.column_by_name("id").unwrap().as_primitive::<Int64Type>().clone();
        let row = b.column_by_name("_row_id").unwrap().as_primitive::<Int64Type>().clone();
        for i in 0..b.num_rows() {
            out.insert(id.value(i), row.value(i));
        }
    }
    out
}

async fn table(name: &str) -> Table {
    create_table(&StoreResolver::new(), &format!("memory://changes-{name}/t"), SCHEMA).await
}

fn batch(table: &Table, ids: &[i64], score: f64) -> RecordBatch {
    let names: Vec<String> = ids.iter().map(|i| format!("n{i}")).collect();
    RecordBatch::try_new(
        table.schema().arrow_schema(),
        vec![
            Arc::new(Int64Array::from(ids.to_vec())),
            Arc::new(StringArray::from(names)),
            Arc::new(Float64Array::from(vec![score; ids.len()])),
        ],
    )
    .unwrap()
}

#[tokio::test]
async fn row_ids_survive_updates_merges_compaction_and_restores() {
    let t = table("ids").await;
    let options = CommitOptions::default();
    for chunk in [[1, 2, 3], [4, 5, 6]] {
        t.append(batch(&t, &chunk, 0.0), &options).await.unwrap();
    }
    let before = row_ids(&t).await;
    assert_eq!(before.len(), 6);
    let distinct: std::collections::HashSet<i64> = before.values().copied().collect();
    assert_eq!(distinct.len(), 6, "ids are unique: {before:?}");
    t.update(&[Assignment { column: "score".into(), expr: "score + 1".into() }], Some("id <= 2"), &options).await.unwrap();
    t.merge(batch(&t, &[3, 7], 9.0), &["id".to_string()], &options).await.unwrap();
    t.compact(1000, &options).await.unwrap();
    let after = row_ids(&t).await;
    for id in 1..=6 {
        assert_eq!(after[&id], before[&id], "row {id} keeps its id through update, merge and compaction");
    }
    assert!(!before.values().any(|r| *r == after[&7]), "an inserted row has an id of its own");
    t.restore(2, &options).await.unwrap();
    assert_eq!(row_ids(&t).await, before, "a restore brings the rows back with their ids");
}

#[tokio::test]
async fn each_kind_of_write_has_its_changes() {
    let t = table("kinds").await;
    let options = CommitOptions::default();
    t.append(batch(&t, &[1, 2, 3, 4], 0.0), &options).await.unwrap(); // v1
    let ids = row_ids(&t).await;
    t.update(&[Assignment { column: "score".into(), expr: "5".into() }], Some("id = 1"), &options).await.unwrap(); // v2
    t.delete("id = 2", &options).await.unwrap(); // v3
    t.append(batch(&t, &[2], 0.0), &options).await.unwrap(); // v4: the same key again
    t.merge(batch(&t, &[3, 9], 7.0), &["id".to_string()], &options).await.unwrap(); // v5
    t.compact(1000, &options).await.unwrap(); // v6

    let none = ChangeOptions::default();
    assert_eq!(changes(&t, 0, Some(1), &none).await.iter().filter(|c| c.0 == "insert").count(), 4);
    assert_eq!(
        changes(&t, 1, Some(2), &none).await,
        vec![("update_preimage".into(), ids[&1], 1, Some(0.0)), ("update_postimage".into(), ids[&1], 1, Some(5.0))]
    );
    assert_eq!(changes(&t, 2, Some(3), &none).await, vec![("delete".into(), ids[&2], 2, Some(0.0))]);
    let reinserted = changes(&t, 3, Some(4), &none).await;
    assert_eq!(reinserted.len(), 1);
    assert_eq!(reinserted[0].0, "insert");
    assert_ne!(reinserted[0].1, ids[&2], "a delete then an insert of the same key: two row ids");
    let merged = changes(&t, 4, Some(5), &none).await;
    assert!(merged.contains(&("update_preimage".into(), ids[&3], 3, Some(0.0))));
    assert!(merged.contains(&("update_postimage".into(), ids[&3], 3, Some(7.0))));
    assert_eq!(merged.iter().filter(|c| c.0 == "insert" && c.2 == 9).count(), 1);
    assert!(changes(&t, 5, Some(6), &none).await.is_empty(), "a compaction changes no row");

    // Net: row 1 updated, 2 deleted (and another inserted), 3 updated, 9 inserted.
    let net = changes(&t, 0, None, &ChangeOptions { net: true, ..ChangeOptions::default() }).await;
    assert_eq!(net.iter().filter(|c| c.0 == "insert").count(), 5, "{net:?}");
    assert!(net.iter().all(|c| c.0 == "insert"), "from the empty table everything is an insert: {net:?}");
    let net = changes(&t, 1, None, &ChangeOptions { net: true, ..ChangeOptions::default() }).await;
    let kinds: Vec<(&str, i64)> = net.iter().map(|c| (c.0.as_str(), c.2)).collect();
    assert_eq!(
        kinds,
        vec![
            ("update_preimage", 1),
            ("update_postimage", 1),
            ("delete", 2),
            ("update_preimage", 3),
            ("update_postimage", 3),
            ("insert", 2),
            ("insert", 9)
        ]
    );

    // Columns and filters.
    let only = ChangeOptions { columns: Some(vec!["id".into()]), filter: Some("id = 3".into()), ..ChangeOptions::default() };
    let feed = t.changes(4, Some(5), &only).await.unwrap();
    let names: Vec<String> = feed.schema().fields().iter().map(|f| f.name().clone()).collect();
    assert_eq!(names, ["id", "_change_type", "_row_id", "_version", "_txn_id", "_committed_at"]);
    let rows: usize = feed.collect().await.unwrap().iter().map(RecordBatch::num_rows).sum();
    assert_eq!(rows, 2, "the update's two rows, nothing of the insert");
    check_feed(&t).await.unwrap();
}

#[tokio::test]
async fn a_schema_change_in_the_range_reads_in_the_last_schema() {
    let t = table("schema").await;
    let options = CommitOptions::default();
    t.append(batch(&t, &[1, 2], 0.0), &options).await.unwrap(); // v1
    t.delete("id = 1", &options).await.unwrap(); // v2
    t.add_column("qty int not null default 4", &options).await.unwrap(); // v3
    t.drop_column("name", &options).await.unwrap(); // v4
    let feed = t.changes(0, None, &ChangeOptions::default()).await.unwrap();
    let names: Vec<String> = feed.schema().fields().iter().map(|f| f.name().clone()).collect();
    assert_eq!(&names[..3], ["id", "score", "qty"], "the last version's columns");
    let batches = feed.collect().await.unwrap();
    let qty: Vec<i32> = batches
        .iter()
        .flat_map(|b| b.column_by_name("qty").unwrap().as_primitive::<concord::arrow::datatypes::Int32Type>().values().to_vec())
        .collect();
    assert_eq!(qty, [4, 4, 4], "rows written before the column read its default");
    check_feed(&t).await.unwrap();
}

#[tokio::test]
async fn bad_ranges_and_unknown_consumers_are_refused() {
    let t = table("bad").await;
    t.append(batch(&t, &[1], 0.0), &CommitOptions::default()).await.unwrap();
    let none = ChangeOptions::default();
    let e = t.changes(1, Some(0), &none).await.unwrap_err();
    assert!(matches!(e, ChangesError::FromAfterTo { from: 1, to: 0 }), "{e}");
    assert_eq!(e.kind(), ErrorKind::InvalidInput);
    let e = t.changes(0, Some(9), &none).await.unwrap_err();
    assert!(matches!(e, ChangesError::VersionNotRetained { missing: 9, .. }), "{e}");
    assert_eq!(e.kind(), ErrorKind::InvalidInput);
    let e = t.consumer_changes("nobody", None, &none).await.unwrap_err();
    assert!(matches!(e, ChangesError::Consumer(ConsumerError::NotFound { .. })), "{e}");
    assert_eq!(e.kind(), ErrorKind::InvalidInput);
    let e = t.changes(0, None, &ChangeOptions { columns: Some(vec!["nope".into()]), ..none.clone() }).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidInput, "{e}");
    let e = t.create_consumer("bad/name", None).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidInput, "{e}");
}

#[tokio::test]
async fn consumers_move_by_compare_and_swap_and_hold_versions_from_vacuum() {
    let dir = tempfile::tempdir().unwrap();
    let uri = dir.path().to_str().unwrap().to_string();
    let resolver = StoreResolver::new();
    let t = create_table(&resolver, &uri, SCHEMA).await;
    let options = CommitOptions::default();
    t.append(batch(&t, &[1], 0.0), &options).await.unwrap(); // v1
    let c = t.create_consumer("reader", Some(1)).await.unwrap();
    assert_eq!(c.version, 1);
    assert!(matches!(t.create_consumer("reader", None).await, Err(ConsumerError::Exists { .. })));
    t.append(batch(&t, &[2], 0.0), &options).await.unwrap(); // v2
    t.append(batch(&t, &[3], 0.0), &options).await.unwrap(); // v3
    let (info, feed) = t.consumer_changes("reader", None, &ChangeOptions::default()).await.unwrap();
    assert_eq!(info.version, 1);
    assert_eq!(feed.collect().await.unwrap().iter().map(RecordBatch::num_rows).sum::<usize>(), 2);

    // Two processes advance at once from version 1: one wins, the other is told.
    let other = open_table(&resolver, &uri).await;
    let (a, b) = tokio::join!(t.advance_consumer("reader", Some(2), Some(1)), other.advance_consumer("reader", Some(3), Some(1)));
    let (won, lost) = match (a, b) {
        (Ok(w), Err(l)) | (Err(l), Ok(w)) => (w, l),
        other => panic!("exactly one advance wins: {other:?}"),
    };
    assert!(matches!(lost, ConsumerError::Moved { expected: 1, .. }), "{lost}");
    assert!(matches!(lost.kind(), ErrorKind::Moved { .. }));
    assert_eq!(t.consumer("reader").await.unwrap().version, won.version);
    assert!(won.version == 2 || won.version == 3);
    assert_eq!(t.consumers().await.unwrap().len(), 1);

    // Vacuum keeps every version from the consumer's on, and says so.
    t.advance_consumer("reader", Some(2), None).await.unwrap();
    let report = t.vacuum(Duration::ZERO, true).await.unwrap();
    assert_eq!(report.oldest_retained, 2);
    assert_eq!(report.held_by_consumers, vec![("reader".to_string(), 2)]);
    assert_eq!(t.consumer_changes("reader", None, &ChangeOptions::default()).await.unwrap().1.collect().await.unwrap()[0].num_rows(), 1);
    t.drop_consumer("reader").await.unwrap();
    assert!(matches!(t.consumer("reader").await, Err(ConsumerError::NotFound { .. })));
    let report = t.vacuum(Duration::ZERO, true).await.unwrap();
    assert!(report.held_by_consumers.is_empty());
    assert_eq!(report.oldest_retained, 3);
    let e = t.changes(2, None, &ChangeOptions::default()).await.unwrap_err();
    assert!(matches!(e, ChangesError::VersionNotRetained { .. }), "{e}");
}

#[tokio::test]
async fn a_feed_lists_concurrent_writers_changes_exactly() {
    // Writers with handles of their own race appends, updates, merges and deletes
    // (cooperative commits carry some); the feed must replay the history.
    let resolver = StoreResolver::new();
    let uri = "memory://changes-concurrent/t";
    let t = create_table(&resolver, uri, SCHEMA).await;
    let mut tasks = Vec::new();
    for w in 0..6i64 {
        let handle = open_table(&resolver, uri).await;
        tasks.push(tokio::spawn(async move {
            let options = CommitOptions::default();
            for k in 0..8i64 {
                let id = w * 100 + k;
                handle.append(batch(&handle, &[id, id + 50], k as f64), &options).await.unwrap();
                match k % 4 {
                    1 => drop(
                        handle
                            .update(
                                &[Assignment { column: "score".into(), expr: "score * 2".into() }],
                                Some(&format!("id = {id}")),
                                &options,
                            )
                            .await
                            .unwrap(),
                    ),
                    2 => drop(handle.merge(batch(&handle, &[id, id + 1000], 3.0), &["id".to_string()], &options).await.unwrap()),
                    3 => drop(handle.delete(&format!("id = {}", id + 50), &options).await.unwrap()),
                    _ => {}
                }
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    check_feed(&t).await.unwrap();
}

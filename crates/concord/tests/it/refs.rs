//! Tags, branches and branch merges (FORMAT.md §17): tags name versions (made once:
//! of two makers, one wins) and hold them from vacuum; branches are chains of their
//! own sharing the table's files, whose writers never race main's; a merge replays a
//! branch's transactions onto the branch it was made from, judged as a rebase is, rows
//! keeping their ids; deleted branches take no commit and leave nothing others need.

use std::collections::BTreeMap;
use std::time::Duration;

use concord::arrow::array::{AsArray, RecordBatch};
use concord::arrow::datatypes::Int64Type;
use concord::{
    Assignment, BranchError, CommitError, CommitOptions, ErrorKind, MergeError, OpenError, ScanOptions, StoreResolver, Table, TagError,
    VersionRef, WriteError,
};
use futures::TryStreamExt;

use crate::common::*;

async fn table(name: &str) -> Table {
    create_table(&StoreResolver::new(), &format!("memory://refs-{name}/t"), SCHEMA).await
}

async fn append(t: &Table, ids: impl IntoIterator<Item = i64>) {
    t.append(rows(t.schema(), ids), &CommitOptions::default()).await.expect("append");
}

/// Live rows by `id`: (row id, score).
async fn by_id(t: &Table) -> BTreeMap<i64, (i64, f64)> {
    let scan = t.scan(ScanOptions { row_ids: true, ..ScanOptions::default() }).await.unwrap();
    let batches: Vec<RecordBatch> = scan.into_stream().try_collect().await.unwrap();
    let mut out = BTreeMap::new();
    for b in batches {
        let id = b.column_by_name("id").unwrap().as_primitive::<Int64Type>().clone();
        let row = b.column_by_name("_row_id").unwrap().as_primitive::<Int64Type>().clone();
        let score = b.column_by_name("score").unwrap().as_primitive::<concord::arrow::datatypes::Float64Type>().clone();
        for i in 0..b.num_rows() {
            out.insert(id.value(i), (row.value(i), score.value(i)));
        }
    }
    out
}

#[tokio::test]
async fn a_tag_names_a_version_once_and_reads_it() {
    let t = table("tags").await;
    append(&t, 0..3).await; // v1
    let tag = t.create_tag("v1", None).await.unwrap();
    assert_eq!((tag.version, tag.branch.as_str()), (1, "main"));
    append(&t, 3..5).await; // v2
    let at = t.checkout_ref(&VersionRef::parse("v1")).await.unwrap();
    assert_eq!((at.version(), ids(&at).await), (1, vec![0, 1, 2]));
    assert_eq!(t.version_of(&VersionRef::parse("2")).await.unwrap(), 2);
    assert!(matches!(t.create_tag("v1", Some(2)).await, Err(TagError::Exists { version: 1, .. })));
    assert!(matches!(t.create_tag("7", None).await, Err(TagError::BadName { .. })), "a number is a version, not a tag");
    assert!(matches!(t.create_tag("old", Some(9)).await, Err(TagError::NoSuchVersion { version: 9, .. })));
    // Two makers of one name at once: one wins.
    let (a, b) = tokio::join!(t.create_tag("race", Some(1)), t.create_tag("race", Some(2)));
    assert!(a.is_ok() != b.is_ok(), "{a:?} {b:?}");
    let names: Vec<String> = t.tags().await.unwrap().into_iter().map(|t| t.name).collect();
    assert_eq!(names, ["race", "v1"]);
    t.delete_tag("v1").await.unwrap();
    let gone = t.checkout_ref(&VersionRef::parse("v1")).await.unwrap_err();
    assert!(matches!(gone, OpenError::UnknownRef { .. }) && gone.kind() == ErrorKind::InvalidInput, "{gone}");
    t.create_tag("v1", Some(2)).await.expect("a deleted tag's name can be used again");
}

#[tokio::test]
async fn vacuum_keeps_a_tagged_version_and_says_so_and_time_travel_stays_right() {
    let t = table("tag-vacuum").await;
    for i in 0..4 {
        append(&t, [i]).await; // v1..v4
    }
    t.create_tag("keep", Some(2)).await.unwrap();
    let report = t.vacuum(Duration::ZERO, true).await.unwrap();
    assert_eq!(report.held_by_tags, [("keep".to_string(), 2)]);
    assert_eq!(t.checkout_ref(&VersionRef::Tag("keep".into())).await.unwrap().row_count(), 2, "the tagged version and its files are kept");
    assert!(t.checkout(1).await.is_err(), "untagged old versions go");
    let latest = t.latest().await.unwrap();
    let as_of = t.checkout_as_of(latest.manifest().timestamp).await.unwrap();
    assert_eq!(as_of.version(), latest.version(), "a kept version below removed ones does not confuse time travel");
}

#[tokio::test]
async fn branches_are_chains_of_their_own_sharing_files() {
    let t = table("branches").await;
    append(&t, 0..3).await; // main v1
    let b = t.create_branch("dev", None).await.unwrap();
    assert_eq!((b.branch_name(), b.version(), ids(&b).await), ("dev", 1, vec![0, 1, 2]));
    append(&b, 10..12).await; // dev v2
    append(&t, 20..21).await; // main v2: no race with dev's v2
    let (main, dev) = (t.latest().await.unwrap(), t.branch("dev").await.unwrap());
    assert_eq!((main.version(), ids(&main).await), (2, vec![0, 1, 2, 20]));
    assert_eq!((dev.version(), ids(&dev).await), (2, vec![0, 1, 2, 10, 11]));
    assert!(matches!(t.create_branch("dev", None).await, Err(BranchError::Exists { .. })));
    assert!(matches!(t.create_branch("main", None).await, Err(BranchError::Main { .. })));
    assert!(matches!(t.branch("nope").await, Err(BranchError::NotFound { .. })));
    let names: Vec<String> = t.branches().await.unwrap().into_iter().map(|b| b.name).collect();
    assert_eq!(names, ["main", "dev"]);
    // A tag on the branch reads the branch's version, from any handle.
    dev.create_tag("dev-2", None).await.unwrap();
    let tagged = t.checkout_ref(&VersionRef::Tag("dev-2".into())).await.unwrap();
    assert_eq!((tagged.branch_name(), ids(&tagged).await), ("dev", vec![0, 1, 2, 10, 11]));
    assert!(matches!(t.version_of(&VersionRef::Tag("dev-2".into())).await, Err(OpenError::TagOfAnotherBranch { .. })));
    // Its rows have ids of its own block: none is a main row's.
    let (main_ids, dev_ids) = (by_id(&main).await, by_id(&dev).await);
    assert_eq!(dev_ids[&0].0, main_ids[&0].0, "rows from before the branch keep their ids");
    assert!(dev_ids[&10].0 >= 1 << 62 && main_ids[&20].0 < 1 << 62);
    // Deleted: a writer still holding it fails, and the name is free again.
    t.delete_branch("dev").await.unwrap();
    let late = dev.append(rows(dev.schema(), [99]), &CommitOptions::default()).await.unwrap_err();
    assert!(matches!(&late, WriteError::Commit(CommitError::Incompatible { .. })), "{late}");
    assert!(matches!(t.branch("dev").await, Err(BranchError::NotFound { .. })));
    assert!(matches!(t.delete_branch("main").await, Err(BranchError::Main { .. })));
    let again = t.create_branch("dev", Some(&VersionRef::Number(1))).await.unwrap();
    assert_eq!(ids(&again).await, vec![0, 1, 2]);
}

#[tokio::test]
async fn a_merge_replays_the_branch_onto_main_keeping_row_ids() {
    let t = table("merge").await;
    append(&t, 0..6).await; // main v1
    let b = t.create_branch("etl", None).await.unwrap();
    append(&b, 10..13).await;
    let set = |expr: &str| vec![Assignment { column: "score".into(), expr: expr.into() }];
    b.update(&set("score + 100"), Some("id = 1 OR id = 11"), &CommitOptions::default()).await.unwrap();
    b.delete("id = 2 OR id = 12", &CommitOptions::default()).await.unwrap();
    // Main goes on meanwhile: appends (a serializable delete on the branch re-runs on
    // them) and an update of a row the branch does not touch.
    append(&t, [30, 2002]).await;
    t.update(&set("score + 1"), Some("id = 5"), &CommitOptions::default()).await.unwrap();
    let before = by_id(&b.latest().await.unwrap()).await;
    let merged = t.merge_branch("etl", None, false).await.unwrap();
    assert_eq!((merged.transactions, merged.branch_versions), (3, Some((2, 4))));
    let main = t.latest().await.unwrap();
    assert_eq!(merged.version, Some(main.version()));
    let after = by_id(&main).await;
    assert_eq!(after.keys().copied().collect::<Vec<_>>(), [0, 1, 3, 4, 5, 10, 11, 30, 2002]);
    for id in [0, 1, 3, 4, 10, 11] {
        assert_eq!(after[&id].0, before[&id].0, "row {id} keeps its row id through the merge");
    }
    assert_eq!((after[&1].1, after[&11].1, after[&5].1), (101.0, 111.0, 6.0));
    check_feed(&main).await.unwrap();
    // Nothing new on the branch: nothing to merge. More on it: merged again, alone.
    assert_eq!(t.merge_branch("etl", None, false).await.unwrap().transactions, 0);
    b.latest().await.unwrap().delete("id = 10", &CommitOptions::default()).await.unwrap();
    assert_eq!(t.merge_branch("etl", None, false).await.unwrap().transactions, 1);
    assert!(!ids(&t.latest().await.unwrap()).await.contains(&10));
    check_feed(&t.latest().await.unwrap()).await.unwrap();
}

#[tokio::test]
async fn merges_refuse_what_a_concurrent_writer_could_not_do() {
    let t = table("merge-refused").await;
    append(&t, 0..4).await;
    let b = t.create_branch("b", None).await.unwrap();
    let set = |expr: &str| vec![Assignment { column: "score".into(), expr: expr.into() }];
    b.update(&set("score + 1"), Some("id = 1"), &CommitOptions::default()).await.unwrap();
    // Fast-forward only: main has not moved, so it merges.
    let ff = t.create_branch("ff", None).await.unwrap();
    append(&ff, [7]).await;
    t.merge_branch("ff", None, true).await.expect("main did not move: a fast-forward");
    // Main moved now: refused, nothing merged.
    let moved = t.merge_branch("b", None, true).await.unwrap_err();
    assert!(matches!(moved, MergeError::TargetMoved { .. }) && matches!(moved.kind(), ErrorKind::Moved { .. }), "{moved}");
    // Both changed row 1: the branch's update re-runs on main's, as a concurrent
    // writer's would (it reads the row as main left it).
    t.update(&set("score + 50"), Some("id = 1"), &CommitOptions::default()).await.unwrap();
    t.merge_branch("b", None, false).await.unwrap();
    assert_eq!(by_id(&t.latest().await.unwrap()).await[&1].1, 52.0);
    // What a concurrent writer could not do, the merge cannot: the branch's update
    // reads a column main dropped. Typed, nothing merged.
    b.update(&set("score + 1"), Some("name = 'n2'"), &CommitOptions::default()).await.unwrap();
    t.drop_column("name", &CommitOptions::default()).await.unwrap();
    let version = t.latest().await.unwrap().version();
    let conflict = t.merge_branch("b", None, false).await.unwrap_err();
    assert!(matches!(conflict.kind(), ErrorKind::Incompatible { .. }), "{conflict}");
    assert_eq!(t.latest().await.unwrap().version(), version);
    assert!(matches!(t.merge_branch("b", Some("b"), false).await, Err(MergeError::IntoItself { .. })));
    let sub = b.create_branch("sub", None).await.unwrap();
    append(&sub, [40]).await;
    assert!(matches!(t.merge_branch("sub", None, false).await, Err(MergeError::NotFromTarget { .. })));
    t.merge_branch("sub", Some("b"), false).await.expect("a branch of a branch merges into its branch");
    assert!(ids(&t.branch("b").await.unwrap()).await.contains(&40));
}

#[tokio::test]
async fn vacuum_keeps_what_any_branch_references_and_clears_deleted_ones() {
    let dir = tempfile::tempdir().unwrap();
    let uri = dir.path().join("t").to_str().unwrap().to_string();
    let t = create_table(&StoreResolver::new(), &uri, SCHEMA).await;
    append(&t, 0..3).await;
    let b = t.create_branch("b", None).await.unwrap();
    append(&b, 10..12).await;
    t.delete("id >= 0", &CommitOptions::default()).await.unwrap();
    append(&t, [5]).await;
    // Main's vacuum keeps the files the branch's versions name.
    t.vacuum(Duration::ZERO, true).await.unwrap();
    assert_eq!(ids(&t.branch("b").await.unwrap()).await, vec![0, 1, 2, 10, 11]);
    let files = |sub: &str| files_under(dir.path(), sub).len();
    let data_before = files("t/data");
    // Deleted, its chain's versions go with the retention, then the files only it named.
    t.delete_branch("b").await.unwrap();
    let report = t.vacuum(Duration::ZERO, true).await.unwrap();
    assert!(report.versions_removed >= 3, "{report:?}");
    assert!(files("t/data") < data_before, "the branch's own files are removed");
    assert_eq!(ids(&t.latest().await.unwrap()).await, vec![5]);
    assert!(
        files("t/_branches") == 0 || files_under(dir.path(), "t/_branches").iter().all(|p| !p.to_string_lossy().contains("_versions/"))
    );
}

//! Requests per operation, counted on every backend (FORMAT.md §8): opening the
//! latest version, a cold append (open, then append: what `concord append` does), a
//! warm append (a handle that just committed), and an append whose first attempt loses
//! to a winner; at 10 and at 1,000 versions. On object stores (S3, Azure): open 2
//! (LIST, GET), cold append 4, warm append 2; a lost first attempt adds one read of the
//! winner with one of the version after it (absent here) and the next conditional PUT,
//! and the writer's winning attempt then reads the version as it creates it (fairness:
//! FORMAT.md §8), one read more. The same at both sizes.

use std::collections::BTreeMap;

use bytes::Bytes;
use chrono::TimeDelta;
use concord::manifest::Operation;
use concord::{CommitOptions, Env, Schema, Table};

use crate::common::*;
use crate::conformance::{backends, Fixture};
use crate::counting::Tally;

/// Grows the table to `target` versions fast: each new version is the latest with no
/// change (a property update), written straight through the coordinator.
async fn grow_to(f: &Fixture, target: u64) {
    let table = Table::open(f.location.clone(), Env::system()).await.unwrap();
    let mut manifest = table.manifest().clone();
    let coordinator = f.location.coordinator();
    for v in manifest.version + 1..=target {
        manifest.parent_version = Some(v - 1);
        manifest.version = v;
        manifest.timestamp += TimeDelta::microseconds(1);
        let mut record = manifest.transactions[0].clone();
        record.id = uuid::Uuid::new_v4();
        record.read_version = Some(v - 1);
        record.operation = Operation::SetProperties { set: BTreeMap::new(), unset: Vec::new() };
        record.idempotency_key = None;
        // A lone writer's: the record copied may be of an append that lost a race.
        (record.attempts, record.rebased_over, record.carried_by) = (1, Vec::new(), None);
        manifest.transactions = vec![record];
        coordinator.create_version(v, Bytes::from(serde_json::to_vec(&manifest).unwrap())).await.unwrap();
    }
    coordinator.after_commit(target).await;
}

/// Requests of the store, plus DynamoDB's for a coordinated fixture.
async fn counted<T>(f: &Fixture, work: impl std::future::Future<Output = T>) -> (T, Tally, u64) {
    let d0 = f.dynamo_requests();
    let (out, tally) = f.counting.measure(work).await;
    (out, tally, f.dynamo_requests() - d0)
}

#[derive(Debug, PartialEq, Eq, Clone, Copy)]
struct Costs {
    open: u64,
    cold_append: u64,
    warm_append: u64,
    lost_append: u64,
}

async fn costs(f: &Fixture, first_id: i64) -> Costs {
    let ((), _, _) = counted(f, async {}).await;
    let (opened, open, d_open) = counted(f, Table::open(f.location.clone(), Env::system())).await;
    opened.unwrap();
    let options = CommitOptions::default();
    // Cold: open and append, as `concord append` does.
    let (table, cold, d_cold) = counted(f, async {
        let table = Table::open(f.location.clone(), Env::system()).await.unwrap();
        table.append(rows(table.schema(), [first_id]), &options).await.unwrap();
        table
    })
    .await;
    let ((), warm, d_warm) = counted(f, async {
        table.append(rows(table.schema(), [first_id + 1]), &options).await.unwrap();
    })
    .await;
    // Another handle wins the next version; this handle's first attempt then loses, if
    // it still takes its newest known version as fresh (within a second: a slow machine
    // may take longer between the two appends; the race is then set up again).
    let other = Table::open(f.location.clone(), Env::system()).await.unwrap();
    let mut id = first_id + 2;
    let (lost, d_lost) = loop {
        table.append(rows(table.schema(), [id]), &options).await.unwrap();
        other.append(rows(other.schema(), [id + 1]), &options).await.unwrap();
        let (info, lost, d_lost) = counted(f, table.append(rows(table.schema(), [id + 2]), &options)).await;
        match info.unwrap().attempts {
            2 => break (lost, d_lost),
            1 if id < first_id + 2 + 3 * 3 => id += 3,
            n => panic!("{}: the first attempt did not lose three times ({n} attempts)", f.name),
        }
    };
    Costs {
        open: open.requests() + d_open,
        cold_append: cold.requests() + d_cold,
        warm_append: warm.requests() + d_warm,
        lost_append: lost.requests() + d_lost,
    }
}

#[tokio::test]
async fn requests_per_commit_are_few_and_flat() {
    for f in backends().await {
        let schema = Schema::parse(SCHEMA).unwrap();
        Table::create(f.location.clone(), Env::system(), schema).await.unwrap();
        grow_to(&f, 10).await;
        let small = costs(&f, 0).await;
        grow_to(&f, 1000).await;
        let large = costs(&f, 100).await;
        eprintln!("{}: requests at ~10 versions {small:?}; at ~1000 versions {large:?}", f.name);
        assert_eq!(small, large, "{}: requests do not grow with versions", f.name);
        if f.name == "s3" || f.name == "azure" {
            let expected = Costs { open: 2, cold_append: 4, warm_append: 2, lost_append: 6 };
            assert_eq!(
                small, expected,
                "{}: LIST + GET to open; + data PUT + conditional PUT to append; a lost attempt adds two reads and a PUT, the next one a read",
                f.name
            );
        }
        if f.name == "s3+dynamodb" {
            // The protocol (FORMAT.md §13): a commit writes a staging manifest, the
            // conditional row, the version object (the copy), marks the row complete and
            // deletes the staging object: 5 requests where S3 needs 1. A lost attempt
            // adds the row read that tells whose it is, the staging cleanup and the read
            // of the winner. No read while creating (it would race with the writer's own
            // protocol, repairing its commit under it: 13 to 18 requests by timing).
            let expected = Costs { open: 2, cold_append: 8, warm_append: 6, lost_append: 11 };
            assert_eq!(small, expected, "{}: Query + GET to open; data PUT + 5 to commit; a lost attempt 6 + the next 5", f.name);
        }
    }
}

/// What publishing as Iceberg (`iceberg.publish=true`, FORMAT.md §16) adds to a warm
/// append and to a delete, at ~10 and ~1,000 versions: the same at both sizes. The
/// commit path is the test above's (publishing starts after the commit returns from
/// it; with the property off a commit costs what it did before publishing existed).
/// An append publishes with 2 reads (the previous version's metadata and manifest list)
/// and 3 writes (its inline segment's data manifest, its manifest list, its metadata);
/// a delete with 4 writes (the position delete file and its manifest, the manifest list
/// and the metadata: the data manifest is the previous version's) and 3 reads (those 2
/// and that data manifest, for its file's sequence numbers; its deletion vector is in
/// the handle's cache).
#[tokio::test]
async fn iceberg_publishing_costs_per_version_are_flat() {
    use concord::manifest::PROPERTY_ICEBERG_PUBLISH;
    let on = BTreeMap::from([(PROPERTY_ICEBERG_PUBLISH.to_string(), "true".to_string())]);
    let off = [PROPERTY_ICEBERG_PUBLISH.to_string()];
    let options = CommitOptions::default();
    let difference = |with: Tally, without: Tally| (with.puts - without.puts, with.gets - without.gets, with.lists - without.lists);
    let bytes = |with: Tally, without: Tally| with.bytes_written - without.bytes_written;
    for f in backends().await {
        let schema = Schema::parse(SCHEMA).unwrap();
        Table::create_with_properties(f.location.clone(), Env::system(), schema, &on).await.unwrap();
        let mut costs = Vec::new();
        for (size, id) in [(10, 0), (1000, 10_000)] {
            grow_to(&f, size).await;
            let table = Table::open(f.location.clone(), Env::system()).await.unwrap();
            let started = std::time::Instant::now();
            table.publish_iceberg().await.unwrap();
            let grown = started.elapsed();
            // Each delete removes one of two rows of a fragment (a deletion vector) and
            // reads that fragment alone (the ranges of ids do not overlap).
            let append = |ids: &[i64]| table.append(rows(table.schema(), ids.iter().copied()), &options);
            append(&[id, id + 500]).await.unwrap();
            let (_, with, _) = counted(&f, append(&[id + 1])).await;
            let (_, deleting, _) = counted(&f, table.delete(&format!("id = {id}"), &options)).await;
            table.set_properties(&BTreeMap::new(), &off, &options).await.unwrap();
            append(&[id + 600, id + 1100]).await.unwrap();
            let (_, without, _) = counted(&f, append(&[id + 3])).await;
            let (_, deleting_without, _) = counted(&f, table.delete(&format!("id = {}", id + 600), &options)).await;
            table.set_properties(&on, &[], &options).await.unwrap();
            let cost = (difference(with, without), difference(deleting, deleting_without));
            eprintln!(
                "{}: at ~{size} versions publishing adds (puts, gets, lists) {:?} and {} bytes written to an append, {:?} and {} bytes to a delete; \
                 publishing the {size} grown versions by hand took {grown:?}",
                f.name,
                cost.0,
                bytes(with, without),
                cost.1,
                bytes(deleting, deleting_without)
            );
            costs.push(cost);
        }
        assert_eq!(costs[0], costs[1], "{}: publishing costs do not grow with versions", f.name);
        if f.name == "s3" || f.name == "azure" {
            assert_eq!(costs[0], ((3, 2, 0), (4, 3, 0)), "{}: see the doc comment", f.name);
        }
    }
}

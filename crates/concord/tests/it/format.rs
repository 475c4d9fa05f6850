//! The on-disk format: commit cost independent of table size, timestamps, restore,
//! fragment ids, pruning.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use chrono::{DateTime, TimeDelta, Utc};
use concord::arrow::array::{Int64Array, RecordBatch, StringArray};
use concord::manifest::{Fragment, Manifest, Operation, SegmentRef};
use concord::object_store::{ObjectStoreExt, PutPayload};
use concord::{Clock, CommitOptions, Env, ScanOptions, Schema, StdRandom, Table};
use futures::future::BoxFuture;

use crate::conformance::local_backends;

const TWO_COLUMNS: &str = "id bigint not null, name varchar";

fn rows(schema: &Schema, ids: std::ops::Range<i64>) -> RecordBatch {
    RecordBatch::try_new(
        schema.arrow_schema(),
        vec![
            Arc::new(Int64Array::from(ids.clone().collect::<Vec<_>>())),
            Arc::new(StringArray::from(ids.map(|i| format!("n{i}")).collect::<Vec<_>>())),
        ],
    )
    .unwrap()
}

/// A one-row append to a table of 100,000 fragments reads and writes about as many
/// bytes as one to a table of 10 fragments. The big table is written by hand, as a
/// second implementation following FORMAT.md would: one segment listing 100,000
/// fragments and a root manifest referencing it.
#[tokio::test]
async fn commit_cost_does_not_grow_with_fragment_count() {
    let mut fixtures = local_backends().into_iter();
    let (small, big) = (fixtures.next().unwrap(), fixtures.next().unwrap());
    let schema = Schema::parse(TWO_COLUMNS).unwrap();

    let small_table = Table::create(small.location.clone(), Env::system(), schema.clone()).await.unwrap();
    for i in 0..10 {
        small_table.append(&[rows(&schema, i..i + 1)], &CommitOptions::default()).await.unwrap();
    }

    let big_table = Table::create(big.location.clone(), Env::system(), schema.clone()).await.unwrap();
    big_table.append(&[rows(&schema, 0..1)], &CommitOptions::default()).await.unwrap();
    let v1: Manifest = big_table.latest().await.unwrap().manifest().clone();
    let file = big_table.latest().await.unwrap().fragments().await.unwrap()[0].files[0].clone();
    let fragments: Vec<Fragment> = (1..=100_000)
        .map(|id| serde_json::from_value(serde_json::json!({"id": id, "files": [file], "physical_rows": 1})).unwrap())
        .collect();
    let segment = serde_json::to_vec(&serde_json::json!({ "fragments": fragments })).unwrap();
    let segment_size = segment.len();
    let segment_path = "_segments/hand-written.json";
    big.location
        .store()
        .put(&big.location.root().clone().join("_segments").join("hand-written.json"), PutPayload::from(segment))
        .await
        .unwrap();
    let mut v2 = v1.clone();
    v2.version = 2;
    v2.parent_version = Some(1);
    v2.timestamp = v1.timestamp + TimeDelta::milliseconds(1);
    v2.transactions[0].id = uuid::Uuid::new_v4();
    v2.transactions[0].read_version = Some(1);
    v2.transactions[0].operation = Operation::Append { fragments: vec![] };
    let reference: SegmentRef = serde_json::from_value(serde_json::json!({
        "path": segment_path, "level": 4, "fragments": 100_000, "live_rows": 100_000, "min_fragment_id": 1, "max_fragment_id": 100_000
    }))
    .unwrap();
    v2.segments.push(reference);
    v2.next_fragment_id = 100_001;
    big.location.coordinator().create_version(2, Bytes::from(serde_json::to_vec(&v2).unwrap())).await.unwrap();
    let big_table = Table::open(big.location.clone(), Env::system()).await.unwrap();
    assert_eq!(big_table.manifest().fragment_count(), 100_001);
    assert_eq!(big_table.count(None).await.unwrap(), 100_001, "counting needs no data or segment reads");

    let append = |table: Table, fixture_id: i64| async move {
        for i in 0..16 {
            table.append(&[rows(table.schema(), fixture_id + i..fixture_id + i + 1)], &CommitOptions::default()).await.unwrap();
        }
    };
    let (_, small_cost) = small.counting.measure(append(small_table, 1000)).await;
    let (_, big_cost) = big.counting.measure(append(big_table.clone(), 1000)).await;
    eprintln!("16 one-row appends: 10 fragments {small_cost:?}; 100,001 fragments {big_cost:?}; the big segment is {segment_size} bytes");
    assert!(big_cost.bytes_written <= small_cost.bytes_written * 3 / 2, "written: {small_cost:?} vs {big_cost:?}");
    assert!(big_cost.bytes_read <= small_cost.bytes_read * 3 / 2, "read: {small_cost:?} vs {big_cost:?}");
    assert!(big_cost.bytes_read < segment_size as u64 / 10, "the big segment is never read by appends");
    let latest = big_table.latest().await.unwrap();
    assert_eq!(latest.count(None).await.unwrap(), 100_017);
    assert_eq!(latest.fragments().await.unwrap().last().unwrap().id, 100_016, "fragment ids continue after the hand-written ones");
}

/// A clock that stands still in the past: commit timestamps still increase.
#[derive(Debug)]
struct FrozenClock(Mutex<DateTime<Utc>>);

impl Clock for FrozenClock {
    fn now(&self) -> DateTime<Utc> {
        *self.0.lock().unwrap()
    }
    fn monotonic(&self) -> Duration {
        Duration::ZERO
    }
    fn sleep(&self, duration: Duration) -> BoxFuture<'static, ()> {
        Box::pin(tokio::time::sleep(duration))
    }
}

#[tokio::test]
async fn timestamps_are_utc_and_strictly_increase_even_with_a_stopped_clock() {
    let f = local_backends().into_iter().next().unwrap();
    let frozen: DateTime<Utc> = "2020-01-01T00:00:00Z".parse().unwrap();
    let env = Env { clock: Arc::new(FrozenClock(Mutex::new(frozen))), random: Arc::new(StdRandom::seeded(7)) };
    let table = Table::create(f.location.clone(), env, Schema::parse(TWO_COLUMNS).unwrap()).await.unwrap();
    for i in 0..5 {
        table.append(&[rows(table.schema(), i..i + 1)], &CommitOptions::default()).await.unwrap();
    }
    let history = table.latest().await.unwrap().history().await.unwrap();
    assert_eq!(history[0].timestamp, frozen);
    assert!(history.windows(2).all(|w| w[0].timestamp < w[1].timestamp), "strictly increasing");
    assert!(serde_json::to_string(&history[3].timestamp).unwrap().ends_with("Z\""));
    let at = history[3].timestamp + TimeDelta::nanoseconds(500);
    assert_eq!(table.checkout_as_of(at).await.unwrap().version(), 3, "time travel bisects on these timestamps");
}

/// Seeded randomness makes transaction ids (and file names) reproducible.
#[tokio::test]
async fn seeded_environment_replays_the_same_ids() {
    let mut ids = Vec::new();
    for _ in 0..2 {
        let f = local_backends().into_iter().next().unwrap();
        let env = Env { clock: Arc::new(concord::SystemClock::default()), random: Arc::new(StdRandom::seeded(42)) };
        let table = Table::create(f.location.clone(), env, Schema::parse(TWO_COLUMNS).unwrap()).await.unwrap();
        let info = table.append(&[rows(table.schema(), 0..3)], &CommitOptions::default()).await.unwrap();
        ids.push((table.manifest().transaction().id, info.transaction_id));
    }
    assert_eq!(ids[0], ids[1]);
}

/// Restore reuses the old version's segments (nothing rewritten), and later appends
/// get fresh fragment ids.
#[tokio::test]
async fn restore_reuses_segments_and_keeps_fragment_ids_unique() {
    let f = local_backends().into_iter().next().unwrap();
    let table = Table::create(f.location.clone(), Env::system(), Schema::parse(TWO_COLUMNS).unwrap()).await.unwrap();
    for i in 0..3 {
        table.append(&[rows(table.schema(), i * 10..i * 10 + 10)], &CommitOptions::default()).await.unwrap();
    }
    let v2 = table.checkout(2).await.unwrap();
    let restore = table.restore(2, &CommitOptions::default()).await.unwrap();
    let restored = table.checkout(restore.version).await.unwrap();
    assert_eq!(restored.manifest().segments, v2.manifest().segments, "same segment files");
    assert_eq!(crate::common::ids(&restored).await, (0..20).collect::<Vec<_>>());
    table.append(&[rows(table.schema(), 100..101)], &CommitOptions::default()).await.unwrap();
    let fragments = table.latest().await.unwrap().fragments().await.unwrap();
    let mut ids: Vec<u64> = fragments.iter().map(|f| f.id).collect();
    ids.dedup();
    assert_eq!(ids, vec![0, 1, 3], "fragment 2 was dropped by the restore; the new one is 3");
}

/// A filter on a sorted column skips row groups whose statistics rule it out, and
/// returns exactly the matching rows.
#[tokio::test]
async fn filters_prune_row_groups() {
    let f = local_backends().into_iter().next().unwrap();
    let table = Table::create(f.location.clone(), Env::system(), Schema::parse(TWO_COLUMNS).unwrap()).await.unwrap();
    table.append(&[rows(table.schema(), 0..200_000)], &CommitOptions::default()).await.unwrap();
    let table = table.latest().await.unwrap();
    let scan = table.scan(ScanOptions { filter: Some("id >= 1000 AND id < 1010".into()), ..Default::default() }).await.unwrap();
    let metrics = scan.metrics_handle();
    let batches = scan.collect().await.unwrap();
    assert_eq!(batches.iter().map(|b| b.num_rows()).sum::<usize>(), 10);
    let m = *metrics.lock().unwrap();
    assert_eq!((m.row_groups_total, m.row_groups_read), (4, 1), "{m:?}");
    assert_eq!(table.count(Some("name = 'n199999' OR id < 3")).await.unwrap(), 4);
    let limited = table.scan(ScanOptions { columns: Some(vec!["name".into()]), limit: Some(5), ..Default::default() }).await.unwrap();
    let batches = limited.collect().await.unwrap();
    assert_eq!(batches.iter().map(|b| b.num_rows()).sum::<usize>(), 5);
    assert_eq!(batches[0].num_columns(), 1);
}

/// Manifests round-trip through their JSON form, and version files are named by
/// inverted version numbers.
#[tokio::test]
async fn manifests_round_trip_and_version_files_are_inverted() {
    let f = local_backends().into_iter().next().unwrap();
    let table = Table::create(f.location.clone(), Env::system(), Schema::parse(TWO_COLUMNS).unwrap()).await.unwrap();
    table.append(&[rows(table.schema(), 0..3)], &CommitOptions::default()).await.unwrap();
    let manifest = table.latest().await.unwrap().manifest().clone();
    let json = serde_json::to_string(&manifest).unwrap();
    assert_eq!(serde_json::from_str::<Manifest>(&json).unwrap(), manifest);
    let path = f.location.root().clone().join("_versions").join(concord::manifest::version_file_name(1).as_str());
    let stored = f.location.store().get(&path).await.unwrap().bytes().await.unwrap();
    assert_eq!(serde_json::from_slice::<Manifest>(&stored).unwrap(), manifest);
    assert_eq!(concord::manifest::version_file_name(1), "18446744073709551614.json");
}

/// Files and row groups are cut by bytes, not only rows: 50,000 rows of 3,072 bytes
/// (150 MiB, far fewer than a file's 2^20 rows) make three files of at most 64 MiB of
/// Arrow data, with row groups of at most 32 MiB, and read back whole.
#[tokio::test]
async fn wide_rows_are_cut_into_files_and_row_groups_by_bytes() {
    use concord::arrow::array::FixedSizeBinaryArray;
    let f = local_backends().into_iter().next().unwrap();
    let schema = Schema::parse("id bigint not null, v fixed(3072)").unwrap();
    let table = Table::create(f.location.clone(), Env::system(), schema.clone()).await.unwrap();
    let rows = 50_000usize;
    let batches: Vec<RecordBatch> = (0..rows)
        .step_by(5_000)
        .map(|start| {
            let ids = Int64Array::from((start as i64..start as i64 + 5_000).collect::<Vec<_>>());
            let v = FixedSizeBinaryArray::try_from_iter((start..start + 5_000).map(|i| [(i % 251) as u8; 3072])).unwrap();
            RecordBatch::try_new(schema.arrow_schema(), vec![Arc::new(ids), Arc::new(v)]).unwrap()
        })
        .collect();
    table.append(batches.as_slice(), &CommitOptions::default()).await.unwrap();
    let table = table.latest().await.unwrap();
    let fragments = table.fragments().await.unwrap();
    assert_eq!(fragments.len(), 3, "150 MiB in files of at most 64 MiB");
    assert!(
        fragments.iter().all(|f| f.files[0].size_bytes <= 66 << 20),
        "{:?}",
        fragments.iter().map(|f| f.files[0].size_bytes).collect::<Vec<_>>()
    );
    let scan = table.scan(ScanOptions::default()).await.unwrap();
    let metrics = scan.metrics_handle();
    let read: usize = scan.collect().await.unwrap().iter().map(|b| b.num_rows()).sum();
    assert_eq!(read, rows);
    let m = *metrics.lock().unwrap();
    assert!(m.row_groups_total >= 5, "row groups of at most 32 MiB: {m:?}");
}

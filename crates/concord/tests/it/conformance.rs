//! Commit-coordinator conformance: every supported backend runs the same checks,
//! gated by its capability flags (in the style of object_store's integration suite).

use std::sync::Arc;

use bytes::Bytes;
use concord::arrow::array::{Int64Array, RecordBatch, StringArray};
use concord::object_store::memory::InMemory;
use concord::object_store::path::Path;
use concord::object_store::ObjectStore;
use concord::store::{
    CommitCoordinator, CreateOutcome, DynamoDbCoordinator, LatestLookup, ObjectStoreCoordinator, StoreKind, SyncedLocalStore,
};
use concord::{CommitOptions, Env, Schema, Table, TableLocation};
use futures::StreamExt;

use crate::servers;

use crate::counting::{CountingStore, Tally};

/// One backend under test: a fresh, empty table location with request counting.
pub struct Fixture {
    pub name: &'static str,
    pub location: TableLocation,
    pub counting: Arc<CountingStore>,
    /// The DynamoDB coordinator, when the fixture commits through one (its requests
    /// are counted there).
    pub dynamo: Option<Arc<DynamoDbCoordinator>>,
    _dir: Option<tempfile::TempDir>,
}

impl Fixture {
    fn on(name: &'static str, inner: Arc<dyn ObjectStore>, kind: StoreKind, lookup: LatestLookup, dir: Option<tempfile::TempDir>) -> Self {
        Self::on_root(name, inner, Path::from("tables/t"), kind, lookup, dir)
    }

    fn on_root(
        name: &'static str,
        inner: Arc<dyn ObjectStore>,
        root: Path,
        kind: StoreKind,
        lookup: LatestLookup,
        dir: Option<tempfile::TempDir>,
    ) -> Self {
        let counting = Arc::new(CountingStore::new(inner));
        let store: Arc<dyn ObjectStore> = counting.clone();
        let coordinator = Arc::new(ObjectStoreCoordinator::new(store.clone(), root.clone(), lookup));
        let display_prefix = format!("{name}://");
        let location = TableLocation::builder(format!("{name}://tables/t"), store, root, kind)
            .display_prefix(display_prefix)
            .coordinator(coordinator)
            .build();
        Fixture { name, location, counting, dynamo: None, _dir: dir }
    }

    /// A fresh table on a running server, with request counting.
    async fn on_server(server: crate::servers::Server) -> Self {
        server.prepare().await;
        let uri = server.fresh_uri("conformance");
        let real = server.resolver().resolve(&uri).unwrap_or_else(|e| panic!("{}: {e}", server.name));
        let counting = Arc::new(CountingStore::new(real.store().clone()));
        let store: Arc<dyn ObjectStore> = counting.clone();
        let mut builder = TableLocation::builder(&uri, store, real.root().clone(), real.kind()).display_prefix(real.display_prefix());
        if let Some(lister) = real.lister().cloned() {
            builder = builder.lister(crate::counting::CountingLister::wrap(lister, &counting));
        }
        let location = builder.build();
        let (location, dynamo) = match &server.coordinator {
            None => (location, None),
            Some(spec) => {
                let c = Arc::new(DynamoDbCoordinator::for_location(spec, &location, &server.option_pairs()).unwrap());
                (location.with_coordinator(c.clone()), Some(c))
            }
        };
        Fixture { name: server.name, location, counting, dynamo, _dir: None }
    }

    /// Requests to the store, plus DynamoDB's for a coordinated fixture.
    pub fn dynamo_requests(&self) -> u64 {
        self.dynamo.as_ref().map_or(0, |d| d.requests())
    }

    fn coordinator(&self) -> &Arc<dyn CommitCoordinator> {
        self.location.coordinator()
    }
}

/// Every backend the project supports: memory and local disk always; S3 (moto), S3 with
/// the DynamoDB coordinator (moto) and Azure (Azurite) when scripts/test runs them.
pub async fn backends() -> Vec<Fixture> {
    let mut fixtures = local_backends();
    for server in [servers::moto_s3(), servers::moto_s3_dynamodb(), servers::azurite()].into_iter().flatten() {
        fixtures.push(Fixture::on_server(server).await);
    }
    fixtures
}

/// The backends that need no server: memory (two latest-version lookups) and local disk.
pub fn local_backends() -> Vec<Fixture> {
    // The store the product ships for local disk (it fsyncs every write).
    let dir = tempfile::tempdir().unwrap();
    let local: Arc<dyn ObjectStore> = Arc::new(SyncedLocalStore::new());
    let root = Path::from_absolute_path(dir.path()).unwrap();
    vec![
        Fixture::on("memory", Arc::new(InMemory::new()), StoreKind::Memory, LatestLookup::HintThenProbe, None),
        // Memory lists in key order, so it also exercises the ordered-listing lookup object stores use.
        Fixture::on("memory-ordered-listing", Arc::new(InMemory::new()), StoreKind::Memory, LatestLookup::OrderedListing, None),
        Fixture::on_root("local", local, root, StoreKind::Local, LatestLookup::HintThenProbe, Some(dir)),
    ]
}

/// The library's conformance suite (`concord::store::conformance`) on every backend.
#[tokio::test]
async fn coordinator_conformance_on_every_backend() {
    for f in backends().await {
        concord::store::conformance::run(f.name, &f.location).await;
    }
}

async fn create_versions(c: &Arc<dyn CommitCoordinator>, range: std::ops::RangeInclusive<u64>) {
    for v in range {
        let manifest = Bytes::from(format!("{{\"tag\":\"{v}\"}}"));
        assert_eq!(c.create_version(v, manifest).await.unwrap(), CreateOutcome::Created);
        c.after_commit(v).await;
    }
}

/// Finding the latest version costs the same few requests at 10 and at 1,000 versions.
#[tokio::test]
async fn latest_version_costs_constant_requests() {
    for f in backends().await {
        let c = f.coordinator();
        create_versions(c, 0..=9).await;
        let d0 = f.dynamo_requests();
        let (latest, small) = f.counting.measure(c.latest_version(None)).await;
        let d_small = f.dynamo_requests() - d0;
        assert_eq!(latest.unwrap(), Some(9));
        create_versions(c, 10..=999).await;
        let d0 = f.dynamo_requests();
        let (latest, large) = f.counting.measure(c.latest_version(None)).await;
        let d_large = f.dynamo_requests() - d0;
        assert_eq!(latest.unwrap(), Some(999));
        eprintln!(
            "{}: latest-version requests at 10 versions {} (+{d_small} DynamoDB), at 1000 versions {} (+{d_large} DynamoDB)",
            f.name,
            small.requests(),
            large.requests()
        );
        assert!(large.requests() + d_large <= 4, "{}: {large:?}", f.name);
        assert_eq!((small.requests(), d_small), (large.requests(), d_large), "{}", f.name);
    }
}

fn one_row(schema: &Schema, id: i64) -> RecordBatch {
    RecordBatch::try_new(schema.arrow_schema(), vec![Arc::new(Int64Array::from(vec![id])), Arc::new(StringArray::from(vec![Some("x")]))])
        .unwrap()
}

/// Average requests of `n` consecutive appends (merges of segments come every few
/// commits, so single commits vary; the average is what grows or not).
async fn append_cost(f: &Fixture, table: &Table, n: u64, first_id: i64) -> Tally {
    let (_, tally) = f
        .counting
        .measure(async {
            for i in 0..n as i64 {
                table.append(&[one_row(table.schema(), first_id + i)], &CommitOptions::default()).await.unwrap();
            }
        })
        .await;
    Tally {
        puts: tally.puts / n,
        gets: tally.gets / n,
        lists: tally.lists / n,
        deletes: 0,
        bytes_written: tally.bytes_written / n,
        bytes_read: tally.bytes_read / n,
    }
}

/// Opening the latest version and committing a one-row append cost the same number of
/// requests, and about the same bytes, at 10 and at 1,000 versions.
#[tokio::test]
async fn open_and_append_cost_do_not_grow_with_versions() {
    for f in backends().await {
        let schema = Schema::parse("id bigint not null, name varchar").unwrap();
        let table = Table::create(f.location.clone(), Env::system(), schema).await.unwrap();
        append_cost(&f, &table, 9, 0).await;
        let d0 = f.dynamo_requests();
        let small_append = append_cost(&f, &table, 64, 100).await;
        let d_small_append = (f.dynamo_requests() - d0) as f64 / 64.0;
        let d0 = f.dynamo_requests();
        let started = std::time::Instant::now();
        let (opened, small_open) = f.counting.measure(Table::open(f.location.clone(), Env::system())).await;
        let small_open_ms = started.elapsed().as_secs_f64() * 1000.0;
        let d_small_open = f.dynamo_requests() - d0;
        assert_eq!(opened.unwrap().version(), 73);
        append_cost(&f, &table, 1000 - 73, 1000).await;
        let d0 = f.dynamo_requests();
        let started = std::time::Instant::now();
        let large_append = append_cost(&f, &table, 64, 5000).await;
        let append_ms = started.elapsed().as_secs_f64() * 1000.0 / 64.0;
        let d_large_append = (f.dynamo_requests() - d0) as f64 / 64.0;
        let d0 = f.dynamo_requests();
        let (opened, large_open) = f.counting.measure(Table::open(f.location.clone(), Env::system())).await;
        let d_large_open = f.dynamo_requests() - d0;
        assert_eq!(opened.unwrap().version(), 1064);
        eprintln!(
            "{}: DynamoDB requests: open {d_small_open} -> {d_large_open}, append/commit {d_small_append:.1} -> {d_large_append:.1}; \
             uncontended append {append_ms:.1} ms/commit at ~1000 versions, open {small_open_ms:.1} ms",
            f.name
        );
        assert_eq!(d_small_open, d_large_open, "{}: DynamoDB requests per open", f.name);
        eprintln!(
            "{}: open-latest requests {} -> {}; append requests/commit {} -> {}, bytes written/commit {} -> {}, read/commit {} -> {}",
            f.name,
            small_open.requests(),
            large_open.requests(),
            small_append.requests(),
            large_append.requests(),
            small_append.bytes_written,
            large_append.bytes_written,
            small_append.bytes_read,
            large_append.bytes_read
        );
        assert_eq!(small_open.requests(), large_open.requests(), "{}: open-latest requests", f.name);
        assert!(large_append.requests() <= small_append.requests() + 1, "{}: {small_append:?} vs {large_append:?}", f.name);
        assert!(large_append.bytes_written <= small_append.bytes_written * 2, "{}: {small_append:?} vs {large_append:?}", f.name);
    }
}

/// Cooperative commits on every backend: 8 writers, each its own handle (as processes),
/// append at once; every append lands once, and once all returned no announcement is
/// left (retired by its owner, or in bulk by the writer that carried it: one request
/// on S3 and Azure).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn contended_appends_land_once_and_leave_no_announcement_on_every_backend() {
    for f in backends().await {
        let schema = Schema::parse("id bigint not null, name varchar").unwrap();
        Table::create(f.location.clone(), Env::system(), schema).await.unwrap();
        let tasks: Vec<_> = (0..8i64)
            .map(|w| {
                let location = f.location.clone();
                tokio::spawn(async move {
                    let table = Table::open(location, Env::system()).await.unwrap();
                    for i in 0..6 {
                        table.append(&[one_row(table.schema(), w * 100 + i)], &CommitOptions::default()).await.unwrap();
                    }
                })
            })
            .collect();
        for t in tasks {
            t.await.unwrap();
        }
        let table = Table::open(f.location.clone(), Env::system()).await.unwrap();
        let history = table.history().await.unwrap();
        let carried = history.iter().flat_map(|v| &v.transactions).filter(|t| t.carried_by.is_some()).count();
        let announced = Path::from(format!("{}/_announced", f.location.root()));
        let left: Vec<_> = f.counting.list(Some(&announced)).map(|m| m.unwrap().location.to_string()).collect().await;
        let read = f.counting.counts.announcement_gets.load(std::sync::atomic::Ordering::SeqCst);
        eprintln!(
            "{}: 48 appends in {} versions, {carried} carried, {read} announcements read, {} left",
            f.name,
            history.len() - 1,
            left.len()
        );
        assert_eq!(table.count(None).await.unwrap(), 48, "{}", f.name);
        assert!(left.is_empty(), "{}: {left:?}", f.name);
        // An announcement's name carries it where a key holds it (every store but the
        // local disk, whose file names end at 255 bytes): includers read none.
        if f.name == "local" {
            assert!(carried == 0 || read > 0, "local: carried from the objects");
        } else {
            assert_eq!(read, 0, "{}: carried from the names", f.name);
        }
    }
}

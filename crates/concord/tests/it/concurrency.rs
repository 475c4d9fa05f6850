//! Many writers on one table: threads and OS processes really racing, and
//! deterministic faults injected through a wrapping coordinator.
//! After every race: versions form one gap-free chain, every acknowledged commit is in
//! exactly one version (its own), and replaying the history reproduces every version.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;
use concord::arrow::array::{Int64Array, RecordBatch, StringArray};
use concord::store::{CommitCoordinator, CoordinatorCapabilities, CreateOutcome};
use concord::{
    CommitError, CommitInfo, CommitOptions, Env, RetryPolicy, Schema, StorageError, StoreResolver, Table, TableLocation, WriteError,
};

use crate::common::*;

/// Rows `ids` with names `n<id>` and null scores, in the common [`SCHEMA`].
fn one_batch(schema: &Schema, ids: std::ops::Range<i64>) -> RecordBatch {
    let n = ids.end - ids.start;
    RecordBatch::try_new(
        schema.arrow_schema(),
        vec![
            Arc::new(Int64Array::from(ids.clone().collect::<Vec<_>>())),
            Arc::new(StringArray::from(ids.map(|i| format!("n{i}")).collect::<Vec<_>>())),
            concord::arrow::array::new_null_array(&concord::arrow::datatypes::DataType::Float64, n as usize),
        ],
    )
    .unwrap()
}

/// Checks the history of `table` against acknowledged commits, and replays it:
/// each version's ids = previous ids + what its transactions wrote, in order (a
/// version may hold several: group and cooperative commits).
async fn verify_history(table: &Table, acknowledged: &[CommitInfo], written: &BTreeMap<uuid::Uuid, Vec<i64>>) {
    let latest = table.latest().await.unwrap();
    let history = latest.history().await.unwrap();
    let versions: Vec<u64> = history.iter().map(|v| v.version).collect();
    assert_eq!(versions, (0..=latest.version()).collect::<Vec<_>>(), "one chain, no gaps");
    let mut at: HashMap<uuid::Uuid, u64> = HashMap::new();
    for v in &history {
        for t in &v.transactions {
            assert!(at.insert(t.transaction_id, v.version).is_none(), "{} committed twice", t.transaction_id);
        }
    }
    for info in acknowledged {
        assert_eq!(at.get(&info.transaction_id), Some(&info.version), "acknowledged commit is at the version it was told");
    }
    let mut expected: Vec<i64> = Vec::new();
    for v in &history {
        for t in &v.transactions {
            match t.operation.as_str() {
                "create" => expected.clear(),
                "append" => expected.extend(written.get(&t.transaction_id).expect("appended ids known")),
                "withdraw" => {}
                other => panic!("unexpected operation {other}"),
            }
        }
        expected.sort_unstable();
        let actual = ids(&latest.checkout(v.version).await.unwrap()).await;
        assert_eq!(actual, expected, "version {} = version {} + its appends", v.version, v.version.saturating_sub(1));
    }
}

/// 16 writers on their own handles (and, for local disk, their own resolvers, like
/// separate processes) append concurrently; all succeed.
#[test]
fn threads_appending_concurrently_all_succeed() {
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(4).enable_all().build().unwrap();
    runtime.block_on(async {
        let dir = tempfile::tempdir().unwrap();
        let local_uri = dir.path().join("t").to_string_lossy().into_owned();
        let shared = Arc::new(StoreResolver::new());
        for uri in ["memory://race", local_uri.as_str()] {
            let table = create_table(&shared, uri, SCHEMA).await;
            let (writers, appends) = (16i64, 8i64);
            let tasks: Vec<_> = (0..writers)
                .map(|w| {
                    let (uri, shared) = (uri.to_string(), shared.clone());
                    tokio::spawn(async move {
                        let own = StoreResolver::new();
                        let resolver = if uri.starts_with("memory://") { &*shared } else { &own };
                        let table = open_table(resolver, &uri).await;
                        let mut done = Vec::new();
                        for k in 0..appends {
                            let first = (w * appends + k) * 10;
                            let info = table.append(&[one_batch(table.schema(), first..first + 10)], &CommitOptions::default()).await;
                            done.push((info.expect("concurrent appends never fail"), (first..first + 10).collect::<Vec<_>>()));
                        }
                        done
                    })
                })
                .collect();
            let mut acknowledged = Vec::new();
            let mut written = BTreeMap::new();
            for t in tasks {
                for (info, ids) in t.await.unwrap() {
                    written.insert(info.transaction_id, ids);
                    acknowledged.push(info);
                }
            }
            let latest = table.latest().await.unwrap();
            // Appends that lost a race may share a version (cooperative commits).
            assert!(latest.version() <= (writers * appends) as u64, "{uri}");
            assert_eq!(latest.count(None).await.unwrap(), (writers * appends * 10) as u64, "{uri}");
            let ids = ids(&latest).await;
            assert_eq!(ids, (0..writers * appends * 10).collect::<Vec<_>>(), "{uri}: every row exactly once");
            assert!(acknowledged.iter().any(|i| i.attempts > 1), "{uri}: the writers really raced");
            verify_history(&latest, &acknowledged, &written).await;
        }
    });
}

/// What a fault-injecting coordinator does to `create_version`.
#[derive(Debug, Clone, Copy)]
enum Fault {
    /// The write lands, but the caller sees an error (lost response), `n` times.
    LoseResponse(u32),
    /// Nothing lands and reading the new version back fails too: storage is unreachable.
    Unreachable,
    /// The write lands, then storage becomes unreachable for reading it back.
    LandThenUnreachable,
    /// Just before each create, another writer takes the version (a copy of ours
    /// under another transaction id), forever.
    Interloper,
}

#[derive(Debug)]
struct FaultyCoordinator {
    inner: Arc<dyn CommitCoordinator>,
    fault: Fault,
    injected: AtomicU32,
}

fn unreachable_error(version: u64) -> StorageError {
    StorageError::new(
        "creating",
        format!("version {version}"),
        concord::object_store::Error::Generic { store: "test", source: "connection reset".into() },
    )
}

#[async_trait]
impl CommitCoordinator for FaultyCoordinator {
    fn capabilities(&self) -> CoordinatorCapabilities {
        self.inner.capabilities()
    }
    async fn create_version(&self, version: u64, manifest: Bytes) -> Result<CreateOutcome, StorageError> {
        match self.fault {
            Fault::LoseResponse(n) if self.injected.fetch_add(1, Ordering::SeqCst) < n => {
                self.inner.create_version(version, manifest).await?;
                Err(unreachable_error(version))
            }
            Fault::Unreachable => Err(unreachable_error(version)),
            Fault::LandThenUnreachable => {
                self.inner.create_version(version, manifest).await?;
                Err(unreachable_error(version))
            }
            Fault::Interloper => {
                let mut other: serde_json::Value = serde_json::from_slice(&manifest).unwrap();
                other["transactions"][0]["id"] = serde_json::json!(uuid::Uuid::new_v4());
                self.injected.fetch_add(1, Ordering::SeqCst);
                self.inner.create_version(version, Bytes::from(serde_json::to_vec(&other).unwrap())).await?;
                self.inner.create_version(version, manifest).await
            }
            _ => self.inner.create_version(version, manifest).await,
        }
    }
    async fn read_version(&self, version: u64) -> Result<Option<Bytes>, StorageError> {
        match self.fault {
            // Versions committed before the fault stay readable; the one being committed does not.
            Fault::Unreachable | Fault::LandThenUnreachable if version > 0 => Err(unreachable_error(version)),
            _ => self.inner.read_version(version).await,
        }
    }
    async fn latest_version(&self, known: Option<u64>) -> Result<Option<u64>, StorageError> {
        self.inner.latest_version(known).await
    }
    async fn list_versions(&self) -> Result<Vec<u64>, StorageError> {
        self.inner.list_versions().await
    }
    async fn remove_version(&self, version: u64) -> Result<(), StorageError> {
        self.inner.remove_version(version).await
    }
    fn describe_version(&self, version: u64) -> String {
        self.inner.describe_version(version)
    }
}

/// A table on memory whose commits go through `fault` (version 0 is created cleanly).
async fn faulty_table(fault: Fault) -> (Table, Arc<FaultyCoordinator>, TableLocation) {
    let resolver = StoreResolver::new();
    let clean = location(&resolver, "memory://faults");
    Table::create(clean.clone(), Env::system(), Schema::parse(SCHEMA).unwrap()).await.unwrap();
    let faulty = Arc::new(FaultyCoordinator { inner: clean.coordinator().clone(), fault, injected: AtomicU32::new(0) });
    let location = clean.clone().with_coordinator(faulty.clone());
    (Table::open(location.clone(), Env::system()).await.unwrap(), faulty, clean)
}

fn quick_retries() -> CommitOptions {
    CommitOptions {
        retry: RetryPolicy { max_attempts: 5, timeout: std::time::Duration::from_secs(5), ..RetryPolicy::default() },
        ..CommitOptions::default()
    }
}

/// The commit landed but its response was lost: the writer reads the version back,
/// recognises its own transaction, and reports success. Exactly one version.
#[tokio::test]
async fn lost_response_after_the_write_landed_is_a_success_not_a_duplicate() {
    let (table, _, clean) = faulty_table(Fault::LoseResponse(1)).await;
    let info = table.append(&[one_batch(table.schema(), 0..5)], &quick_retries()).await.expect("resolved as success");
    assert_eq!(info.version, 1);
    let clean_table = Table::open(clean, Env::system()).await.unwrap();
    assert_eq!(clean_table.version(), 1, "exactly one version carries the transaction");
    assert_eq!(clean_table.history().await.unwrap()[1].transaction_id, info.transaction_id);
    assert_eq!(clean_table.count(None).await.unwrap(), 5);
}

/// Storage unreachable past the budget: a typed CommitStateUnknown naming the version
/// and the transaction, never a guess.
#[tokio::test]
async fn unreachable_storage_reports_commit_state_unknown() {
    let (table, _, _) = faulty_table(Fault::Unreachable).await;
    let err = table.append(&[one_batch(table.schema(), 0..5)], &quick_retries()).await.unwrap_err();
    match err {
        WriteError::Commit(CommitError::CommitStateUnknown { version, .. }) => assert_eq!(version, 1),
        other => panic!("expected CommitStateUnknown, got {other:?}"),
    }
}

/// The commit landed, but storage stayed unreachable to read it back: the caller gets
/// CommitStateUnknown; retrying with the same idempotency key once storage is back
/// commits nothing new and reports the version that landed. One copy in the history.
#[tokio::test]
async fn retry_with_the_same_key_after_commit_state_unknown_leaves_one_copy() {
    let (table, _, clean) = faulty_table(Fault::LandThenUnreachable).await;
    let keyed = CommitOptions { idempotency_key: Some("load-42".into()), ..quick_retries() };
    let batch = one_batch(table.schema(), 0..5);
    let err = table.append(std::slice::from_ref(&batch), &keyed).await.unwrap_err();
    assert!(matches!(err, WriteError::Commit(CommitError::CommitStateUnknown { version: 1, .. })), "{err:?}");
    let recovered = Table::open(clean.clone(), Env::system()).await.unwrap();
    let info = recovered.append(&[batch], &keyed).await.unwrap();
    assert!(info.idempotent_replay, "the earlier attempt landed: nothing new is written");
    assert_eq!(info.version, 1);
    let latest = recovered.latest().await.unwrap();
    assert_eq!((latest.version(), latest.count(None).await.unwrap()), (1, 5), "one copy");
}

/// A writer that loses every race gives up with a typed TooMuchContention once its
/// attempts are spent, and nothing of it is visible. Having lost, it announced its
/// append (cooperative commits), so it withdraws it first: the chain records the
/// withdrawal (here in the interloper's copy of the withdrawing version) before the
/// failure is reported.
#[tokio::test]
async fn endless_contention_is_a_typed_error_and_leaves_nothing() {
    let (table, faulty, clean) = faulty_table(Fault::Interloper).await;
    let err = table.append(&[one_batch(table.schema(), 0..5)], &quick_retries()).await.unwrap_err();
    let WriteError::Commit(CommitError::TooMuchContention { attempts, .. }) = err else {
        panic!("expected TooMuchContention, got {err:?}")
    };
    assert_eq!(attempts, 5, "its own attempts: the withdrawal's are not counted");
    assert_eq!(faulty.injected.load(Ordering::SeqCst), 6, "five appends and the withdrawal");
    let history = Table::open(clean, Env::system()).await.unwrap().history().await.unwrap();
    assert_eq!(history.len(), 7, "create + the interloper's five versions + the withdrawal");
    assert_eq!(history[6].operation, "withdraw");
    assert!(history.iter().all(|v| v.rebased_over.len() < 5), "the loser's own record never landed");
}

/// Writers with no retries: some lose (typed TooMuchContention), and exactly the
/// acknowledged ones are in the table.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn failed_writers_leave_nothing_behind() {
    let resolver = Arc::new(StoreResolver::new());
    let table = create_table(&resolver, "memory://no-retries", SCHEMA).await;
    let no_retries = CommitOptions { retry: RetryPolicy { max_attempts: 1, ..RetryPolicy::default() }, ..CommitOptions::default() };
    let tasks: Vec<_> = (0..12i64)
        .map(|w| {
            let (table, options) = (table.clone(), no_retries.clone());
            tokio::spawn(async move { (w, table.append(&[one_batch(table.schema(), w * 100..w * 100 + 100)], &options).await) })
        })
        .collect();
    let mut expected = Vec::new();
    for t in tasks {
        match t.await.unwrap() {
            (w, Ok(_)) => expected.extend(w * 100..w * 100 + 100),
            (_, Err(WriteError::Commit(CommitError::TooMuchContention { .. }))) => {}
            (_, Err(other)) => panic!("unexpected error {other:?}"),
        }
    }
    expected.sort_unstable();
    assert_eq!(ids(&table.latest().await.unwrap()).await, expected);
}

/// Cooperative commits on, then off (the table property `cooperative_commits=false`):
/// 8 writers with their own handles (as processes) append on local disk. On, some
/// appends that lost a race are carried by another writer's commit; off, none is, and
/// nothing is announced.
#[test]
fn cooperative_commits_carry_lost_appends_unless_the_table_turns_them_off() {
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(4).enable_all().build().unwrap();
    runtime.block_on(async {
        for on in [true, false] {
            let dir = tempfile::tempdir().unwrap();
            let uri = dir.path().join("t").to_string_lossy().into_owned();
            let resolver = StoreResolver::new();
            let table = create_table(&resolver, &uri, SCHEMA).await;
            if !on {
                let set = BTreeMap::from([("cooperative_commits".to_string(), "false".to_string())]);
                table.set_properties(&set, &[], &CommitOptions::default()).await.unwrap();
            }
            let tasks: Vec<_> = (0..8i64)
                .map(|w| {
                    let uri = uri.clone();
                    tokio::spawn(async move {
                        let table = open_table(&StoreResolver::new(), &uri).await;
                        for k in 0..10 {
                            let first = (w * 10 + k) * 10;
                            table.append(&[one_batch(table.schema(), first..first + 10)], &CommitOptions::default()).await.unwrap();
                        }
                    })
                })
                .collect();
            for t in tasks {
                t.await.unwrap();
            }
            let latest = table.latest().await.unwrap();
            let history = latest.history().await.unwrap();
            let carried = history.iter().flat_map(|v| &v.transactions).filter(|t| t.carried_by.is_some()).count();
            let appends = history.iter().flat_map(|v| &v.transactions).filter(|t| t.operation == "append").count();
            assert_eq!((appends, latest.count(None).await.unwrap()), (80, 800), "on: {on}");
            let announced = std::fs::read_dir(dir.path().join("t/_announced")).map(|d| d.count()).unwrap_or(0);
            eprintln!("cooperative commits {on}: {} versions for 80 appends, {carried} carried", history.len() - 1);
            // Retired by their owners, or, when carried, by the writer that carried them.
            assert_eq!(announced, 0, "on: {on}: every announcement retired");
            if on {
                assert!(carried > 0, "some lost appends were carried");
            } else {
                assert_eq!(carried, 0, "none carried");
                assert_eq!(announced, 0, "nothing announced");
            }
        }
    });
}

//! The commit seam: creating version N exactly once.
//!
//! Every commit goes through [`CommitCoordinator::create_version`]. Implementations:
//! [`super::ObjectStoreCoordinator`] (put-if-absent on the store itself). An external
//! coordinator (e.g. DynamoDB for stores without conditional writes) implements the
//! same trait; callers do not change.

use std::fmt::Debug;

use async_trait::async_trait;
use bytes::Bytes;

use crate::error::StorageError;

/// What a coordinator can do, for callers and for the conformance suite (which runs
/// a check only where its capability is claimed).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CoordinatorCapabilities {
    /// `create_version` is atomic: of concurrent creators of one version, exactly one
    /// wins (the suite races 16 creators). A coordinator without it is unsafe for
    /// concurrent writers.
    pub atomic_create: bool,
    /// The latest version is found with the help of an advisory hint object
    /// (`_latest_version_hint.json`) that must never make the answer wrong (the suite
    /// writes stale, wrong and garbled hints).
    pub advisory_hint: bool,
    /// A version may be read while it is being created (a writer that has lost races
    /// reads the version it creates, to have the winner at once if it loses again).
    /// False where reading a version completes half-finished commits (the DynamoDB
    /// coordinator): the read would race with the writer's own protocol, repairing its
    /// commit under it (requests that depend on timing).
    pub read_while_creating: bool,
}

/// Outcome of a create attempt the store answered clearly.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum CreateOutcome {
    /// This call created the version.
    Created,
    /// The version already existed (possibly written by this very caller if an earlier
    /// attempt's response was lost: callers compare transaction ids to find out).
    AlreadyExists,
}

/// Creates each version of a table exactly once (see the module docs); the conformance
/// suite (`concord::store::conformance`, feature `testing`) checks an implementation.
///
/// A coordinator of one's own, here one that counts the versions it creates and leaves
/// the rest to the store's put-if-absent:
///
/// ```
/// use std::sync::atomic::{AtomicU64, Ordering};
/// use std::sync::Arc;
/// use concord::store::{CommitCoordinator, CoordinatorCapabilities, CreateOutcome, LatestLookup, ObjectStoreCoordinator, StoreKind};
/// use concord::{Env, Schema, StorageError, Table, TableLocation};
/// use concord::object_store::{memory::InMemory, path::Path, ObjectStore};
///
/// #[derive(Debug)]
/// struct Counting { inner: ObjectStoreCoordinator, created: AtomicU64 }
///
/// #[async_trait::async_trait]
/// impl CommitCoordinator for Counting {
///     fn capabilities(&self) -> CoordinatorCapabilities { self.inner.capabilities() }
///     async fn create_version(&self, version: u64, manifest: bytes::Bytes) -> Result<CreateOutcome, StorageError> {
///         let outcome = self.inner.create_version(version, manifest).await?;
///         if outcome == CreateOutcome::Created { self.created.fetch_add(1, Ordering::Relaxed); }
///         Ok(outcome)
///     }
///     async fn read_version(&self, version: u64) -> Result<Option<bytes::Bytes>, StorageError> { self.inner.read_version(version).await }
///     async fn latest_version(&self, known: Option<u64>) -> Result<Option<u64>, StorageError> { self.inner.latest_version(known).await }
///     async fn list_versions(&self) -> Result<Vec<u64>, StorageError> { self.inner.list_versions().await }
///     async fn remove_version(&self, version: u64) -> Result<(), StorageError> { self.inner.remove_version(version).await }
///     fn describe_version(&self, version: u64) -> String { self.inner.describe_version(version) }
/// }
///
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// let store: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
/// let root = Path::from("t");
/// let coordinator = Arc::new(Counting {
///     inner: ObjectStoreCoordinator::new(store.clone(), root.clone(), LatestLookup::HintThenProbe),
///     created: AtomicU64::new(0),
/// });
/// let location = TableLocation::builder("memory://custom/t", store, root, StoreKind::Memory).coordinator(coordinator.clone()).build();
/// Table::create(location, Env::system(), Schema::parse("id bigint")?).await?;
/// assert_eq!(coordinator.created.load(Ordering::Relaxed), 1);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// # }).unwrap();
/// ```
#[async_trait]
pub trait CommitCoordinator: Send + Sync + Debug {
    /// What it can do.
    fn capabilities(&self) -> CoordinatorCapabilities;

    /// Atomically creates `version` with `manifest` if it does not exist.
    /// `Err` means the outcome is unknown: the write may or may not have landed.
    async fn create_version(&self, version: u64, manifest: Bytes) -> Result<CreateOutcome, StorageError>;

    /// The manifest bytes of `version`, or `None` if it does not exist.
    async fn read_version(&self, version: u64) -> Result<Option<Bytes>, StorageError>;

    /// The newest existing version, or `None` for an empty location. `known` is a
    /// version the caller knows exists, letting implementations start from there.
    async fn latest_version(&self, known: Option<u64>) -> Result<Option<u64>, StorageError>;

    /// Every existing version, ascending. Costs O(versions); for history and cleanup.
    async fn list_versions(&self) -> Result<Vec<u64>, StorageError>;

    /// Removes `version` (vacuum; never the latest): afterwards reading it finds
    /// nothing, and nothing left behind makes a reader try to finish it. Removing a
    /// version that is already gone succeeds.
    async fn remove_version(&self, version: u64) -> Result<(), StorageError>;

    /// Called after `version` was committed by this process. Best effort.
    async fn after_commit(&self, _version: u64) {}

    /// The coordinator of another chain of versions kept under the table: folder
    /// `prefix` (relative to the table root, e.g. `_branches/<id>`) holds its versions
    /// as the table root holds the table's, created once each the same way. Branches,
    /// tags and the other named records of FORMAT.md §17 are such chains. `None` (the
    /// default): this coordinator keeps no other chain, and those features are refused.
    fn chain(&self, _prefix: &str) -> Option<std::sync::Arc<dyn CommitCoordinator>> {
        None
    }

    /// The coordinator of another table of the same store, at `root` (a path from the
    /// store's root): multi-table transactions (FORMAT.md §18) read and write one
    /// table's decision records from every table. `None` (the default): refused.
    fn sibling(&self, _root: &object_store::path::Path) -> Option<std::sync::Arc<dyn CommitCoordinator>> {
        None
    }

    /// Where versions live, for messages.
    fn describe_version(&self, version: u64) -> String;
}

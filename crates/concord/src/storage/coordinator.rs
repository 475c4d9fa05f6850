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
}

/// Outcome of a create attempt the store answered clearly.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CreateOutcome {
    /// This call created the version.
    Created,
    /// The version already existed (possibly written by this very caller if an earlier
    /// attempt's response was lost: callers compare transaction ids to find out).
    AlreadyExists,
}

#[async_trait]
pub trait CommitCoordinator: Send + Sync + Debug {
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

    /// Where versions live, for messages.
    fn describe_version(&self, version: u64) -> String;
}

//! Named records (FORMAT.md §17): small objects that several writers race to change:
//! consumers, tags, branch references, row-id block claims, multi-table decisions.
//! Each name is a chain of records under its own folder, numbered 0, 1, 2, ... and
//! created once each through the commit coordinator, exactly as versions are: the
//! newest record is the name's state, and writing the next one is a compare-and-swap
//! (of two writers of one number, one creates it). On a store without conditional
//! writes the DynamoDB coordinator creates them, as it creates versions.

use std::sync::Arc;

use bytes::Bytes;

use super::{CommitCoordinator, CreateOutcome, TableStore};
use crate::error::{StorageCause, StorageError};

/// The chain of records of one name.
#[derive(Debug, Clone)]
pub(crate) struct Records {
    chain: Arc<dyn CommitCoordinator>,
}

impl TableStore {
    /// The table-wide records of `name`, a folder under the table root (e.g.
    /// `_refs/tags/v1`).
    pub(crate) fn records(&self, name: &str) -> Result<Records, StorageError> {
        Records::under(self.root_coordinator(), name, self.display(name))
    }

    /// The records of `name` kept with this store's chain of versions (a branch's
    /// consumers are its own): under the chain's folder.
    pub(crate) fn chain_records(&self, name: &str) -> Result<Records, StorageError> {
        Records::under(self.coordinator(), name, self.display(name))
    }
}

impl Records {
    /// The records of `name` under `coordinator`'s root.
    pub(crate) fn of_coordinator(coordinator: &Arc<dyn CommitCoordinator>, name: &str, shown: String) -> Result<Records, StorageError> {
        Records::under(coordinator, name, shown)
    }

    fn under(coordinator: &Arc<dyn CommitCoordinator>, name: &str, shown: String) -> Result<Records, StorageError> {
        match coordinator.chain(name) {
            Some(chain) => Ok(Records { chain }),
            None => Err(StorageError::new("creating", shown, StorageCause::NoNamedRecords)),
        }
    }

    /// The newest record and its number, if the name has any.
    pub(crate) async fn newest(&self) -> Result<Option<(u64, Bytes)>, StorageError> {
        // A record is removed only below the newest (vacuum), so the newest found is
        // readable unless a newer one was created meanwhile: then read that one.
        let mut known = None;
        loop {
            let Some(number) = self.chain.latest_version(known).await? else { return Ok(None) };
            if let Some(bytes) = self.chain.read_version(number).await? {
                return Ok(Some((number, bytes)));
            }
            known = Some(number);
        }
    }

    /// Record `number`, if it exists.
    pub(crate) async fn read(&self, number: u64) -> Result<Option<Bytes>, StorageError> {
        self.chain.read_version(number).await
    }

    /// Creates record `number` holding `bytes` unless it exists: `true` if this call
    /// (or an earlier attempt of it whose answer was lost) created it. `bytes` must be
    /// unique to the writer (a fresh id in them): an existing record with the same
    /// bytes is ours.
    pub(crate) async fn create(&self, number: u64, bytes: Bytes) -> Result<bool, StorageError> {
        let created = match self.chain.create_version(number, bytes.clone()).await {
            Ok(CreateOutcome::Created) => true,
            Ok(CreateOutcome::AlreadyExists) => self.read(number).await?.is_some_and(|found| found == bytes),
            Err(e) => match self.read(number).await {
                Ok(Some(found)) => found == bytes,
                _ => return Err(e),
            },
        };
        if created {
            self.chain.after_commit(number).await;
        }
        Ok(created)
    }

    /// Removes record `number` (never the newest: vacuum trims a chain from its oldest).
    pub(crate) async fn remove(&self, number: u64) -> Result<(), StorageError> {
        self.chain.remove_version(number).await
    }

    /// How record `number` is named in messages.
    pub(crate) fn describe(&self, number: u64) -> String {
        self.chain.describe_version(number)
    }
}

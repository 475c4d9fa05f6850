//! Idempotency keys: the one check every commit path makes (a prepare-and-commit, a
//! staged commit, a group or a job commit), so that a retry under a key never commits
//! twice (contract promise 1).
//!
//! A key belongs either to one transaction (its own key) or to one job commit (every
//! member of the job carries the job's key). A retry that finds its key in the
//! retained history reports that earlier outcome and commits nothing; a key used by
//! another kind of write (another operation, or a job for a single transaction) is
//! refused: the retry cannot be of that write.

use super::CommitInfo;
use crate::error::CommitError;
use crate::format::manifest::{Manifest, OperationKind};
use crate::storage::TableStore;

/// What is being retried under a key.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Retry {
    /// A transaction of this kind.
    Transaction(OperationKind),
    /// A job commit.
    Job,
}

/// What a version carrying the key committed.
#[derive(Debug)]
pub(crate) enum Found {
    /// The transaction's outcome, as a replay.
    Transaction(CommitInfo),
    /// The job's transactions' outcomes, in order, as replays.
    Job(Vec<CommitInfo>),
}

/// The job commit's name in messages.
const JOB: &str = "job commit";

/// In `manifest`: what carries `key`, checked against what is retried. `None` if
/// nothing of `manifest` carries it.
pub(crate) fn in_version(manifest: &Manifest, key: &str, retry: Retry) -> Result<Option<Found>, CommitError> {
    let replay = |record| CommitInfo { idempotent_replay: true, ..CommitInfo::of(manifest, record) };
    let job: Vec<CommitInfo> = manifest.transactions.iter().filter(|t| t.job_idempotency_key.as_deref() == Some(key)).map(replay).collect();
    let own = manifest.transactions.iter().find(|t| t.idempotency_key.as_deref() == Some(key));
    let (found, theirs) = match (job.is_empty(), own) {
        (false, _) => (Found::Job(job), JOB.to_string()),
        (true, Some(record)) => (Found::Transaction(replay(record)), record.operation.name().to_string()),
        (true, None) => return Ok(None),
    };
    let ours = match retry {
        Retry::Transaction(kind) => kind.name(),
        Retry::Job => JOB,
    };
    if theirs != ours {
        return Err(CommitError::KeyOfAnotherOperation {
            key: key.to_string(),
            version: manifest.version,
            operation: theirs,
            ours: ours.to_string(),
        });
    }
    Ok(Some(found))
}

/// The same, over the retained history up to version `up_to` (the handle's key index).
pub(crate) async fn in_history(store: &TableStore, key: &str, retry: Retry, up_to: u64) -> Result<Option<Found>, CommitError> {
    let Some(version) = store.version_with_key(key, up_to).await? else { return Ok(None) };
    // Vacuum removed it since it was indexed: the key is no longer retained.
    let Some(manifest) = store.read_manifest(version).await? else { return Ok(None) };
    in_version(&manifest, key, retry)
}

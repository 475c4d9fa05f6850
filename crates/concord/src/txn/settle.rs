//! Creating a version and settling an unclear answer: an error, a timeout or "already
//! exists" is resolved by reading the version back and comparing transaction ids.
//! Nothing is guessed; only when storage stays unreachable past the retry budget is the
//! outcome reported unknown.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;

use uuid::Uuid;

use super::RetryPolicy;
use crate::env::Env;
use crate::error::{CommitError, CorruptObject, CreateError, StorageCause, StorageError};
use crate::format::manifest::Manifest;
use crate::storage::{CreateOutcome, TableStore};

/// How one create attempt ended, once ambiguity is settled.
pub(crate) enum Attempt {
    Won,
    /// Someone else holds the version: its manifest, as read back (the winner the next
    /// attempt judges and builds on).
    Lost(Arc<Manifest>),
    /// The create failed with `cause`, and reading back found nobody holding the version:
    /// it did not land (yet). Retried at the same version; if the budget ends here, the
    /// outcome is reported unknown, since a delayed write could still land.
    NotWritten(StorageError),
}

/// One create attempt: `version` as `bytes`, created under transaction
/// `transaction_id` (the version's first).
pub(crate) struct Create {
    pub(crate) version: u64,
    pub(crate) bytes: Bytes,
    pub(crate) transaction_id: Uuid,
    /// Read the version while creating it (see [`create_and_settle`]).
    pub(crate) speculate: bool,
    /// Read this many versions after it too, at once (see [`create_and_settle`]).
    pub(crate) look_ahead: u64,
}

/// Creates the version; on an unclear answer reads it back until it can tell, within
/// `retry`'s budget counted from `started`.
///
/// `speculate`: read the version while creating it, so that if the create loses, the
/// winner is already in hand and the next attempt can start at once (no read-back
/// round trip). A writer that has lost before does this: it is what lets it catch up
/// with a winner that needs no read before its next attempt (FORMAT.md §8,
/// "Fairness"). The read is the one read of the winner a lost attempt costs; a won
/// attempt wastes it.
///
/// `look_ahead`: the versions after it are read with that read (while creating, or
/// with the read back of a create that lost without one): a winner that did not wait
/// may have made the next already, and the next attempt builds on the newest.
pub(crate) async fn create_and_settle(
    store: &TableStore,
    env: &Env,
    create: Create,
    retry: &RetryPolicy,
    started: Duration,
) -> Result<Attempt, CommitError> {
    let Create { version, bytes, transaction_id, speculate, look_ahead } = create;
    let read_with_after = || async move {
        let after = futures::future::join_all((version + 1..=version + look_ahead).map(|v| store.read_version_bytes(v)));
        let (read, after) = futures::join!(store.read_version_bytes(version), after);
        (read.ok().flatten(), after)
    };
    let (created, early, after) = if speculate {
        let (created, (read, after)) = futures::join!(store.create_version(version, bytes), read_with_after());
        (created, read, after)
    } else {
        (store.create_version(version, bytes).await, None, Vec::new())
    };
    let cause = match created {
        Ok(CreateOutcome::Created) => return Ok(Attempt::Won),
        Ok(CreateOutcome::AlreadyExists) => None,
        Err(e) => Some(e),
    };
    // Lost with no read while creating: the winner is read back with the versions
    // after it.
    let (early, after) = match &cause {
        None if !speculate && look_ahead > 0 => read_with_after().await,
        _ => (early, after),
    };
    let settled = |found: Bytes| holder(store, version, transaction_id, &found, &after);
    // Read while creating: whoever holds the version now holds it for good.
    if let Some(found) = early {
        return settled(found);
    }
    match read_back(store, env, version, transaction_id, cause, retry, started).await? {
        Ok(found) => settled(found),
        Err(not_written) => Ok(Attempt::NotWritten(not_written)),
    }
}

/// The outcome by the version's content `found`: ours if our manifest landed (its first
/// transaction is the one created under: our id further on is another writer's version
/// carrying it, cooperative commits: lost, and the next round finds it settled there);
/// else lost to it, or to the newest of the versions read after it (`after`, taken in
/// a row: the chain has no gaps).
fn holder(
    store: &TableStore,
    version: u64,
    transaction_id: Uuid,
    found: &Bytes,
    after: &[Result<Option<Bytes>, StorageError>],
) -> Result<Attempt, CommitError> {
    let holder = crate::decode::manifest(&store.describe_version(version), version, found)?;
    if holder.transactions.first().is_some_and(|t| t.id == transaction_id && t.carried_by.is_none()) {
        return Ok(Attempt::Won);
    }
    let mut holder = store.remember(holder);
    for (v, found) in (version + 1..).zip(after) {
        let Ok(Some(found)) = found else { break };
        let Ok(next) = crate::decode::manifest(&store.describe_version(v), v, found) else { break };
        holder = store.remember(next);
    }
    Ok(Attempt::Lost(holder))
}

/// Reads the version back until it can tell: its content (`Ok`), or, absent, the error
/// the create failed with (`Err`: not written). Absent after "already exists" (a store
/// that is not read-after-write consistent, or a spurious precondition failure), it is
/// read again, and at the third read taken as not written: creating again is safe (the
/// create is atomic). Past `retry`'s budget (counted from `started`) the outcome is
/// unknown.
async fn read_back(
    store: &TableStore,
    env: &Env,
    version: u64,
    transaction_id: Uuid,
    cause: Option<StorageError>,
    retry: &RetryPolicy,
    started: Duration,
) -> Result<Result<Bytes, StorageError>, CommitError> {
    let unreadable = || StorageError::new("reading back", store.describe_version(version), StorageCause::ReportedButUnreadable);
    let mut last_error: Option<StorageError> = cause;
    let mut failures = 0u32;
    loop {
        match store.read_version_bytes(version).await {
            Ok(Some(found)) => return Ok(Ok(found)),
            Ok(None) if last_error.is_some() => return Ok(Err(last_error.expect("checked"))),
            Ok(None) if failures >= 2 => return Ok(Err(unreadable())),
            Ok(None) => {}
            Err(e) => last_error = Some(e),
        }
        failures += 1;
        let elapsed = env.clock.monotonic() - started;
        if elapsed >= retry.timeout || failures >= retry.max_attempts {
            let cause = last_error.unwrap_or_else(unreadable);
            return Err(CommitError::CommitStateUnknown { version, transaction_id, cause });
        }
        let pause = retry.error_backoff(failures, retry.min_backoff, |max| env.random_below_or_eq(max));
        env.clock.sleep(pause).await;
    }
}

/// Creates version 0, settling an unclear outcome by reading it back.
/// `Ok(false)`: another writer's version 0 exists (the table exists).
pub(crate) async fn create_table(store: &TableStore, manifest: &Manifest) -> Result<bool, CreateError> {
    let created = match store.create_version(0, crate::encode::manifest(manifest)).await {
        Ok(CreateOutcome::Created) => true,
        Ok(CreateOutcome::AlreadyExists) => false,
        Err(cause) => match store.read_version_bytes(0).await {
            Ok(Some(found)) => {
                let holder = crate::decode::manifest(&store.describe_version(0), 0, &found)
                    .map_err(|e| CorruptObject { path: store.describe_version(0), reason: e.to_string() })?;
                holder.transaction().id == manifest.transaction().id
            }
            Ok(None) => return Err(CreateError::Storage(cause)),
            Err(_) => return Err(CreateError::StateUnknown { cause }),
        },
    };
    if created {
        store.after_commit(0).await;
    }
    Ok(created)
}

//! Cooperative commits (FORMAT.md §8, "Cooperative commits"): writers of different
//! processes and machines share versions with nothing but the object store.
//!
//! A writer that has lost a commit race *announces* its transaction (`announce.rs`)
//! and goes on trying to commit it; announced writers *wait in line* behind older
//! announcements (`line.rs`); a writer that has lost at least once *carries*, in the
//! version it creates, every announced transaction it may include (`carry.rs`), each
//! judged on its own as a group commit's members are. A writer that runs out of budget
//! *withdraws*: a marker beside its announcement, then a `withdraw` transaction in the
//! chain (the commit driver runs it, `txn/commit`).
//!
//! Invariants (the argument is FORMAT.md's): the chain is the only arbiter: a
//! transaction is committed if and only if its id is in a version, and an includer
//! never includes an id already in the chain or withdrawn (it judges every version
//! since the transaction's read version, and its create of v+1 succeeds only if v is
//! the latest). Whichever the chain shows first, a transaction or its withdrawal, is its
//! outcome. An announcement past its deadline is never carried. The line decides who
//! tries when, never what commits.

pub(crate) mod announce;
pub(crate) mod carry;
pub(crate) mod line;

use std::time::Duration;

use uuid::Uuid;

use crate::error::{CommitError, StorageCause, StorageError};
use crate::format::manifest::{Manifest, Operation, PROPERTY_COOPERATIVE};
use crate::storage::TableStore;
use crate::txn::{CommitOptions, PreparedTransaction};

/// How much longer than its owner's time budget an announcement may be carried: room
/// for the clocks of different machines to disagree. A live owner's outcome never
/// depends on it (it withdraws within its budget); a crashed owner's transaction may
/// land until then, never after.
pub(crate) const DEADLINE_MARGIN: Duration = Duration::from_secs(60);

/// The withdrawal of an announced transaction reaches the chain within this many
/// attempts and this time after its owner's budget ended (the extra wait a giving-up
/// writer may take); past it, the outcome is reported unknown (an includer that read
/// the announcement before the withdrawal marker may still carry it, until its
/// deadline).
pub(crate) const WITHDRAW_ATTEMPTS: u32 = 20;
/// See [`WITHDRAW_ATTEMPTS`].
pub(crate) const WITHDRAW_TIMEOUT: Duration = Duration::from_secs(30);

/// Whether the table (as of `base`) cooperates: the table property
/// `cooperative_commits`, on unless `false`.
pub(crate) fn enabled(base: &Manifest) -> bool {
    base.properties.get(PROPERTY_COOPERATIVE).is_none_or(|v| !v.trim().eq_ignore_ascii_case("false"))
}

/// Whether `txn` may be announced and carried: an append (an includer judges it from
/// the chain alone, reading no data on its behalf), not a compare-and-swap.
pub(crate) fn carriable(txn: &PreparedTransaction, opts: &CommitOptions) -> bool {
    matches!(txn.operation, Operation::Append { .. }) && opts.expect_version.is_none()
}

/// The outcome of announced transaction `id` (announcement `name`) is unknown: its
/// withdrawal did not reach the chain within its budget (an includer may still carry
/// it, until its deadline).
pub(crate) fn unsettled(store: &TableStore, name: &str, version: u64, id: Uuid) -> CommitError {
    let cause = StorageError::new("withdrawing", store.display(name), StorageCause::WithdrawalUnsettled);
    CommitError::CommitStateUnknown { version, transaction_id: id, cause }
}

//! Transactions: prepared against a read version, committed with rebase on conflict.
//!
//! One file per operation in `ops` (`append`, `overwrite`, `restore`, `delete`,
//! `update`, `merge`, `alter`, `compact`): its next state from a base version and its
//! re-run over what a winner changed. `conflict` decides (purely)
//! what a winner means for a transaction; `member` is one transaction being committed,
//! `build` the version being built; `commit` runs the rounds (a pure planner and a
//! driver), `settle` resolves unclear creates, `cooperative` shares versions between
//! processes, `group` between the tasks of one handle.

pub(crate) mod build;
pub(crate) mod commit;
pub(crate) mod conflict;
pub(crate) mod cooperative;
pub(crate) mod group;
pub(crate) mod handle;
pub(crate) mod keys;
pub(crate) mod member;
pub(crate) mod multi;
pub(crate) mod ops;
pub(crate) mod retry;
pub(crate) mod settle;

use uuid::Uuid;

use crate::error::WriteError;
use crate::format::manifest::{IsolationLevel, Manifest, OperationKind, TransactionRecord};
pub use crate::format::staged::PreparedTransaction;
pub(crate) use crate::format::staged::StagedOptions;
pub use retry::RetryPolicy;

impl StagedOptions {
    /// The parts of `options` a staged transaction keeps.
    pub(crate) fn of(options: &CommitOptions) -> Self {
        StagedOptions {
            isolation: options.isolation,
            expect_version: options.expect_version,
            idempotency_key: options.idempotency_key.clone(),
        }
    }

    /// `given` with these options filled in; an option both set differently is refused.
    pub(crate) fn apply_to(&self, given: &CommitOptions) -> Result<CommitOptions, WriteError> {
        fn pick<T: Clone + PartialEq + std::fmt::Display>(
            option: &'static str,
            staged: &Option<T>,
            given: &Option<T>,
        ) -> Result<Option<T>, WriteError> {
            match (staged, given) {
                (Some(s), Some(g)) if s != g => Err(WriteError::ContradictsStaged { option, staged: s.to_string(), given: g.to_string() }),
                (Some(s), _) => Ok(Some(s.clone())),
                (None, g) => Ok(g.clone()),
            }
        }
        Ok(CommitOptions {
            isolation: pick("isolation", &self.isolation, &given.isolation)?,
            expect_version: pick("expect_version", &self.expect_version, &given.expect_version)?,
            idempotency_key: pick("idempotency_key", &self.idempotency_key, &given.idempotency_key)?,
            retry: given.retry,
        })
    }
}

/// How a write commits.
#[derive(Debug, Clone, Default)]
pub struct CommitOptions {
    /// Overrides the table's default isolation level for this write.
    pub isolation: Option<IsolationLevel>,
    /// Commit only if the latest version is still this one (compare-and-swap).
    pub expect_version: Option<u64>,
    /// How hard to try.
    pub retry: RetryPolicy,
    /// If a retained version already carries this key, commit nothing and report it.
    pub idempotency_key: Option<String>,
}

/// The outcome of a successful commit.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct CommitInfo {
    /// The version it committed as (or the latest, if nothing was committed).
    pub version: u64,
    /// The operation's kind (its name as the history shows it: `kind.name()`).
    pub operation: OperationKind,
    /// The transaction.
    pub transaction_id: Uuid,
    /// Attempts it took.
    pub attempts: u32,
    /// Versions it rebased over.
    pub rebased_over: Vec<u64>,
    /// Whether part of it was re-run on winners' changes.
    pub rerun: bool,
    /// Rows it added.
    pub rows_written: u64,
    /// Rows it removed.
    pub rows_deleted: u64,
    /// True when an earlier version already carried the idempotency key: nothing new was written.
    pub idempotent_replay: bool,
    /// Set when a maintenance operation (compaction) gave way to concurrent writers and
    /// committed nothing: why. `version` is then the latest version it saw.
    pub abandoned: Option<String>,
}

impl CommitInfo {
    /// The outcome reported for transaction `record` of `manifest` (committed now, or
    /// earlier).
    pub(crate) fn of(manifest: &Manifest, record: &TransactionRecord) -> CommitInfo {
        CommitInfo {
            version: manifest.version,
            operation: record.operation.kind(),
            transaction_id: record.id,
            attempts: record.attempts,
            rebased_over: record.rebased_over.clone(),
            rerun: record.rerun,
            rows_written: record.operation.rows_written(),
            rows_deleted: record.rows_deleted,
            idempotent_replay: false,
            abandoned: None,
        }
    }

    /// Nothing committed (nothing to change, or maintenance that gave way): the table
    /// stays at `version`; `reason` says why.
    pub(crate) fn abandoned(version: u64, txn: &PreparedTransaction, attempts: u32, rerun: bool, reason: &str) -> CommitInfo {
        CommitInfo {
            version,
            operation: txn.operation.kind(),
            transaction_id: txn.id,
            attempts,
            rebased_over: Vec::new(),
            rerun,
            rows_written: 0,
            rows_deleted: 0,
            idempotent_replay: false,
            abandoned: Some(reason.to_string()),
        }
    }
}

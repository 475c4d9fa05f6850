//! A staged transaction (`_transactions/<id>.json`): a prepared transaction whose
//! files are written, recorded to be committed later by any process (FORMAT.md §10).

use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::manifest::{IsolationLevel, Operation};
use super::schema::Schema;

/// A transaction whose files are written and which awaits commit. Serialized as a
/// staged transaction (`_transactions/<id>.json`) by two-phase writes.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct PreparedTransaction {
    /// Its id (fresh, random).
    pub(crate) id: Uuid,
    /// The version the transaction was prepared against.
    pub(crate) read_version: u64,
    /// The schema of the read version (what the written data files follow).
    pub(crate) read_schema: Schema,
    /// `next_fragment_id` of the read version: fragments with ids from here on were
    /// added by winners.
    pub(crate) read_next_fragment_id: u64,
    /// What it does.
    pub(crate) operation: Operation,
    /// The value of `now()` in the transaction's SQL (UTC), fixed when it was prepared
    /// so that a re-run computes the same values. `None` in transactions staged by
    /// versions that had no `now()`: then the commit's time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) now: Option<DateTime<Utc>>,
    /// Options given when the transaction was staged: they hold when it is committed.
    #[serde(default, skip_serializing_if = "StagedOptions::is_empty")]
    pub(crate) staged: StagedOptions,
}

/// The commit options a staged transaction carries (see `CommitOptions`). A commit
/// may repeat them but not contradict them.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(crate) struct StagedOptions {
    /// The isolation level.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) isolation: Option<IsolationLevel>,
    /// The version the table must still be at.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) expect_version: Option<u64>,
    /// The idempotency key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) idempotency_key: Option<String>,
}

impl StagedOptions {
    /// No option set.
    pub(crate) fn is_empty(&self) -> bool {
        *self == StagedOptions::default()
    }
}

impl PreparedTransaction {
    /// Its id (the staged id, once staged).
    pub fn id(&self) -> Uuid {
        self.id
    }

    /// The version it was prepared against.
    pub fn read_version(&self) -> u64 {
        self.read_version
    }

    /// What it does.
    pub fn operation(&self) -> &Operation {
        &self.operation
    }

    /// `now()` for this transaction's SQL.
    pub(crate) fn now_or(&self, fallback: DateTime<Utc>) -> DateTime<Utc> {
        self.now.unwrap_or(fallback)
    }
}

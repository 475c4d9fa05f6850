//! A staged transaction (`_transactions/<id>.json`): a prepared transaction whose
//! files are written, recorded to be committed later by any process (FORMAT.md §10).

use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::manifest::{IsolationLevel, Operation};
use super::schema::Schema;

/// A transaction whose files are written and which awaits commit: what a caller
/// prepares, stages and commits. Its file (`_transactions/<id>.json`) is written
/// through a private serde mirror (`StagedFile`): the file's shape is not the API.
#[derive(Debug, Clone, PartialEq)]
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
    pub(crate) now: Option<DateTime<Utc>>,
    /// Options given when the transaction was staged: they hold when it is committed.
    pub(crate) staged: StagedOptions,
}

/// A staged transaction as serialized (FORMAT.md §10): the fields of
/// [`PreparedTransaction`], by name.
#[derive(serde::Serialize, serde::Deserialize)]
pub(crate) struct StagedFile {
    id: Uuid,
    read_version: u64,
    read_schema: Schema,
    read_next_fragment_id: u64,
    operation: Operation,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    now: Option<DateTime<Utc>>,
    #[serde(default, skip_serializing_if = "StagedOptions::is_empty")]
    staged: StagedOptions,
}

impl From<&PreparedTransaction> for StagedFile {
    fn from(t: &PreparedTransaction) -> Self {
        StagedFile {
            id: t.id,
            read_version: t.read_version,
            read_schema: t.read_schema.clone(),
            read_next_fragment_id: t.read_next_fragment_id,
            operation: t.operation.clone(),
            now: t.now,
            staged: t.staged.clone(),
        }
    }
}

impl From<StagedFile> for PreparedTransaction {
    fn from(f: StagedFile) -> Self {
        PreparedTransaction {
            id: f.id,
            read_version: f.read_version,
            read_schema: f.read_schema,
            read_next_fragment_id: f.read_next_fragment_id,
            operation: f.operation,
            now: f.now,
            staged: f.staged,
        }
    }
}

/// Serializes a [`PreparedTransaction`] field through [`StagedFile`] (`#[serde(with)]`).
pub(crate) mod as_staged_file {
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    use super::{PreparedTransaction, StagedFile};

    pub(crate) fn serialize<S: Serializer>(t: &PreparedTransaction, s: S) -> Result<S::Ok, S::Error> {
        StagedFile::from(t).serialize(s)
    }

    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<PreparedTransaction, D::Error> {
        StagedFile::deserialize(d).map(PreparedTransaction::from)
    }
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

#[cfg(test)]
impl PreparedTransaction {
    /// An append of no fragments by transaction `id`, read at version 3 of a table of
    /// `schema` (tests of announcements and lines).
    pub(crate) fn test_append(id: Uuid, schema: &str) -> PreparedTransaction {
        PreparedTransaction {
            id,
            read_version: 3,
            read_schema: Schema::parse(schema).unwrap(),
            read_next_fragment_id: 7,
            operation: Operation::Append { fragments: vec![] },
            now: None,
            staged: StagedOptions::default(),
        }
    }
}

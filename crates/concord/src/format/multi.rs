//! Multi-table transactions' decisions (FORMAT.md §18): record 0 of the chain of
//! records `_multi/<id>` of the primary table, created once. Pure data.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// Folder of the decisions' record chains: `_multi/<id>`.
pub(crate) const MULTI_DIR: &str = "_multi";

/// A multi-table transaction's outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Outcome {
    /// Every table's version holding it counts.
    Committed,
    /// No table's version holding it counts: each is undone.
    Aborted,
}

/// The decision record.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Decision {
    pub outcome: Outcome,
    /// When it was decided (UTC).
    pub at: DateTime<Utc>,
    /// Unique to the decider (an unclear create is ours only if this is).
    pub writer: Uuid,
}

/// The chain of records of multi-table transaction `id`'s decision.
pub(crate) fn decision_records(id: Uuid) -> String {
    format!("{MULTI_DIR}/{id}")
}

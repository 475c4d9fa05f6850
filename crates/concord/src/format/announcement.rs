//! An announced transaction (`_announced/<micros>-<id>.json`, or
//! `<micros>-<id>/<content, in segments>.json` where the key holds it; FORMAT.md §8,
//! "Cooperative commits"): a writer that lost a commit race publishes its prepared
//! transaction, so that whoever creates a version may carry it, until `deadline`.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::staged::PreparedTransaction;

/// A transaction offered to other writers' commits.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Announcement {
    /// The transaction, as staged (with the options it commits with).
    #[serde(with = "super::staged::as_staged_file")]
    pub(crate) transaction: PreparedTransaction,
    /// After this time (UTC) nobody carries it: its owner's time budget has ended, plus
    /// a margin for clocks of different machines that disagree.
    pub(crate) deadline: DateTime<Utc>,
}

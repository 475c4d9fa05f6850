//! Errors of change feeds and of their consumers (named cursors).

use super::{CorruptObject, OpenError, PredicateError, ScanError, StorageError};
use crate::format::schema::ColumnNameError;

/// Reading the changes between two versions failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ChangesError {
    /// The range is empty the wrong way round.
    #[error("the change range starts at version {from}, after its end {to}; give --from at or before --to")]
    FromAfterTo {
        /// The version the range starts after.
        from: u64,
        /// The version it ends at.
        to: u64,
    },
    /// A version of the range is not retained: vacuum removed it, or it was never
    /// committed. Nothing was read.
    #[error("the changes after version {from} cannot be read: version {missing} is not retained (versions {oldest} to {latest} are); a consumer keeps versions from vacuum")]
    VersionNotRetained {
        /// The version the range starts after.
        from: u64,
        /// The version missing.
        missing: u64,
        /// The oldest retained version.
        oldest: u64,
        /// The latest version.
        latest: u64,
    },
    /// The table has a column named as one of the feed's own columns.
    #[error("the table has a column named '{column}', which is the name of a change feed column; rename it to read changes")]
    ReservedColumn {
        /// The column.
        column: String,
    },
    /// A column asked for is not in the table.
    #[error(transparent)]
    Column(#[from] ColumnNameError),
    /// The filter does not compile or fails.
    #[error(transparent)]
    Predicate(#[from] PredicateError),
    /// The consumer named does not exist.
    #[error(transparent)]
    Consumer(#[from] ConsumerError),
    /// Reading a version failed.
    #[error(transparent)]
    Open(#[from] OpenError),
    /// Reading rows failed.
    #[error(transparent)]
    Scan(#[from] ScanError),
    /// A version's transactions do not add up to its manifest (the feed refuses to
    /// guess what changed).
    #[error(transparent)]
    Corrupt(#[from] CorruptObject),
}

/// Creating, reading or moving a consumer failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConsumerError {
    /// No consumer of that name.
    #[error("the table has no consumer named '{name}'; create it first")]
    NotFound {
        /// The name.
        name: String,
    },
    /// A consumer of that name exists already.
    #[error("the table has a consumer named '{name}' already (at version {version})")]
    Exists {
        /// The name.
        name: String,
        /// Its version.
        version: u64,
    },
    /// Another process moved the consumer at the same time: nothing was changed.
    #[error("consumer '{name}' was moved by another process meanwhile (from version {expected} to {found}); read its position again")]
    Moved {
        /// The name.
        name: String,
        /// The version this process had read.
        expected: u64,
        /// The version it found.
        found: u64,
    },
    /// A name that is not usable in an object key.
    #[error("'{name}' is not a usable consumer name: use letters, digits, '-', '_' and '.', at most 128 bytes, not starting with '.'")]
    BadName {
        /// The name.
        name: String,
    },
    /// The position asked for is not a retained version.
    #[error("consumer '{name}' cannot be set to version {version}: versions {oldest} to {latest} are retained")]
    NoSuchVersion {
        /// The name.
        name: String,
        /// The version asked for.
        version: u64,
        /// The oldest retained version.
        oldest: u64,
        /// The latest version.
        latest: u64,
    },
    /// Reading the table failed.
    #[error(transparent)]
    Open(#[from] OpenError),
    /// A consumer's record does not decode.
    #[error(transparent)]
    Corrupt(#[from] CorruptObject),
    /// A storage request failed.
    #[error(transparent)]
    Storage(#[from] StorageError),
}

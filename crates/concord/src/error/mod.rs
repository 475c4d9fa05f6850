//! Typed errors, one per operation a caller branches on. Messages name the object
//! involved and say what to do next; they name no command-line flag (the CLI adds its
//! own hints). Every enum and error struct is `#[non_exhaustive]`: new cases may come,
//! so a `match` needs a catch-all arm.

mod changes;
mod kind;
mod read;
mod refs;
mod storage;
mod write;

pub use changes::{ChangesError, ConsumerError};
pub use kind::ErrorKind;
#[cfg(test)]
pub(crate) use read::abbreviate;
pub use read::{OpenError, PredicateError, RefKind, ScanError, Unavailable};
pub use refs::{BranchError, MergeError, TagError};
pub use storage::{CorruptObject, DynamoDbError, OversizedObject, StorageCause, StorageError, UriError};
pub use write::{
    AlterError, CommitError, CreateError, DefaultProblem, IncompatibleReason, InputError, StagedCommitError, TogetherError, WriteError,
};

/// `e`'s message followed by each of its sources' that it does not already contain,
/// joined by ": ", e.g. a storage failure with the store's own error under it. The CLI
/// and the Python package show errors this way.
pub fn describe_chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let part = s.to_string();
        if !text.contains(&part) {
            text.push_str(": ");
            text.push_str(&part);
        }
        source = s.source();
    }
    text
}

/// Reading a version failed inside a write or scan: storage errors stay storage
/// errors, bad bytes are corrupt, and a table that changed under the read says how.
enum Unexpected {
    Storage(StorageError),
    Corrupt(CorruptObject),
    Unavailable(Unavailable),
}

fn unexpected_open_error(e: OpenError) -> Unexpected {
    match e {
        OpenError::Storage(s) => Unexpected::Storage(s),
        OpenError::Corrupt(c) => Unexpected::Corrupt(c),
        OpenError::UnsupportedFormat { path, found, supported } => {
            Unexpected::Unavailable(Unavailable::NewerFormat { path, found, supported })
        }
        OpenError::NotFound { uri } | OpenError::NotATable { uri } => Unexpected::Unavailable(Unavailable::TableGone { uri }),
        other @ (OpenError::VersionNotFound { .. }
        | OpenError::NoVersionAt { .. }
        | OpenError::Removed { .. }
        | OpenError::UnknownRef { .. }
        | OpenError::NotCommitted { .. }
        | OpenError::TagOfAnotherBranch { .. }) => Unexpected::Unavailable(Unavailable::VersionGone { what: other.to_string() }),
    }
}

/// The conversion of an [`OpenError`] met inside another operation into that
/// operation's error type (`$t` has `Storage`, `Corrupt` and `Unavailable` variants).
macro_rules! from_open_error {
    ($t:ident) => {
        impl From<OpenError> for $t {
            fn from(e: OpenError) -> Self {
                match unexpected_open_error(e) {
                    Unexpected::Storage(s) => $t::Storage(s),
                    Unexpected::Corrupt(c) => $t::Corrupt(c),
                    Unexpected::Unavailable(u) => $t::Unavailable(u),
                }
            }
        }
    };
}

from_open_error!(CommitError);
from_open_error!(ScanError);

impl From<OpenError> for WriteError {
    fn from(e: OpenError) -> Self {
        if let OpenError::VersionNotFound { version, oldest, latest } = e {
            return WriteError::NoSuchVersion { version, oldest, latest };
        }
        match unexpected_open_error(e) {
            Unexpected::Storage(s) => WriteError::Storage(s),
            Unexpected::Corrupt(c) => WriteError::Corrupt(c),
            Unexpected::Unavailable(u) => WriteError::Unavailable(u),
        }
    }
}

impl From<ScanError> for WriteError {
    fn from(e: ScanError) -> Self {
        match e {
            ScanError::Predicate(p) => WriteError::Predicate(p),
            ScanError::Storage(s) => WriteError::Storage(s),
            ScanError::Corrupt(c) => WriteError::Corrupt(c),
            ScanError::Column(c) => WriteError::Column(c),
            ScanError::Unavailable(u) => WriteError::Unavailable(u),
        }
    }
}

impl CommitError {
    /// The re-run on `version` failed with `e`: storage and corrupt objects stay what
    /// they are; anything else (the expression no longer applies, a value no longer
    /// fits) fails the re-run.
    pub(crate) fn rerun(version: u64, e: impl Into<WriteError>) -> Self {
        match e.into() {
            WriteError::Storage(s) => CommitError::Storage(s),
            WriteError::Corrupt(c) => CommitError::Corrupt(c),
            WriteError::Commit(c) => c,
            other => CommitError::RerunFailed { version, source: Box::new(other) },
        }
    }
}

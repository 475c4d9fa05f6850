//! What each error means for its caller, decided once, here: the outcomes of the
//! concurrency contract. The CLI's exit codes and the Python package's exceptions are
//! total maps of [`ErrorKind`] and nothing else. Every `kind()` below matches every
//! variant of its type (no catch-all arm): a new variant without a kind does not
//! compile.

use uuid::Uuid;

use super::{
    AlterError, BranchError, ChangesError, CommitError, ConsumerError, CorruptObject, CreateError, InputError, MergeError, OpenError,
    PredicateError, ScanError, StorageError, TagError, TogetherError, Unavailable, UriError, WriteError,
};
use crate::duration::{DurationError, TimeError};
use crate::format::schema::{ColumnNameError, SchemaParseError};

/// What an error means: what a caller does about it. Not `non_exhaustive`: the kinds
/// are the contract's outcomes, and a caller's map of them is meant to be total.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ErrorKind {
    /// Bad usage or bad input (an unknown column, a value that does not fit, an
    /// unparsable file or predicate): nothing was committed; fix the input.
    InvalidInput,
    /// A concurrent commit made this write impossible; retrying will not help.
    Incompatible {
        /// The winner's version, when one is known.
        winner_version: Option<u64>,
        /// The winner's operation, when known.
        winner_operation: Option<String>,
    },
    /// Retries or the time budget ran out; nothing was committed; retrying later is safe.
    Contention {
        /// Attempts made.
        attempts: u32,
        /// Time spent.
        elapsed_ms: u64,
    },
    /// Compare-and-swap: the table is no longer at the expected version.
    Moved {
        /// The version expected.
        expected: u64,
        /// The latest version.
        latest: u64,
    },
    /// The table (or a staged transaction) does not exist.
    NotFound,
    /// A table already exists there.
    Exists,
    /// The commit's outcome could not be determined: retry with the same idempotency key.
    UnknownOutcome {
        /// The version it tried to create.
        version: Option<u64>,
        /// The transaction, when one was committing.
        transaction_id: Option<Uuid>,
    },
    /// A storage request failed (I/O, network, permissions).
    Storage,
    /// An object's bytes do not decode.
    Corrupt,
}

impl ErrorKind {
    /// One error of every kind (for surfaces to check that they map each).
    pub fn all() -> Vec<ErrorKind> {
        vec![
            ErrorKind::InvalidInput,
            ErrorKind::Incompatible { winner_version: Some(1), winner_operation: Some("append".into()) },
            ErrorKind::Contention { attempts: 3, elapsed_ms: 10 },
            ErrorKind::Moved { expected: 1, latest: 2 },
            ErrorKind::NotFound,
            ErrorKind::Exists,
            ErrorKind::UnknownOutcome { version: Some(2), transaction_id: None },
            ErrorKind::Storage,
            ErrorKind::Corrupt,
        ]
    }

    /// The kind's name, as `--json` prints it (../shared/cli-contract.md).
    pub fn name(&self) -> &'static str {
        match self {
            ErrorKind::InvalidInput => "invalid_input",
            ErrorKind::Incompatible { .. } => "incompatible",
            ErrorKind::Contention { .. } => "contention",
            ErrorKind::Moved { .. } => "moved",
            ErrorKind::NotFound => "not_found",
            ErrorKind::Exists => "exists",
            ErrorKind::UnknownOutcome { .. } => "unknown_outcome",
            ErrorKind::Storage => "storage",
            ErrorKind::Corrupt => "corrupt",
        }
    }
}

impl OpenError {
    /// What it means (see [`ErrorKind`]).
    pub fn kind(&self) -> ErrorKind {
        match self {
            OpenError::NotFound { .. } | OpenError::NotATable { .. } => ErrorKind::NotFound,
            OpenError::VersionNotFound { .. }
            | OpenError::NoVersionAt { .. }
            | OpenError::UnknownRef { .. }
            | OpenError::NotCommitted { .. }
            | OpenError::TagOfAnotherBranch { .. } => ErrorKind::InvalidInput,
            OpenError::Removed { .. } | OpenError::UnsupportedFormat { .. } => ErrorKind::Storage,
            OpenError::Corrupt(_) => ErrorKind::Corrupt,
            OpenError::Storage(_) => ErrorKind::Storage,
        }
    }
}

impl Unavailable {
    /// What it means (see [`ErrorKind`]): a table removed while in use no longer exists.
    pub fn kind(&self) -> ErrorKind {
        match self {
            Unavailable::TableGone { .. } => ErrorKind::NotFound,
            Unavailable::NewerFormat { .. } | Unavailable::VersionGone { .. } => ErrorKind::Storage,
        }
    }
}

impl PredicateError {
    /// What it means (see [`ErrorKind`]): always bad input.
    pub fn kind(&self) -> ErrorKind {
        ErrorKind::InvalidInput
    }
}

impl ScanError {
    /// What it means (see [`ErrorKind`]).
    pub fn kind(&self) -> ErrorKind {
        match self {
            ScanError::Column(_) | ScanError::Predicate(_) => ErrorKind::InvalidInput,
            ScanError::Unavailable(u) => u.kind(),
            ScanError::Corrupt(c) => c.kind(),
            ScanError::Storage(s) => s.kind(),
        }
    }
}

impl StorageError {
    /// What it means (see [`ErrorKind`]).
    pub fn kind(&self) -> ErrorKind {
        ErrorKind::Storage
    }
}

impl CorruptObject {
    /// What it means (see [`ErrorKind`]).
    pub fn kind(&self) -> ErrorKind {
        ErrorKind::Corrupt
    }
}

impl UriError {
    /// What it means (see [`ErrorKind`]): a URI or setting to fix.
    pub fn kind(&self) -> ErrorKind {
        ErrorKind::InvalidInput
    }
}

impl SchemaParseError {
    /// What it means (see [`ErrorKind`]).
    pub fn kind(&self) -> ErrorKind {
        ErrorKind::InvalidInput
    }
}

impl ColumnNameError {
    /// What it means (see [`ErrorKind`]).
    pub fn kind(&self) -> ErrorKind {
        ErrorKind::InvalidInput
    }
}

impl DurationError {
    /// What it means (see [`ErrorKind`]).
    pub fn kind(&self) -> ErrorKind {
        ErrorKind::InvalidInput
    }
}

impl TimeError {
    /// What it means (see [`ErrorKind`]).
    pub fn kind(&self) -> ErrorKind {
        ErrorKind::InvalidInput
    }
}

impl InputError {
    /// What it means (see [`ErrorKind`]): input that does not fit, except a file that
    /// cannot be read.
    pub fn kind(&self) -> ErrorKind {
        match self {
            InputError::Io { .. } => ErrorKind::Storage,
            InputError::UnsupportedFileType { .. }
            | InputError::UnknownColumn { .. }
            | InputError::AmbiguousColumn { .. }
            | InputError::MissingColumn { .. }
            | InputError::MissingForInsert { .. }
            | InputError::MissingKey { .. }
            | InputError::OutsidePredicate { .. }
            | InputError::ColumnsDiffer { .. }
            | InputError::TypeMismatch { .. }
            | InputError::InvalidValue { .. }
            | InputError::ValueDoesNotFit { .. }
            | InputError::NullInNonNullable { .. }
            | InputError::DuplicateKey { .. }
            | InputError::Unparsable { .. } => ErrorKind::InvalidInput,
        }
    }
}

impl AlterError {
    /// What it means (see [`ErrorKind`]): always bad input.
    pub fn kind(&self) -> ErrorKind {
        ErrorKind::InvalidInput
    }
}

impl CreateError {
    /// What it means (see [`ErrorKind`]).
    pub fn kind(&self) -> ErrorKind {
        match self {
            CreateError::AlreadyExists { .. } => ErrorKind::Exists,
            CreateError::NotEmpty { .. } | CreateError::Property(_) => ErrorKind::InvalidInput,
            // Creating is committing version 0; no transaction id is reported.
            CreateError::StateUnknown { .. } => ErrorKind::UnknownOutcome { version: Some(0), transaction_id: None },
            CreateError::Corrupt(c) => c.kind(),
            CreateError::Storage(s) => s.kind(),
        }
    }
}

impl CommitError {
    /// What it means (see [`ErrorKind`]). A job fails as its member did.
    pub fn kind(&self) -> ErrorKind {
        match self {
            CommitError::Incompatible { winner_version, winner_operation, .. } => {
                ErrorKind::Incompatible { winner_version: Some(*winner_version), winner_operation: Some(winner_operation.clone()) }
            }
            // The re-run on the winners' version failed: that version is known, not its operation.
            CommitError::RerunFailed { version, .. } => ErrorKind::Incompatible { winner_version: Some(*version), winner_operation: None },
            CommitError::JobMember { source, .. } => source.kind(),
            CommitError::MembersIncompatible { .. } | CommitError::KeyOfAnotherOperation { .. } => ErrorKind::InvalidInput,
            CommitError::TooMuchContention { attempts, elapsed_ms, .. } => {
                ErrorKind::Contention { attempts: *attempts, elapsed_ms: *elapsed_ms }
            }
            CommitError::VersionMoved { expected, latest } => ErrorKind::Moved { expected: *expected, latest: *latest },
            CommitError::HistoryRemoved { .. } | CommitError::RowIdsExhausted { .. } => ErrorKind::Storage,
            CommitError::Unavailable(u) => u.kind(),
            CommitError::CommitStateUnknown { version, transaction_id, .. } => {
                ErrorKind::UnknownOutcome { version: Some(*version), transaction_id: Some(*transaction_id) }
            }
            CommitError::Corrupt(c) => c.kind(),
            CommitError::Storage(s) => s.kind(),
        }
    }
}

impl WriteError {
    /// What it means (see [`ErrorKind`]).
    pub fn kind(&self) -> ErrorKind {
        match self {
            WriteError::Input(i) => i.kind(),
            WriteError::Predicate(_)
            | WriteError::Alter(_)
            | WriteError::Column(_)
            | WriteError::StagedCommit(_)
            | WriteError::ContradictsStaged { .. }
            | WriteError::StagedNotFound { .. }
            | WriteError::NoSuchVersion { .. } => ErrorKind::InvalidInput,
            WriteError::Commit(c) => c.kind(),
            WriteError::Encode { .. } => ErrorKind::Storage,
            WriteError::Unavailable(u) => u.kind(),
            WriteError::Corrupt(c) => c.kind(),
            WriteError::Storage(s) => s.kind(),
        }
    }
}

impl ChangesError {
    /// What it means (see [`ErrorKind`]): a range or a consumer that cannot be read is
    /// bad input.
    pub fn kind(&self) -> ErrorKind {
        match self {
            ChangesError::FromAfterTo { .. }
            | ChangesError::VersionNotRetained { .. }
            | ChangesError::ReservedColumn { .. }
            | ChangesError::Column(_)
            | ChangesError::Predicate(_) => ErrorKind::InvalidInput,
            ChangesError::Consumer(e) => e.kind(),
            ChangesError::Open(e) => e.kind(),
            ChangesError::Scan(e) => e.kind(),
            ChangesError::Corrupt(e) => e.kind(),
        }
    }
}

impl ConsumerError {
    /// What it means (see [`ErrorKind`]): an unknown consumer is bad input; one moved
    /// meanwhile, like a table moved under compare-and-swap.
    pub fn kind(&self) -> ErrorKind {
        match self {
            ConsumerError::NotFound { .. } | ConsumerError::BadName { .. } | ConsumerError::NoSuchVersion { .. } => ErrorKind::InvalidInput,
            ConsumerError::Exists { .. } => ErrorKind::Exists,
            ConsumerError::Moved { expected, found, .. } => ErrorKind::Moved { expected: *expected, latest: *found },
            ConsumerError::Open(e) => e.kind(),
            ConsumerError::Corrupt(e) => e.kind(),
            ConsumerError::Storage(e) => e.kind(),
        }
    }
}

impl TagError {
    /// What it means (see [`ErrorKind`]): an unknown tag or version is bad input; one
    /// made or changed by another process meanwhile, like a table moved under
    /// compare-and-swap.
    pub fn kind(&self) -> ErrorKind {
        match self {
            TagError::NotFound { .. } | TagError::BadName { .. } | TagError::NoSuchVersion { .. } => ErrorKind::InvalidInput,
            TagError::Exists { .. } => ErrorKind::Exists,
            TagError::Moved { expected, found, .. } => ErrorKind::Moved { expected: *expected, latest: *found },
            TagError::Open(e) => e.kind(),
            TagError::Corrupt(e) => e.kind(),
            TagError::Storage(e) => e.kind(),
        }
    }
}

impl BranchError {
    /// What it means (see [`ErrorKind`]): an unknown branch, a bad name or `main` is bad
    /// input.
    pub fn kind(&self) -> ErrorKind {
        match self {
            BranchError::NotFound { .. } | BranchError::BadName { .. } | BranchError::Main { .. } | BranchError::NoSuchVersion { .. } => {
                ErrorKind::InvalidInput
            }
            BranchError::Exists { .. } => ErrorKind::Exists,
            BranchError::NoBlocks { .. } => ErrorKind::Storage,
            BranchError::Tag(e) => e.kind(),
            BranchError::Write(e) => e.kind(),
            BranchError::Open(e) => e.kind(),
            BranchError::Corrupt(e) => e.kind(),
            BranchError::Storage(e) => e.kind(),
        }
    }
}

impl MergeError {
    /// What it means (see [`ErrorKind`]): a merge the conflict rules refuse is
    /// incompatible; a fast-forward refused, a moved target.
    pub fn kind(&self) -> ErrorKind {
        match self {
            MergeError::IntoItself { .. } | MergeError::NotFromTarget { .. } => ErrorKind::InvalidInput,
            MergeError::TargetMoved { base, latest, .. } => ErrorKind::Moved { expected: *base, latest: *latest },
            MergeError::Branch(e) => e.kind(),
            MergeError::Commit(e) => e.kind(),
            MergeError::Refused { operation, .. } => {
                ErrorKind::Incompatible { winner_version: None, winner_operation: Some(operation.clone()) }
            }
            MergeError::Open(e) => e.kind(),
            MergeError::Storage(e) => e.kind(),
        }
    }
}

impl TogetherError {
    /// What it means (see [`ErrorKind`]): tables that cannot commit together are bad
    /// input; a part's failure is that failure; an abort by another writer, contention.
    pub fn kind(&self) -> ErrorKind {
        match self {
            TogetherError::DifferentStores { .. } | TogetherError::SameTable { .. } | TogetherError::Invalid { .. } => {
                ErrorKind::InvalidInput
            }
            TogetherError::Part { source, .. } => source.kind(),
            TogetherError::Aborted { .. } => ErrorKind::Contention { attempts: 1, elapsed_ms: 0 },
            TogetherError::OutcomeUnknown { .. } => ErrorKind::UnknownOutcome { version: None, transaction_id: None },
            TogetherError::Commit(e) => e.kind(),
            TogetherError::Open(e) => e.kind(),
        }
    }
}

//! Failures to the exit codes of the CLI contract (../shared/cli-contract.md): the
//! library decides what an error means ([`ErrorKind`]); this is the total map of
//! kinds to codes, and the command-line hints the library's messages leave out (they
//! name no flag).

use concord::errors::{DynamoDbError, StorageCause};
use concord::schema::SchemaParseError;
use concord::time::DurationError;
use concord::{
    AlterError, BranchError, ChangesError, CommitError, ConsumerError, CorruptObject, CreateError, ErrorKind, MergeError, OpenError,
    ScanError, SqlError, StorageError, TagError, TogetherError, UriError, WriteError,
};

pub const SUCCESS: i32 = 0;
pub const OTHER: i32 = 1;
pub const USAGE: i32 = 2;
pub const INCOMPATIBLE: i32 = 3;
pub const CONTENTION: i32 = 4;
pub const MOVED: i32 = 5;
pub const UNSAFE_STORE: i32 = 6;
pub const NO_TABLE_OR_EXISTS: i32 = 7;
pub const UNKNOWN_OUTCOME: i32 = 8;

/// A failure: its exit code, its kind's name (as `--json` prints it) and the message
/// for stderr.
#[derive(Debug)]
pub struct Failure {
    pub code: i32,
    pub kind: &'static str,
    pub message: String,
}

/// The exit code of a kind (the contract's table).
pub fn code(kind: &ErrorKind) -> i32 {
    match kind {
        ErrorKind::InvalidInput => USAGE,
        ErrorKind::Incompatible { .. } => INCOMPATIBLE,
        ErrorKind::Contention { .. } => CONTENTION,
        ErrorKind::Moved { .. } => MOVED,
        ErrorKind::NotFound | ErrorKind::Exists => NO_TABLE_OR_EXISTS,
        ErrorKind::UnknownOutcome { .. } => UNKNOWN_OUTCOME,
        ErrorKind::Storage | ErrorKind::Corrupt => OTHER,
    }
}

/// `e` (of kind `kind`): its message and causes, then the command-line hint, if any.
fn fail_with(kind: ErrorKind, e: &dyn std::error::Error, hint: Option<String>) -> Failure {
    let mut message = concord::errors::describe_chain(e);
    if let Some(hint) = hint {
        message.push_str("; ");
        message.push_str(&hint);
    }
    Failure { code: code(&kind), kind: kind.name(), message }
}

/// Bad usage (exit 2) with `message`.
pub fn usage(message: String) -> Failure {
    Failure { code: USAGE, kind: ErrorKind::InvalidInput.name(), message }
}

/// `doctor`'s verdict on a store that does not enforce conditional creates (exit 6).
pub fn unsafe_store(message: String) -> Failure {
    Failure { code: UNSAFE_STORE, kind: "unsafe_store", message }
}

/// A failure of the store itself (exit 1), outside the library's typed errors.
pub fn storage(message: String) -> Failure {
    Failure { code: OTHER, kind: ErrorKind::Storage.name(), message }
}

/// A closed stdout (`concord scan t | head`): the reader has what it wanted, so the
/// command ends quietly and successfully.
fn closed_stdout() -> Failure {
    Failure { code: SUCCESS, kind: "", message: String::new() }
}

/// Hints that name this command line's flags and commands.
fn corrupt_hint(_: &CorruptObject) -> Option<String> {
    Some("use --version to read another version".into())
}

fn storage_hint(e: &StorageError) -> Option<String> {
    match &e.source {
        StorageCause::DynamoDb(DynamoDbError::TableNotFound { table }) => {
            Some(format!("create it with `concord coordinator create-table dynamodb://{table}`"))
        }
        _ => None,
    }
}

impl From<UriError> for Failure {
    fn from(e: UriError) -> Self {
        let hint = matches!(e, UriError::CoordinatorCredentials { .. }).then(|| "in the environment or with --storage-option".to_string());
        fail_with(e.kind(), &e, hint)
    }
}

impl From<SchemaParseError> for Failure {
    fn from(e: SchemaParseError) -> Self {
        fail_with(e.kind(), &e, None)
    }
}

impl From<DurationError> for Failure {
    fn from(e: DurationError) -> Self {
        fail_with(e.kind(), &e, None)
    }
}

impl From<ChangesError> for Failure {
    fn from(e: ChangesError) -> Self {
        let hint = match &e {
            ChangesError::VersionNotRetained { .. } => {
                Some("create a consumer (`concord consumer create`) to keep versions from vacuum".to_string())
            }
            ChangesError::Open(OpenError::NotFound { uri }) => Some(format!("create one with `concord create {uri} --schema ...`")),
            _ => None,
        };
        fail_with(e.kind(), &e, hint)
    }
}

impl From<ConsumerError> for Failure {
    fn from(e: ConsumerError) -> Self {
        let hint = match &e {
            ConsumerError::NotFound { name } => Some(format!("create it with `concord consumer create <uri> {name}`")),
            _ => None,
        };
        fail_with(e.kind(), &e, hint)
    }
}

impl From<TagError> for Failure {
    fn from(e: TagError) -> Self {
        let hint = match &e {
            TagError::NotFound { .. } => Some("`concord tag list <uri>` lists the tags".to_string()),
            _ => None,
        };
        fail_with(e.kind(), &e, hint)
    }
}

impl From<BranchError> for Failure {
    fn from(e: BranchError) -> Self {
        let hint = match &e {
            BranchError::NotFound { name } => Some(format!("create it with `concord branch create <uri> {name}`")),
            _ => None,
        };
        fail_with(e.kind(), &e, hint)
    }
}

impl From<MergeError> for Failure {
    fn from(e: MergeError) -> Self {
        let hint = match &e {
            MergeError::TargetMoved { .. } => {
                Some("merge without --fast-forward-only to replay the branch on what the target did".to_string())
            }
            _ => None,
        };
        fail_with(e.kind(), &e, hint)
    }
}

impl From<OpenError> for Failure {
    fn from(e: OpenError) -> Self {
        let hint = match &e {
            OpenError::NotFound { uri } => Some(format!("create one with `concord create {uri} --schema ...`")),
            OpenError::Corrupt(c) => corrupt_hint(c),
            OpenError::Storage(s) => storage_hint(s),
            _ => None,
        };
        fail_with(e.kind(), &e, hint)
    }
}

impl From<concord::errors::PublishError> for Failure {
    fn from(e: concord::errors::PublishError) -> Self {
        fail_with(e.kind(), &e, None)
    }
}

impl From<CreateError> for Failure {
    fn from(e: CreateError) -> Self {
        let hint = match &e {
            CreateError::StateUnknown { .. } => Some("`concord history` tells".into()),
            CreateError::Storage(s) => storage_hint(s),
            _ => None,
        };
        fail_with(e.kind(), &e, hint)
    }
}

impl From<ScanError> for Failure {
    fn from(e: ScanError) -> Self {
        scan_failure(&e)
    }
}

fn scan_failure(e: &ScanError) -> Failure {
    let hint = match e {
        ScanError::Corrupt(c) => corrupt_hint(c),
        ScanError::Storage(s) => storage_hint(s),
        _ => None,
    };
    fail_with(e.kind(), e, hint)
}

impl From<SqlError> for Failure {
    fn from(e: SqlError) -> Self {
        match &e {
            SqlError::Scan(scan) => scan_failure(scan),
            _ => fail_with(e.kind(), &e, None),
        }
    }
}

fn commit_hint(e: &CommitError) -> Option<String> {
    match e {
        CommitError::JobMember { source, .. } => commit_hint(source),
        CommitError::Corrupt(c) => corrupt_hint(c),
        CommitError::Storage(s) => storage_hint(s),
        CommitError::CommitStateUnknown { .. } => Some("pass the same --idempotency-key".into()),
        _ => None,
    }
}

impl From<WriteError> for Failure {
    fn from(e: WriteError) -> Self {
        if let WriteError::ContradictsStaged { option, staged, given } = &e {
            let flag = format!("--{}", option.replace('_', "-"));
            return usage(format!(
                "the transaction was staged with {flag} {staged}; `concord commit` was given {flag} {given}. \
                 Give commit the staged value or none, or stage the transaction again"
            ));
        }
        let hint = match &e {
            WriteError::Alter(AlterError::ShortRetention { .. }) => Some("pass --allow-short-retention if no such writer runs".into()),
            WriteError::Alter(AlterError::BadTargetRows { .. }) => Some("give --target-rows 1 or more".into()),
            WriteError::Commit(c) => commit_hint(c),
            WriteError::Corrupt(c) => corrupt_hint(c),
            WriteError::Storage(s) => storage_hint(s),
            _ => None,
        };
        fail_with(e.kind(), &e, hint)
    }
}

impl From<TogetherError> for Failure {
    fn from(e: TogetherError) -> Self {
        let hint = match &e {
            TogetherError::Part { source, .. } => commit_hint(source),
            TogetherError::Commit(c) => commit_hint(c),
            TogetherError::OutcomeUnknown { .. } => Some("pass the same --idempotency-key".into()),
            _ => None,
        };
        fail_with(e.kind(), &e, hint)
    }
}

impl From<arrow::error::ArrowError> for Failure {
    fn from(e: arrow::error::ArrowError) -> Self {
        match &e {
            arrow::error::ArrowError::IoError(_, io) if io.kind() == std::io::ErrorKind::BrokenPipe => closed_stdout(),
            _ => storage(concord::errors::describe_chain(&e)),
        }
    }
}

impl From<parquet::errors::ParquetError> for Failure {
    fn from(e: parquet::errors::ParquetError) -> Self {
        storage(format!("writing Parquet: {e}"))
    }
}

impl From<std::io::Error> for Failure {
    fn from(e: std::io::Error) -> Self {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            closed_stdout()
        } else {
            storage(concord::errors::describe_chain(&e))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every kind the library has maps to the exit code ../shared/cli-contract.md gives
    /// its name (the match in `code` is total: a new kind does not compile without one).
    #[test]
    fn every_kind_exits_as_the_contract_says() {
        let contract = [
            ("invalid_input", 2),
            ("incompatible", 3),
            ("contention", 4),
            ("moved", 5),
            ("not_found", 7),
            ("exists", 7),
            ("unknown_outcome", 8),
            ("storage", 1),
            ("corrupt", 1),
        ];
        let kinds = ErrorKind::all();
        assert_eq!(kinds.len(), contract.len(), "one of each kind");
        for kind in kinds {
            let expected =
                contract.iter().find(|(name, _)| *name == kind.name()).unwrap_or_else(|| panic!("{} is not in the contract", kind.name()));
            assert_eq!(code(&kind), expected.1, "{}", kind.name());
        }
        assert_eq!(unsafe_store(String::new()).code, 6);
    }
}

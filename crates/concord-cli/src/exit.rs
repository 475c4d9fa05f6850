//! Errors to the exit codes of the CLI contract (../shared/cli-contract.md), and the
//! command-line hints the library's messages leave out (they name no flag).

use concord::{
    AlterError, CommitError, CorruptObject, CreateError, DynamoDbError, OpenError, ScanError, SchemaParseError, SqlError, StorageCause,
    StorageError, Unavailable, UriError, WriteError,
};

pub const OTHER: i32 = 1;
pub const USAGE: i32 = 2;
pub const INCOMPATIBLE: i32 = 3;
pub const CONTENTION: i32 = 4;
pub const MOVED: i32 = 5;
pub const UNSAFE_STORE: i32 = 6;
pub const NO_TABLE_OR_EXISTS: i32 = 7;
pub const UNKNOWN_OUTCOME: i32 = 8;

/// A failure with its exit code and the message for stderr.
#[derive(Debug)]
pub struct Failure {
    pub code: i32,
    pub message: String,
}

/// `e`'s message and causes, then the command-line hint, if any.
fn fail_with(code: i32, e: &dyn std::error::Error, hint: Option<String>) -> Failure {
    let mut message = concord::describe_chain(e);
    if let Some(hint) = hint {
        message.push_str("; ");
        message.push_str(&hint);
    }
    Failure { code, message }
}

fn fail(code: i32, e: &dyn std::error::Error) -> Failure {
    fail_with(code, e, None)
}

/// Bad usage (exit 2) with `message`.
pub fn usage(message: String) -> Failure {
    Failure { code: USAGE, message }
}

/// A closed stdout (`concord scan t | head`): the reader has what it wanted, so the
/// command ends quietly and successfully.
fn closed_stdout() -> Failure {
    Failure { code: 0, message: String::new() }
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
        let hint = match &e {
            UriError::CoordinatorCredentials { .. } => Some("in the environment or with --storage-option".to_string()),
            _ => None,
        };
        fail_with(USAGE, &e, hint)
    }
}

impl From<SchemaParseError> for Failure {
    fn from(e: SchemaParseError) -> Self {
        fail(USAGE, &e)
    }
}

impl From<OpenError> for Failure {
    fn from(e: OpenError) -> Self {
        let (code, hint) = match &e {
            OpenError::NotFound { uri } => (NO_TABLE_OR_EXISTS, Some(format!("create one with `concord create {uri} --schema ...`"))),
            OpenError::NotATable { .. } => (NO_TABLE_OR_EXISTS, None),
            OpenError::VersionNotFound { .. } | OpenError::NoVersionAt { .. } => (USAGE, None),
            OpenError::Corrupt(c) => (OTHER, corrupt_hint(c)),
            OpenError::Storage(s) => (OTHER, storage_hint(s)),
            _ => (OTHER, None),
        };
        fail_with(code, &e, hint)
    }
}

impl From<CreateError> for Failure {
    fn from(e: CreateError) -> Self {
        let (code, hint) = match &e {
            CreateError::AlreadyExists { .. } => (NO_TABLE_OR_EXISTS, None),
            CreateError::StateUnknown { .. } => (UNKNOWN_OUTCOME, Some("`concord history` tells".into())),
            CreateError::Storage(s) => (OTHER, storage_hint(s)),
            _ => (OTHER, None),
        };
        fail_with(code, &e, hint)
    }
}

/// A table removed while in use no longer exists (7); the rest is "other" (1).
fn unavailable_code(e: &Unavailable) -> i32 {
    match e {
        Unavailable::TableGone { .. } => NO_TABLE_OR_EXISTS,
        _ => OTHER,
    }
}

impl From<ScanError> for Failure {
    fn from(e: ScanError) -> Self {
        scan_failure(&e)
    }
}

fn scan_failure(e: &ScanError) -> Failure {
    let (code, hint) = match e {
        ScanError::Column(_) | ScanError::Predicate(_) => (USAGE, None),
        ScanError::Unavailable(u) => (unavailable_code(u), None),
        ScanError::Corrupt(c) => (OTHER, corrupt_hint(c)),
        ScanError::Storage(s) => (OTHER, storage_hint(s)),
        _ => (OTHER, None),
    };
    fail_with(code, e, hint)
}

/// Query mistakes are bad input (2); reading failures as for scans.
impl From<SqlError> for Failure {
    fn from(e: SqlError) -> Self {
        match &e {
            SqlError::Scan(scan) => scan_failure(scan),
            SqlError::Engine { .. } => fail(OTHER, &e),
            _ => fail(USAGE, &e),
        }
    }
}

pub fn commit_code(e: &CommitError) -> i32 {
    match e {
        CommitError::Incompatible { .. } | CommitError::RerunFailed { .. } | CommitError::CannotShareVersion { .. } => INCOMPATIBLE,
        // A job fails as its member did.
        CommitError::JobMember { source, .. } => commit_code(source),
        CommitError::KeyOfAnotherOperation { .. } => USAGE,
        CommitError::Unavailable(u) => unavailable_code(u),
        CommitError::TooMuchContention { .. } => CONTENTION,
        CommitError::VersionMoved { .. } => MOVED,
        CommitError::CommitStateUnknown { .. } => UNKNOWN_OUTCOME,
        _ => OTHER,
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
        let (code, hint) = match &e {
            WriteError::Alter(AlterError::ShortRetention { .. }) => {
                (USAGE, Some("pass --allow-short-retention if no such writer runs".into()))
            }
            WriteError::Alter(AlterError::BadTargetRows { .. }) => (USAGE, Some("give --target-rows 1 or more".into())),
            WriteError::Input(_)
            | WriteError::Predicate(_)
            | WriteError::Alter(_)
            | WriteError::Column(_)
            | WriteError::StagedNotFound { .. }
            | WriteError::ContradictsStaged { .. }
            | WriteError::NoSuchVersion { .. } => (USAGE, None),
            WriteError::Commit(c) => (commit_code(c), commit_hint(c)),
            WriteError::Unavailable(u) => (unavailable_code(u), None),
            WriteError::Corrupt(c) => (OTHER, corrupt_hint(c)),
            WriteError::Storage(s) => (OTHER, storage_hint(s)),
            _ => (OTHER, None),
        };
        fail_with(code, &e, hint)
    }
}

impl From<arrow::error::ArrowError> for Failure {
    fn from(e: arrow::error::ArrowError) -> Self {
        match &e {
            arrow::error::ArrowError::IoError(_, io) if io.kind() == std::io::ErrorKind::BrokenPipe => closed_stdout(),
            _ => fail(OTHER, &e),
        }
    }
}

impl From<std::io::Error> for Failure {
    fn from(e: std::io::Error) -> Self {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            closed_stdout()
        } else {
            fail(OTHER, &e)
        }
    }
}

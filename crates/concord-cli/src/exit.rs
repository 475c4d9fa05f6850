//! Errors to the exit codes of the CLI contract (../shared/cli-contract.md).

use concord::{CommitError, CreateError, OpenError, ScanError, SchemaParseError, Unavailable, UriError, WriteError};

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

/// The message followed by its causes, e.g. the storage error under a storage failure.
fn describe(e: &dyn std::error::Error) -> String {
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

fn fail(code: i32, e: &dyn std::error::Error) -> Failure {
    Failure { code, message: describe(e) }
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

impl From<UriError> for Failure {
    fn from(e: UriError) -> Self {
        fail(USAGE, &e)
    }
}

impl From<SchemaParseError> for Failure {
    fn from(e: SchemaParseError) -> Self {
        fail(USAGE, &e)
    }
}

impl From<OpenError> for Failure {
    fn from(e: OpenError) -> Self {
        let code = match &e {
            OpenError::NotFound { .. } | OpenError::NotATable { .. } => NO_TABLE_OR_EXISTS,
            OpenError::VersionNotFound { .. } | OpenError::NoVersionAt { .. } => USAGE,
            OpenError::UnsupportedFormat { .. } | OpenError::Removed { .. } | OpenError::Corrupt(_) | OpenError::Storage(_) => OTHER,
        };
        fail(code, &e)
    }
}

impl From<CreateError> for Failure {
    fn from(e: CreateError) -> Self {
        let code = match &e {
            CreateError::AlreadyExists { .. } => NO_TABLE_OR_EXISTS,
            CreateError::StateUnknown { .. } => UNKNOWN_OUTCOME,
            CreateError::Corrupt(_) | CreateError::Storage(_) => OTHER,
        };
        fail(code, &e)
    }
}

impl From<ScanError> for Failure {
    fn from(e: ScanError) -> Self {
        let code = match &e {
            ScanError::Column(_) | ScanError::Predicate(_) => USAGE,
            ScanError::Unavailable(u) => unavailable_code(u),
            ScanError::Corrupt(_) | ScanError::Storage(_) => OTHER,
        };
        fail(code, &e)
    }
}

/// A table removed while in use no longer exists (7); the rest is "other" (1).
fn unavailable_code(e: &Unavailable) -> i32 {
    match e {
        Unavailable::TableGone { .. } => NO_TABLE_OR_EXISTS,
        _ => OTHER,
    }
}

pub fn commit_code(e: &CommitError) -> i32 {
    match e {
        CommitError::Incompatible { .. } | CommitError::RerunFailed { .. } => INCOMPATIBLE,
        CommitError::KeyOfAnotherOperation { .. } => USAGE,
        CommitError::Unavailable(u) => unavailable_code(u),
        CommitError::TooMuchContention { .. } => CONTENTION,
        CommitError::VersionMoved { .. } => MOVED,
        CommitError::CommitStateUnknown { .. } => UNKNOWN_OUTCOME,
        CommitError::Corrupt(_) | CommitError::Storage(_) | CommitError::HistoryRemoved { .. } => OTHER,
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
        let code = match &e {
            WriteError::Input(_)
            | WriteError::Predicate(_)
            | WriteError::Alter(_)
            | WriteError::Column(_)
            | WriteError::StagedNotFound { .. }
            | WriteError::ContradictsStaged { .. }
            | WriteError::NoSuchVersion { .. } => USAGE,
            WriteError::Commit(c) => commit_code(c),
            WriteError::Unavailable(u) => unavailable_code(u),
            WriteError::Encode { .. } | WriteError::Corrupt(_) | WriteError::Storage(_) => OTHER,
        };
        fail(code, &e)
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
        if e.kind() == std::io::ErrorKind::BrokenPipe { closed_stdout() } else { fail(OTHER, &e) }
    }
}


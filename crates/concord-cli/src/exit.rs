//! Errors to the exit codes of the CLI contract (../shared/cli-contract.md).

use concord::{CommitError, CreateError, OpenError, ScanError, SchemaParseError, UriError, WriteError};

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
            OpenError::NotFound { .. } => NO_TABLE_OR_EXISTS,
            OpenError::VersionNotFound { .. } | OpenError::NoVersionAt { .. } => USAGE,
            OpenError::UnsupportedFormat { .. } | OpenError::Corrupt(_) | OpenError::Storage(_) => OTHER,
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
            ScanError::UnknownColumn { .. } | ScanError::Predicate(_) => USAGE,
            ScanError::Corrupt(_) | ScanError::Storage(_) => OTHER,
        };
        fail(code, &e)
    }
}

pub fn commit_code(e: &CommitError) -> i32 {
    match e {
        CommitError::Incompatible { .. } | CommitError::RerunFailed { .. } => INCOMPATIBLE,
        CommitError::TooMuchContention { .. } => CONTENTION,
        CommitError::VersionMoved { .. } => MOVED,
        CommitError::CommitStateUnknown { .. } => UNKNOWN_OUTCOME,
        CommitError::Corrupt(_) | CommitError::Storage(_) | CommitError::HistoryRemoved { .. } => OTHER,
    }
}

impl From<WriteError> for Failure {
    fn from(e: WriteError) -> Self {
        let code = match &e {
            WriteError::Input(_)
            | WriteError::Predicate(_)
            | WriteError::Alter(_)
            | WriteError::StagedNotFound { .. }
            | WriteError::NoSuchVersion { .. } => USAGE,
            WriteError::Commit(c) => commit_code(c),
            WriteError::Encode { .. } | WriteError::Corrupt(_) | WriteError::Storage(_) => OTHER,
        };
        fail(code, &e)
    }
}

impl From<arrow::error::ArrowError> for Failure {
    fn from(e: arrow::error::ArrowError) -> Self {
        fail(OTHER, &e)
    }
}

impl From<std::io::Error> for Failure {
    fn from(e: std::io::Error) -> Self {
        // A closed stdout (e.g. `| head`) is not worth a message.
        Failure { code: OTHER, message: if e.kind() == std::io::ErrorKind::BrokenPipe { String::new() } else { describe(&e) } }
    }
}


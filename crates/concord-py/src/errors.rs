//! The library's typed errors to the package's exception classes (python/concord/_errors.py),
//! one to one by type as the CLI maps them to exit codes (crates/concord-cli/src/exit.rs):
//!
//! | CLI exit | exception |
//! |---|---|
//! | 2 | `InvalidInputError` |
//! | 3 | `IncompatibleError` |
//! | 4 | `TooMuchContentionError` |
//! | 5 | `VersionMovedError` |
//! | 7 | `TableNotFoundError` / `TableExistsError` |
//! | 8 | `CommitStateUnknownError` |
//! | 1 | `CorruptError` (bytes that do not decode), `StorageError` (the rest) |
//!
//! Messages are the CLI's: the library's message and its causes, then the hint the CLI
//! adds, with the Python argument in place of the command-line flag.

use arrow::error::ArrowError;
use concord::{
    AlterError, CommitError, CreateError, DynamoDbError, OpenError, ScanError, SchemaParseError, SqlError, StorageCause, StorageError,
    Unavailable, UriError, WriteError,
};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyModule};

/// Everything a call can fail with.
#[derive(Debug)]
pub(crate) enum Error {
    Uri(UriError),
    Schema(SchemaParseError),
    Open(OpenError),
    Create(CreateError),
    Scan(ScanError),
    Write(WriteError),
    Sql(SqlError),
    /// A bad argument (the CLI's usage errors, exit 2).
    Usage(String),
    /// The caller's Arrow data could not be imported.
    BadData(ArrowError),
    /// A panic (in the library or here), caught.
    Panic(String),
    /// Anything else that should not happen (the runtime could not start, ...).
    Internal(String),
}

impl From<UriError> for Error {
    fn from(e: UriError) -> Self {
        Error::Uri(e)
    }
}
impl From<SchemaParseError> for Error {
    fn from(e: SchemaParseError) -> Self {
        Error::Schema(e)
    }
}
impl From<OpenError> for Error {
    fn from(e: OpenError) -> Self {
        Error::Open(e)
    }
}
impl From<CreateError> for Error {
    fn from(e: CreateError) -> Self {
        Error::Create(e)
    }
}
impl From<ScanError> for Error {
    fn from(e: ScanError) -> Self {
        Error::Scan(e)
    }
}
impl From<SqlError> for Error {
    fn from(e: SqlError) -> Self {
        Error::Sql(e)
    }
}
impl From<WriteError> for Error {
    fn from(e: WriteError) -> Self {
        Error::Write(e)
    }
}

/// Which exception, with its attributes.
#[derive(Debug, Clone, PartialEq)]
enum Kind {
    Invalid,
    Incompatible {
        winner_version: Option<u64>,
        winner_operation: Option<String>,
    },
    Contention {
        attempts: u32,
        elapsed_ms: u64,
    },
    Moved {
        expected: u64,
        latest: u64,
    },
    NotFound,
    Exists,
    Unknown {
        version: Option<u64>,
        transaction_id: Option<String>,
    },
    Corrupt,
    Storage,
    /// `ConcordError` itself: panics and internal failures.
    Base,
}

impl Kind {
    fn class_name(&self) -> &'static str {
        match self {
            Kind::Invalid => "InvalidInputError",
            Kind::Incompatible { .. } => "IncompatibleError",
            Kind::Contention { .. } => "TooMuchContentionError",
            Kind::Moved { .. } => "VersionMovedError",
            Kind::NotFound => "TableNotFoundError",
            Kind::Exists => "TableExistsError",
            Kind::Unknown { .. } => "CommitStateUnknownError",
            Kind::Corrupt => "CorruptError",
            Kind::Storage => "StorageError",
            Kind::Base => "ConcordError",
        }
    }
}

/// A table removed while in use no longer exists (exit 7); the rest is "other" (1).
fn unavailable_kind(e: &Unavailable) -> Kind {
    match e {
        Unavailable::TableGone { .. } => Kind::NotFound,
        _ => Kind::Storage,
    }
}

fn open_kind(e: &OpenError) -> Kind {
    match e {
        OpenError::NotFound { .. } | OpenError::NotATable { .. } => Kind::NotFound,
        OpenError::VersionNotFound { .. } | OpenError::NoVersionAt { .. } => Kind::Invalid,
        OpenError::Corrupt(_) => Kind::Corrupt,
        _ => Kind::Storage,
    }
}

fn create_kind(e: &CreateError) -> Kind {
    match e {
        CreateError::AlreadyExists { .. } => Kind::Exists,
        // Creating is committing version 0; no transaction id is reported.
        CreateError::StateUnknown { .. } => Kind::Unknown { version: Some(0), transaction_id: None },
        CreateError::Corrupt(_) => Kind::Corrupt,
        _ => Kind::Storage,
    }
}

fn scan_kind(e: &ScanError) -> Kind {
    match e {
        ScanError::Column(_) | ScanError::Predicate(_) => Kind::Invalid,
        ScanError::Unavailable(u) => unavailable_kind(u),
        ScanError::Corrupt(_) => Kind::Corrupt,
        _ => Kind::Storage,
    }
}

fn commit_kind(e: &CommitError) -> Kind {
    match e {
        CommitError::Incompatible { winner_version, winner_operation, .. } => {
            Kind::Incompatible { winner_version: Some(*winner_version), winner_operation: Some(winner_operation.clone()) }
        }
        // The re-run on the winners' version failed: that version is known, the operation not.
        CommitError::RerunFailed { version, .. } => Kind::Incompatible { winner_version: Some(*version), winner_operation: None },
        // A job member that cannot follow another member: no winner.
        CommitError::CannotShareVersion { .. } => Kind::Incompatible { winner_version: None, winner_operation: None },
        // A job fails as its member did.
        CommitError::JobMember { source, .. } => commit_kind(source),
        CommitError::KeyOfAnotherOperation { .. } => Kind::Invalid,
        CommitError::Unavailable(u) => unavailable_kind(u),
        CommitError::TooMuchContention { attempts, elapsed_ms, .. } => Kind::Contention { attempts: *attempts, elapsed_ms: *elapsed_ms },
        CommitError::VersionMoved { expected, latest } => Kind::Moved { expected: *expected, latest: *latest },
        CommitError::CommitStateUnknown { version, transaction_id, .. } => {
            Kind::Unknown { version: Some(*version), transaction_id: Some(transaction_id.to_string()) }
        }
        CommitError::Corrupt(_) => Kind::Corrupt,
        _ => Kind::Storage,
    }
}

fn write_kind(e: &WriteError) -> Kind {
    match e {
        WriteError::Input(_)
        | WriteError::Predicate(_)
        | WriteError::Alter(_)
        | WriteError::Column(_)
        | WriteError::StagedNotFound { .. }
        | WriteError::ContradictsStaged { .. }
        | WriteError::NoSuchVersion { .. } => Kind::Invalid,
        WriteError::Commit(c) => commit_kind(c),
        WriteError::Unavailable(u) => unavailable_kind(u),
        WriteError::Corrupt(_) => Kind::Corrupt,
        _ => Kind::Storage,
    }
}

/// Query mistakes are bad input (2); reading failures as for scans; the engine failing
/// for another reason is "other" (1). As the CLI's `From<SqlError>`.
fn sql_kind(e: &SqlError) -> Kind {
    match e {
        SqlError::Scan(s) => scan_kind(s),
        SqlError::Engine { .. } => Kind::Storage,
        _ => Kind::Invalid,
    }
}

const CORRUPT_HINT: &str = "pass version= to read another version";

fn storage_hint(e: &StorageError) -> Option<String> {
    match &e.source {
        StorageCause::DynamoDb(DynamoDbError::TableNotFound { table }) => {
            Some(format!("create it with `concord coordinator create-table dynamodb://{table}`"))
        }
        _ => None,
    }
}

fn commit_hint(e: &CommitError) -> Option<String> {
    match e {
        CommitError::JobMember { source, .. } => commit_hint(source),
        CommitError::Corrupt(_) => Some(CORRUPT_HINT.into()),
        CommitError::Storage(s) => storage_hint(s),
        CommitError::CommitStateUnknown { .. } => Some("pass the same idempotency_key".into()),
        _ => None,
    }
}

/// The exception's class, attributes and message.
fn classify(e: &Error) -> (Kind, String) {
    let with_hint = |e: &dyn std::error::Error, hint: Option<String>| match hint {
        Some(hint) => format!("{}; {hint}", concord::describe_chain(e)),
        None => concord::describe_chain(e),
    };
    match e {
        Error::Uri(e) => {
            let hint = matches!(e, UriError::CoordinatorCredentials { .. }).then(|| "in the environment or in storage_options".to_string());
            (Kind::Invalid, with_hint(e, hint))
        }
        Error::Schema(e) => (Kind::Invalid, concord::describe_chain(e)),
        Error::Open(e) => {
            let hint = match e {
                OpenError::NotFound { uri } => Some(format!("create one with concord.create({uri:?}, schema)")),
                OpenError::Corrupt(_) => Some(CORRUPT_HINT.into()),
                OpenError::Storage(s) => storage_hint(s),
                _ => None,
            };
            (open_kind(e), with_hint(e, hint))
        }
        Error::Create(e) => {
            let hint = match e {
                CreateError::StateUnknown { .. } => Some("concord.open(uri).history() tells".into()),
                CreateError::Storage(s) => storage_hint(s),
                _ => None,
            };
            (create_kind(e), with_hint(e, hint))
        }
        Error::Scan(e) => {
            let hint = match e {
                ScanError::Corrupt(_) => Some(CORRUPT_HINT.into()),
                ScanError::Storage(s) => storage_hint(s),
                _ => None,
            };
            (scan_kind(e), with_hint(e, hint))
        }
        Error::Write(e) => {
            let hint = match e {
                WriteError::Alter(AlterError::ShortRetention { .. }) => {
                    Some("pass allow_short_retention=True if no such writer runs".into())
                }
                WriteError::Alter(AlterError::BadTargetRows { .. }) => Some("give target_rows=1 or more".into()),
                WriteError::Commit(c) => commit_hint(c),
                WriteError::Corrupt(_) => Some(CORRUPT_HINT.into()),
                WriteError::Storage(s) => storage_hint(s),
                _ => None,
            };
            (write_kind(e), with_hint(e, hint))
        }
        Error::Sql(e) => {
            let hint = match e {
                SqlError::Scan(s) => match s.as_ref() {
                    ScanError::Corrupt(_) => Some(CORRUPT_HINT.into()),
                    ScanError::Storage(s) => storage_hint(s),
                    _ => None,
                },
                _ => None,
            };
            (sql_kind(e), with_hint(e, hint))
        }
        Error::Usage(message) => (Kind::Invalid, message.clone()),
        Error::BadData(e) => (Kind::Invalid, format!("the data could not be read as Arrow: {}", concord::describe_chain(e))),
        Error::Panic(message) => (Kind::Base, format!("internal error (a bug in concord; please report it): {message}")),
        Error::Internal(message) => (Kind::Base, message.clone()),
    }
}

/// `ClassName: message`, for consumers of a C stream (which only carry text).
pub(crate) fn plain_message(e: &Error) -> String {
    let (kind, message) = classify(e);
    format!("concord.{}: {message}", kind.class_name())
}

static ERRORS_MODULE: PyOnceLock<Py<PyModule>> = PyOnceLock::new();

/// The exception instance for `e`.
fn exception(py: Python<'_>, e: &Error) -> PyResult<PyErr> {
    let (kind, message) = classify(e);
    let module = ERRORS_MODULE.get_or_try_init(py, || PyModule::import(py, "concord._errors").map(Bound::unbind))?.bind(py);
    let class = module.getattr(kind.class_name())?;
    let kwargs = PyDict::new(py);
    match &kind {
        Kind::Incompatible { winner_version, winner_operation } => {
            kwargs.set_item("winner_version", winner_version)?;
            kwargs.set_item("winner_operation", winner_operation)?;
        }
        Kind::Contention { attempts, elapsed_ms } => {
            kwargs.set_item("attempts", attempts)?;
            kwargs.set_item("elapsed_ms", elapsed_ms)?;
        }
        Kind::Moved { expected, latest } => {
            kwargs.set_item("expected", expected)?;
            kwargs.set_item("latest", latest)?;
        }
        Kind::Unknown { version, transaction_id } => {
            kwargs.set_item("version", version)?;
            kwargs.set_item("transaction_id", transaction_id)?;
        }
        _ => {}
    }
    if let Error::Write(WriteError::Commit(CommitError::JobMember { transaction_id, .. })) = e {
        kwargs.set_item("staged_id", transaction_id.to_string())?;
    }
    let instance = class.call((message,), Some(&kwargs))?;
    Ok(PyErr::from_value(instance))
}

impl From<Error> for PyErr {
    fn from(e: Error) -> PyErr {
        Python::attach(|py| match exception(py, &e) {
            Ok(err) => err,
            // The package's exception module is missing (a broken install): still an exception.
            Err(import_failed) => {
                let (_, message) = classify(&e);
                pyo3::exceptions::PyRuntimeError::new_err(format!("{message} (and concord._errors could not be loaded: {import_failed})"))
            }
        })
    }
}

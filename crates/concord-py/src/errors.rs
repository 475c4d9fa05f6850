//! The library's typed errors to the package's exception classes (python/concord/_errors.py):
//! the library decides each error's kind (`ErrorKind`), this maps kinds to classes as the
//! CLI maps them to exit codes (crates/concord-cli/src/exit.rs):
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
use concord::errors::{DynamoDbError, StorageCause};
use concord::schema::SchemaParseError;
use concord::{AlterError, CommitError, CreateError, ErrorKind, OpenError, ScanError, SqlError, StorageError, UriError, WriteError};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyModule};

/// An error of the change feed, consumers, tags, branches, merges or multi-table
/// commits.
#[derive(Debug)]
pub(crate) enum History {
    Changes(concord::ChangesError),
    Consumer(concord::ConsumerError),
    Tag(concord::TagError),
    Branch(concord::BranchError),
    Merge(concord::MergeError),
    Together(concord::TogetherError),
}

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
    Publish(concord::errors::PublishError),
    History(History),
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
impl From<concord::errors::PublishError> for Error {
    fn from(e: concord::errors::PublishError) -> Self {
        Error::Publish(e)
    }
}
impl From<concord::ChangesError> for Error {
    fn from(e: concord::ChangesError) -> Self {
        Error::History(History::Changes(e))
    }
}
impl From<concord::ConsumerError> for Error {
    fn from(e: concord::ConsumerError) -> Self {
        Error::History(History::Consumer(e))
    }
}
impl From<concord::TagError> for Error {
    fn from(e: concord::TagError) -> Self {
        Error::History(History::Tag(e))
    }
}
impl From<concord::BranchError> for Error {
    fn from(e: concord::BranchError) -> Self {
        Error::History(History::Branch(e))
    }
}
impl From<concord::MergeError> for Error {
    fn from(e: concord::MergeError) -> Self {
        Error::History(History::Merge(e))
    }
}
impl From<concord::TogetherError> for Error {
    fn from(e: concord::TogetherError) -> Self {
        Error::History(History::Together(e))
    }
}
impl From<WriteError> for Error {
    fn from(e: WriteError) -> Self {
        Error::Write(e)
    }
}

/// Which exception, with its attributes.
/// Every kind the library has, with its exception class: for the test that checks the
/// map against ../shared/python-contract.md (python/tests/test_errors.py).
#[pyfunction]
pub(crate) fn _error_classes() -> Vec<(&'static str, &'static str)> {
    ErrorKind::all().iter().map(|k| (k.name(), class_name(k))).collect()
}

/// The exception class of a kind (the contract's table): a total map.
fn class_name(kind: &ErrorKind) -> &'static str {
    match kind {
        ErrorKind::InvalidInput => "InvalidInputError",
        ErrorKind::Incompatible { .. } => "IncompatibleError",
        ErrorKind::Contention { .. } => "TooMuchContentionError",
        ErrorKind::Moved { .. } => "VersionMovedError",
        ErrorKind::NotFound => "TableNotFoundError",
        ErrorKind::Exists => "TableExistsError",
        ErrorKind::UnknownOutcome { .. } => "CommitStateUnknownError",
        ErrorKind::Corrupt => "CorruptError",
        ErrorKind::Storage => "StorageError",
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

fn branch_hint(e: &concord::BranchError) -> Option<String> {
    match e {
        concord::BranchError::NotFound { name } => Some(format!("create it with t.create_branch({name:?})")),
        _ => None,
    }
}

/// The library's message of `e` with its causes, then the CLI's hint (if any).
fn with_hint(e: &dyn std::error::Error, hint: Option<String>) -> String {
    match hint {
        Some(hint) => format!("{}; {hint}", concord::errors::describe_chain(e)),
        None => concord::errors::describe_chain(e),
    }
}

/// The kind of `e` (`None`: the base class, for internal errors) and its message.
fn classify(e: &Error) -> (Option<ErrorKind>, String) {
    match e {
        Error::Uri(e) => {
            let hint = matches!(e, UriError::CoordinatorCredentials { .. }).then(|| "in the environment or in storage_options".to_string());
            (Some(e.kind()), with_hint(e, hint))
        }
        Error::Schema(e) => (Some(e.kind()), concord::errors::describe_chain(e)),
        Error::Open(e) => {
            let hint = match e {
                OpenError::NotFound { uri } => Some(format!("create one with concord.create({uri:?}, schema)")),
                OpenError::Corrupt(_) => Some(CORRUPT_HINT.into()),
                OpenError::Storage(s) => storage_hint(s),
                _ => None,
            };
            (Some(e.kind()), with_hint(e, hint))
        }
        Error::Create(e) => {
            let hint = match e {
                CreateError::StateUnknown { .. } => Some("concord.open(uri).history() tells".into()),
                CreateError::Storage(s) => storage_hint(s),
                _ => None,
            };
            (Some(e.kind()), with_hint(e, hint))
        }
        Error::Scan(e) => {
            let hint = match e {
                ScanError::Corrupt(_) => Some(CORRUPT_HINT.into()),
                ScanError::Storage(s) => storage_hint(s),
                _ => None,
            };
            (Some(e.kind()), with_hint(e, hint))
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
            (Some(e.kind()), with_hint(e, hint))
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
            (Some(e.kind()), with_hint(e, hint))
        }
        Error::Publish(e) => (Some(e.kind()), concord::errors::describe_chain(e)),
        Error::History(e) => {
            let (kind, message) = classify_history(e);
            (Some(kind), message)
        }
        Error::Usage(message) => (Some(ErrorKind::InvalidInput), message.clone()),
        Error::BadData(e) => {
            (Some(ErrorKind::InvalidInput), format!("the data could not be read as Arrow: {}", concord::errors::describe_chain(e)))
        }
        Error::Panic(message) => (None, format!("internal error (a bug in concord; please report it): {message}")),
        Error::Internal(message) => (None, message.clone()),
    }
}

/// The kind and message of an error of the change feed, consumers, tags, branches,
/// merges or multi-table commits.
fn classify_history(e: &History) -> (ErrorKind, String) {
    match e {
        History::Changes(e) => {
            let hint = matches!(e, concord::ChangesError::VersionNotRetained { .. })
                .then(|| "a consumer (t.consumer(name).create()) keeps versions from vacuum".to_string());
            (e.kind(), with_hint(e, hint))
        }
        History::Consumer(e) => {
            let hint = match e {
                concord::ConsumerError::NotFound { name } => Some(format!("create it with t.consumer({name:?}).create()")),
                _ => None,
            };
            (e.kind(), with_hint(e, hint))
        }
        History::Tag(e) => {
            let hint = matches!(e, concord::TagError::NotFound { .. }).then(|| "t.tags.list() lists the tags".to_string());
            (e.kind(), with_hint(e, hint))
        }
        History::Branch(e) => (e.kind(), with_hint(e, branch_hint(e))),
        History::Merge(e) => {
            let hint = match e {
                concord::MergeError::TargetMoved { .. } => {
                    Some("merge without fast_forward_only=True to replay the branch on what the target did".into())
                }
                concord::MergeError::Branch(b) => branch_hint(b),
                concord::MergeError::Commit(c) => commit_hint(c),
                _ => None,
            };
            (e.kind(), with_hint(e, hint))
        }
        History::Together(e) => {
            let hint = match e {
                concord::TogetherError::Part { source, .. } => commit_hint(source),
                concord::TogetherError::Commit(c) => commit_hint(c),
                concord::TogetherError::OutcomeUnknown { .. } => Some("pass the same idempotency_key".into()),
                _ => None,
            };
            (e.kind(), with_hint(e, hint))
        }
    }
}

/// `ClassName: message`, for consumers of a C stream (which only carry text).
pub(crate) fn plain_message(e: &Error) -> String {
    let (kind, message) = classify(e);
    format!("concord.{}: {message}", kind.as_ref().map_or("ConcordError", class_name))
}

static ERRORS_MODULE: PyOnceLock<Py<PyModule>> = PyOnceLock::new();

/// The exception instance for `e`.
fn exception(py: Python<'_>, e: &Error) -> PyResult<PyErr> {
    let (kind, message) = classify(e);
    let module = ERRORS_MODULE.get_or_try_init(py, || PyModule::import(py, "concord._errors").map(Bound::unbind))?.bind(py);
    let class = module.getattr(kind.as_ref().map_or("ConcordError", class_name))?;
    let kwargs = PyDict::new(py);
    match &kind {
        Some(ErrorKind::Incompatible { winner_version, winner_operation }) => {
            kwargs.set_item("winner_version", winner_version)?;
            kwargs.set_item("winner_operation", winner_operation)?;
        }
        Some(ErrorKind::Contention { attempts, elapsed_ms }) => {
            kwargs.set_item("attempts", attempts)?;
            kwargs.set_item("elapsed_ms", elapsed_ms)?;
        }
        Some(ErrorKind::Moved { expected, latest }) => {
            kwargs.set_item("expected", expected)?;
            kwargs.set_item("latest", latest)?;
        }
        Some(ErrorKind::UnknownOutcome { version, transaction_id }) => {
            kwargs.set_item("version", version)?;
            kwargs.set_item("transaction_id", transaction_id.map(|t| t.to_string()))?;
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

//! Errors of SQL queries, and the classification of DataFusion's errors into them.

use std::sync::Arc;

use datafusion::common::DataFusionError;

use crate::error::{ErrorKind, PredicateError, ScanError};

/// A SQL query could not be planned or run.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SqlError {
    /// The text is not a valid query on the registered tables: it does not parse, or
    /// names an unknown table, column or function, or combines types that do not fit.
    /// The message is DataFusion's.
    #[error("{message}")]
    Plan {
        /// DataFusion's message.
        message: String,
    },
    /// The statement would change a table or the session (INSERT, CREATE, COPY, SET,
    /// ...); only queries run, and nothing was written.
    #[error("only queries run over Concord tables; this statement is {kind} ({name}), and nothing was written. Change a table with Concord's writes (append, delete, update, merge, ...)")]
    NotAQuery {
        /// What kind of statement: "a data definition", "a data modification", ...
        kind: &'static str,
        /// DataFusion's name for it, e.g. `CreateMemoryTable`, `Insert Into`.
        name: String,
    },
    /// Evaluating the query on the rows failed (division by zero, a value an explicit
    /// CAST does not fit, ...). The message is DataFusion's.
    #[error("the query failed on the table's rows: {message}")]
    Failed {
        /// DataFusion's message.
        message: String,
    },
    /// Reading a table's data failed (storage, corrupt data, a filter failing on a
    /// value). Shared: DataFusion may hand one failure to several consumers.
    #[error(transparent)]
    Scan(Arc<ScanError>),
    /// An unquoted column name that matches, ignoring case, columns of several names
    /// (in the tables of the query) and none exactly.
    #[error("column name '{column}' matches {} columns that differ only in case ({}); write the one you mean in double quotes with its exact case, e.g. \"{}\"", candidates.len(), candidates.join(", "), candidates[0])]
    AmbiguousColumn {
        /// The name as written.
        column: String,
        /// The columns it matches.
        candidates: Vec<String>,
    },
    /// A name is registered twice in one session (names are matched ignoring case).
    #[error("a table named '{name}' is already registered; give each table its own name")]
    DuplicateName {
        /// The name.
        name: String,
    },
    /// A name that is not a plain SQL identifier.
    #[error("'{name}' is not a usable table name: use letters, digits and _, starting with a letter or _ (at most 128 bytes)")]
    BadName {
        /// The name.
        name: String,
    },
    /// The query's text is too long or has too many operators to plan safely.
    #[error(transparent)]
    TooLarge(PredicateError),
    /// The query engine failed for another reason (memory, an internal error).
    #[error("the query engine failed: {message}")]
    Engine {
        /// DataFusion's message.
        message: String,
    },
}

impl SqlError {
    /// What it means (see [`ErrorKind`]): query mistakes are bad input; reading
    /// failures as for scans.
    pub fn kind(&self) -> ErrorKind {
        match self {
            SqlError::Scan(scan) => scan.kind(),
            SqlError::Engine { .. } => ErrorKind::Storage,
            SqlError::Plan { .. }
            | SqlError::NotAQuery { .. }
            | SqlError::Failed { .. }
            | SqlError::DuplicateName { .. }
            | SqlError::AmbiguousColumn { .. }
            | SqlError::BadName { .. }
            | SqlError::TooLarge(_) => ErrorKind::InvalidInput,
        }
    }
}

/// A scan failure carried through DataFusion (which only knows its own error type).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub(crate) struct ScanFailure(#[source] pub(crate) Arc<ScanError>);

impl ScanFailure {
    /// `e` as DataFusion's error.
    pub(crate) fn wrap(e: impl Into<ScanError>) -> DataFusionError {
        DataFusionError::External(Box::new(ScanFailure(Arc::new(e.into()))))
    }
}

/// The scan failure anywhere in `e`'s chain of causes, if any.
fn scan_failure(e: &(dyn std::error::Error + 'static)) -> Option<Arc<ScanError>> {
    let mut next = Some(e);
    while let Some(e) = next {
        if let Some(found) = e.downcast_ref::<ScanFailure>() {
            return Some(found.0.clone());
        }
        next = e.source();
    }
    None
}

impl From<DataFusionError> for SqlError {
    fn from(e: DataFusionError) -> Self {
        if let Some(scan) = scan_failure(&e) {
            return SqlError::Scan(scan);
        }
        let root = e.find_root();
        let message = root.to_string();
        match root {
            DataFusionError::SQL(..)
            | DataFusionError::Plan(..)
            | DataFusionError::SchemaError(..)
            | DataFusionError::NotImplemented(..)
            | DataFusionError::Configuration(..) => SqlError::Plan { message },
            DataFusionError::ArrowError(..) | DataFusionError::Execution(..) => SqlError::Failed { message },
            _ => SqlError::Engine { message },
        }
    }
}

//! Errors of reading: opening a table or a version, planning a predicate, scanning.

use super::{CorruptObject, StorageError};
use crate::format::schema::ColumnNameError;

/// Opening a table, one of its versions, or its history failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OpenError {
    /// No table is at the location.
    #[error("no Concord table at '{uri}'")]
    NotFound {
        /// The URI as given.
        uri: String,
    },
    /// The version was never committed, or vacuum removed it.
    #[error("version {version} does not exist; versions run from {oldest} to {latest}")]
    VersionNotFound {
        /// The version asked for.
        version: u64,
        /// The oldest retained version.
        oldest: u64,
        /// The latest version.
        latest: u64,
    },
    /// Vacuum removed the version while it was being read.
    #[error("version {version} was removed (vacuum) while it was being read; run the command again")]
    Removed {
        /// The version.
        version: u64,
    },
    /// Time travel to before the oldest retained version.
    #[error("no version was committed at or before {at}; the oldest retained version is from {oldest}")]
    NoVersionAt {
        /// The time asked for (RFC 3339).
        at: String,
        /// The oldest retained version's time (RFC 3339).
        oldest: String,
    },
    /// The location is a file (a table is a folder).
    #[error("'{uri}' is not a Concord table: it is a file, and a table is a folder")]
    NotATable {
        /// The URI as given.
        uri: String,
    },
    /// A manifest of a newer format than this library reads.
    #[error("'{path}' uses format version {found}, newer than this concord understands ({supported}); upgrade concord")]
    UnsupportedFormat {
        /// The manifest.
        path: String,
        /// Its format version.
        found: u32,
        /// The newest this library reads.
        supported: u32,
    },
    /// The version holds a multi-table transaction that did not commit (aborted, or not
    /// decided yet): it is not read (FORMAT.md §18).
    #[error("version {version} holds part of a multi-table transaction that did not commit (aborted, or not decided yet); read version {} (or the latest)", version - 1)]
    NotCommitted {
        /// The version.
        version: u64,
    },
    /// The tag or branch named does not exist.
    #[error("the table has no {kind} named '{name}'")]
    UnknownRef {
        /// Tag or branch.
        kind: RefKind,
        /// The name.
        name: String,
    },
    /// A tag names a version of another branch than the one asked about.
    #[error("tag '{tag}' names version {version} of branch {branch}, not a version of branch {asked}")]
    TagOfAnotherBranch {
        /// The tag.
        tag: String,
        /// The version it names.
        version: u64,
        /// Its branch.
        branch: String,
        /// The branch asked about.
        asked: String,
    },
    /// An object's bytes do not decode.
    #[error(transparent)]
    Corrupt(#[from] CorruptObject),
    /// A storage request failed.
    #[error(transparent)]
    Storage(#[from] StorageError),
}

/// What a name refers to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum RefKind {
    /// A tag.
    Tag,
    /// A branch.
    Branch,
}

impl std::fmt::Display for RefKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            RefKind::Tag => "tag",
            RefKind::Branch => "branch",
        })
    }
}

/// The table is not as a read inside a write or scan expected, for a reason other than
/// bad bytes or storage.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Unavailable {
    /// A manifest of a newer format than this library reads.
    #[error("'{path}' uses format version {found}, newer than this concord understands ({supported}); upgrade concord")]
    NewerFormat {
        /// The manifest.
        path: String,
        /// Its format version.
        found: u32,
        /// The newest this library reads.
        supported: u32,
    },
    /// The table was removed while in use.
    #[error("the table at '{uri}' was removed while in use")]
    TableGone {
        /// The table's URI.
        uri: String,
    },
    /// A version in use was removed (vacuum).
    #[error("{what} was removed (vacuum) while in use; run the command again")]
    VersionGone {
        /// Which version, and how it was found missing.
        what: String,
    },
}

/// A SQL predicate or expression is not usable on the table.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PredicateError {
    /// The text is not SQL.
    #[error("cannot parse '{}': {reason}", abbreviate(sql))]
    Parse {
        /// The expression.
        sql: String,
        /// The parser's message.
        reason: String,
    },
    /// A name that is no column.
    #[error("'{}' refers to unknown column '{column}'; the table has: {known}", abbreviate(sql))]
    UnknownColumn {
        /// The expression.
        sql: String,
        /// The name.
        column: String,
        /// The table's columns.
        known: String,
    },
    /// A name that matches several columns ignoring case.
    #[error("in '{}', column name '{column}' matches {} columns that differ only in case ({}); write the one you mean in double quotes with its exact case, e.g. \"{}\"", abbreviate(sql), candidates.len(), candidates.join(", "), candidates[0])]
    AmbiguousColumn {
        /// The expression.
        sql: String,
        /// The name.
        column: String,
        /// The columns it matches.
        candidates: Vec<String>,
    },
    /// A comparison of values of kinds that do not compare (text and numbers, ...).
    #[error("in '{}', {left} ({left_type}) and {right} ({right_type}) do not compare; write values of the column's type (text in quotes, numbers without), or CAST one side", abbreviate(sql))]
    Incomparable {
        /// The expression.
        sql: String,
        /// One side.
        left: String,
        /// Its type.
        left_type: String,
        /// The other side.
        right: String,
        /// Its type.
        right_type: String,
    },
    /// A text literal compared with a column is not exactly a value of the column's
    /// type (it does not parse, or it is more precise than the column keeps).
    #[error("in '{}', '{value}' is not a valid {column_type} (the type of {column}), exactly: it does not parse, or it is more precise than the column keeps, so no stored value could equal it", abbreviate(sql))]
    BadLiteral {
        /// The expression.
        sql: String,
        /// The literal.
        value: String,
        /// What it is compared with.
        column: String,
        /// That side's type.
        column_type: String,
    },
    /// A number literal no double holds.
    #[error("in '{}', the number {number} does not fit a double (it would become infinite or zero)", abbreviate(sql))]
    NumberOutOfRange {
        /// The expression.
        sql: String,
        /// The number as written.
        number: String,
    },
    /// Evaluating the expression on rows failed (e.g. an explicit CAST a value does
    /// not fit).
    #[error("evaluating '{}' on the table's rows failed: {reason}", abbreviate(sql))]
    Failed {
        /// The expression.
        sql: String,
        /// The evaluator's message.
        reason: String,
    },
    /// A filter whose values are not true or false.
    #[error("'{}' is of type {found}, not boolean; a filter must be true or false for each row", abbreviate(sql))]
    NotBoolean {
        /// The expression.
        sql: String,
        /// Its type.
        found: String,
    },
    /// Any other reason the planner refused the expression.
    #[error("cannot use '{}' on this table: {reason}", abbreviate(sql))]
    Invalid {
        /// The expression.
        sql: String,
        /// The planner's message.
        reason: String,
    },
    /// Deeper expressions would exhaust the stack while being planned and evaluated.
    #[error(
        "'{}' has {operators} operators or nesting levels; the limit is {limit}. Split the work into several \
             statements, or use `column IN (v1, v2, ...)` instead of long OR chains",
        abbreviate(sql)
    )]
    TooComplex {
        /// The expression.
        sql: String,
        /// Its operators and nesting levels.
        operators: usize,
        /// [`crate::limits::MAX_EXPRESSION_OPERATORS`].
        limit: usize,
    },
    /// The expression's text is too long.
    #[error("the expression is {bytes} bytes long; the limit is {limit} bytes. Split the work into several statements")]
    TooLong {
        /// Its length.
        bytes: usize,
        /// [`crate::limits::MAX_EXPRESSION_BYTES`].
        limit: usize,
    },
}

/// `text` for an error message: long expressions are cut, with their length shown.
pub(crate) fn abbreviate(text: &str) -> String {
    const SHOWN: usize = 160;
    if text.len() <= SHOWN {
        return text.to_string();
    }
    let mut cut = SHOWN;
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    format!("{}... ({} bytes)", &text[..cut], text.len())
}

/// Reading rows failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ScanError {
    /// A column name picks out no column, or several.
    #[error(transparent)]
    Column(#[from] ColumnNameError),
    /// The filter is not usable.
    #[error(transparent)]
    Predicate(#[from] PredicateError),
    /// The table changed under the scan.
    #[error(transparent)]
    Unavailable(#[from] Unavailable),
    /// An object's bytes do not decode.
    #[error(transparent)]
    Corrupt(#[from] CorruptObject),
    /// A storage request failed.
    #[error(transparent)]
    Storage(#[from] StorageError),
}

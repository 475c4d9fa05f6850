//! Typed errors, one per operation a caller branches on. Messages name the object
//! involved and say what to do next.

use uuid::Uuid;

use crate::format::schema::ColumnNameError;

/// A storage request failed. Retrying may help if the store was unreachable.
#[derive(Debug, thiserror::Error)]
#[error("storage error while {action} '{path}': {source}")]
pub struct StorageError {
    pub action: &'static str,
    pub path: String,
    #[source]
    pub source: object_store::Error,
}

/// An object exists but cannot be decoded.
#[derive(Debug, Clone, thiserror::Error)]
#[error("'{path}' is corrupt or truncated ({reason}); other versions stay readable (use --version to read one)")]
pub struct CorruptObject {
    pub path: String,
    pub reason: String,
}

/// A table URI could not be turned into a store.
#[derive(Debug, thiserror::Error)]
pub enum UriError {
    #[error("unsupported URI scheme '{scheme}://' in '{uri}'; supported: a local path, file://, memory://, s3://, az://, gs://")]
    UnsupportedScheme { uri: String, scheme: String },
    #[error("invalid table URI '{uri}': {reason}")]
    Invalid { uri: String, reason: String },
    #[error("unknown store option '{key}'; use object_store's names, e.g. AWS_REGION, AWS_ENDPOINT_URL, AZURE_STORAGE_ACCOUNT_NAME, GOOGLE_SERVICE_ACCOUNT")]
    UnknownOption { key: String },
    #[error("store option '{key}' applies to object stores (s3://, az://, gs://), and '{uri}' is not one; remove the option")]
    OptionNotApplicable { key: String, uri: String },
    #[error("cannot set up the store for '{uri}': {reason}")]
    StoreConfig { uri: String, reason: String },
    #[error("commit coordinator '{spec}': {reason}")]
    Coordinator { spec: String, reason: String },
}

/// Opening a table, one of its versions, or its history failed.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    #[error("no Concord table at '{uri}'; create one with `concord create {uri} --schema ...`")]
    NotFound { uri: String },
    #[error("version {version} does not exist; versions run from {oldest} to {latest}")]
    VersionNotFound { version: u64, oldest: u64, latest: u64 },
    #[error("version {version} was removed (vacuum) while it was being read; run the command again")]
    Removed { version: u64 },
    #[error("no version was committed at or before {at}; the oldest retained version is from {oldest}")]
    NoVersionAt { at: String, oldest: String },
    #[error("'{uri}' is not a Concord table: {reason}")]
    NotATable { uri: String, reason: String },
    #[error("'{path}' uses format version {found}, newer than this concord understands ({supported}); upgrade concord")]
    UnsupportedFormat { path: String, found: u32, supported: u32 },
    #[error(transparent)]
    Corrupt(#[from] CorruptObject),
    #[error(transparent)]
    Storage(#[from] StorageError),
}

/// Creating a table failed.
#[derive(Debug, thiserror::Error)]
pub enum CreateError {
    #[error("a table already exists at '{uri}'; choose another location or open it")]
    AlreadyExists { uri: String },
    #[error("could not tell whether the table was created ({cause}); run `concord history` on it to find out, then retry")]
    StateUnknown { cause: StorageError },
    #[error(transparent)]
    Corrupt(#[from] CorruptObject),
    #[error(transparent)]
    Storage(#[from] StorageError),
}

/// Committing a prepared transaction failed. Nothing of the transaction is visible.
#[derive(Debug, thiserror::Error)]
pub enum CommitError {
    #[error("incompatible with version {winner_version} ({winner_operation}) committed concurrently: {reason}; nothing was committed")]
    Incompatible { winner_version: u64, winner_operation: String, reason: String },
    #[error("re-running this operation on version {version}, after concurrent commits, failed: {reason}; nothing was committed")]
    RerunFailed { version: u64, reason: String },
    #[error("too much contention: gave up after {attempts} attempts over {elapsed_ms} ms (last tried version {last_version}); nothing was committed, retrying later is safe")]
    TooMuchContention { attempts: u32, elapsed_ms: u64, last_version: u64 },
    #[error("the table moved: expected version {expected}, but the latest is {latest}; nothing was committed")]
    VersionMoved { expected: u64, latest: u64 },
    #[error("idempotency key '{key}' belongs to version {version}, a {operation}; this {ours} cannot be a retry of it: use another key for another operation. Nothing was committed")]
    KeyOfAnotherOperation { key: String, version: u64, operation: String, ours: String },
    #[error("version {version}, which this transaction needs (a winner to check it against, or the version it restores), was removed (vacuum) before it committed; nothing was committed: prepare it again")]
    HistoryRemoved { version: u64 },
    #[error(transparent)]
    Unavailable(#[from] Unavailable),
    #[error("could not determine whether transaction {transaction_id} committed as version {version} ({cause}); retry with the same idempotency key")]
    CommitStateUnknown { version: u64, transaction_id: Uuid, cause: StorageError },
    #[error(transparent)]
    Corrupt(#[from] CorruptObject),
    #[error(transparent)]
    Storage(#[from] StorageError),
}

/// Input data does not fit the table. Nothing was committed.
#[derive(Debug, thiserror::Error)]
pub enum InputError {
    #[error("'{file}': unsupported file type; use .csv (with a header row), .json/.jsonl/.ndjson, or .parquet")]
    UnsupportedFileType { file: String },
    #[error("'{file}': column '{column}' is not in the table; the table has: {known}")]
    UnknownColumn { file: String, column: String, known: String },
    #[error("'{file}': column name '{column}' matches {} columns that differ only in case ({}); name the column exactly as the table does", candidates.len(), candidates.join(", "))]
    AmbiguousColumn { file: String, column: String, candidates: Vec<String> },
    #[error("'{file}': column '{column}' is required (not null) but missing from the file")]
    MissingColumn { file: String, column: String },
    #[error("'{file}': the row with key ({key}) matches no row, so it is inserted, but column '{column}' is required (not null, no default) and the file does not have it; add the column to the file")]
    MissingForInsert { file: String, column: String, key: String },
    #[error("'{file}' row {row} ({values}) does not satisfy '{predicate}'; a write that replaces the rows matching '{predicate}' may only write rows that match it. Nothing was committed")]
    OutsidePredicate { file: String, row: u64, values: String, predicate: String },
    #[error("'{file}': batch {batch} has columns ({found}) but batch 0 has ({expected}); give every batch the same columns")]
    ColumnsDiffer { file: String, batch: usize, expected: String, found: String },
    #[error("'{file}': column '{column}' has type {found}, but the table expects {expected}")]
    TypeMismatch { file: String, column: String, expected: String, found: String },
    #[error("'{file}' line {line}: value '{value}' in column '{column}' is not a valid {expected}{}", if value.is_empty() { " (a quoted \"\" is the empty string; leave the field empty, without quotes, for NULL)" } else { "" })]
    InvalidValue { file: String, line: u64, column: String, value: String, expected: String },
    #[error("{source_name}: value '{value}' for column '{column}' is not a valid {expected}; nothing was committed")]
    ValueDoesNotFit { source_name: String, column: String, value: String, expected: String },
    #[error("'{file}': column '{column}' is not null in the table, but row {row} has a null")]
    NullInNonNullable { file: String, column: String, row: u64 },
    #[error("'{file}': key ({key}) occurs more than once; a merge source must have one row per key")]
    DuplicateKey { file: String, key: String },
    #[error("'{file}' could not be parsed: {reason}")]
    Unparsable { file: String, reason: String },
    #[error("'{file}' could not be read: {source}")]
    Io { file: String, source: std::io::Error },
}

/// A SQL predicate or expression is not usable on the table.
#[derive(Debug, thiserror::Error)]
pub enum PredicateError {
    #[error("cannot parse '{}': {reason}", abbreviate(sql))]
    Parse { sql: String, reason: String },
    #[error("'{}' refers to unknown column '{column}'; the table has: {known}", abbreviate(sql))]
    UnknownColumn { sql: String, column: String, known: String },
    #[error("in '{}', column name '{column}' matches {} columns that differ only in case ({}); write the one you mean in double quotes with its exact case, e.g. \"{}\"", abbreviate(sql), candidates.len(), candidates.join(", "), candidates[0])]
    AmbiguousColumn { sql: String, column: String, candidates: Vec<String> },
    #[error("in '{}', {left} ({left_type}) and {right} ({right_type}) do not compare; write values of the column's type (text in quotes, numbers without), or CAST one side", abbreviate(sql))]
    Incomparable { sql: String, left: String, left_type: String, right: String, right_type: String },
    #[error("in '{}', '{value}' is not a valid {column_type}, the type of {column}", abbreviate(sql))]
    BadLiteral { sql: String, value: String, column: String, column_type: String },
    #[error("evaluating '{}' on the table's rows failed: {reason}", abbreviate(sql))]
    Failed { sql: String, reason: String },
    #[error("'{}' is of type {found}, not boolean; a filter must be true or false for each row", abbreviate(sql))]
    NotBoolean { sql: String, found: String },
    #[error("cannot use '{}' on this table: {reason}", abbreviate(sql))]
    Invalid { sql: String, reason: String },
    /// Deeper expressions would exhaust the stack while being planned and evaluated.
    #[error("'{}' has {operators} operators or nesting levels; the limit is {limit}. Split the work into several \
             statements, or use `column IN (v1, v2, ...)` instead of long OR chains", abbreviate(sql))]
    TooComplex { sql: String, operators: usize, limit: usize },
    #[error("the expression is {bytes} bytes long; the limit is {limit} bytes. Split the work into several statements")]
    TooLong { bytes: usize, limit: usize },
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
pub enum ScanError {
    #[error(transparent)]
    Column(#[from] ColumnNameError),
    #[error(transparent)]
    Predicate(#[from] PredicateError),
    #[error(transparent)]
    Unavailable(#[from] Unavailable),
    #[error(transparent)]
    Corrupt(#[from] CorruptObject),
    #[error(transparent)]
    Storage(#[from] StorageError),
}

/// A schema or property change is not valid for the table. Nothing was written.
#[derive(Debug, thiserror::Error)]
pub enum AlterError {
    #[error(transparent)]
    Definition(#[from] crate::format::schema::SchemaParseError),
    #[error("the table already has a column '{name}'; pick another name (or drop it first)")]
    ColumnExists { name: String },
    #[error(transparent)]
    Column(#[from] ColumnNameError),
    #[error("'{name}' is the table's last column; a table needs at least one (add another first)")]
    LastColumn { name: String },
    #[error("column '{name}' is not null but has no default, so existing rows would have no value; add a default (\"... not null default <expr>\") or make it nullable")]
    RequiredWithoutDefault { name: String },
    #[error("the default of column '{name}' ('{sql}') is not usable: {reason}")]
    BadDefault { name: String, sql: String, reason: String },
    #[error("'{name}' is not a valid column name; use letters, digits and '_', not starting with a digit")]
    BadName { name: String },
    #[error("unknown table property '{key}'; known properties: {known}")]
    UnknownProperty { key: String, known: String },
    #[error("property '{key}' cannot be '{value}': {expected}")]
    BadPropertyValue { key: String, value: String, expected: String },
    #[error("'{given}' is not of the form key=value")]
    BadPropertyAssignment { given: String },
    #[error("compaction needs --target-rows of at least 1 (got {given})")]
    BadTargetRows { given: u64 },
    #[error("a retention of {given_s} s is shorter than the safe minimum of {minimum_s} s: writes slower than it could lose files; pass --allow-short-retention if no such writer runs")]
    ShortRetention { given_s: u64, minimum_s: u64 },
}

/// A write operation (append, overwrite, restore, ...) failed. Nothing was committed.
#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    #[error(transparent)]
    Input(#[from] InputError),
    #[error(transparent)]
    Predicate(#[from] PredicateError),
    #[error(transparent)]
    Alter(#[from] AlterError),
    #[error(transparent)]
    Column(#[from] ColumnNameError),
    #[error("no staged transaction {id} in this table; staging prints the ids it creates")]
    StagedNotFound { id: String },
    #[error("the transaction was staged with {option} {staged}, but its commit was given {option} {given}; give the commit the staged value or none, or stage the transaction again")]
    ContradictsStaged { option: &'static str, staged: String, given: String },
    #[error("version {version} cannot be restored: versions run from {oldest} to {latest}")]
    NoSuchVersion { version: u64, oldest: u64, latest: u64 },
    #[error(transparent)]
    Commit(#[from] CommitError),
    #[error("could not encode a new data file: {reason}")]
    Encode { reason: String },
    #[error(transparent)]
    Unavailable(#[from] Unavailable),
    #[error(transparent)]
    Corrupt(#[from] CorruptObject),
    #[error(transparent)]
    Storage(#[from] StorageError),
}

/// The table is not as a read inside a write or scan expected, for a reason other
/// than bad bytes or storage.
#[derive(Debug, thiserror::Error)]
pub enum Unavailable {
    #[error("'{path}' uses format version {found}, newer than this concord understands ({supported}); upgrade concord")]
    NewerFormat { path: String, found: u32, supported: u32 },
    #[error("the table at '{uri}' was removed while in use")]
    TableGone { uri: String },
    #[error("{what} was removed (vacuum) while in use; run the command again")]
    VersionGone { what: String },
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
        OpenError::UnsupportedFormat { path, found, supported } => Unexpected::Unavailable(Unavailable::NewerFormat { path, found, supported }),
        OpenError::NotFound { uri } | OpenError::NotATable { uri, .. } => Unexpected::Unavailable(Unavailable::TableGone { uri }),
        other @ (OpenError::VersionNotFound { .. } | OpenError::NoVersionAt { .. } | OpenError::Removed { .. }) => {
            Unexpected::Unavailable(Unavailable::VersionGone { what: other.to_string() })
        }
    }
}

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

impl From<OpenError> for CommitError {
    fn from(e: OpenError) -> Self {
        match unexpected_open_error(e) {
            Unexpected::Storage(s) => CommitError::Storage(s),
            Unexpected::Corrupt(c) => CommitError::Corrupt(c),
            Unexpected::Unavailable(u) => CommitError::Unavailable(u),
        }
    }
}

impl From<OpenError> for ScanError {
    fn from(e: OpenError) -> Self {
        match unexpected_open_error(e) {
            Unexpected::Storage(s) => ScanError::Storage(s),
            Unexpected::Corrupt(c) => ScanError::Corrupt(c),
            Unexpected::Unavailable(u) => ScanError::Unavailable(u),
        }
    }
}

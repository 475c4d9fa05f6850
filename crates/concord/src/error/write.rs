//! Errors of writing: creating a table, committing, input that does not fit, schema
//! changes. Whenever one is returned, nothing was committed.

use uuid::Uuid;

use super::{CorruptObject, OpenError, PredicateError, StorageError, Unavailable};
use crate::format::schema::{ColumnNameError, ColumnType, SchemaParseError};

/// "a" or "an" before `word` (an append, a delete).
fn article(word: &str) -> &'static str {
    if word.starts_with(['a', 'e', 'i', 'o', 'u']) {
        "an"
    } else {
        "a"
    }
}

/// Creating a table failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CreateError {
    /// A table is already there.
    #[error("a table already exists at '{uri}'; choose another location or open it")]
    AlreadyExists {
        /// The URI as given.
        uri: String,
    },
    /// The location holds objects that are not a table's: creating one there would mix
    /// them in (a local folder, or an object-store prefix).
    #[error("'{uri}' is not empty and holds no table (found '{found}'); create the table in an empty or new location")]
    NotEmpty {
        /// The URI as given.
        uri: String,
        /// One of the objects there.
        found: String,
    },
    /// A table property that is not known or not valid.
    #[error(transparent)]
    Property(#[from] AlterError),
    /// The create's outcome could not be read back.
    #[error("could not tell whether the table was created ({cause}); read its history to find out, then retry")]
    StateUnknown {
        /// Why the outcome is unknown.
        cause: StorageError,
    },
    /// An object's bytes do not decode.
    #[error(transparent)]
    Corrupt(#[from] CorruptObject),
    /// A storage request failed.
    #[error(transparent)]
    Storage(#[from] StorageError),
}

/// Why a transaction cannot follow a winner in any serial order.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum IncompatibleReason {
    /// The winner added a column of the same name.
    #[error("it added a column named '{name}' ({column_type}) too; add yours under another name if both are wanted")]
    ColumnAddedToo {
        /// The name.
        name: String,
        /// The type the winner gave it.
        column_type: ColumnType,
    },
    /// The winner removed a column this transaction reads, sets, writes or renames.
    #[error("it removed column '{column}', which this operation uses")]
    ColumnRemoved {
        /// The column's name when this transaction was prepared.
        column: String,
    },
    /// The winner renamed a column this transaction uses by name.
    #[error("it renamed column '{from}' to '{to}', which this operation uses by name")]
    ColumnRenamed {
        /// The old name.
        from: String,
        /// The new name.
        to: String,
    },
    /// The winner changed the type of a column this transaction uses.
    #[error("it changed column '{column}' from {from} to {to}, which this operation uses")]
    ColumnTypeChanged {
        /// The column.
        column: String,
        /// Its type when this transaction was prepared.
        from: ColumnType,
        /// Its type now.
        to: ColumnType,
    },
    /// The winner took the name this rename gives.
    #[error("it added a column named '{name}'")]
    NameTaken {
        /// The name.
        name: String,
    },
    /// The winner made a column required, and this write has no values for it.
    #[error("it made column '{column}' required (not null), and this write has no values for it")]
    ColumnNowRequired {
        /// The column.
        column: String,
    },
    /// The winner added fields, and the branch's block of field ids has none left for
    /// this column.
    #[error("it added fields, and this branch has no field ids left for this column (a branch gives at most {limit}); add it on main, or on a new branch")]
    FieldIdsUsedUp {
        /// The ids a branch gives.
        limit: u32,
    },
    /// The winner deleted the branch: nothing commits on it any more.
    #[error("it deleted the branch; nothing commits on a deleted branch")]
    BranchDeleted,
    /// A branch merge: a branch made before branches had field ids of their own changed
    /// the schema, and so did the target since the branch started (the ids the branch
    /// gave may be ones the target gave since).
    #[error("the branch changed the schema, and so did the target since the branch started; this branch was made before branches had field ids of their own, so it changes the schema only over an unchanged one (a branch made now merges its columns either way)")]
    SchemaChangedOnBoth,
}

/// Committing a prepared transaction failed. Nothing of the transaction is visible.
///
/// What a caller does about each:
///
/// ```
/// # use std::sync::Arc;
/// # use concord::arrow::array::{Int64Array, RecordBatch};
/// use concord::{CommitError, CommitOptions, Env, Schema, StoreResolver, Table, WriteError};
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// # let table = Table::create(StoreResolver::new().resolve("memory://errors/t")?, Env::system(), Schema::parse("id bigint")?).await?;
/// # let rows = RecordBatch::try_new(table.schema().arrow_schema(), vec![Arc::new(Int64Array::from(vec![1]))])?;
/// // Compare-and-swap: commit only if the table is still at version 0.
/// let options = CommitOptions { expect_version: Some(0), idempotency_key: Some("load-1".into()), ..CommitOptions::default() };
/// table.append(rows.clone(), &options).await?;
/// match table.append(rows, &options).await {
///     // The same key: the first commit is reported, nothing is written twice.
///     Ok(info) if info.idempotent_replay => assert_eq!(info.version, 1),
///     Ok(info) => println!("committed version {}", info.version),
///     Err(WriteError::Commit(e)) => match e {
///         // A winner made this write impossible: retrying will not help.
///         CommitError::Incompatible { winner_version, reason, .. } => eprintln!("version {winner_version}: {reason}"),
///         // Retries ran out: retrying later may help.
///         CommitError::TooMuchContention { .. } => eprintln!("busy; try again later"),
///         // Compare-and-swap refused: read the new state and decide again.
///         CommitError::VersionMoved { latest, .. } => eprintln!("the table is at {latest} now"),
///         // Unknown outcome: retry with the same idempotency key (never writes twice).
///         CommitError::CommitStateUnknown { .. } => eprintln!("retry with the same key"),
///         other => return Err(other.into()),
///     },
///     Err(other) => return Err(other.into()),
/// }
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// # }).unwrap();
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CommitError {
    /// A winner made this transaction impossible; retrying will not help.
    #[error("incompatible with version {winner_version} ({winner_operation}) committed concurrently: {reason}; nothing was committed")]
    Incompatible {
        /// The winner's version.
        winner_version: u64,
        /// The winner's operation.
        winner_operation: String,
        /// What it did.
        reason: IncompatibleReason,
    },
    /// Re-running the transaction on the winners' changes failed.
    #[error("re-running this operation on version {version}, after concurrent commits, failed: {source}; nothing was committed")]
    RerunFailed {
        /// The version it was re-run on.
        version: u64,
        /// Why.
        #[source]
        source: Box<WriteError>,
    },
    /// Retries ran out (count or time); retrying later may help.
    #[error("too much contention: gave up after {attempts} attempts over {elapsed_ms} ms (last tried version {last_version}); nothing was committed, retrying later is safe")]
    TooMuchContention {
        /// Attempts made.
        attempts: u32,
        /// Time spent.
        elapsed_ms: u64,
        /// The version the last attempt tried to create.
        last_version: u64,
    },
    /// Compare-and-swap: the table is no longer at the expected version.
    #[error("the table moved: expected version {expected}, but the latest is {latest}; nothing was committed")]
    VersionMoved {
        /// The version expected.
        expected: u64,
        /// The latest version.
        latest: u64,
    },
    /// The idempotency key belongs to a different operation.
    #[error("idempotency key '{key}' belongs to version {version}, {} {operation}; this {ours} cannot be a retry of it: use another key for another operation. Nothing was committed", article(operation))]
    KeyOfAnotherOperation {
        /// The key.
        key: String,
        /// The version carrying it.
        version: u64,
        /// That version's operation.
        operation: String,
        /// This transaction's operation.
        ours: String,
    },
    /// A version this transaction needs was removed (vacuum).
    #[error("version {version}, which this transaction needs (a winner to check it against, or the version it restores), was removed (vacuum) before it committed; nothing was committed: prepare it again")]
    HistoryRemoved {
        /// The version.
        version: u64,
    },
    /// A job commit (several staged transactions as one version, all or none) failed
    /// because of one member: nothing of the job was committed.
    #[error("staged transaction {transaction_id}: {source}; nothing of the job was committed")]
    JobMember {
        /// The member.
        transaction_id: Uuid,
        /// Why it could not commit.
        #[source]
        source: Box<CommitError>,
    },
    /// In a job commit, this transaction cannot follow an earlier member: both carry
    /// one idempotency key (`reason` None), or no serial order of the two exists (the
    /// earlier one removes a column this one uses...). Nothing concurrent is involved:
    /// the job itself is contradictory.
    #[error("it cannot follow staged transaction {earlier} in one job: {}; commit the two separately, or stage them again", reason.as_ref().map_or_else(|| "both carry the same idempotency key".to_string(), |r| format!("that one {r}")))]
    MembersIncompatible {
        /// The earlier member.
        earlier: Uuid,
        /// Why not, if not because of a shared key.
        reason: Option<IncompatibleReason>,
    },
    /// Its fragments' rows would take row ids past the end of the chain's range (2^62
    /// ids on the main chain, 2^40 on a branch): nothing was committed. Compaction does
    /// not give ids back; the table has reached its limit.
    #[error("the table's row ids are used up: the next is {next_row_id}, and a fragment of {rows} rows would pass the end of this branch's range (FORMAT.md §6); nothing was committed")]
    RowIdsExhausted {
        /// The next row id.
        next_row_id: u64,
        /// The rows that did not fit.
        rows: u64,
    },
    /// The table changed under the commit.
    #[error(transparent)]
    Unavailable(#[from] Unavailable),
    /// Storage stayed unreachable past the retry budget: the commit may or may not
    /// have landed. Retry with the same idempotency key.
    #[error("could not determine whether transaction {transaction_id} committed as version {version} ({cause}); retry with the same idempotency key")]
    CommitStateUnknown {
        /// The version it tried to create.
        version: u64,
        /// The transaction.
        transaction_id: Uuid,
        /// The last storage error.
        cause: StorageError,
    },
    /// An object's bytes do not decode.
    #[error(transparent)]
    Corrupt(#[from] CorruptObject),
    /// A storage request failed.
    #[error(transparent)]
    Storage(#[from] StorageError),
}

/// Input data does not fit the table. Nothing was committed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum InputError {
    /// The file's extension names no supported format.
    #[error("'{file}': unsupported file type; use .csv (with a header row), .json/.jsonl/.ndjson, or .parquet")]
    UnsupportedFileType {
        /// The file.
        file: String,
    },
    /// A column the table does not have.
    #[error("'{file}': column '{column}' is not in the table; the table has: {known}")]
    UnknownColumn {
        /// The input.
        file: String,
        /// The input's column name.
        column: String,
        /// The table's columns.
        known: String,
    },
    /// A column name matching several columns ignoring case.
    #[error("'{file}': column name '{column}' matches {} columns that differ only in case ({}); name the column exactly as the table does", candidates.len(), candidates.join(", "))]
    AmbiguousColumn {
        /// The input.
        file: String,
        /// The input's column name.
        column: String,
        /// The table columns it matches.
        candidates: Vec<String>,
    },
    /// A required column (not null, no default) is missing.
    #[error("'{file}': column '{column}' is required (not null) but missing from the file")]
    MissingColumn {
        /// The input.
        file: String,
        /// The column.
        column: String,
    },
    /// A merge source without one of its key columns.
    #[error("'{file}': the merge key column '{column}' is not in the source; every key column must be")]
    MissingKey {
        /// The input.
        file: String,
        /// The key column.
        column: String,
    },
    /// A merge would insert a row lacking a required column.
    #[error("'{file}': the row with key ({key}) matches no row, so it is inserted, but column '{column}' is required (not null, no default) and the file does not have it; add the column to the file")]
    MissingForInsert {
        /// The input.
        file: String,
        /// The column.
        column: String,
        /// The row's key.
        key: String,
    },
    /// A row that a replacement of the rows matching a predicate would write, and that
    /// does not match it.
    #[error("'{file}' row {row} ({values}) does not satisfy '{predicate}'; a write that replaces the rows matching '{predicate}' may only write rows that match it. Nothing was committed")]
    OutsidePredicate {
        /// The input.
        file: String,
        /// The row (1-based).
        row: u64,
        /// Its values of the predicate's columns.
        values: String,
        /// The predicate.
        predicate: String,
    },
    /// Inputs of one write with different columns.
    #[error("'{file}': batch {batch} has columns ({found}) but batch 0 has ({expected}); give every batch the same columns")]
    ColumnsDiffer {
        /// The input.
        file: String,
        /// Which input (0-based).
        batch: usize,
        /// The first input's columns.
        expected: String,
        /// This one's.
        found: String,
    },
    /// A column whose type never goes into the table's.
    #[error("'{file}': column '{column}' has type {found}, but the table expects {expected}")]
    TypeMismatch {
        /// The input.
        file: String,
        /// The column.
        column: String,
        /// The table's type.
        expected: String,
        /// The input's.
        found: String,
    },
    /// A value of a file that is no value of the column's type.
    #[error("'{file}' line {line}: value '{value}' in column '{column}' is not a valid {expected}{}", if value.is_empty() { " (a quoted \"\" is the empty string; leave the field empty, without quotes, for NULL)" } else { "" })]
    InvalidValue {
        /// The input.
        file: String,
        /// The line (CSV, NDJSON) or row (Parquet, batches), 1-based.
        line: u64,
        /// The column.
        column: String,
        /// The value as text.
        value: String,
        /// The column's type.
        expected: String,
    },
    /// A computed value (an update's SET) that is no value of the column's type.
    #[error("{source_name}: value '{value}' for column '{column}' is not a valid {expected}; nothing was committed")]
    ValueDoesNotFit {
        /// What computed it.
        source_name: String,
        /// The column.
        column: String,
        /// The value as text.
        value: String,
        /// The column's type.
        expected: String,
    },
    /// A NULL in a not-null column.
    #[error("'{file}': column '{column}' is not null in the table, but row {row} has a null")]
    NullInNonNullable {
        /// The input.
        file: String,
        /// The column.
        column: String,
        /// The row (1-based).
        row: u64,
    },
    /// A merge source with two rows of one key.
    #[error("'{file}': key ({key}) occurs more than once; a merge source must have one row per key")]
    DuplicateKey {
        /// The input.
        file: String,
        /// The key.
        key: String,
    },
    /// The file is not in its format.
    #[error("'{file}' could not be parsed: {reason}")]
    Unparsable {
        /// The input.
        file: String,
        /// The parser's message.
        reason: String,
    },
    /// The file could not be read.
    #[error("'{file}' could not be read: {source}")]
    Io {
        /// The input.
        file: String,
        /// The error.
        source: std::io::Error,
    },
}

/// Why a new column's default is not usable.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DefaultProblem {
    /// It reads a column (a default is a constant).
    #[error("it reads column '{column}'; a default is a constant, e.g. 0, 'n/a' or now()")]
    ReadsColumn {
        /// The column.
        column: String,
    },
    /// It is not a valid expression.
    #[error(transparent)]
    Expression(#[from] PredicateError),
    /// Its type never goes into the column's.
    #[error("it is a {found}, not a {expected}")]
    WrongType {
        /// Its type.
        found: String,
        /// The column's.
        expected: ColumnType,
    },
    /// Its value is no value of the column's type.
    #[error("'{value}' is not a valid {expected}")]
    DoesNotFit {
        /// The value as text.
        value: String,
        /// The column's type.
        expected: ColumnType,
    },
    /// Its value does not read back the same from its stored text.
    #[error("the value does not survive storage as text ('{text}')")]
    NotStorable {
        /// The text.
        text: String,
    },
}

/// A schema or property change is not valid for the table. Nothing was written.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AlterError {
    /// The column definition does not parse.
    #[error(transparent)]
    Definition(#[from] SchemaParseError),
    /// A column of that name exists.
    #[error("the table already has a column '{name}'; pick another name (or drop it first)")]
    ColumnExists {
        /// The name.
        name: String,
    },
    /// The column named is none, or ambiguous.
    #[error(transparent)]
    Column(#[from] ColumnNameError),
    /// A type change that is not a widening (`alter widen-column`).
    #[error("column '{name}' is {from}, which does not widen to {to} without rewriting its files; widenings: an integer to a wider one (tinyint, smallint, int, bigint; unsigned ones also to a wider signed one), float to double, decimal(p, s) to decimal(q, s) with q > p")]
    NotWider {
        /// The column.
        name: String,
        /// Its type.
        from: ColumnType,
        /// The type asked for.
        to: ColumnType,
    },
    /// Dropping the last column.
    #[error("'{name}' is the table's last column; a table needs at least one (add another first)")]
    LastColumn {
        /// The column.
        name: String,
    },
    /// A change to a nested field that nested fields do not take: a field added to,
    /// dropped from or renamed in something other than a struct, a struct's last field
    /// dropped, a nested field added `not null` or with a default.
    #[error("'{path}': {why}")]
    NestedField {
        /// The field's path, as given.
        path: String,
        /// What is not allowed, and what is.
        why: String,
    },
    /// A branch added as many field ids (columns and nested fields) as its block holds.
    #[error("column '{name}' needs field ids this branch has none left of: a branch adds at most {limit} (columns and nested fields); add it on main, or on a new branch")]
    FieldIdsExhausted {
        /// The column.
        name: String,
        /// The ids a branch gives.
        limit: u32,
    },
    /// A new required column without a value for existing rows.
    #[error("column '{name}' is not null but has no default, so existing rows would have no value; add a default (\"... not null default <expr>\") or make it nullable")]
    RequiredWithoutDefault {
        /// The column.
        name: String,
    },
    /// The default is not usable.
    #[error("the default of column '{name}' ('{sql}') is not usable: {problem}")]
    BadDefault {
        /// The column.
        name: String,
        /// The default as written.
        sql: String,
        /// Why.
        #[source]
        problem: DefaultProblem,
    },
    /// A property the table does not know.
    #[error("unknown table property '{key}'; known properties: {known}")]
    UnknownProperty {
        /// The property.
        key: String,
        /// The known ones.
        known: String,
    },
    /// A value the property cannot take.
    #[error("property '{key}' cannot be '{value}': {expected}")]
    BadPropertyValue {
        /// The property.
        key: String,
        /// The value.
        value: String,
        /// What it may be.
        expected: String,
    },
    /// Not `key=value`.
    #[error("'{given}' is not of the form key=value")]
    BadPropertyAssignment {
        /// The text given.
        given: String,
    },
    /// A compaction target of zero rows.
    #[error("compaction needs a target of at least 1 row per fragment (got {given})")]
    BadTargetRows {
        /// The target given.
        given: u64,
    },
    /// A vacuum retention below the safe minimum, not explicitly allowed.
    #[error("a retention of {given_s} s is shorter than the safe minimum of {minimum_s} s: writes slower than it could lose files")]
    ShortRetention {
        /// The retention given.
        given_s: u64,
        /// [`crate::limits::MIN_VACUUM_RETENTION`].
        minimum_s: u64,
    },
}

/// Staged transactions that cannot be committed as asked (see `Table::commit_staged`).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StagedCommitError {
    /// No transaction given.
    #[error("no staged transaction given; give at least one staged id")]
    NoTransactions,
    /// One transaction given twice.
    #[error("staged transaction {id} is given twice")]
    GivenTwice {
        /// The transaction.
        id: Uuid,
    },
    /// An option that applies to one commit, given for several separate commits.
    #[error("the {option} applies to one commit, and these transactions would commit one after another: give one staged id, or commit them together as one version")]
    OneCommitOnly {
        /// `idempotency key` or `expected version`.
        option: &'static str,
    },
    /// Two members of one job (or a member and the job) with one idempotency key.
    #[error("idempotency key '{key}' is given to {} and to {second}; in one job each key belongs to one transaction, or to the job", first.map_or_else(|| "the job".to_string(), |id| format!("staged transaction {id}")))]
    KeyTwice {
        /// The key.
        key: String,
        /// The first member carrying it (`None`: the job itself).
        first: Option<Uuid>,
        /// The other member.
        second: Uuid,
    },
}

/// A write operation (append, overwrite, restore, ...) failed. Nothing was committed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WriteError {
    /// The input does not fit the table.
    #[error(transparent)]
    Input(#[from] InputError),
    /// A predicate or expression is not usable.
    #[error(transparent)]
    Predicate(#[from] PredicateError),
    /// A schema or property change is not valid.
    #[error(transparent)]
    Alter(#[from] AlterError),
    /// A column name picks out no column, or several.
    #[error(transparent)]
    Column(#[from] ColumnNameError),
    /// No staged transaction has this id.
    #[error("no staged transaction {id} in this table; staging prints the ids it creates")]
    StagedNotFound {
        /// The id given.
        id: String,
    },
    /// Staged transactions that cannot be committed as asked.
    #[error(transparent)]
    StagedCommit(#[from] StagedCommitError),
    /// A commit option that contradicts the one the transaction was staged with.
    #[error("the transaction was staged with {option} {staged}, but its commit was given {option} {given}; give the commit the staged value or none, or stage the transaction again")]
    ContradictsStaged {
        /// The option: `isolation`, `expect_version` or `idempotency_key`.
        option: &'static str,
        /// Its staged value.
        staged: String,
        /// The value the commit was given.
        given: String,
    },
    /// Restoring a version that does not exist.
    #[error("version {version} cannot be restored: versions run from {oldest} to {latest}")]
    NoSuchVersion {
        /// The version asked for.
        version: u64,
        /// The oldest retained version.
        oldest: u64,
        /// The latest version.
        latest: u64,
    },
    /// The commit failed.
    #[error(transparent)]
    Commit(#[from] CommitError),
    /// A data file could not be encoded.
    #[error("could not encode a new data file: {source}")]
    Encode {
        /// The encoder's error.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// The table changed under the write.
    #[error(transparent)]
    Unavailable(#[from] Unavailable),
    /// An object's bytes do not decode.
    #[error(transparent)]
    Corrupt(#[from] CorruptObject),
    /// A storage request failed.
    #[error(transparent)]
    Storage(#[from] StorageError),
}

impl WriteError {
    /// An encoding failure.
    pub(crate) fn encode(source: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> Self {
        WriteError::Encode { source: source.into() }
    }
}

/// Committing staged transactions of several tables as one (a multi-table
/// transaction, FORMAT.md §18) failed: no table changed (what was committed is undone).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TogetherError {
    /// The tables are not in one store (one bucket, container or filesystem).
    #[error("'{first}' and '{other}' are not in one store; a multi-table commit needs every table in one bucket (or one filesystem)")]
    DifferentStores {
        /// The first table.
        first: String,
        /// A table of another store.
        other: String,
    },
    /// Options a staged transaction contradicts, or another bad argument.
    #[error("{reason}")]
    Invalid {
        /// What is wrong.
        reason: String,
    },
    /// A table given twice.
    #[error("table '{uri}' is given twice; give each table once, with all its staged transactions")]
    SameTable {
        /// The table.
        uri: String,
    },
    /// One table's part could not commit: nothing of the transaction counts.
    #[error("'{uri}': {source}; nothing of the multi-table transaction was committed")]
    Part {
        /// The table.
        uri: String,
        /// Why.
        #[source]
        source: Box<CommitError>,
    },
    /// Another writer aborted it (it waited past its deadline, or an older one needed
    /// its tables): nothing was committed; retrying (with another idempotency key, if
    /// one was given) is safe.
    #[error("multi-table transaction {id} was aborted by another writer (too slow, or in the way of an older one); nothing was committed")]
    Aborted {
        /// The transaction.
        id: Uuid,
    },
    /// Its decision could not be written or read back: it may have committed.
    #[error("could not determine whether multi-table transaction {id} committed ({cause}); retry with the same idempotency key")]
    OutcomeUnknown {
        /// The transaction.
        id: Uuid,
        /// Why.
        cause: String,
    },
    /// A step of the multi-table commit (its decision, an undo) failed.
    #[error(transparent)]
    Commit(#[from] CommitError),
    /// Reading a table failed.
    #[error(transparent)]
    Open(#[from] OpenError),
}

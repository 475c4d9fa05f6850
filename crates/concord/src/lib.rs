//! Concord: versioned Arrow tables on object storage that many writers change at once.
//!
//! Layers, each a private module that uses only the ones above it (the public API is
//! the list below):
//! - `format`: the on-disk format, pure data (see FORMAT.md);
//! - [`decode`]: untrusted bytes to format objects (pure; public for tools and fuzzing),
//!   and `encode`, their serialization;
//! - `storage`: stores, URIs and the commit seam ([`CommitCoordinator`]);
//! - `io`: reading input, writing and scanning Parquet data files;
//! - `txn`: transactions as actions, the pure conflict rules, the commit loop;
//! - `table`: the [`Table`] API;
//! - `sql`: SQL over table versions with DataFusion ([`SqlSession`], [`SqlTableProvider`]).
//!
//! # Example
//!
//! Create a table, append from two writers at once, read it back, travel in time:
//!
//! ```
//! use std::sync::Arc;
//! use concord::arrow::array::{Int64Array, RecordBatch, StringArray};
//! use concord::{CommitOptions, Env, ScanOptions, Schema, StoreResolver, Table};
//!
//! # tokio::runtime::Runtime::new().unwrap().block_on(async {
//! let resolver = StoreResolver::new();
//! let schema = Schema::parse("id bigint not null, name varchar")?;
//! let table = Table::create(resolver.resolve("memory://example/t")?, Env::system(), schema).await?;
//! let rows = |ids: Vec<i64>| {
//!     let names: Vec<String> = ids.iter().map(|i| format!("n{i}")).collect();
//!     RecordBatch::try_new(table.schema().arrow_schema(), vec![Arc::new(Int64Array::from(ids)), Arc::new(StringArray::from(names))])
//! };
//! // Two writers race; the loser rebases onto the winner and commits the next version.
//! let options = CommitOptions::default();
//! let (a, b) = tokio::join!(table.append(rows(vec![1, 2])?, &options), table.append(rows(vec![3])?, &options));
//! assert_eq!(a?.version.max(b?.version), 2);
//!
//! // Open the latest version elsewhere, and read it.
//! let latest = Table::open(resolver.resolve("memory://example/t")?, Env::system()).await?;
//! let filter = ScanOptions { filter: Some("id > 1".into()), ..ScanOptions::default() };
//! let batches = latest.scan(filter).await?.collect().await?;
//! assert_eq!(batches.iter().map(RecordBatch::num_rows).sum::<usize>(), 2);
//! assert_eq!(latest.count(None).await?, 3);
//!
//! // Every version stays readable: by number, or by time.
//! assert_eq!(latest.checkout(0).await?.row_count(), 0);
//! let then = latest.checkout_as_of(latest.manifest().timestamp).await?;
//! assert_eq!(then.version(), 2);
//! assert_eq!(latest.history().await?.len(), 3);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! # }).unwrap();
//! ```

#![warn(missing_docs, unreachable_pub)]

pub mod decode;
mod duration;
mod encode;
mod env;
mod error;
mod format;
mod io;
mod sql;
mod storage;
mod table;
mod txn;

pub use duration::{parse_duration, parse_time, DurationError, TimeError, MAX_DURATION_DAYS};
pub use env::{Clock, Env, RandomSource, StdRandom, SystemClock};
pub use error::{
    describe_chain, AlterError, CommitError, CorruptObject, CreateError, DefaultProblem, DynamoDbError, ErrorKind, IncompatibleReason,
    InputError, OpenError, OversizedObject, PredicateError, ScanError, StagedCommitError, StorageCause, StorageError, Unavailable,
    UriError, WriteError,
};
pub use format::manifest::{
    Assignment, ColumnStats, CompactGroup, CompactInput, DataFile, DeletionRef, Fragment, FragmentDeletion, IsolationLevel, Manifest,
    NewColumn, NewFragment, Operation, OperationKind, PartialMerge, SegmentRef, TransactionRecord, FORMAT_VERSION,
    INLINE_SEGMENT_FRAGMENTS, PROPERTY_COOPERATIVE, PROPERTY_ISOLATION,
};
pub use format::naming::{parse_version_file_name, version_file_name};
pub use format::schema::{
    check_column_name, quote_column_name, sql_literal, ColumnNameError, ColumnSpec, ColumnType, Field, Schema, SchemaParseError,
    MAX_COLUMNS, MAX_COLUMN_NAME_BYTES,
};
pub use io::csv_fields::quote_field as quote_csv_field;
pub use io::guard::panic_is_caught;
pub use io::predicate::{MAX_EXPRESSION_BYTES, MAX_EXPRESSION_OPERATORS};
pub use io::scan::ScanMetrics;
pub use sql::{SqlError, SqlSession, SqlStream, SqlTableProvider};
#[cfg(feature = "testing")]
pub use storage::{conformance, ProtocolStep};
pub use storage::{
    create_coordinator_table, latest_lookup, probe_store, CommitCoordinator, CoordinatorCapabilities, CreateOutcome, DynamoDbCoordinator,
    LatestLookup, Lister, ObjectStoreCoordinator, ProbeReport, StoreKind, StoreResolver, SyncedLocalStore, TableLocation,
    TableLocationBuilder, MAX_METADATA_BYTES, PROBE_RACERS, PROBE_STALE_AFTER,
};
pub use table::{
    Input, ProgressFn, ScanOptions, Table, TableScan, TransactionInfo, VacuumReport, VersionInfo, Write, WriteProgress,
    DEFAULT_COMPACT_TARGET_ROWS, MIN_VACUUM_RETENTION,
};
pub use txn::{CommitInfo, CommitOptions, PreparedTransaction, RetryPolicy};

/// The Arrow version Concord's API speaks: [`Input`] and scans carry its
/// `RecordBatch`es, so a caller builds them with this one (re-exported whole, as
/// deltalake and lance do, so that no second Arrow version enters the build).
pub use arrow;
/// The DataFusion version behind [`SqlTableProvider`] and [`SqlSession`]: register a
/// provider in a `SessionContext` of this crate's DataFusion.
pub use datafusion;
/// The object_store version behind [`TableLocation`]: a caller with its own store
/// (or [`CommitCoordinator`]) implements or passes this crate's `ObjectStore`.
pub use object_store;

//! Concord: versioned Arrow tables on object storage that many writers change at once.
//!
//! Layers, each a private module that uses only the ones above it (the public API is
//! the list below):
//! - `format`: the on-disk format, pure data (see FORMAT.md);
//! - [`decode`]: untrusted bytes to format objects (pure; public for tools and fuzzing),
//!   and `encode`, their serialization;
//! - `storage`: stores, URIs and the commit seam ([`store::CommitCoordinator`]);
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
mod iceberg;
mod io;
mod sql;
mod storage;
mod table;
mod txn;

// The crate root holds what a program that uses tables needs; the on-disk format, the
// storage seam, schema helpers, limits and error details are in the modules below.
pub use env::{Clock, Env, RandomSource, StdRandom, SystemClock};
pub use error::{
    AlterError, BranchError, ChangesError, CommitError, ConsumerError, CorruptObject, CreateError, ErrorKind, InputError, MergeError,
    OpenError, PredicateError, ScanError, StagedCommitError, StorageError, TagError, TogetherError, UriError, WriteError,
};
pub use format::manifest::{Assignment, IsolationLevel, OperationKind};
pub use format::refs::MAIN_BRANCH;
pub use format::schema::{ColumnType, Field, Schema};
pub use io::parquet::guard::quiet_caught_panics;
pub use sql::{SqlError, SqlSession, SqlStream, SqlTableProvider};
pub use storage::{StoreResolver, TableLocation, TableLocationBuilder};
pub use table::commit_together;
pub use table::{
    BranchInfo, ChangeFeed, ChangeOptions, ConsumerInfo, Input, MergeInfo, ProgressFn, ScanOptions, Table, TableScan, TagInfo,
    TransactionInfo, VacuumReport, VersionInfo, VersionRef, Write, WriteProgress, CHANGE_COLUMNS,
};
pub use txn::{CommitInfo, CommitOptions, PreparedTransaction, RetryPolicy};

/// Every error type: the ones operations return (also at the crate root) and the
/// details their variants carry.
pub mod errors {
    pub use crate::error::{
        describe_chain, AlterError, BranchError, ChangesError, CommitError, ConsumerError, CorruptObject, CreateError, DefaultProblem,
        DynamoDbError, ErrorKind, IncompatibleReason, InputError, MergeError, OpenError, OversizedObject, PredicateError, RefKind,
        ScanError, StagedCommitError, StorageCause, StorageError, TagError, TogetherError, Unavailable, UriError, WriteError,
    };
    pub use crate::iceberg::PublishError;
    pub use crate::io::scan::ScanMetrics;
}

/// The on-disk format as a table's versions hold it (FORMAT.md): manifests, fragments,
/// transaction records, version file names. Read, not built, outside the crate.
pub mod manifest {
    pub use crate::format::manifest::{
        ColumnStats, CompactGroup, CompactInput, DataFile, DeletionRef, Fragment, FragmentDeletion, Manifest, NewColumn, NewFragment,
        NextIds, Operation, PartialMerge, SegmentRef, TransactionRecord, FORMAT_VERSION, PROPERTY_AUTO_COMPACT, PROPERTY_COOPERATIVE,
        PROPERTY_ICEBERG_PUBLISH, PROPERTY_ISOLATION, ROW_ID_COLUMN, ROW_ID_FIELD,
    };
    pub use crate::format::naming::{parse_version_file_name, version_file_name};
}

/// Column names, SQL literals and schema strings.
pub mod schema {
    pub use crate::format::schema::{check_column_name, quote_column_name, sql_literal, ColumnNameError, ColumnSpec, SchemaParseError};
}

/// Stores and the commit seam: coordinators (object stores' conditional writes,
/// DynamoDB), latest-version lookups, the store probe.
pub mod store {
    #[cfg(feature = "testing")]
    pub use crate::storage::{conformance, ProtocolStep};
    pub use crate::storage::{
        create_coordinator_table, latest_lookup, probe_store, CommitCoordinator, CoordinatorCapabilities, CreateOutcome,
        DynamoDbCoordinator, LatestLookup, Lister, ObjectStoreCoordinator, ProbeReport, StoreKind, SyncedLocalStore, PROBE_RACERS,
        PROBE_STALE_AFTER,
    };
}

/// Change feeds: applying one to a version's rows (what a replica does).
pub mod changes {
    pub use crate::table::{ApplyError, RowsById};
}

/// Durations and points in time as the CLI and Python take them (`7d`, `2026-01-01`).
pub mod time {
    pub use crate::duration::{parse_duration, parse_time, DurationError, TimeError};
}

/// The bounds Concord enforces, and its defaults.
pub mod limits {
    pub use crate::duration::MAX_DURATION_DAYS;
    pub use crate::format::manifest::{
        FIELD_ID_BLOCK, INLINE_SEGMENT_FRAGMENTS, MAIN_FIELD_IDS, MAIN_ROW_IDS, ROW_ID_BLOCK, ROW_ID_BLOCKS,
    };
    pub use crate::format::schema::{MAX_COLUMNS, MAX_COLUMN_NAME_BYTES, MAX_DECIMAL128_PRECISION, MAX_DECIMAL_PRECISION};
    pub use crate::io::predicate::{MAX_EXPRESSION_BYTES, MAX_EXPRESSION_OPERATORS};
    pub use crate::storage::MAX_METADATA_BYTES;
    pub use crate::table::{AUTO_COMPACT_MAX_FRAGMENTS, DEFAULT_COMPACT_TARGET_ROWS, MIN_VACUUM_RETENTION};
    pub use crate::txn::together::MULTI_DEADLINE;
}

/// The Arrow version Concord's API speaks: [`Input`] and scans carry its
/// `RecordBatch`es, so a caller builds them with this one (re-exported whole, as
/// deltalake and lance do, so that no second Arrow version enters the build).
pub use arrow;
/// The DataFusion version behind [`SqlTableProvider`] and [`SqlSession`]: register a
/// provider in a `SessionContext` of this crate's DataFusion.
pub use datafusion;
/// The object_store version behind [`TableLocation`]: a caller with its own store
/// (or [`store::CommitCoordinator`]) implements or passes this crate's `ObjectStore`.
pub use object_store;

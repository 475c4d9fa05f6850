//! Concord: versioned Arrow tables on object storage that many writers change at once.
//!
//! Layers (each a private module; the public API is the list below):
//! - `format`: the on-disk format, pure data (see FORMAT.md);
//! - `storage`: stores, URIs and the commit seam ([`CommitCoordinator`]);
//! - `txn`: transactions, conflict rules, the commit loop;
//! - `io`: reading input, writing and scanning Parquet data files;
//! - `table`: the [`Table`] API;
//! - [`decode`]: untrusted bytes to format objects (public for tools and fuzzing).

pub mod decode;
mod env;
mod error;
mod format;
mod io;
mod storage;
mod table;
mod txn;

pub use env::{Clock, Env, RandomSource, StdRandom, SystemClock};
pub use error::{
    AlterError, CommitError, CorruptObject, CreateError, DefaultProblem, DynamoDbError, IncompatibleReason, InputError, OpenError,
    OversizedObject, PredicateError, ScanError, StorageCause, StorageError, Unavailable, UriError, WriteError,
};
pub use format::manifest::{
    Assignment, CompactGroup, CompactInput, DataFile, DeletionRef, Fragment, FragmentDeletion, IsolationLevel, Manifest, NewColumn, NewFragment,
    Operation, PartialMerge, SegmentRef,
    TransactionRecord,
    FORMAT_VERSION, PROPERTY_ISOLATION,
};
pub use format::naming::{parse_version_file_name, version_file_name};
pub use format::schema::{sql_literal, ColumnNameError, ColumnSpec, ColumnType, Field, Schema, SchemaParseError, MAX_COLUMNS, MAX_COLUMN_NAME_BYTES};
pub use io::cast::sql_type_name;
pub use io::csv_fields::quote_field as quote_csv_field;
pub use io::predicate::{MAX_EXPRESSION_BYTES, MAX_EXPRESSION_OPERATORS};
pub use io::scan::ScanMetrics;
pub use storage::{
    create_coordinator_table, latest_lookup, probe_store, CommitCoordinator, CoordinatorCapabilities, CreateOutcome, DynamoDbCoordinator,
    LatestLookup, Lister, ObjectStoreCoordinator, ProbeReport, StoreKind, StoreResolver, SyncedLocalStore, TableLocation,
    TableLocationBuilder, MAX_METADATA_BYTES, PROBE_RACERS, PROBE_STALE_AFTER,
};
#[cfg(feature = "testing")]
pub use storage::{conformance, ProtocolStep};
pub use table::{Input, ScanOptions, Table, TableScan, VacuumReport, VersionInfo, DEFAULT_COMPACT_TARGET_ROWS, MIN_VACUUM_RETENTION};
pub use txn::conflict::{resolve as resolve_conflict, RerunScope, Resolution, Winner};
pub use txn::{CommitInfo, CommitOptions, PreparedTransaction, RetryPolicy, StagedOptions};

/// The Arrow and object_store versions Concord's API uses.
pub use {arrow, object_store};

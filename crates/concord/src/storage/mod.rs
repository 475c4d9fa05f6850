//! Storage and commit: where bytes live and how a version is created exactly once.

mod coordinator;
mod dynamodb;
mod local;
mod object_stores;
mod probe;
mod object_store_coordinator;
mod table_store;
mod uri;

pub use coordinator::{CommitCoordinator, CoordinatorCapabilities, CreateOutcome};
pub use object_store_coordinator::{LatestLookup, Lister, ObjectStoreCoordinator};
pub(crate) use table_store::{get_metadata, TableStore};
pub use table_store::{OversizedObject, MAX_METADATA_BYTES};
pub use local::SyncedLocalStore;
pub use dynamodb::{create_coordinator_table, DynamoDbCoordinator, ProtocolStep};
pub(crate) use probe::{is_stale_probe_object, PROBE_DIR};
pub use probe::{probe_store, ProbeReport, PROBE_RACERS, PROBE_STALE_AFTER};
pub use uri::{latest_lookup, StoreKind, StoreResolver, TableLocation};

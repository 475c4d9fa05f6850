//! Storage and commit: where bytes live and how a version is created exactly once.

#[cfg(feature = "testing")]
pub mod conformance;
mod coordinator;
mod dynamodb;
mod local;
mod location;
mod object_store_coordinator;
mod object_stores;
mod probe;
mod records;
mod resolver;
mod table_store;

pub use coordinator::{CommitCoordinator, CoordinatorCapabilities, CreateOutcome};
#[cfg(feature = "testing")]
pub use dynamodb::ProtocolStep;
pub use dynamodb::{create_coordinator_table, DynamoDbCoordinator};
pub use local::SyncedLocalStore;
pub use location::{latest_lookup, StoreKind, TableLocation, TableLocationBuilder};
pub use object_store_coordinator::{LatestLookup, Lister, ObjectStoreCoordinator};
pub(crate) use probe::{is_stale_probe_object, PROBE_DIR};
pub use probe::{probe_store, ProbeReport, PROBE_RACERS, PROBE_STALE_AFTER};
pub(crate) use records::Records;
pub use resolver::StoreResolver;
pub use table_store::MAX_METADATA_BYTES;
pub(crate) use table_store::{Durable, TableStore};

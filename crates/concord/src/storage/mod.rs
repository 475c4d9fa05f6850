//! Storage and commit: where bytes live and how a version is created exactly once.

mod coordinator;
mod object_store_coordinator;
mod table_store;
mod uri;

pub use coordinator::{CommitCoordinator, CoordinatorCapabilities, CreateOutcome};
pub use object_store_coordinator::{LatestLookup, ObjectStoreCoordinator};
pub(crate) use table_store::{decode_manifest, TableStore};
pub use uri::{StoreKind, StoreResolver, TableLocation};

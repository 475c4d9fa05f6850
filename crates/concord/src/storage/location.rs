//! Where a table lives and how it commits: [`TableLocation`], built by the resolver
//! (`super::resolver`) or by callers with their own store or coordinator.

use std::sync::Arc;

use object_store::path::Path;
use object_store::ObjectStore;

use super::local::SyncedLocalStore;
use super::object_store_coordinator::{LatestLookup, Lister, ObjectStoreCoordinator};
use super::CommitCoordinator;

/// Which kind of store a location lives on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum StoreKind {
    /// A local filesystem path (durable: every write is fsynced).
    Local,
    /// An in-process store (tests, simulation).
    Memory,
    /// Amazon S3 or an S3-compatible store.
    S3,
    /// Azure Blob storage.
    Azure,
    /// Google Cloud Storage.
    Gcs,
}

/// Where a table lives and how it commits: a store, the table's folder in it, and the
/// commit coordinator that creates its versions. Built with [`TableLocation::builder`]
/// (or by [`crate::StoreResolver::resolve`]); cheap to clone.
#[derive(Debug, Clone)]
pub struct TableLocation {
    /// As given by the user, for messages.
    pub(crate) uri: String,
    pub(crate) store: Arc<dyn ObjectStore>,
    /// The table folder inside `store`.
    pub(crate) root: Path,
    pub(crate) kind: StoreKind,
    pub(crate) coordinator: Arc<dyn CommitCoordinator>,
    /// Put before object paths in messages, e.g. `/` or `s3://bucket/`.
    pub(crate) display_prefix: String,
    /// The store's paginated listing, if it has one.
    pub(crate) lister: Option<Lister>,
    /// The same store as `store` when it is the local filesystem the resolver opened:
    /// data files are then written first and fsynced in the background (see
    /// [`crate::storage::TableStore::put_new_synced_later`]).
    pub(crate) local: Option<Arc<SyncedLocalStore>>,
}

/// Builds a [`TableLocation`]; see [`TableLocation::builder`].
#[derive(Debug)]
pub struct TableLocationBuilder {
    uri: String,
    store: Arc<dyn ObjectStore>,
    root: Path,
    kind: StoreKind,
    display_prefix: Option<String>,
    lister: Option<Lister>,
    coordinator: Option<Arc<dyn CommitCoordinator>>,
}

impl TableLocationBuilder {
    /// Name objects in messages as `prefix` + path (default: by the store kind, e.g.
    /// `s3:///`).
    pub fn display_prefix(mut self, prefix: impl Into<String>) -> Self {
        self.display_prefix = Some(prefix.into());
        self
    }

    /// Find the newest version with `lister`, the same store's paginated listing
    /// (one-key LIST pages). Used by the default coordinator.
    pub fn lister(mut self, lister: Lister) -> Self {
        self.lister = Some(lister);
        self
    }

    /// Commit through `coordinator` instead of the store's own put-if-absent.
    pub fn coordinator(mut self, coordinator: Arc<dyn CommitCoordinator>) -> Self {
        self.coordinator = Some(coordinator);
        self
    }

    /// The location. Without a coordinator given, commits go through an
    /// [`ObjectStoreCoordinator`] on the store (with the lister, if given).
    pub fn build(self) -> TableLocation {
        let display_prefix = self.display_prefix.unwrap_or_else(|| default_prefix(self.kind).to_string());
        let coordinator = self.coordinator.unwrap_or_else(|| {
            Arc::new(
                ObjectStoreCoordinator::new(self.store.clone(), self.root.clone(), latest_lookup(self.kind))
                    .with_display_prefix(display_prefix.clone())
                    .with_lister(self.lister.clone()),
            )
        });
        TableLocation {
            uri: self.uri,
            store: self.store,
            root: self.root,
            kind: self.kind,
            coordinator,
            display_prefix,
            lister: self.lister,
            local: None,
        }
    }
}

impl TableLocation {
    /// A location on `store` under the folder `root`, of `kind`; `uri` names it in
    /// messages.
    pub fn builder(uri: impl Into<String>, store: Arc<dyn ObjectStore>, root: Path, kind: StoreKind) -> TableLocationBuilder {
        TableLocationBuilder { uri: uri.into(), store, root, kind, display_prefix: None, lister: None, coordinator: None }
    }

    /// A location on `store` under `root`, committing by put-if-absent on the store.
    pub fn on_store(uri: impl Into<String>, store: Arc<dyn ObjectStore>, root: Path, kind: StoreKind) -> Self {
        Self::builder(uri, store, root, kind).build()
    }

    /// This location, on `local` (the same store as its `store`).
    pub(crate) fn with_local(self, local: Arc<SyncedLocalStore>) -> Self {
        TableLocation { local: Some(local), ..self }
    }

    /// The same location committing through `coordinator` instead.
    pub fn with_coordinator(self, coordinator: Arc<dyn CommitCoordinator>) -> Self {
        TableLocation { coordinator, ..self }
    }

    /// The URI as the user gave it.
    pub fn uri(&self) -> &str {
        &self.uri
    }

    /// The store holding the table.
    pub fn store(&self) -> &Arc<dyn ObjectStore> {
        &self.store
    }

    /// The table's folder inside the store.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The kind of store.
    pub fn kind(&self) -> StoreKind {
        self.kind
    }

    /// The coordinator that creates versions.
    pub fn coordinator(&self) -> &Arc<dyn CommitCoordinator> {
        &self.coordinator
    }

    /// The store's paginated listing, if it has one.
    pub fn lister(&self) -> Option<&Lister> {
        self.lister.as_ref()
    }

    /// What object paths are prefixed with in messages.
    pub fn display_prefix(&self) -> &str {
        &self.display_prefix
    }

    /// How an object of this location is named in messages: a path the user can use.
    pub fn display(&self, path: &Path) -> String {
        format!("{}{path}", self.display_prefix)
    }
}

/// How the latest version is found on a store: object stores list keys in order (one
/// LIST page finds the newest); local disk and memory do not.
pub fn latest_lookup(kind: StoreKind) -> LatestLookup {
    match kind {
        StoreKind::Local | StoreKind::Memory => LatestLookup::HintThenProbe,
        StoreKind::S3 | StoreKind::Azure | StoreKind::Gcs => LatestLookup::OrderedListing,
    }
}

fn default_prefix(kind: StoreKind) -> &'static str {
    match kind {
        StoreKind::Local => "/",
        StoreKind::Memory => "memory:///",
        StoreKind::S3 => "s3:///",
        StoreKind::Azure => "az:///",
        StoreKind::Gcs => "gs:///",
    }
}

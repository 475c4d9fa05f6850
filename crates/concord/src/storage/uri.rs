//! Table URIs to stores: local paths, `file://`, `memory://name`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use object_store::local::LocalFileSystem;
use object_store::memory::InMemory;
use object_store::path::Path;
use object_store::ObjectStore;

use super::object_store_coordinator::{LatestLookup, ObjectStoreCoordinator};
use super::CommitCoordinator;
use crate::error::UriError;

/// Which kind of store a location lives on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoreKind {
    Local,
    Memory,
}

/// Where a table lives and how it commits.
#[derive(Debug, Clone)]
pub struct TableLocation {
    /// As given by the user, for messages.
    pub uri: String,
    pub store: Arc<dyn ObjectStore>,
    /// The table folder inside `store`.
    pub root: Path,
    pub kind: StoreKind,
    pub coordinator: Arc<dyn CommitCoordinator>,
}

impl TableLocation {
    /// A location on `store` under `root`, committing by put-if-absent on the store.
    pub fn on_store(uri: impl Into<String>, store: Arc<dyn ObjectStore>, root: Path, kind: StoreKind) -> Self {
        let lookup = match kind {
            StoreKind::Local | StoreKind::Memory => LatestLookup::HintThenProbe,
        };
        let coordinator =
            Arc::new(ObjectStoreCoordinator::new(store.clone(), root.clone(), lookup).with_display_prefix(display_prefix(kind)));
        TableLocation { uri: uri.into(), store, root, kind, coordinator }
    }

    /// How an object of this location is named in messages: a path the user can use.
    pub fn display(&self, path: &Path) -> String {
        format!("{}{path}", display_prefix(self.kind))
    }
}

fn display_prefix(kind: StoreKind) -> &'static str {
    match kind {
        StoreKind::Local => "/",
        StoreKind::Memory => "memory:///",
    }
}

/// Turns URIs into locations. Holds the named in-memory stores it created, so two
/// resolutions of `memory://x` by one resolver see the same table (nothing global).
#[derive(Debug, Default)]
pub struct StoreResolver {
    memory: Mutex<HashMap<String, Arc<InMemory>>>,
}

impl StoreResolver {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn resolve(&self, uri: &str) -> Result<TableLocation, UriError> {
        let invalid = |reason: &str| UriError::Invalid { uri: uri.to_string(), reason: reason.to_string() };
        if uri.trim().is_empty() {
            return Err(invalid("empty"));
        }
        match uri.split_once("://") {
            None => local(uri, uri),
            Some(("file", _)) => {
                let url = url::Url::parse(uri).map_err(|e| invalid(&e.to_string()))?;
                let path = url.to_file_path().map_err(|_| invalid("not an absolute file path"))?;
                local(uri, &path.to_string_lossy())
            }
            Some(("memory", name)) => {
                let (name, prefix) = name.split_once('/').unwrap_or((name, ""));
                let store = self.memory.lock().unwrap_or_else(|e| e.into_inner()).entry(name.to_string()).or_default().clone();
                let store: Arc<dyn ObjectStore> = store;
                Ok(TableLocation::on_store(uri, store, Path::from(prefix), StoreKind::Memory))
            }
            Some((scheme, _)) => Err(UriError::UnsupportedScheme { uri: uri.to_string(), scheme: scheme.to_string() }),
        }
    }
}

fn local(uri: &str, path: &str) -> Result<TableLocation, UriError> {
    let invalid = |reason: String| UriError::Invalid { uri: uri.to_string(), reason };
    let absolute = std::path::absolute(path).map_err(|e| invalid(e.to_string()))?;
    let root = Path::from_absolute_path(&absolute).map_err(|e| invalid(e.to_string()))?;
    let store: Arc<dyn ObjectStore> = Arc::new(LocalFileSystem::new());
    Ok(TableLocation::on_store(uri, store, root, StoreKind::Local))
}

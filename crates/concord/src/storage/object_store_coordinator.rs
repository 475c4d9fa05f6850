//! Commits by put-if-absent of `_versions/<inverted>.json` on the table's own store.

use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;
use futures::TryStreamExt;
use object_store::list::{PaginatedListOptions, PaginatedListStore};
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload};
use serde::{Deserialize, Serialize};

use super::coordinator::{CommitCoordinator, CoordinatorCapabilities, CreateOutcome};
use super::table_store::get_metadata;
use crate::error::StorageError;
use crate::format::naming;

/// How the latest version is found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum LatestLookup {
    /// One ordered LIST page: the first entry of `_versions/` is the newest (S3, Azure, GCS).
    OrderedListing,
    /// Read the advisory hint, then probe upward with HEAD requests (galloping, then
    /// binary search). Falls back to a full listing only if the hint is missing or wrong.
    /// For stores whose listing is unordered or costs O(entries) (local disk, memory).
    HintThenProbe,
}

/// A store's paginated listing (S3, Azure, GCS), used for one-key LIST pages.
#[derive(Clone)]
pub struct Lister(pub Arc<dyn PaginatedListStore>);

impl std::fmt::Debug for Lister {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Lister")
    }
}

/// Commits by put-if-absent of the version's manifest on the table's own store.
#[derive(Debug, Clone)]
pub struct ObjectStoreCoordinator {
    store: Arc<dyn ObjectStore>,
    /// The same store's paginated listing, when it has one (S3, Azure, GCS): finds the
    /// newest version with a one-key LIST page instead of a full page.
    lister: Option<Lister>,
    root: Path,
    lookup: LatestLookup,
    /// Put before object paths in messages (e.g. `/` on local disk).
    display_prefix: String,
}

#[derive(Serialize, Deserialize)]
struct Hint {
    version: u64,
}

impl ObjectStoreCoordinator {
    /// Versions of the table at `root` in `store`, the latest found by `lookup`.
    pub fn new(store: Arc<dyn ObjectStore>, root: Path, lookup: LatestLookup) -> Self {
        ObjectStoreCoordinator { store, lister: None, root, lookup, display_prefix: String::new() }
    }

    /// Uses `lister` (the same store's paginated listing) for [`LatestLookup::OrderedListing`].
    pub fn with_lister(self, lister: Option<Lister>) -> Self {
        ObjectStoreCoordinator { lister, ..self }
    }

    /// Names objects in messages as `prefix` + path.
    pub fn with_display_prefix(self, prefix: impl Into<String>) -> Self {
        ObjectStoreCoordinator { display_prefix: prefix.into(), ..self }
    }

    /// The same store's coordinator of the table at `root`.
    pub(crate) fn at_root(&self, root: &Path) -> ObjectStoreCoordinator {
        ObjectStoreCoordinator { root: root.clone(), ..self.clone() }
    }

    /// The same store's coordinator of the chain under folder `prefix` of the root.
    pub(crate) fn chain_under(&self, prefix: &str) -> ObjectStoreCoordinator {
        ObjectStoreCoordinator { root: naming::resolve(&self.root, prefix), ..self.clone() }
    }

    fn storage_error(&self, action: &'static str, path: &Path, source: impl Into<crate::error::StorageCause>) -> StorageError {
        StorageError::new(action, format!("{}{path}", self.display_prefix), source)
    }

    async fn exists(&self, version: u64) -> Result<bool, StorageError> {
        let path = naming::version_path(&self.root, version);
        match self.store.head(&path).await {
            Ok(_) => Ok(true),
            Err(object_store::Error::NotFound { .. }) => Ok(false),
            Err(e) => Err(self.storage_error("checking", &path, e)),
        }
    }

    async fn read_hint(&self) -> Option<u64> {
        let bytes = self.store.get(&naming::latest_hint_path(&self.root)).await.ok()?.bytes().await.ok()?;
        serde_json::from_slice::<Hint>(&bytes).ok().map(|h| h.version)
    }

    /// Newest version at or above `start`, which is known to exist.
    /// Versions have no gaps, so existence is monotone: gallop, then bisect.
    async fn probe_up_from(&self, start: u64) -> Result<u64, StorageError> {
        let (mut lo, mut step) = (start, 1u64);
        let hi = loop {
            let probe = lo.saturating_add(step);
            if self.exists(probe).await? {
                lo = probe;
                step = step.saturating_mul(2);
            } else {
                break probe;
            }
        };
        let (mut lo, mut hi) = (lo, hi);
        while hi - lo > 1 {
            let mid = lo + (hi - lo) / 2;
            if self.exists(mid).await? {
                lo = mid
            } else {
                hi = mid
            }
        }
        Ok(lo)
    }

    async fn latest_by_listing(&self, ordered: bool) -> Result<Option<u64>, StorageError> {
        let dir = naming::versions_dir(&self.root);
        if let (true, Some(lister)) = (ordered, &self.lister) {
            let prefix = format!("{dir}/");
            let opts = PaginatedListOptions { max_keys: Some(1), ..Default::default() };
            let page = lister.0.list_paginated(Some(&prefix), opts).await.map_err(|e| self.storage_error("listing", &dir, e))?;
            return Ok(page.result.objects.iter().find_map(|m| m.location.filename().and_then(naming::parse_version_file_name)));
        }
        let mut stream = self.store.list(Some(&dir));
        let mut newest: Option<u64> = None;
        while let Some(meta) = stream.try_next().await.map_err(|e| self.storage_error("listing", &dir, e))? {
            if let Some(v) = meta.location.filename().and_then(naming::parse_version_file_name) {
                if ordered {
                    return Ok(Some(v));
                }
                newest = newest.max(Some(v));
            }
        }
        Ok(newest)
    }
}

#[async_trait]
impl CommitCoordinator for ObjectStoreCoordinator {
    fn capabilities(&self) -> CoordinatorCapabilities {
        // Put-if-absent is atomic on every store Concord supports; `concord doctor`
        // finds stores that only claim it.
        CoordinatorCapabilities {
            atomic_create: true,
            advisory_hint: self.lookup == LatestLookup::HintThenProbe,
            read_while_creating: true,
        }
    }

    async fn create_version(&self, version: u64, manifest: Bytes) -> Result<CreateOutcome, StorageError> {
        let path = naming::version_path(&self.root, version);
        let opts = PutOptions { mode: PutMode::Create, ..Default::default() };
        match self.store.put_opts(&path, PutPayload::from_bytes(manifest), opts).await {
            Ok(_) => Ok(CreateOutcome::Created),
            Err(object_store::Error::AlreadyExists { .. }) | Err(object_store::Error::Precondition { .. }) => {
                Ok(CreateOutcome::AlreadyExists)
            }
            Err(e) => Err(self.storage_error("creating", &path, e)),
        }
    }

    async fn read_version(&self, version: u64) -> Result<Option<Bytes>, StorageError> {
        let path = naming::version_path(&self.root, version);
        match get_metadata(self.store.as_ref(), &path).await {
            Ok(bytes) => Ok(Some(bytes)),
            Err(crate::error::StorageCause::ObjectStore(object_store::Error::NotFound { .. })) => Ok(None),
            Err(e) => Err(self.storage_error("reading", &path, e)),
        }
    }

    async fn latest_version(&self, known: Option<u64>) -> Result<Option<u64>, StorageError> {
        match self.lookup {
            LatestLookup::OrderedListing => self.latest_by_listing(true).await,
            LatestLookup::HintThenProbe => {
                // The hint is advisory: trust it only after checking that it exists.
                let verified_hint = match self.read_hint().await {
                    Some(h) if known.is_none_or(|k| h > k) => self.exists(h).await?.then_some(h),
                    _ => None,
                };
                match known.max(verified_hint) {
                    Some(start) => self.probe_up_from(start).await.map(Some),
                    None => self.latest_by_listing(false).await,
                }
            }
        }
    }

    async fn list_versions(&self) -> Result<Vec<u64>, StorageError> {
        let dir = naming::versions_dir(&self.root);
        let metas: Vec<_> = self.store.list(Some(&dir)).try_collect().await.map_err(|e| self.storage_error("listing", &dir, e))?;
        let mut versions: Vec<u64> = metas.iter().filter_map(|m| m.location.filename().and_then(naming::parse_version_file_name)).collect();
        versions.sort_unstable();
        Ok(versions)
    }

    async fn remove_version(&self, version: u64) -> Result<(), StorageError> {
        let path = naming::version_path(&self.root, version);
        match self.store.delete(&path).await {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(e) => Err(self.storage_error("removing", &path, e)),
        }
    }

    async fn after_commit(&self, version: u64) {
        if self.lookup == LatestLookup::HintThenProbe {
            let body = serde_json::to_vec(&Hint { version }).unwrap_or_default();
            // Best effort: a stale or missing hint only costs extra probes.
            let _ = self.store.put(&naming::latest_hint_path(&self.root), PutPayload::from(body)).await;
        }
    }

    fn describe_version(&self, version: u64) -> String {
        format!("{}{}", self.display_prefix, naming::version_path(&self.root, version))
    }

    fn chain(&self, prefix: &str) -> Option<Arc<dyn CommitCoordinator>> {
        Some(Arc::new(self.chain_under(prefix)))
    }

    fn sibling(&self, root: &Path) -> Option<Arc<dyn CommitCoordinator>> {
        Some(Arc::new(self.at_root(root)))
    }
}

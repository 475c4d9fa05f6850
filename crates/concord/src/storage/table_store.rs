//! Typed reads and writes of a table's objects: manifests, segments, data files.
//! Everything written here is created once (put-if-absent) and never modified.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use object_store::path::Path;
use object_store::{ObjectMeta, ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload};

use super::local::PendingSync;
use super::{CoordinatorCapabilities, CreateOutcome, StoreKind, TableLocation};
use crate::env::Env;
use crate::error::{OpenError, OversizedObject, StorageCause, StorageError};
use crate::format::announcement::Announcement;
use crate::format::manifest::{Manifest, Segment, SegmentRef};
use crate::format::refs::{ChainId, MAIN_BRANCH};
use crate::format::{naming, segments};

/// Largest metadata object (manifest, segment, transaction record, deletion vector)
/// Concord reads. It never writes one this large; a bigger one is refused before its
/// bytes are fetched, so a hostile object cannot exhaust memory.
pub const MAX_METADATA_BYTES: u64 = 256 << 20;

/// The bytes of a metadata object, refusing oversized ones before reading them.
pub(crate) async fn get_metadata(store: &dyn object_store::ObjectStore, path: &Path) -> Result<Bytes, StorageCause> {
    let found = store.get(path).await?;
    if found.meta.size > MAX_METADATA_BYTES {
        return Err(OversizedObject::new(found.meta.size, MAX_METADATA_BYTES).into());
    }
    Ok(found.bytes().await?)
}

/// Attempts of one create-once write that fails in transport (see `put_new`).
const PUT_NEW_ATTEMPTS: u32 = 3;

/// Concurrent manifest reads while indexing idempotency keys.
const KEY_INDEX_READS: usize = 16;

/// Segments are immutable, so caching them is always safe; the cap bounds memory.
const SEGMENT_CACHE_ENTRIES: usize = 4096;

/// Manifests kept per handle. Versions are immutable, so a cached one is always right;
/// the commit loop needs the last few (the base and its winners), history walks many.
const MANIFEST_CACHE_ENTRIES: usize = 1024;

/// The one way to a table's objects: versions (through the commit coordinator),
/// manifests and segments (cached: immutable), data files, deletion vectors and staged
/// transactions. Nothing outside `storage/` reaches into the location behind it.
#[derive(Debug)]
pub(crate) struct TableStore {
    location: TableLocation,
    /// Which chain of versions this store commits to (the location's coordinator is
    /// that chain's), and its branch's name.
    chain: ChainId,
    branch: String,
    /// The coordinator of the table root: table-wide records (tags, branches) and the
    /// chains of branches.
    root_coordinator: Arc<dyn super::CommitCoordinator>,
    /// Manifests by version (see `MANIFEST_CACHE_ENTRIES`).
    manifests: Mutex<std::collections::BTreeMap<u64, Arc<Manifest>>>,
    segment_cache: Mutex<HashMap<String, Arc<Segment>>>,
    /// Deletion vectors, immutable like segments.
    deletion_cache: Mutex<HashMap<String, Arc<roaring::RoaringBitmap>>>,
    /// Announced transactions read so far (immutable; `None`: unreadable, ignored).
    announcements: Mutex<HashMap<String, Option<Arc<Announcement>>>>,
    /// Multi-table transactions' decisions read so far (made once, never changed).
    decisions: Mutex<HashMap<uuid::Uuid, crate::format::multi::Outcome>>,
    /// Idempotency keys of versions read so far (versions are immutable): the versions
    /// up to `.0` are indexed in `.1` (key -> version).
    key_index: tokio::sync::Mutex<(Option<u64>, HashMap<String, u64>)>,
    /// The newest version this handle set out to follow up after its commit (Iceberg
    /// publishing, automatic compaction; plus one, 0: none): transactions sharing a
    /// version follow it up once.
    followed_up: std::sync::atomic::AtomicU64,
}

impl TableStore {
    pub(crate) fn new(location: TableLocation) -> Self {
        TableStore {
            chain: ChainId::Main,
            branch: MAIN_BRANCH.to_string(),
            root_coordinator: location.coordinator.clone(),
            location,
            manifests: Mutex::new(std::collections::BTreeMap::new()),
            segment_cache: Mutex::new(HashMap::new()),
            deletion_cache: Mutex::new(HashMap::new()),
            announcements: Mutex::new(HashMap::new()),
            decisions: Mutex::new(HashMap::new()),
            key_index: tokio::sync::Mutex::new((None, HashMap::new())),
            followed_up: std::sync::atomic::AtomicU64::new(0),
        }
    }

    /// The same table's store on chain `chain` (branch `branch`): its versions are that
    /// chain's; data files, segments and table-wide records are shared.
    pub(crate) fn for_chain(&self, chain: ChainId, branch: &str) -> Result<TableStore, StorageError> {
        let coordinator = match chain {
            ChainId::Main => self.root_coordinator.clone(),
            ChainId::Branch(_) => {
                let prefix = chain.prefix();
                let prefix = prefix.trim_end_matches('/');
                self.root_coordinator
                    .chain(prefix)
                    .ok_or_else(|| StorageError::new("opening", self.display(prefix), StorageCause::NoNamedRecords))?
            }
        };
        let mut store = TableStore::new(self.location.clone().with_coordinator(coordinator));
        (store.chain, store.branch, store.root_coordinator) = (chain, branch.to_string(), self.root_coordinator.clone());
        Ok(store)
    }

    /// The chain of versions this store commits to.
    pub(crate) fn chain(&self) -> ChainId {
        self.chain
    }

    /// The name of its branch (`main` for the table's own chain).
    pub(crate) fn branch(&self) -> &str {
        &self.branch
    }

    /// The coordinator of the table root (its main chain; the chains of branches and
    /// table-wide records are under it).
    pub(crate) fn root_coordinator(&self) -> &Arc<dyn super::CommitCoordinator> {
        &self.root_coordinator
    }

    /// Whether this caller is the first of this handle to follow up `version` after its
    /// commit (and no newer one was): then it does.
    pub(crate) fn claim_followup(&self, version: u64) -> bool {
        self.followed_up.fetch_max(version + 1, std::sync::atomic::Ordering::SeqCst) <= version
    }

    /// The version (up to `latest`) whose transactions carry idempotency `key`, as a
    /// transaction's own key or as their job's, if any. Reads each version once per
    /// store handle (`KEY_INDEX_READS` at a time): later calls read only newer versions.
    /// A first call costs one read per retained version.
    pub(crate) async fn version_with_key(&self, key: &str, latest: u64) -> Result<Option<u64>, OpenError> {
        use futures::{StreamExt, TryStreamExt};
        let mut index = self.key_index.lock().await;
        let from = index.0.map_or(0, |v| v + 1);
        let mut reads = futures::stream::iter(from..=latest)
            .map(|v| async move { Ok::<_, OpenError>((v, self.read_manifest(v).await?)) })
            .buffered(KEY_INDEX_READS);
        while let Some((v, manifest)) = reads.try_next().await? {
            // None: removed by vacuum (older versions), nothing to index.
            let records = manifest.iter().flat_map(|m| m.transactions.iter());
            for k in records.flat_map(|t| [&t.idempotency_key, &t.job_idempotency_key]).flatten() {
                index.1.entry(k.clone()).or_insert(v);
            }
            index.0 = Some(v);
        }
        Ok(index.1.get(key).copied().filter(|v| *v <= latest))
    }

    /// The announcement at `relative`, read once per handle; `None` if it is gone or
    /// does not decode (it is then never carried).
    pub(crate) async fn read_announcement(&self, relative: &str) -> Result<Option<Arc<Announcement>>, StorageError> {
        if let Some(hit) = self.announcements.lock().unwrap_or_else(|e| e.into_inner()).get(relative) {
            return Ok(hit.clone());
        }
        // Its name may carry it (no read); a name that does not decode is read as a name
        // without content (the object holds the same announcement).
        let found = match crate::decode::inline_announcement(&self.display(relative), relative) {
            Ok(Some(announcement)) => Some(Arc::new(announcement)),
            Ok(None) | Err(_) => {
                let Some(bytes) = self.get_metadata_object(relative).await? else { return Ok(None) };
                crate::decode::announcement(&self.display(relative), &bytes).ok().map(Arc::new)
            }
        };
        let mut cache = self.announcements.lock().unwrap_or_else(|e| e.into_inner());
        if cache.len() >= SEGMENT_CACHE_ENTRIES {
            cache.clear();
        }
        cache.insert(relative.to_string(), found.clone());
        Ok(found)
    }

    pub(crate) fn cached_deletion(&self, relative: &str) -> Option<Arc<roaring::RoaringBitmap>> {
        self.deletion_cache.lock().unwrap_or_else(|e| e.into_inner()).get(relative).cloned()
    }

    pub(crate) fn cache_deletion(&self, relative: &str, rows: Arc<roaring::RoaringBitmap>) {
        let mut cache = self.deletion_cache.lock().unwrap_or_else(|e| e.into_inner());
        if cache.len() >= SEGMENT_CACHE_ENTRIES {
            cache.clear();
        }
        cache.insert(relative.to_string(), rows);
    }

    /// The path of `relative` (a name relative to the table root). A chain's own objects
    /// (its announcements and consumers, [`naming::CHAIN_DIRS`]) are under its chain's
    /// folder: a branch's store resolves them there.
    pub(crate) fn path(&self, relative: &str) -> Path {
        match self.chain {
            ChainId::Branch(_) if naming::is_chain_object(relative) => {
                naming::resolve(&self.location.root, &format!("{}{relative}", self.chain.prefix()))
            }
            _ => naming::resolve(&self.location.root, relative),
        }
    }

    /// The table's URI, as given.
    pub(crate) fn uri(&self) -> &str {
        &self.location.uri
    }

    /// How an object of the table is named in messages.
    pub(crate) fn display(&self, relative: &str) -> String {
        self.location.display(&self.path(relative))
    }

    /// Whether names may carry content here: a store of 1,024-byte keys (S3, Azure, GCS,
    /// memory), never the local filesystem, whose file names end at 255 bytes.
    pub(crate) fn long_names(&self) -> bool {
        let keyed = matches!(self.location.kind, StoreKind::S3 | StoreKind::Azure | StoreKind::Gcs | StoreKind::Memory);
        keyed && self.location.local.is_none()
    }

    /// Whether the object `relative` may be named so: [`Self::long_names`], and its key
    /// at most 1,024 bytes.
    pub(crate) fn name_fits(&self, relative: &str) -> bool {
        self.long_names() && self.path(relative).as_ref().len() <= crate::decode::MAX_KEY_BYTES
    }

    /// The table's folder, when it is on the local filesystem.
    pub(crate) fn local_folder(&self) -> Option<std::path::PathBuf> {
        (self.location.kind == super::StoreKind::Local).then(|| std::path::PathBuf::from(format!("/{}", self.location.root)))
    }

    // ---------------------------------------------------------------- versions

    /// Multi-table transaction `id`'s decision, if this handle has read it.
    pub(crate) fn decided(&self, id: uuid::Uuid) -> Option<crate::format::multi::Outcome> {
        self.decisions.lock().unwrap_or_else(|e| e.into_inner()).get(&id).copied()
    }

    /// Keeps multi-table transaction `id`'s decision (decisions never change).
    pub(crate) fn remember_decision(&self, id: uuid::Uuid, outcome: crate::format::multi::Outcome) {
        self.decisions.lock().unwrap_or_else(|e| e.into_inner()).insert(id, outcome);
    }

    /// The table's root, as a path from its store's root.
    pub(crate) fn store_root(&self) -> String {
        self.location.root.to_string()
    }

    /// What names the table's store (its URI without the root): tables in one store
    /// have the same.
    pub(crate) fn store_identity(&self) -> String {
        let uri = self.location.uri.trim_end_matches('/');
        let root = self.location.root.as_ref();
        format!("{:?}:{}", self.location.kind, uri.strip_suffix(root).unwrap_or(uri))
    }

    /// The records of `name` of another table of the same store, at `root` (a path
    /// from the store's root).
    pub(crate) fn sibling_records(&self, root: &str, name: &str) -> Result<super::Records, StorageError> {
        let shown = format!("{}{root}/{name}", self.location.display_prefix);
        let sibling = self
            .root_coordinator
            .sibling(&Path::from(root))
            .ok_or_else(|| StorageError::new("opening", shown.clone(), StorageCause::NoNamedRecords))?;
        super::Records::of_coordinator(&sibling, name, shown)
    }

    /// The commit coordinator of the table's versions.
    pub(crate) fn coordinator(&self) -> &Arc<dyn super::CommitCoordinator> {
        &self.location.coordinator
    }

    /// What the commit coordinator can do.
    pub(crate) fn capabilities(&self) -> CoordinatorCapabilities {
        self.location.coordinator.capabilities()
    }

    /// The latest version (at least `known`), if the table has any.
    pub(crate) async fn latest_version(&self, known: Option<u64>) -> Result<Option<u64>, StorageError> {
        self.location.coordinator.latest_version(known).await
    }

    /// Every retained version, oldest first.
    pub(crate) async fn list_versions(&self) -> Result<Vec<u64>, StorageError> {
        self.location.coordinator.list_versions().await
    }

    /// Creates `version` holding `manifest` (encoded: `crate::encode::manifest`) if it
    /// does not exist: the one atomic step of a commit.
    pub(crate) async fn create_version(&self, version: u64, manifest: Bytes) -> Result<CreateOutcome, StorageError> {
        self.location.coordinator.create_version(version, manifest).await
    }

    /// The bytes of `version`'s manifest, if it exists (not cached: settling reads).
    pub(crate) async fn read_version_bytes(&self, version: u64) -> Result<Option<Bytes>, StorageError> {
        self.location.coordinator.read_version(version).await
    }

    /// How `version` is named in messages.
    pub(crate) fn describe_version(&self, version: u64) -> String {
        self.location.coordinator.describe_version(version)
    }

    /// Tells the coordinator that this writer committed `version` (e.g. a hint).
    pub(crate) async fn after_commit(&self, version: u64) {
        self.location.coordinator.after_commit(version).await
    }

    /// Removes `version` (vacuum), through the coordinator.
    pub(crate) async fn remove_version(&self, version: u64) -> Result<(), StorageError> {
        self.location.coordinator.remove_version(version).await
    }

    // ---------------------------------------------------------------- objects

    /// A metadata object's bytes (size-checked: see [`MAX_METADATA_BYTES`]); `None` if
    /// it does not exist.
    pub(crate) async fn get_metadata_object(&self, relative: &str) -> Result<Option<Bytes>, StorageError> {
        let path = self.path(relative);
        match get_metadata(self.location.store.as_ref(), &path).await {
            Ok(bytes) => Ok(Some(bytes)),
            Err(StorageCause::ObjectStore(object_store::Error::NotFound { .. })) => Ok(None),
            Err(source) => Err(StorageError::new("reading", self.location.display(&path), source)),
        }
    }

    /// The store and path of a data file, for ranged reads by the Parquet reader (which
    /// reads a file's footer and column chunks where they are).
    pub(crate) fn ranged_reads(&self, relative: &str) -> (Arc<dyn ObjectStore>, Path) {
        (self.location.store.clone(), self.path(relative))
    }

    /// The objects under folder `dir` of the table: their paths relative to the table
    /// root (as manifests name them) and metadata.
    pub(crate) async fn list_dir(&self, dir: &str) -> Result<Vec<(String, ObjectMeta)>, StorageError> {
        use futures::TryStreamExt;
        let prefix = naming::resolve(&self.location.root, dir);
        let metas: Vec<ObjectMeta> = self
            .location
            .store
            .list(Some(&prefix))
            .try_collect()
            .await
            .map_err(|source| StorageError::new("listing", self.location.display(&prefix), source))?;
        Ok(metas.into_iter().map(|m| (self.relative(&m.location), m)).collect())
    }

    /// The names one level under `dir` (relative to the table root): its objects, and
    /// its sub-folders with a trailing `/`. On key-value stores a folder is there only
    /// while an object under it is.
    pub(crate) async fn list_dir_names(&self, dir: &str) -> Result<Vec<String>, StorageError> {
        let prefix = naming::resolve(&self.location.root, dir);
        let listed = self
            .location
            .store
            .list_with_delimiter(Some(&prefix))
            .await
            .map_err(|source| StorageError::new("listing", self.location.display(&prefix), source))?;
        let folders = listed.common_prefixes.iter().map(|p| format!("{}/", self.relative(p)));
        Ok(listed.objects.iter().map(|m| self.relative(&m.location)).chain(folders).collect())
    }

    /// `path` relative to the table root (a chain's own objects relative to its folder,
    /// as [`Self::path`] resolves them).
    fn relative(&self, path: &Path) -> String {
        let (root, full) = (self.location.root.as_ref(), path.as_ref());
        let relative = full.strip_prefix(root).map(|r| r.trim_start_matches('/')).unwrap_or(full);
        match relative.strip_prefix(&self.chain.prefix()) {
            Some(own) if self.chain != ChainId::Main && naming::is_chain_object(own) => own.to_string(),
            _ => relative.to_string(),
        }
    }

    /// Removes `relative` (gone already is fine).
    pub(crate) async fn delete(&self, relative: &str) -> Result<(), StorageError> {
        let path = self.path(relative);
        match self.location.store.delete(&path).await {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(source) => Err(StorageError::new("removing", self.location.display(&path), source)),
        }
    }

    /// One object under the table's location, if there is any (one LIST request).
    pub(crate) async fn first_object(&self) -> Result<Option<String>, StorageError> {
        use futures::StreamExt;
        let mut listing = self.location.store.list(Some(&self.location.root));
        match listing.next().await {
            None => Ok(None),
            Some(Ok(meta)) => Ok(Some(self.location.display(&meta.location))),
            // A local folder that does not exist yet is empty.
            Some(Err(object_store::Error::NotFound { .. })) => Ok(None),
            Some(Err(e)) => Err(StorageError::new("listing", self.location.display(&self.location.root), e)),
        }
    }

    /// Whether `meta` (under the probe folder) is what a killed `doctor` left behind.
    pub(crate) fn is_stale_probe(&self, meta: &ObjectMeta, now: chrono::DateTime<chrono::Utc>) -> bool {
        super::is_stale_probe_object(&self.location.root, meta, now)
    }

    /// Version `version`'s manifest, `None` if it does not exist. Read once per handle
    /// (then cached: versions are immutable).
    pub(crate) async fn read_manifest(&self, version: u64) -> Result<Option<Arc<Manifest>>, OpenError> {
        if let Some(hit) = self.manifests.lock().unwrap_or_else(|e| e.into_inner()).get(&version) {
            return Ok(Some(hit.clone()));
        }
        self.read_manifest_now(version).await
    }

    /// Version `version`'s manifest if this handle holds it (read or created by it).
    pub(crate) fn cached_manifest(&self, version: u64) -> Option<Arc<Manifest>> {
        self.manifests.lock().unwrap_or_else(|e| e.into_inner()).get(&version).cloned()
    }

    /// Whether every version in `versions` is in this handle's cache (read or created
    /// by it): judging them costs no request.
    pub(crate) fn holds_manifests(&self, versions: std::ops::Range<u64>) -> bool {
        let cache = self.manifests.lock().unwrap_or_else(|e| e.into_inner());
        versions.into_iter().all(|v| cache.contains_key(&v))
    }

    /// Version `version`'s manifest as the store holds it now (`None`: it does not
    /// exist, or vacuum removed it), bypassing the cache: for reads that must not
    /// find a removed version (time travel).
    pub(crate) async fn read_manifest_now(&self, version: u64) -> Result<Option<Arc<Manifest>>, OpenError> {
        let coordinator = &self.location.coordinator;
        match coordinator.read_version(version).await? {
            None => Ok(None),
            Some(bytes) => {
                let manifest = crate::decode::manifest(&coordinator.describe_version(version), version, &bytes)?;
                Ok(Some(self.remember(manifest)))
            }
        }
    }

    /// Caches `manifest` (read, or created by this handle) and returns it shared.
    pub(crate) fn remember(&self, manifest: Manifest) -> Arc<Manifest> {
        let manifest = Arc::new(manifest);
        let mut cache = self.manifests.lock().unwrap_or_else(|e| e.into_inner());
        if cache.len() >= MANIFEST_CACHE_ENTRIES {
            // The oldest versions are the least likely to be read again.
            let oldest = *cache.keys().next().expect("not empty");
            cache.remove(&oldest);
        }
        cache.insert(manifest.version, manifest.clone());
        manifest
    }

    pub(crate) async fn read_segment(&self, reference: &SegmentRef) -> Result<Arc<Segment>, OpenError> {
        if let Some(fragments) = &reference.inline {
            return Ok(Arc::new(Segment { fragments: fragments.clone() }));
        }
        if let Some(hit) = self.segment_cache.lock().unwrap_or_else(|e| e.into_inner()).get(&reference.path) {
            return Ok(hit.clone());
        }
        let path = self.path(&reference.path);
        let read = get_metadata(self.location.store.as_ref(), &path);
        let shown = self.location.display(&path);
        let bytes = read.await.map_err(|source| StorageError::new("reading", shown.clone(), source))?;
        let segment = crate::decode::segment(&shown, reference.fragments, &bytes)?;
        let segment = Arc::new(segment);
        let mut cache = self.segment_cache.lock().unwrap_or_else(|e| e.into_inner());
        if cache.len() >= SEGMENT_CACHE_ENTRIES {
            cache.clear();
        }
        cache.insert(reference.path.clone(), segment.clone());
        Ok(segment)
    }

    /// Writes `segment` under a fresh name and returns its reference; a small one is
    /// held inline in the root instead (`segments::is_inline`: nothing is written).
    pub(crate) async fn write_segment(&self, env: &Env, level: u8, segment: Segment) -> Result<SegmentRef, StorageError> {
        if segments::is_inline(&segment) {
            return Ok(segments::inline_ref(level, segment));
        }
        let name = naming::segment_name(env.new_uuid());
        self.put_new(&name, crate::encode::segment(&segment)).await?;
        let reference = segments::segment_ref(name.clone(), level, &segment);
        self.segment_cache.lock().unwrap_or_else(|e| e.into_inner()).insert(name, Arc::new(segment));
        Ok(reference)
    }

    /// Creates `relative`, named by a fresh UUID. "Already exists" can then only mean
    /// that this very write landed and its response was lost (a retry, ours or the
    /// client's): it is accepted once the object is found with the expected size.
    /// object_store does not retry a PUT whose connection was reset after sending; for a
    /// fresh name that is safe, so such failures (`Generic`) are tried again here.
    pub(crate) async fn put_new(&self, relative: &str, bytes: Bytes) -> Result<(), StorageError> {
        self.put_new_synced_later(relative, bytes).await?.wait().await
    }

    /// As [`Self::put_new`], except that on the local filesystem the object's fsync is
    /// started and not awaited: it is durable once the returned [`Durable`] has been
    /// waited for, and nothing may name it before then. (Other stores are durable when
    /// the write returns.)
    pub(crate) async fn put_new_synced_later(&self, relative: &str, bytes: Bytes) -> Result<Durable, StorageError> {
        let path = self.path(relative);
        let size = bytes.len() as u64;
        let error = |source: object_store::Error| StorageError::new("writing", self.location.display(&path), source);
        let durable = |pending| Durable { path: self.location.display(&path), pending };
        let mut attempt = 1;
        loop {
            let opts = PutOptions { mode: PutMode::Create, ..Default::default() };
            let payload = PutPayload::from_bytes(bytes.clone());
            let put = match &self.location.local {
                Some(local) => local.put_synced_later(&path, payload, opts).await.map(Some),
                None => self.location.store.put_opts(&path, payload, opts).await.map(|_| None),
            };
            match put {
                Ok(pending) => return Ok(durable(pending)),
                Err(e @ (object_store::Error::AlreadyExists { .. } | object_store::Error::Precondition { .. })) => {
                    return match self.location.store.head(&path).await {
                        // Our own earlier attempt: on the local filesystem its sync may
                        // not have run, so it runs again.
                        Ok(meta) if meta.size == size => match &self.location.local {
                            Some(local) => Ok(durable(Some(local.start_sync(&path).map_err(error)?))),
                            None => Ok(durable(None)),
                        },
                        _ => Err(error(e)),
                    };
                }
                Err(object_store::Error::Generic { .. }) if attempt < PUT_NEW_ATTEMPTS => attempt += 1,
                Err(e) => return Err(error(e)),
            }
        }
    }

    /// Removes objects this process wrote for a transaction that will not commit.
    /// Best effort: leftovers are unreferenced and removed by cleanup.
    pub(crate) async fn delete_best_effort(&self, relatives: impl IntoIterator<Item = &str>) {
        use futures::StreamExt;
        // One stream: a store with bulk deletes (S3, Azure) sends one request for all.
        let paths: Vec<object_store::Result<Path>> = relatives.into_iter().map(|r| Ok(self.path(r))).collect();
        if paths.is_empty() {
            return;
        }
        let _ = self.location.store.delete_stream(futures::stream::iter(paths).boxed()).collect::<Vec<_>>().await;
    }
}

/// An object written by [`TableStore::put_new_synced_later`], durable once waited for.
#[derive(Debug)]
#[must_use = "an object is durable only once its sync has been waited for"]
pub(crate) struct Durable {
    path: String,
    pending: Option<PendingSync>,
}

impl Durable {
    /// Waits until the object is on stable storage.
    pub(crate) async fn wait(self) -> Result<(), StorageError> {
        match self.pending {
            Some(pending) => pending.wait().await.map_err(|e| StorageError::new("syncing", self.path, e)),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// On the local disk a write's sync may be left to run: a retry that finds the
    /// object (its earlier attempt landed) syncs it again, and a different object of the
    /// same name is still refused.
    #[tokio::test]
    async fn a_local_write_synced_later_is_durable_once_waited_for_and_a_retry_syncs_again() {
        let dir = tempfile::tempdir().unwrap();
        let location = crate::StoreResolver::default().resolve(dir.path().to_str().unwrap()).unwrap();
        assert!(location.local.is_some(), "the resolver's local store syncs writes later");
        let store = TableStore::new(location);
        let bytes = Bytes::from_static(b"0123456789");
        store.put_new_synced_later("data/a.parquet", bytes.clone()).await.unwrap().wait().await.unwrap();
        let again = store.put_new_synced_later("data/a.parquet", bytes).await.unwrap();
        assert!(again.pending.is_some(), "a retry syncs the object its earlier attempt wrote");
        again.wait().await.unwrap();
        let other = store.put_new_synced_later("data/a.parquet", Bytes::from_static(b"other")).await;
        assert!(other.is_err(), "another object under the same name is refused");
        assert_eq!(std::fs::read(dir.path().join("data/a.parquet")).unwrap(), b"0123456789");
    }
}

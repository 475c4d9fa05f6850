//! Typed reads and writes of a table's objects: manifests, segments, data files.
//! Everything written here is created once (put-if-absent) and never modified.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use object_store::path::Path;
use object_store::{ObjectStoreExt, PutMode, PutOptions, PutPayload};

use super::TableLocation;
use crate::env::Env;
use crate::error::{OpenError, OversizedObject, StorageCause, StorageError};
use crate::format::manifest::{Manifest, Segment, SegmentRef};
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

/// How long what a handle learned of the latest version counts as current: a write
/// within this time starts from it without looking the latest up again (one LIST or
/// probe saved). Staleness costs nothing in correctness: a winner the handle did not
/// know of makes the first create fail and is then read and judged like any other.
pub(crate) const NEWEST_FRESH_FOR: std::time::Duration = std::time::Duration::from_secs(1);

#[derive(Debug)]
pub(crate) struct TableStore {
    pub location: TableLocation,
    /// Manifests by version (see `MANIFEST_CACHE_ENTRIES`).
    manifests: Mutex<std::collections::BTreeMap<u64, Arc<Manifest>>>,
    /// The newest version this handle has seen (opened, looked up, lost a race to or
    /// committed), and when (the env clock's monotonic time).
    newest: Mutex<Option<(Arc<Manifest>, std::time::Duration)>>,
    /// When this handle last lost a commit race (monotonic) and how long that attempt
    /// took: a new transaction then yields to the writers already waiting.
    last_contention: Mutex<Option<(std::time::Duration, std::time::Duration)>>,
    segment_cache: Mutex<HashMap<String, Arc<Segment>>>,
    /// Deletion vectors, immutable like segments.
    deletion_cache: Mutex<HashMap<String, Arc<roaring::RoaringBitmap>>>,
    /// Idempotency keys of versions read so far (versions are immutable): the versions
    /// up to `.0` are indexed in `.1` (key -> version).
    key_index: tokio::sync::Mutex<(Option<u64>, HashMap<String, u64>)>,
}

impl TableStore {
    pub(crate) fn new(location: TableLocation) -> Self {
        TableStore {
            location,
            manifests: Mutex::new(std::collections::BTreeMap::new()),
            newest: Mutex::new(None),
            last_contention: Mutex::new(None),
            segment_cache: Mutex::new(HashMap::new()),
            deletion_cache: Mutex::new(HashMap::new()),
            key_index: tokio::sync::Mutex::new((None, HashMap::new())),
        }
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

    pub(crate) fn path(&self, relative: &str) -> Path {
        naming::resolve(&self.location.root, relative)
    }

    /// Version `version`'s manifest, `None` if it does not exist. Read once per handle
    /// (then cached: versions are immutable).
    pub(crate) async fn read_manifest(&self, version: u64) -> Result<Option<Arc<Manifest>>, OpenError> {
        if let Some(hit) = self.manifests.lock().unwrap_or_else(|e| e.into_inner()).get(&version) {
            return Ok(Some(hit.clone()));
        }
        self.read_manifest_now(version).await
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

    /// Records that `manifest`'s version exists, as of `now` (monotonic).
    pub(crate) fn saw_newest(&self, manifest: &Arc<Manifest>, now: std::time::Duration) {
        let mut newest = self.newest.lock().unwrap_or_else(|e| e.into_inner());
        match &*newest {
            Some((known, _)) if known.version > manifest.version => {}
            _ => *newest = Some((manifest.clone(), now)),
        }
    }

    /// The newest version this handle knows of, if it learned of it within
    /// [`NEWEST_FRESH_FOR`] of `now` (monotonic).
    pub(crate) fn fresh_newest(&self, now: std::time::Duration) -> Option<Arc<Manifest>> {
        let newest = self.newest.lock().unwrap_or_else(|e| e.into_inner());
        newest.as_ref().filter(|(_, at)| now.saturating_sub(*at) < NEWEST_FRESH_FOR).map(|(m, _)| m.clone())
    }

    /// Records a lost race at `now` (monotonic) whose attempt took `latency`.
    pub(crate) fn saw_contention(&self, now: std::time::Duration, latency: std::time::Duration) {
        *self.last_contention.lock().unwrap_or_else(|e| e.into_inner()) = Some((now, latency));
    }

    /// If this handle lost a race within [`NEWEST_FRESH_FOR`] of `now`: how long that
    /// attempt took.
    pub(crate) fn recent_contention(&self, now: std::time::Duration) -> Option<std::time::Duration> {
        let last = self.last_contention.lock().unwrap_or_else(|e| e.into_inner());
        last.filter(|(at, _)| now.saturating_sub(*at) < NEWEST_FRESH_FOR).map(|(_, latency)| latency)
    }

    /// The newest version this handle knows of, however old that knowledge.
    pub(crate) fn newest_known(&self) -> Option<Arc<Manifest>> {
        self.newest.lock().unwrap_or_else(|e| e.into_inner()).as_ref().map(|(m, _)| m.clone())
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
        let bytes = serde_json::to_vec(&segment).expect("segments always serialize");
        self.put_new(&name, Bytes::from(bytes)).await?;
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
        let path = self.path(relative);
        let size = bytes.len() as u64;
        let error = |source: object_store::Error| StorageError::new("writing", self.location.display(&path), source);
        let mut attempt = 1;
        loop {
            let opts = PutOptions { mode: PutMode::Create, ..Default::default() };
            match self.location.store.put_opts(&path, PutPayload::from_bytes(bytes.clone()), opts).await {
                Ok(_) => return Ok(()),
                Err(e @ (object_store::Error::AlreadyExists { .. } | object_store::Error::Precondition { .. })) => {
                    return match self.location.store.head(&path).await {
                        Ok(meta) if meta.size == size => Ok(()),
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
        for relative in relatives {
            let _ = self.location.store.delete(&self.path(relative)).await;
        }
    }
}

//! The local filesystem store, made durable: every object write is fsynced (the file,
//! then its directory) before it returns.
//!
//! Invariant: when a commit is acknowledged, its data files, deletion vectors,
//! segments and root manifest are on stable storage, since each was synced before the
//! manifest, which is written last. Data files are the one kind written first and
//! synced afterwards, in the background ([`SyncedLocalStore::put_synced_later`]): their
//! writer waits for every sync before it hands its fragments to anyone, so the kernel
//! writes a file back while the next one is encoded and written. The advisory latest-version hint is the
//! one object not synced: a stale or missing hint costs probes, never an answer. (object_store's `LocalFileSystem` writes
//! via a temporary file and a rename or link, but syncs nothing.)

use std::ops::Range;
use std::path::PathBuf;
use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;
use futures::stream::BoxStream;
use object_store::local::LocalFileSystem;
use object_store::path::Path;
use object_store::{
    CopyOptions, GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, ObjectStore, PutMultipartOptions, PutOptions, PutPayload,
    PutResult, Result,
};

/// The local filesystem, with every write fsynced (file and folder) before it returns.
#[derive(Debug)]
pub struct SyncedLocalStore {
    inner: Arc<LocalFileSystem>,
}

impl SyncedLocalStore {
    /// A store over the whole filesystem (paths are absolute).
    pub fn new() -> Self {
        SyncedLocalStore { inner: Arc::new(LocalFileSystem::new()) }
    }

    /// fsyncs `location`'s file and its directory (so the new name is durable too).
    async fn sync(&self, location: &Path) -> Result<()> {
        self.start_sync(location)?.wait().await
    }

    /// Starts fsyncing `location`'s file and directory on the blocking pool.
    pub(crate) fn start_sync(&self, location: &Path) -> Result<PendingSync> {
        let file: PathBuf = self.inner.path_to_filesystem(location)?;
        Ok(PendingSync(tokio::task::spawn_blocking(move || -> std::io::Result<()> {
            std::fs::File::open(&file)?.sync_all()?;
            if let Some(dir) = file.parent() {
                std::fs::File::open(dir)?.sync_all()?;
            }
            Ok(())
        })))
    }

    /// Writes `location` as `put_opts` does and starts its fsync without waiting for it:
    /// the object is durable once the returned sync has completed, and only then may
    /// anything that names it be written.
    pub(crate) async fn put_synced_later(&self, location: &Path, payload: PutPayload, opts: PutOptions) -> Result<PendingSync> {
        self.inner.put_opts(location, payload, opts).await?;
        self.start_sync(location)
    }
}

/// An fsync under way (see [`SyncedLocalStore::put_synced_later`]).
#[derive(Debug)]
pub(crate) struct PendingSync(tokio::task::JoinHandle<std::io::Result<()>>);

impl PendingSync {
    /// Waits until the object is on stable storage.
    pub(crate) async fn wait(self) -> Result<()> {
        self.0.await.map_err(|e| fail(std::io::Error::other(e)))?.map_err(fail)
    }
}

fn fail(e: std::io::Error) -> object_store::Error {
    object_store::Error::Generic { store: "LocalFileSystem", source: Box::new(e) }
}

impl Default for SyncedLocalStore {
    fn default() -> Self {
        Self::new()
    }
}

impl std::fmt::Display for SyncedLocalStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Synced({})", self.inner)
    }
}

#[async_trait]
impl ObjectStore for SyncedLocalStore {
    async fn put_opts(&self, location: &Path, payload: PutPayload, opts: PutOptions) -> Result<PutResult> {
        let result = self.inner.put_opts(location, payload, opts).await?;
        // The latest-version hint is advisory (never trusted alone): losing it in a
        // crash costs probes, never an answer, so it is not worth two fsyncs a commit.
        if location.filename() != Some(crate::format::naming::LATEST_HINT) {
            self.sync(location).await?;
        }
        Ok(result)
    }

    async fn put_multipart_opts(&self, location: &Path, opts: PutMultipartOptions) -> Result<Box<dyn MultipartUpload>> {
        // Not used by Concord (objects are written whole); unsynced.
        self.inner.put_multipart_opts(location, opts).await
    }

    async fn get_opts(&self, location: &Path, options: GetOptions) -> Result<GetResult> {
        self.inner.get_opts(location, options).await
    }

    async fn get_ranges(&self, location: &Path, ranges: &[Range<u64>]) -> Result<Vec<Bytes>> {
        self.inner.get_ranges(location, ranges).await
    }

    fn delete_stream(&self, locations: BoxStream<'static, Result<Path>>) -> BoxStream<'static, Result<Path>> {
        self.inner.delete_stream(locations)
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, Result<ObjectMeta>> {
        self.inner.list(prefix)
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> Result<ListResult> {
        self.inner.list_with_delimiter(prefix).await
    }

    async fn copy_opts(&self, from: &Path, to: &Path, options: CopyOptions) -> Result<()> {
        self.inner.copy_opts(from, to, options).await?;
        self.sync(to).await
    }
}

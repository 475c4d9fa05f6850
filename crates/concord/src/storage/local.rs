//! The local filesystem store, made durable: every object write is fsynced (the file,
//! then its directory) before it returns.
//!
//! Invariant: when a commit is acknowledged, its data files, deletion vectors,
//! segments and root manifest are on stable storage, since each was synced when
//! written and the manifest is written last. The advisory latest-version hint is the
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
        let file: PathBuf = self.inner.path_to_filesystem(location)?;
        let fail = |e: std::io::Error| object_store::Error::Generic { store: "LocalFileSystem", source: Box::new(e) };
        tokio::task::spawn_blocking(move || -> std::io::Result<()> {
            std::fs::File::open(&file)?.sync_all()?;
            if let Some(dir) = file.parent() {
                std::fs::File::open(dir)?.sync_all()?;
            }
            Ok(())
        })
        .await
        .map_err(|e| fail(std::io::Error::other(e)))?
        .map_err(fail)
    }
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

//! An `ObjectStore` wrapper that counts requests and bytes, to prove costs are O(1)
//! or O(changed) rather than O(table).

use std::fmt;
use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;
use futures::stream::BoxStream;
use futures::StreamExt;
use object_store::path::Path;
use object_store::{
    CopyOptions, GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, ObjectStore, PutMultipartOptions, PutOptions, PutPayload,
    PutResult, Result,
};

#[derive(Debug, Default)]
pub struct Counts {
    pub puts: AtomicU64,
    pub gets: AtomicU64,
    pub lists: AtomicU64,
    pub deletes: AtomicU64,
    pub bytes_written: AtomicU64,
    pub bytes_read: AtomicU64,
    /// Reads of announcements (cooperative commits), also counted in `gets`.
    pub announcement_gets: AtomicU64,
}

/// A snapshot of [`Counts`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Tally {
    pub puts: u64,
    pub gets: u64,
    pub lists: u64,
    pub deletes: u64,
    pub bytes_written: u64,
    pub bytes_read: u64,
}

impl Tally {
    pub fn requests(&self) -> u64 {
        self.puts + self.gets + self.lists + self.deletes
    }
}

#[derive(Debug)]
pub struct CountingStore {
    inner: Arc<dyn ObjectStore>,
    pub counts: Arc<Counts>,
}

impl CountingStore {
    pub fn new(inner: Arc<dyn ObjectStore>) -> Self {
        CountingStore { inner, counts: Arc::new(Counts::default()) }
    }

    pub fn tally(&self) -> Tally {
        let c = &self.counts;
        Tally {
            puts: c.puts.load(Ordering::SeqCst),
            gets: c.gets.load(Ordering::SeqCst),
            lists: c.lists.load(Ordering::SeqCst),
            deletes: c.deletes.load(Ordering::SeqCst),
            bytes_written: c.bytes_written.load(Ordering::SeqCst),
            bytes_read: c.bytes_read.load(Ordering::SeqCst),
        }
    }

    /// Counts accumulated while running `f`.
    pub async fn measure<T>(&self, f: impl std::future::Future<Output = T>) -> (T, Tally) {
        let before = self.tally();
        let out = f.await;
        let after = self.tally();
        let diff = Tally {
            puts: after.puts - before.puts,
            gets: after.gets - before.gets,
            lists: after.lists - before.lists,
            deletes: after.deletes - before.deletes,
            bytes_written: after.bytes_written - before.bytes_written,
            bytes_read: after.bytes_read - before.bytes_read,
        };
        (out, diff)
    }
}

impl fmt::Display for CountingStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Counting({})", self.inner)
    }
}

#[async_trait]
impl ObjectStore for CountingStore {
    async fn put_opts(&self, location: &Path, payload: PutPayload, opts: PutOptions) -> Result<PutResult> {
        self.counts.puts.fetch_add(1, Ordering::SeqCst);
        self.counts.bytes_written.fetch_add(payload.content_length() as u64, Ordering::SeqCst);
        self.inner.put_opts(location, payload, opts).await
    }

    async fn put_multipart_opts(&self, location: &Path, opts: PutMultipartOptions) -> Result<Box<dyn MultipartUpload>> {
        self.counts.puts.fetch_add(1, Ordering::SeqCst);
        self.inner.put_multipart_opts(location, opts).await
    }

    async fn get_opts(&self, location: &Path, options: GetOptions) -> Result<GetResult> {
        self.counts.gets.fetch_add(1, Ordering::SeqCst);
        if location.as_ref().contains("/_announced/") {
            self.counts.announcement_gets.fetch_add(1, Ordering::SeqCst);
        }
        let head = options.head;
        let result = self.inner.get_opts(location, options).await?;
        if !head {
            self.counts.bytes_read.fetch_add(result.range.end - result.range.start, Ordering::SeqCst);
        }
        Ok(result)
    }

    async fn get_ranges(&self, location: &Path, ranges: &[Range<u64>]) -> Result<Vec<Bytes>> {
        self.counts.gets.fetch_add(1, Ordering::SeqCst);
        let out = self.inner.get_ranges(location, ranges).await?;
        self.counts.bytes_read.fetch_add(out.iter().map(|b| b.len() as u64).sum(), Ordering::SeqCst);
        Ok(out)
    }

    fn delete_stream(&self, locations: BoxStream<'static, Result<Path>>) -> BoxStream<'static, Result<Path>> {
        let counts = self.counts.clone();
        let counted = locations.inspect(move |_| {
            counts.deletes.fetch_add(1, Ordering::SeqCst);
        });
        self.inner.delete_stream(counted.boxed())
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, Result<ObjectMeta>> {
        self.counts.lists.fetch_add(1, Ordering::SeqCst);
        self.inner.list(prefix)
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> Result<ListResult> {
        self.counts.lists.fetch_add(1, Ordering::SeqCst);
        self.inner.list_with_delimiter(prefix).await
    }

    async fn copy_opts(&self, from: &Path, to: &Path, options: CopyOptions) -> Result<()> {
        self.counts.puts.fetch_add(1, Ordering::SeqCst);
        self.inner.copy_opts(from, to, options).await
    }
}

/// Counts a store's paginated LIST requests into the same [`Counts`].
pub struct CountingLister {
    inner: concord::store::Lister,
    counts: Arc<Counts>,
}

impl CountingLister {
    pub fn wrap(inner: concord::store::Lister, store: &CountingStore) -> concord::store::Lister {
        concord::store::Lister(Arc::new(CountingLister { inner, counts: store.counts.clone() }))
    }
}

#[async_trait]
impl object_store::list::PaginatedListStore for CountingLister {
    async fn list_paginated(
        &self,
        prefix: Option<&str>,
        opts: object_store::list::PaginatedListOptions,
    ) -> Result<object_store::list::PaginatedListResult> {
        self.counts.lists.fetch_add(1, Ordering::SeqCst);
        self.inner.0.list_paginated(prefix, opts).await
    }
}

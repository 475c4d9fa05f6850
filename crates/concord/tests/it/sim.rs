//! The seeded simulation's world, shared by the simulations (`simulation.rs`,
//! `together.rs`): a virtual clock and an in-memory store that injects faults from a
//! seeded generator.

use std::fmt;
use std::ops::Range;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use chrono::{DateTime, TimeZone, Utc};
use concord::{Clock, RandomSource, StdRandom};
use futures::future::BoxFuture;
use futures::stream::BoxStream;
use object_store::memory::InMemory;
use object_store::path::Path;
use object_store::{
    CopyOptions, GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, ObjectStore, PutMode, PutMultipartOptions, PutOptions,
    PutPayload, PutResult, Result,
};

/// Virtual time: advances only when someone sleeps.
#[derive(Debug, Default)]
pub struct SimClock {
    micros: AtomicU64,
}

impl Clock for SimClock {
    fn now(&self) -> DateTime<Utc> {
        Utc.timestamp_opt(1_800_000_000, 0).unwrap() + chrono::TimeDelta::microseconds(self.micros.load(Ordering::SeqCst) as i64)
    }
    fn monotonic(&self) -> Duration {
        Duration::from_micros(self.micros.load(Ordering::SeqCst))
    }
    fn sleep(&self, duration: Duration) -> BoxFuture<'static, ()> {
        self.micros.fetch_add(duration.as_micros() as u64, Ordering::SeqCst);
        Box::pin(tokio::task::yield_now())
    }
}

/// The store's faults, per request, in parts per thousand.
#[derive(Debug, Clone, Copy)]
pub struct Faults {
    pub error_before_write: u64,
    pub error_after_write: u64,
    pub spurious_precondition: u64,
    pub read_error: u64,
}

#[derive(Debug)]
pub struct SimStore {
    pub inner: InMemory,
    pub random: StdRandom,
    pub faults: Faults,
    pub on: AtomicBool,
    pub injected: AtomicU64,
}

impl fmt::Display for SimStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SimStore")
    }
}

impl SimStore {
    fn roll(&self, per_mille: u64) -> bool {
        let hit = self.on.load(Ordering::SeqCst) && self.random.next_u64() % 1000 < per_mille;
        if hit {
            self.injected.fetch_add(1, Ordering::SeqCst);
        }
        hit
    }

    fn fault(what: &str) -> object_store::Error {
        object_store::Error::Generic { store: "SimStore", source: format!("injected: {what}").into() }
    }

    /// Lets other tasks run a random number of times: reorders concurrent requests.
    async fn jitter(&self) {
        for _ in 0..self.random.next_u64() % 4 {
            tokio::task::yield_now().await;
        }
    }
}

#[async_trait]
impl ObjectStore for SimStore {
    async fn put_opts(&self, location: &Path, payload: PutPayload, opts: PutOptions) -> Result<PutResult> {
        self.jitter().await;
        if self.roll(self.faults.error_before_write) {
            return Err(Self::fault("error before the write"));
        }
        let create = matches!(opts.mode, PutMode::Create);
        if create && self.roll(self.faults.spurious_precondition) {
            return Err(object_store::Error::AlreadyExists {
                path: location.to_string(),
                source: "injected: spurious precondition failure".into(),
            });
        }
        let result = self.inner.put_opts(location, payload, opts).await?;
        self.jitter().await;
        if self.roll(self.faults.error_after_write) {
            return Err(Self::fault("error after the write landed"));
        }
        Ok(result)
    }
    async fn put_multipart_opts(&self, location: &Path, opts: PutMultipartOptions) -> Result<Box<dyn MultipartUpload>> {
        self.inner.put_multipart_opts(location, opts).await
    }
    async fn get_opts(&self, location: &Path, options: GetOptions) -> Result<GetResult> {
        self.jitter().await;
        if self.roll(self.faults.read_error) {
            return Err(Self::fault("read error"));
        }
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
        // A waiting writer's listing of names: reordered, and failing as reads do.
        self.jitter().await;
        if self.roll(self.faults.read_error) {
            return Err(Self::fault("listing error"));
        }
        self.inner.list_with_delimiter(prefix).await
    }
    async fn copy_opts(&self, from: &Path, to: &Path, options: CopyOptions) -> Result<()> {
        self.inner.copy_opts(from, to, options).await
    }
}


impl Faults {
    /// The faults of a run, from its setup generator.
    pub fn drawn(setup: &StdRandom) -> Faults {
        Faults {
            error_before_write: setup.next_u64() % 60,
            error_after_write: setup.next_u64() % 60,
            spurious_precondition: setup.next_u64() % 40,
            read_error: setup.next_u64() % 15,
        }
    }
}

impl SimStore {
    /// An empty store injecting `faults` (once turned on) from `seed`.
    pub fn new(seed: u64, faults: Faults) -> SimStore {
        SimStore { inner: InMemory::new(), random: StdRandom::seeded(seed), faults, on: AtomicBool::new(false), injected: AtomicU64::new(0) }
    }

    /// Turns the faults on or off.
    pub fn faults_on(&self, on: bool) {
        self.on.store(on, Ordering::SeqCst);
    }

    /// Faults injected so far.
    pub fn injected(&self) -> u64 {
        self.injected.load(Ordering::SeqCst)
    }
}

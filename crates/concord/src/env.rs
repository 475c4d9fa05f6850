//! The outside world a table touches besides storage: time and randomness.
//! Passed in (never global) so tests and the simulator control them.

use std::fmt::Debug;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use futures::future::BoxFuture;
use rand::rngs::StdRng;
use rand::{RngCore, SeedableRng};
use uuid::Uuid;

/// Time, as a table handle sees it (the simulator and tests give their own).
pub trait Clock: Send + Sync + Debug {
    /// Wall-clock time, UTC.
    fn now(&self) -> DateTime<Utc>;
    /// Monotonic time since an arbitrary origin; used for retry budgets.
    fn monotonic(&self) -> Duration;
    /// Waits `duration` (retry backoff).
    fn sleep(&self, duration: Duration) -> BoxFuture<'static, ()>;
}

/// Randomness: new ids and backoff jitter.
pub trait RandomSource: Send + Sync + Debug {
    /// The next random number.
    fn next_u64(&self) -> u64;
}

/// The system clock (UTC) and tokio sleeps.
#[derive(Debug)]
pub struct SystemClock {
    origin: Instant,
}

impl Default for SystemClock {
    fn default() -> Self {
        SystemClock { origin: Instant::now() }
    }
}

impl Clock for SystemClock {
    fn now(&self) -> DateTime<Utc> {
        Utc::now()
    }
    fn monotonic(&self) -> Duration {
        self.origin.elapsed()
    }
    fn sleep(&self, duration: Duration) -> BoxFuture<'static, ()> {
        Box::pin(tokio::time::sleep(duration))
    }
}

/// A seedable generator; `from_entropy` for production, `seeded` for replayable tests.
#[derive(Debug)]
pub struct StdRandom(Mutex<StdRng>);

impl StdRandom {
    /// Seeded by the operating system.
    pub fn from_entropy() -> Self {
        StdRandom(Mutex::new(StdRng::from_os_rng()))
    }
    /// The same sequence for the same seed.
    pub fn seeded(seed: u64) -> Self {
        StdRandom(Mutex::new(StdRng::seed_from_u64(seed)))
    }
}

impl RandomSource for StdRandom {
    fn next_u64(&self) -> u64 {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).next_u64()
    }
}

/// Clock and randomness used by one table handle.
#[derive(Debug, Clone)]
pub struct Env {
    /// Wall-clock and monotonic time.
    pub clock: Arc<dyn Clock>,
    /// Random numbers (ids, jitter).
    pub random: Arc<dyn RandomSource>,
}

impl Env {
    /// The real clock and OS-seeded randomness.
    pub fn system() -> Self {
        Env { clock: Arc::new(SystemClock::default()), random: Arc::new(StdRandom::from_entropy()) }
    }

    /// A fresh random (version 4) UUID drawn from this environment's randomness.
    pub fn new_uuid(&self) -> Uuid {
        let hi = self.random.next_u64() as u128;
        let lo = self.random.next_u64() as u128;
        uuid::Builder::from_random_bytes(((hi << 64) | lo).to_be_bytes()).into_uuid()
    }

    /// Uniform in `0..=max`.
    pub fn random_below_or_eq(&self, max: u64) -> u64 {
        if max == u64::MAX {
            self.random.next_u64()
        } else {
            self.random.next_u64() % (max + 1)
        }
    }
}

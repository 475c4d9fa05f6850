//! Retry budget and backoff. Pure: randomness comes in as an argument.

use std::time::Duration;

/// The backoff ceiling grows to at most 2^MAX_DOUBLINGS attempt latencies. Beyond
/// that, waiting longer only adds latency: a commit race is lost to one winner at a
/// time, so the next attempt is as likely to win after 16 latencies as after 1,000.
const MAX_DOUBLINGS: u32 = 4;

/// Bounds on a commit's retries: both a count and a total time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Commit attempts before `TooMuchContention` (1 = no retry).
    pub max_attempts: u32,
    /// Total time before `TooMuchContention`, measured from the first attempt.
    pub timeout: Duration,
    /// Floor of the backoff scale, used when attempts are faster than this.
    pub min_backoff: Duration,
    /// Ceiling of any single backoff.
    pub max_backoff: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            max_attempts: 100,
            timeout: Duration::from_secs(300),
            min_backoff: Duration::from_millis(1),
            max_backoff: Duration::from_secs(2),
        }
    }
}

impl RetryPolicy {
    /// Whether another attempt fits the budget after `attempts` attempts over `elapsed`.
    pub fn allows_another(&self, attempts: u32, elapsed: Duration) -> bool {
        attempts < self.max_attempts && elapsed < self.timeout
    }

    /// Full-jitter backoff after the `failures`-th lost attempt, scaled to how long an
    /// attempt takes on this store: uniform in `0..=min(max, scale * 2^min(failures, 4))`.
    /// `uniform(n)` must return a value in `0..=n`.
    pub fn backoff(&self, failures: u32, attempt_latency: Duration, uniform: impl FnOnce(u64) -> u64) -> Duration {
        let scale = attempt_latency.max(self.min_backoff);
        let ceiling = scale.saturating_mul(1u32 << failures.min(MAX_DOUBLINGS)).min(self.max_backoff);
        Duration::from_micros(uniform(ceiling.as_micros() as u64))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_grows_with_failures_and_latency_and_is_capped() {
        let p = RetryPolicy::default();
        let max = |f, lat| p.backoff(f, lat, |n| n);
        assert_eq!(max(0, Duration::from_millis(3)), Duration::from_millis(3));
        assert_eq!(max(2, Duration::from_millis(3)), Duration::from_millis(12));
        assert_eq!(max(1, Duration::from_micros(10)), Duration::from_millis(2), "floored at min_backoff");
        assert_eq!(max(30, Duration::from_millis(5)), Duration::from_millis(80), "growth stops at 16 latencies");
        assert_eq!(max(30, Duration::from_millis(500)), p.max_backoff);
        assert_eq!(p.backoff(5, Duration::from_millis(3), |_| 0), Duration::ZERO);
    }

    #[test]
    fn budget_is_bounded_by_count_and_time() {
        let p = RetryPolicy { max_attempts: 3, timeout: Duration::from_secs(1), ..RetryPolicy::default() };
        assert!(p.allows_another(2, Duration::from_millis(10)));
        assert!(!p.allows_another(3, Duration::from_millis(10)));
        assert!(!p.allows_another(1, Duration::from_secs(1)));
    }
}

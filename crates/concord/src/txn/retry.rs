//! Retry budget and backoff. Pure: randomness comes in as an argument.

use std::time::Duration;

/// After storage errors, the backoff ceiling grows to at most 2^MAX_DOUBLINGS attempt
/// latencies.
const MAX_DOUBLINGS: u32 = 4;

/// A newcomer to a contended table pauses up to this many attempt latencies before
/// its first attempt: twice what a writer that lost once does (see
/// [`RetryPolicy::contention_backoff`]).
const NEWCOMER_SPREAD: u32 = 2;

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

    /// The pause before a commit attempt under contention (FORMAT.md §8, "Fairness"):
    /// after a writer's `lost`-th lost race, uniform in `0..=scale / lost`, `scale`
    /// being how long an attempt takes on this store; before the first attempt of a
    /// handle that lost a race recently (`lost` = 0, a newcomer), uniform in
    /// `0..=NEWCOMER_SPREAD * scale`. Capped at `max_backoff`. The pause shrinks as a
    /// writer keeps losing, so of the writers racing for a version the one that has
    /// waited longest most likely tries first, and newcomers go last; none starves.
    /// (Growing backoff does the opposite: the unluckiest writer waits longest.)
    /// `uniform(n)` must return a value in `0..=n`.
    pub fn contention_backoff(&self, lost: u32, attempt_latency: Duration, uniform: impl FnOnce(u64) -> u64) -> Duration {
        let scale = attempt_latency.max(self.min_backoff);
        let ceiling = if lost == 0 { scale * NEWCOMER_SPREAD } else { scale / lost }.min(self.max_backoff);
        Duration::from_micros(uniform(ceiling.as_micros() as u64))
    }

    /// Full-jitter backoff after the `failures`-th storage error (a create or a read
    /// back that failed): uniform in `0..=min(max, scale * 2^min(failures, 4))`, growing
    /// to give a struggling store room.
    pub fn error_backoff(&self, failures: u32, attempt_latency: Duration, uniform: impl FnOnce(u64) -> u64) -> Duration {
        let scale = attempt_latency.max(self.min_backoff);
        let ceiling = scale.saturating_mul(1u32 << failures.min(MAX_DOUBLINGS)).min(self.max_backoff);
        Duration::from_micros(uniform(ceiling.as_micros() as u64))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_backoff_grows_with_failures_and_latency_and_is_capped() {
        let p = RetryPolicy::default();
        let max = |f, lat| p.error_backoff(f, lat, |n| n);
        assert_eq!(max(0, Duration::from_millis(3)), Duration::from_millis(3));
        assert_eq!(max(2, Duration::from_millis(3)), Duration::from_millis(12));
        assert_eq!(max(1, Duration::from_micros(10)), Duration::from_millis(2), "floored at min_backoff");
        assert_eq!(max(30, Duration::from_millis(5)), Duration::from_millis(80), "growth stops at 16 latencies");
        assert_eq!(max(30, Duration::from_millis(500)), p.max_backoff);
        assert_eq!(p.error_backoff(5, Duration::from_millis(3), |_| 0), Duration::ZERO);
    }

    #[test]
    fn contention_backoff_shrinks_as_a_writer_keeps_losing() {
        let p = RetryPolicy::default();
        let max = |lost| p.contention_backoff(lost, Duration::from_millis(10), |n| n);
        assert_eq!([0, 1, 2, 4, 10].map(max), [20_000, 10_000, 5_000, 2_500, 1_000].map(Duration::from_micros));
        assert_eq!(p.contention_backoff(1, Duration::from_secs(10), |n| n), p.max_backoff, "capped");
        assert_eq!(p.contention_backoff(3, Duration::from_millis(10), |_| 0), Duration::ZERO);
    }

    #[test]
    fn budget_is_bounded_by_count_and_time() {
        let p = RetryPolicy { max_attempts: 3, timeout: Duration::from_secs(1), ..RetryPolicy::default() };
        assert!(p.allows_another(2, Duration::from_millis(10)));
        assert!(!p.allows_another(3, Duration::from_millis(10)));
        assert!(!p.allows_another(1, Duration::from_secs(1)));
    }
}

//! The contention policy of one commit: what each attempt's outcome leads to (build
//! on the winner at once, look the latest up, pause, read while creating, carry and
//! announce). Pure: times and randomness come in as arguments; the commit loop
//! (`commit.rs`) performs what it decides.

use std::time::Duration;

use chrono::{DateTime, Utc};

use super::RetryPolicy;

/// A writer that has lost this many attempts reads the version while creating it (see
/// `settle::create_and_settle`): if it loses again, the winner is in hand with no
/// read-back round trip, which lets it catch up with a winner that needs no read at
/// all before its next attempt (without it, a writer lost 15-17 races in a row to one
/// that kept winning, in the fairness simulation). The price: its winning attempt
/// reads once for nothing (an append that lost once costs 5 requests, not 4).
const SPECULATE_AFTER: u32 = 1;

/// Versions found already committed in a row (the handle was behind) before the latest
/// is looked up instead of walking on one version at a time.
const MAX_BEHIND: u32 = 3;

/// Races lost, storage errors, and versions found already there in a row, in one
/// commit. Invariant: `lost_races + errors + behind_total <= attempts`.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct Contention {
    /// Attempts made (creates tried).
    pub(crate) attempts: u32,
    /// Races lost: another writer created the version after this one learned its base.
    pub(crate) lost_races: u32,
    /// Storage errors in this commit (the error backoff grows with them).
    pub(crate) errors: u32,
    /// Versions found already there in a row: the handle was behind, not beaten.
    pub(crate) behind: u32,
}

/// What a lost attempt leads to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AfterLost {
    /// The winner was built before this writer learned its base: the handle was
    /// behind. Build on the winner at once; `look_up`: first look the latest up (after
    /// `MAX_BEHIND` in a row, rather than walking on one version at a time).
    Behind { look_up: bool },
    /// A race lost: pause this long before the next attempt.
    Race { pause: Duration },
}

impl Contention {
    /// Whether the next attempt reads the version while creating it.
    pub(crate) fn speculates(&self) -> bool {
        self.lost_races + self.behind >= SPECULATE_AFTER
    }

    /// Whether this commit's next version carries announced transactions (cooperative
    /// commits): it lost a race, or its handle did (or found announcements) recently.
    /// A writer that never loses pays nothing.
    pub(crate) fn carries(&self, handle_lost_recently: bool, handle_saw_announcements: bool) -> bool {
        self.lost_races > 0 || handle_lost_recently || handle_saw_announcements
    }

    /// Whether the pause after a lost attempt lists the announcements for the next build.
    pub(crate) fn lists_during_pause(&self) -> bool {
        self.lost_races > 0
    }

    /// An attempt lost to a version created at `winner_created`; this writer learned
    /// of its base at `base_learned` (both wall clock, as version timestamps are), the
    /// attempt took `latency`. `uniform(n)` returns a value in `0..=n`.
    pub(crate) fn lost(
        &mut self,
        winner_created: DateTime<Utc>,
        base_learned: DateTime<Utc>,
        retry: &RetryPolicy,
        latency: Duration,
        uniform: impl FnOnce(u64) -> u64,
    ) -> AfterLost {
        self.attempts += 1;
        if winner_created < base_learned {
            self.behind += 1;
            let look_up = self.behind >= MAX_BEHIND;
            if look_up {
                self.behind = 0;
            }
            return AfterLost::Behind { look_up };
        }
        self.behind = 0;
        self.lost_races += 1;
        AfterLost::Race { pause: retry.contention_backoff(self.lost_races, latency, uniform) }
    }

    /// An attempt whose create failed and did not land (yet): the pause before the next.
    pub(crate) fn failed(&mut self, retry: &RetryPolicy, latency: Duration, uniform: impl FnOnce(u64) -> u64) -> Duration {
        self.attempts += 1;
        self.errors += 1;
        retry.error_backoff(self.errors, latency, uniform)
    }

    /// An attempt that created its version.
    pub(crate) fn won(&mut self) {
        self.attempts += 1;
    }
}

#[cfg(test)]
mod tests {
    use chrono::TimeDelta;

    use super::*;

    fn at(ms: i64) -> DateTime<Utc> {
        DateTime::UNIX_EPOCH + TimeDelta::milliseconds(ms)
    }

    const LATENCY: Duration = Duration::from_millis(10);

    #[test]
    fn a_winner_older_than_the_base_is_the_handle_behind_and_costs_no_pause() {
        let mut c = Contention::default();
        let retry = RetryPolicy::default();
        assert_eq!(c.lost(at(5), at(10), &retry, LATENCY, |n| n), AfterLost::Behind { look_up: false });
        assert_eq!(c.lost(at(5), at(10), &retry, LATENCY, |n| n), AfterLost::Behind { look_up: false });
        assert!(c.speculates(), "behind twice: the next attempt reads while creating");
        assert_eq!(
            c.lost(at(5), at(10), &retry, LATENCY, |n| n),
            AfterLost::Behind { look_up: true },
            "the third in a row looks the latest up"
        );
        assert_eq!(c.lost(at(5), at(10), &retry, LATENCY, |n| n), AfterLost::Behind { look_up: false }, "and counts again from there");
        assert_eq!((c.attempts, c.lost_races), (4, 0), "being behind is not a race lost");
        assert!(!c.carries(false, false), "nor a reason to carry others");
    }

    #[test]
    fn races_lost_pause_less_each_time() {
        let mut c = Contention::default();
        let retry = RetryPolicy::default();
        assert!(!c.speculates() && !c.carries(false, false) && !c.lists_during_pause(), "a first attempt does nothing extra");
        let pauses: Vec<AfterLost> = (0..3).map(|_| c.lost(at(20), at(10), &retry, LATENCY, |n| n)).collect();
        let ms = |ms: u64| Duration::from_micros(ms * 1000);
        assert_eq!(
            pauses,
            [AfterLost::Race { pause: ms(10) }, AfterLost::Race { pause: ms(5) }, AfterLost::Race { pause: Duration::from_micros(3333) },]
        );
        assert!(c.speculates() && c.carries(false, false) && c.lists_during_pause());
    }

    #[test]
    fn a_race_lost_resets_the_behind_count() {
        let mut c = Contention::default();
        let retry = RetryPolicy::default();
        c.lost(at(5), at(10), &retry, LATENCY, |n| n);
        c.lost(at(5), at(10), &retry, LATENCY, |n| n);
        c.lost(at(20), at(10), &retry, LATENCY, |n| n);
        assert_eq!(c.behind, 0);
        assert_eq!(c.lost(at(5), at(10), &retry, LATENCY, |n| n), AfterLost::Behind { look_up: false });
    }

    #[test]
    fn errors_back_off_more_each_time_and_count_as_attempts() {
        let mut c = Contention::default();
        let retry = RetryPolicy::default();
        let pauses: Vec<Duration> = (0..3).map(|_| c.failed(&retry, LATENCY, |n| n)).collect();
        assert_eq!(pauses, [20, 40, 80].map(Duration::from_millis));
        c.won();
        assert_eq!((c.attempts, c.errors, c.lost_races), (4, 3, 0));
    }

    #[test]
    fn a_handle_that_lost_or_saw_announcements_recently_carries_from_its_first_attempt() {
        let c = Contention::default();
        assert!(c.carries(true, false) && c.carries(false, true));
        assert!(!c.lists_during_pause(), "its own pause lists only after it lost in this commit");
    }
}

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

/// Versions that pass over an older pending announcement (do not carry it) before a
/// waiting writer presumes its owner gone, or its transaction settled before the
/// waiter's read version, and stops waiting for it.
pub(crate) const PASSED_OVER: u32 = 2;

/// The shortest pause of a waiting writer. A read from memory or the page cache takes
/// microseconds: paced by that, a waiter would read the next version thousands of times
/// per version (a version takes milliseconds: its fsyncs) and, where reading takes no
/// time at all (the simulation's clock), its wait would never end.
const MIN_PAUSE: Duration = Duration::from_millis(1);

/// An announced writer waiting in line (cooperative commits): the owner of the oldest
/// pending announcement creates the next version and carries the others; the others
/// read the next version until it does, and take over if the line stops moving.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct Waiting {
    /// When the line last moved (a version carried others), or the wait began.
    since: Option<Duration>,
    /// Reads of the next version since the chain last moved.
    reads: u32,
}

impl Waiting {
    /// Whether to wait (again) at `now`, with `ahead` older pending announcements, the
    /// line taking `pace` per version: the oldest never waits; the others take over
    /// after 3, 5, 7 or 9 paces without the line moving (so one at a time, oldest first).
    pub(crate) fn waits(&mut self, ahead: usize, now: Duration, pace: Duration) -> bool {
        if ahead == 0 {
            return false;
        }
        let since = *self.since.get_or_insert(now);
        now.saturating_sub(since) < pace * (1 + 2 * ahead.min(4) as u32)
    }

    /// The pause before the next read: an attempt's `latency` (a loaded store's
    /// latency grows, and the reads slow down with it), at least [`MIN_PAUSE`], and up
    /// to half of that more (`uniform(n)` returns a value in `0..=n`).
    pub(crate) fn pause(&self, latency: Duration, uniform: impl FnOnce(u64) -> u64) -> Duration {
        let pause = latency.max(MIN_PAUSE);
        pause + Duration::from_micros(uniform(pause.as_micros() as u64 / 2))
    }

    /// A read of the next version at `now`: `moved`, it was there; `progressed`, it
    /// carried others (the line moves).
    pub(crate) fn read(&mut self, moved: bool, progressed: bool, now: Duration) {
        self.reads = if moved { 0 } else { self.reads + 1 };
        if progressed {
            self.since = Some(now);
        }
    }

    /// Whether the line stalls (the second read in a row found the chain unmoved): the
    /// writer lists the announcements again.
    pub(crate) fn relists(&self) -> bool {
        self.reads == 2
    }

    /// It attempted a create itself: a new wait starts afresh.
    pub(crate) fn raced(&mut self) {
        *self = Waiting::default();
    }
}

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
        // Every attempt lost counts (`behind` restarts after a lookup).
        self.attempts - self.errors >= SPECULATE_AFTER
    }

    /// Whether this commit's next version carries announced transactions (cooperative
    /// commits): it lost a race, or its handle did recently, or its handle knows of a
    /// line (found announcements, and no listing since found none). A writer that never
    /// loses pays nothing.
    pub(crate) fn carries(&self, handle_lost_recently: bool, handle_knows_a_line: bool) -> bool {
        self.shared() || handle_lost_recently || handle_knows_a_line
    }

    /// Whether the pause after a lost attempt lists the announcements for the next build.
    pub(crate) fn lists_during_pause(&self) -> bool {
        self.shared()
    }

    /// Whether this commit found the table shared: it lost a race, or lost twice in any
    /// way (a handle behind once is only stale; twice, others keep creating versions).
    /// It then announces its transaction (if it may be carried) and carries others.
    pub(crate) fn shared(&self) -> bool {
        self.lost_races > 0 || self.attempts - self.errors >= 2
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
        // The first attempt builds on the newest version the handle knew when the commit
        // began: a winner built before that was there already. A later attempt's base was
        // read, the answer maybe delayed in a loaded store's queue: a winner built up to
        // one attempt's time before it beat this writer in a race.
        let margin = if self.attempts == 0 { Duration::ZERO } else { latency };
        let margin = chrono::TimeDelta::from_std(margin).unwrap_or(chrono::TimeDelta::MAX);
        self.attempts += 1;
        if winner_created.checked_add_signed(margin).is_some_and(|t| t < base_learned) {
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
        assert_eq!(c.lost(at(5), at(100), &retry, LATENCY, |n| n), AfterLost::Behind { look_up: false });
        assert!(!c.carries(false, false), "behind once: only a stale handle, no reason to carry others");
        assert_eq!(c.lost(at(5), at(100), &retry, LATENCY, |n| n), AfterLost::Behind { look_up: false });
        assert!(c.speculates(), "behind twice: the next attempt reads while creating");
        assert!(c.shared() && c.carries(false, false), "and others keep creating versions: it announces and carries");
        assert_eq!(
            c.lost(at(5), at(100), &retry, LATENCY, |n| n),
            AfterLost::Behind { look_up: true },
            "the third in a row looks the latest up"
        );
        assert!(c.speculates(), "and still reads while creating (every lost attempt counts)");
        assert_eq!(c.lost(at(5), at(100), &retry, LATENCY, |n| n), AfterLost::Behind { look_up: false }, "and counts again from there");
        assert_eq!((c.attempts, c.lost_races), (4, 0), "being behind is not a race lost");
    }

    #[test]
    fn after_a_read_a_winner_built_within_one_attempt_beat_this_writer() {
        let mut c = Contention::default();
        let retry = RetryPolicy::default();
        // The first attempt's base was known when the commit began: a winner built 5 ms
        // before was there already.
        assert_eq!(c.lost(at(95), at(100), &retry, LATENCY, |n| n), AfterLost::Behind { look_up: false });
        // The next base was read; a loaded store's answer may have waited in its queue.
        assert_eq!(c.lost(at(95), at(100), &retry, LATENCY, |n| n), AfterLost::Race { pause: LATENCY });
        assert_eq!(c.lost(at(85), at(100), &retry, LATENCY, |n| n), AfterLost::Behind { look_up: false }, "more than one attempt before");
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
        c.lost(at(5), at(100), &retry, LATENCY, |n| n);
        c.lost(at(5), at(100), &retry, LATENCY, |n| n);
        c.lost(at(200), at(100), &retry, LATENCY, |n| n);
        assert_eq!(c.behind, 0);
        assert_eq!(c.lost(at(5), at(100), &retry, LATENCY, |n| n), AfterLost::Behind { look_up: false });
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
    fn the_oldest_in_line_never_waits_the_others_take_over_one_at_a_time() {
        let ms = |ms: u64| Duration::from_millis(ms);
        let pace = ms(100);
        let mut first = Waiting::default();
        assert!(!first.waits(0, ms(0), pace));
        let (mut second, mut fifth) = (Waiting::default(), Waiting::default());
        assert!(second.waits(1, ms(0), pace) && fifth.waits(4, ms(0), pace));
        assert!(second.waits(1, ms(299), pace) && !second.waits(1, ms(300), pace), "the second takes over after 3 paces");
        assert!(fifth.waits(4, ms(899), pace) && !fifth.waits(4, ms(900), pace), "the fifth after 9");
        fifth.read(true, true, ms(800));
        assert!(fifth.waits(4, ms(1600), pace), "the line moved at 800 ms: it waits again");
        fifth.read(true, false, ms(1700));
        assert!(!fifth.waits(4, ms(1700), pace), "a version that carried nobody is no progress of the line");
    }

    #[test]
    fn a_waiting_writer_reads_an_attempt_apart_and_lists_again_when_the_line_stalls() {
        let mut w = Waiting::default();
        assert_eq!(w.pause(LATENCY, |n| n), LATENCY + LATENCY / 2);
        assert_eq!(w.pause(LATENCY, |_| 0), LATENCY);
        assert_eq!(w.pause(Duration::ZERO, |_| 0), MIN_PAUSE, "a read that took no time");
        assert_eq!(w.pause(Duration::from_micros(30), |n| n), MIN_PAUSE * 3 / 2);
        w.read(false, false, Duration::ZERO);
        assert!(!w.relists());
        w.read(false, false, Duration::ZERO);
        assert!(w.relists(), "the second read in a row that finds nothing");
        w.read(true, false, Duration::ZERO);
        assert!(!w.relists());
    }

    #[test]
    fn a_handle_that_lost_or_saw_announcements_recently_carries_from_its_first_attempt() {
        let c = Contention::default();
        assert!(c.carries(true, false) && c.carries(false, true));
        assert!(!c.lists_during_pause(), "its own pause lists only after it lost in this commit");
    }
}

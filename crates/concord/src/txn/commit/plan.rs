//! The commit's decisions (FORMAT.md §8, one function per step of the loop): from the
//! commit's memory and what the writer knows now ([`Facts`]), the next [`Step`] for the
//! driver (`mod.rs`) to perform. Pure: times come in as facts and randomness as an
//! argument (`uniform(n)` returns a value in `0..=n`); nothing here does I/O.

use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};

use super::memory::{AfterLost, Contention, Memory, Withdrawal};
use super::Sharing;
use crate::error::{CommitError, StorageError};
use crate::format::manifest::Manifest;
use crate::txn::cooperative::line::CarryFrom;
use crate::txn::cooperative::{self, DEADLINE_MARGIN, WITHDRAW_ATTEMPTS, WITHDRAW_TIMEOUT};
use crate::txn::member::Member;
use crate::txn::RetryPolicy;

/// A writer that has lost this many attempts reads the version while creating it (see
/// `settle::create_and_settle`): if it loses again, the winner is in hand with no
/// read-back round trip, which lets it catch up with a winner that needs no read at
/// all before its next attempt (without it, a writer lost 15-17 races in a row to one
/// that kept winning, in the fairness simulation). The price: its winning attempt
/// reads once for nothing.
const SPECULATE_AFTER: u32 = 1;

/// Versions found already committed in a row (the handle was behind) before the latest
/// is looked up instead of walking on one version at a time.
const MAX_BEHIND: u32 = 3;

/// The pace a waiting writer presumes of a line it has not yet seen move (a new
/// process): on a fast store a few latencies are shorter than one leader's round (its
/// listing, its reads, its build), and the waiters would take over from a leader that
/// is not gone.
const UNSEEN_PACE: Duration = Duration::from_millis(25);

/// The versions a writer announcing in its pause reads on from its base.
pub(super) const PAUSE_READ_ON: u64 = 2;

/// The most versions the first in line reads on from a base it held too long.
const READ_ON_AT_MOST: u128 = 4;

/// What the driver does next.
#[derive(Debug)]
pub(super) enum Step {
    /// Nothing at this step.
    Skip,
    /// Step 1: every open member judges the versions up to the base.
    Judge,
    /// 1. (withdrawing) The withdrawn member judges them: carried or withdrawn already?
    JudgeOwner,
    /// Step 2: learn what the first base shows of contention (a new handle's first commit).
    LearnStart,
    /// Step 2: announce the lone transaction at once, to be carried until `deadline`.
    Announce { deadline: DateTime<Utc> },
    /// Sleep this long (the newcomer pause; a withdrawal's pauses).
    Pause(Duration),
    /// Step 3: list the announcements (names only, or in full).
    List { names_only: bool },
    /// Step 4: wait in line: pause, then read the version after the base.
    Wait { pause: Duration },
    /// Step 4, 10: give up, and withdraw the announced transaction of this member (`in_line`:
    /// while waiting in line, which the handle then knows of).
    Withdraw { member: usize, in_line: bool },
    /// Step 5: read the announcements to carry.
    Carry(CarryFrom),
    /// Step 6: read this many versions after the base first.
    ReadOn { ahead: u64 },
    /// Step 7-8: build version base+1 from the open members (and what is carried), create it
    /// and settle the outcome; the create reads the version while creating it
    /// (`speculate`) and `look_ahead` versions after it.
    Build { speculate: bool, look_ahead: u64 },
    /// 7-8. (withdrawing) Build and create a version holding the withdrawal.
    BuildWithdrawal,
    /// Step 9: look the latest version up.
    LookUp,
    /// Step 10: these members are out of budget: each fails (too much contention).
    GiveUp(Vec<usize>),
    /// The commit fails.
    Fail(CommitError),
    /// The withdrawal did not reach the chain within its budget: the outcome is unknown.
    Unsettled,
    /// Step 11: sleep `pause`; meanwhile announce (to be carried until that time), list the
    /// announcements, and read on from the base.
    Rest { pause: Duration, announce: Option<DateTime<Utc>>, list: bool, read_on: bool },
}

/// What the writer knows at the moment of a decision: the time, and its handle's memory.
#[derive(Debug, Clone, Copy)]
pub(super) struct Facts {
    /// Monotonic time.
    pub(super) now: Duration,
    /// Wall-clock time (UTC).
    pub(super) wall: DateTime<Utc>,
    /// The handle lost a race recently.
    pub(super) lost_recently: bool,
    /// The handle found announcements recently.
    pub(super) saw_line_recently: bool,
    /// The handle knows of a line (found announcements, and no listing since found none).
    pub(super) knows_line: bool,
    /// How long the chain takes to move, as the handle saw it while waiting.
    pub(super) move_interval: Option<Duration>,
}

impl Memory {
    /// Step 1, judge.
    pub(super) fn judge(&self) -> Step {
        if self.withdrawal.is_some() {
            Step::JudgeOwner
        } else {
            Step::Judge
        }
    }

    /// Step 2, newcomer: the first round learns what its base shows.
    pub(super) fn start(&mut self) -> Step {
        if self.withdrawal.is_some() || !self.first_round {
            return Step::Skip;
        }
        Step::LearnStart
    }

    /// Step 2, newcomer: a handle that lost a race, or found announcements, recently lets the
    /// writers already waiting go first: a lone carriable transaction announces at once
    /// (and waits in line, step 4); anything else pauses.
    pub(super) fn newcomer(&mut self, members: &[Member<'_>], f: &Facts, uniform: impl FnOnce(u64) -> u64) -> Step {
        if !std::mem::take(&mut self.first_round) || self.withdrawal.is_some() {
            return Step::Skip;
        }
        let crowded = f.lost_recently || f.saw_line_recently;
        if crowded && self.announces && cooperative::enabled(&self.base) {
            let left = members[0].opts.retry.timeout + DEADLINE_MARGIN;
            return Step::Announce { deadline: f.wall + TimeDelta::from_std(left).unwrap_or(TimeDelta::MAX) };
        }
        if crowded {
            let retry = &members[first_open(members)].opts.retry;
            return Step::Pause(retry.contention_backoff(0, self.latency, uniform));
        }
        Step::Skip
    }

    /// Step 3, list: a writer that has lost a race (in this commit, or through its handle
    /// recently), or whose handle knows of a line, carries what others announced, and
    /// lists them unless it holds a listing. A lone writer never loses: it pays nothing.
    pub(super) fn list(&mut self, f: &Facts) -> Step {
        let contended = self.contention.carries(f.lost_recently, f.saw_line_recently || f.knows_line);
        self.carries =
            self.withdrawal.is_none() && !self.solitary && contended && self.sharing == Sharing::Group && cooperative::enabled(&self.base);
        if self.carries && self.line.lists() {
            Step::List { names_only: self.announcement.is_some() }
        } else {
            Step::Skip
        }
    }

    /// Step 4, wait: an announced writer waits while an older announcement is pending and
    /// the line moves; out of budget, it withdraws.
    pub(super) fn wait(&mut self, members: &[Member<'_>], f: &Facts, uniform: impl FnOnce(u64) -> u64) -> Step {
        let pace = f.move_interval.unwrap_or(UNSEEN_PACE).max(self.latency * 4);
        let Some(own) = self.announcement.as_ref().map(|a| a.name.clone()) else { return Step::Skip };
        if !self.carries || !self.line.waits(&own, &self.base, f.now, pace) {
            return Step::Skip;
        }
        if !members[0].opts.retry.allows_another(members[0].attempts, f.now - self.started) {
            return Step::Withdraw { member: 0, in_line: true };
        }
        Step::Wait { pause: self.line.pause(self.latency, uniform) }
    }

    /// Step 5, carry: what the version carries, if it carries.
    pub(super) fn carry(&mut self) -> Step {
        self.carry = None;
        match self.carries.then(|| self.line.take_carry()).flatten() {
            Some(from) => Step::Carry(from),
            None => Step::Skip,
        }
    }

    /// Step 6, read on: the first in line whose reading of what it carries took longer than
    /// an attempt, on a base made by a writer that did not wait, reads the next versions
    /// before it builds (a create on a taken base only loses): as many as attempts fit
    /// in that time.
    pub(super) fn read_on(&self, f: &Facts) -> Step {
        let leads = self.carry.as_ref().is_some_and(|c| c.leads());
        let unwaiting = !self.base.carried_others();
        let since = (f.wall - self.learned).to_std().unwrap_or_default();
        if leads && unwaiting && since > self.latency {
            let ahead = (since.as_micros() / self.latency.as_micros().max(1)).clamp(1, READ_ON_AT_MOST) as u64;
            return Step::ReadOn { ahead };
        }
        Step::Skip
    }

    /// Step 7, build. A writer that has lost reads the version while creating it; the first
    /// in line, and a first attempt's lost create (reading the winner back), read one
    /// version further: a writer that does not wait may have made it meanwhile.
    pub(super) fn build(&mut self, reads_while_creating: bool) -> Step {
        if self.withdrawal.is_some() {
            return Step::BuildWithdrawal;
        }
        let leads = self.carry.as_ref().is_some_and(|c| c.leads());
        let speculate = self.contention.speculates() && reads_while_creating;
        let look_ahead = u64::from(leads || (!self.contention.speculates() && reads_while_creating));
        // Versions read after the one created, if it loses (see `settle.rs`).
        self.read_after = if speculate { look_ahead } else { 0 };
        Step::Build { speculate, look_ahead }
    }

    /// Step 9, learn, won: the attempt counts.
    pub(super) fn won(&mut self) {
        self.contention.won();
    }

    /// Step 9, learn, lost to `holder` (the winner, the newest of the versions read after it):
    /// it becomes the base. Returns [`Step::LookUp`] after `MAX_BEHIND` versions found
    /// already there, unless the reads after the winner found the end.
    pub(super) fn lost(
        &mut self,
        holder: std::sync::Arc<Manifest>,
        retry: &RetryPolicy,
        f: &Facts,
        uniform: impl FnOnce(u64) -> u64,
    ) -> Step {
        if let Some(w) = &self.withdrawal {
            self.pause = w.retry.contention_backoff(w.attempts, self.latency, uniform);
            self.base = holder;
            return Step::Skip;
        }
        // The holder was the newest when read: looking the latest up would only find it
        // again (a round trip in which a writer that does not wait creates first).
        let newest_when_read = newest_when_read(holder.version, self.created, self.read_after);
        let after = self.contention.lost(holder.timestamp, self.learned, retry, self.latency, uniform);
        let carried = self.carry.take();
        // The first in line, beaten by a writer that did not wait: it tries again at
        // once, carrying what it read, listing nothing.
        let again = self.line.lost(&holder, self.announcement.is_some(), carried);
        self.moved_to(holder, f.wall);
        self.after = Some(match after {
            AfterLost::Race { .. } if again => AfterLost::Race { pause: Duration::ZERO },
            after => after,
        });
        match after {
            AfterLost::Behind { look_up: true } if !newest_when_read => Step::LookUp,
            _ => Step::Skip,
        }
    }

    /// Step 9, learn, lost (after any lookup): the pause before the next attempt, and when
    /// to announce (the contended lone append, once: during that pause). Returns whether
    /// the attempt lost a race (the handle records it).
    pub(super) fn after_lost(&mut self, retry: &RetryPolicy, f: &Facts) -> bool {
        let Some(after) = self.after.take() else { return false };
        let (race, pause) = match after {
            AfterLost::Behind { .. } => (false, Duration::ZERO),
            AfterLost::Race { pause } => (true, pause),
        };
        // Carried until its budget ends (and a margin for other clocks).
        let announces = (race || self.contention.shared()) && self.announces && self.announcement.is_none();
        if announces && cooperative::enabled(&self.base) {
            let left = retry.timeout.saturating_sub(self.elapsed) + DEADLINE_MARGIN;
            self.announce_by = Some(f.wall + TimeDelta::from_std(left).unwrap_or(TimeDelta::MAX));
        }
        self.pause = pause;
        race
    }

    /// Step 9, learn, not written (the create failed and did not land, yet): refused for good
    /// (nothing was written; reported as it is), the budget spent (unknown: a delayed
    /// write could still land), or the error backoff.
    pub(super) fn not_written(&mut self, cause: StorageError, member: &Member<'_>, uniform: impl FnOnce(u64) -> u64) -> Step {
        if cause.is_definite_refusal() {
            return Step::Fail(CommitError::Storage(cause));
        }
        if let Some(w) = &mut self.withdrawal {
            w.errors += 1;
            self.pause = w.retry.error_backoff(w.errors, self.latency, uniform);
            return Step::Skip;
        }
        let retry = member.opts.retry;
        if !retry.allows_another(member.attempts, self.elapsed) {
            return Step::Fail(CommitError::CommitStateUnknown { version: self.created, transaction_id: member.txn.id, cause });
        }
        self.pause = self.contention.failed(&retry, self.latency, uniform);
        Step::Skip
    }

    /// Step 10, budget, per member (counted from the commit's start): out of it, a member
    /// fails, or, announced, withdraws (it may be carried yet: its outcome is whichever
    /// the chain shows first).
    pub(super) fn budget(&self, members: &[Member<'_>], now: Duration) -> Step {
        if let Some(w) = &self.withdrawal {
            return if w.retry.allows_another(w.attempts, now - w.started) { Step::Skip } else { Step::Unsettled };
        }
        let out: Vec<usize> = (0..members.len())
            .filter(|&i| members[i].outcome.is_none() && !members[i].opts.retry.allows_another(members[i].attempts, self.elapsed))
            .collect();
        match out.first() {
            None => Step::Skip,
            Some(&member) if self.announcement.is_some() => Step::Withdraw { member, in_line: false },
            Some(_) => Step::GiveUp(out),
        }
    }

    /// Step 11, pause: the pause, and meanwhile the announcement (counted as made even if its
    /// write fails: it may have landed), then, for a writer that carries, a listing for
    /// its next build, made after its own announcement (writers that lost the same race
    /// announce together, and each listing holds those made before its own: only the
    /// oldest takes itself for the first in line); with both, it reads on from a base
    /// made by a writer that did not wait (its two round trips are time enough for such
    /// a writer to make a version).
    pub(super) fn rest(&mut self) -> Step {
        if self.withdrawal.is_some() {
            return Step::Pause(self.pause);
        }
        let announce = self.announce_by.take();
        let list = self.contention.lists_during_pause()
            && self.line.lists_during_pause()
            && self.sharing == Sharing::Group
            && cooperative::enabled(&self.base);
        let read_on = announce.is_some() && list && !self.base.carried_others();
        Step::Rest { pause: self.pause, announce, list, read_on }
    }

    /// Withdrawal, step 1: the judging failed (a storage error): judged again after the
    /// error backoff, within the withdrawal's budget.
    pub(super) fn owner_unjudged(&mut self, now: Duration, uniform: impl FnOnce(u64) -> u64) -> Step {
        let Some(w) = &mut self.withdrawal else { return Step::Skip };
        w.errors += 1;
        w.attempts += 1;
        if !w.retry.allows_another(w.attempts, now - w.started) {
            return Step::Unsettled;
        }
        Step::Pause(w.retry.error_backoff(w.errors, Duration::ZERO, uniform))
    }

    /// Starts withdrawing the announced transaction of member `index` at `now`, within
    /// a budget of its own (its attempts are its creates until now).
    pub(super) fn withdraw(&mut self, index: usize, member: &Member<'_>, now: Duration) {
        let retry = RetryPolicy { max_attempts: WITHDRAW_ATTEMPTS, timeout: WITHDRAW_TIMEOUT, ..member.opts.retry };
        self.withdrawal = Some(Withdrawal { member: index, retry, started: now, attempts: 0, errors: 0 });
    }
}

/// Whether a lost create's winner was the newest version when read: the versions read
/// after it (`read_after`, see `settle.rs`) ended before the last one (one was absent;
/// or a read failed, and if the holder was not the newest, the next create loses and
/// reads the winner: the chain decides, this only saves a lookup).
fn newest_when_read(holder: u64, created: u64, read_after: u64) -> bool {
    holder < created + read_after
}

fn first_open(members: &[Member<'_>]) -> usize {
    members.iter().position(|m| m.outcome.is_none()).unwrap_or(0)
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
    /// attempt took `latency`.
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
        let margin = TimeDelta::from_std(margin).unwrap_or(TimeDelta::MAX);
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
    fn a_handle_that_lost_or_saw_announcements_recently_carries_from_its_first_attempt() {
        let c = Contention::default();
        assert!(c.carries(true, false) && c.carries(false, true));
        assert!(!c.lists_during_pause(), "its own pause lists only after it lost in this commit");
    }

    #[test]
    fn a_winner_is_known_newest_when_the_reads_after_it_found_nothing() {
        assert!(newest_when_read(7, 7, 1), "version 8 was read and absent");
        assert!(!newest_when_read(8, 7, 1), "version 8 was found: the holder is it, the next one unread");
        assert!(!newest_when_read(7, 7, 0), "nothing read after it");
    }
}

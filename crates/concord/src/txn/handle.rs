//! A table handle's memory, kept between its commits and shared by its clones: the
//! newest version seen and when (a write within [`NEWEST_FRESH_FOR`] starts from it
//! without a lookup), when a commit race was last lost (a newcomer then yields), and
//! whether a line of announced writers waits (its commits then carry it); and
//! [`Writer`], what a commit works with. Advisory: stale memory costs a lost attempt,
//! never a wrong answer.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, Utc};

use crate::env::Env;
use crate::format::manifest::Manifest;
use crate::storage::TableStore;

/// How long what a handle learned of the latest version counts as current: a write
/// within this time starts from it without looking the latest up again (one LIST or
/// probe saved). Staleness costs nothing in correctness: a winner the handle did not
/// know of makes the first create fail and is then read and judged like any other.
pub(crate) const NEWEST_FRESH_FOR: Duration = Duration::from_secs(1);

/// What a commit works with: the table's store, the environment, and the memory of the
/// handle it commits through.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Writer<'a> {
    pub(crate) store: &'a TableStore,
    pub(crate) env: &'a Env,
    pub(crate) memory: &'a HandleMemory,
}

/// See [`HandleMemory::recent_for`].
const RECENT_ATTEMPTS: u32 = 8;

#[derive(Debug, Default)]
pub(crate) struct HandleMemory {
    /// The newest version this handle has seen (opened, looked up, lost a race to or
    /// committed), and when (the env clock's monotonic time).
    newest: Mutex<Option<(Arc<Manifest>, Duration)>>,
    /// When this handle last lost a commit race (monotonic) and how long that attempt
    /// took: a new transaction then yields to the writers already waiting.
    last_contention: Mutex<Option<(Duration, Duration)>>,
    /// When this handle last found other writers' announcements (cooperative commits):
    /// it goes on carrying while it keeps winning.
    last_announcements: Mutex<Option<Duration>>,
    /// Whether a line waits for this table, as far as this handle knows: set when it
    /// finds announcements, cleared when a listing finds none. While set, its commits
    /// list and carry the line (a writer that stopped losing would otherwise take
    /// every version while the line waits on a first in line slower than it).
    line: Mutex<bool>,
    /// How long this handle's last create attempt took.
    attempt_latency: Mutex<Option<Duration>>,
    /// When a waiting writer of this handle last saw the chain move (monotonic), and how
    /// long it moves in (a moving average of the intervals seen).
    moves: Mutex<Option<(Duration, Option<Duration>)>>,
}

impl HandleMemory {
    /// Records that `manifest`'s version exists, as of `now` (monotonic).
    pub(crate) fn saw_newest(&self, manifest: &Arc<Manifest>, now: Duration) {
        let mut newest = self.newest.lock().unwrap_or_else(|e| e.into_inner());
        match &*newest {
            Some((known, _)) if known.version > manifest.version => {}
            _ => *newest = Some((manifest.clone(), now)),
        }
    }

    /// The newest version this handle knows of, if it learned of it within
    /// [`NEWEST_FRESH_FOR`] of `now` (monotonic).
    pub(crate) fn fresh_newest(&self, now: Duration) -> Option<Arc<Manifest>> {
        let newest = self.newest.lock().unwrap_or_else(|e| e.into_inner());
        newest.as_ref().filter(|(_, at)| now.saturating_sub(*at) < NEWEST_FRESH_FOR).map(|(m, _)| m.clone())
    }

    /// Records a lost race at `now` (monotonic) whose attempt took `latency`.
    pub(crate) fn saw_contention(&self, now: Duration, latency: Duration) {
        *self.last_contention.lock().unwrap_or_else(|e| e.into_inner()) = Some((now, latency));
    }

    /// If this handle lost a race recently (see [`HandleMemory::recent_for`]) before
    /// `now`: how long that attempt took.
    pub(crate) fn recent_contention(&self, now: Duration) -> Option<Duration> {
        let window = self.recent_for();
        let last = self.last_contention.lock().unwrap_or_else(|e| e.into_inner());
        last.filter(|(at, _)| now.saturating_sub(*at) < window).map(|(_, latency)| latency)
    }

    /// How long a lost race or announcements found count as recent: a second, or
    /// [`RECENT_ATTEMPTS`] attempts on a slower store (a writer appending back to back
    /// on a store with 300 ms requests takes longer than a second per append).
    fn recent_for(&self) -> Duration {
        let latency = self.attempt_latency().unwrap_or_default();
        NEWEST_FRESH_FOR.max(latency * RECENT_ATTEMPTS)
    }

    /// Records that other writers' announcements were found at `now` (monotonic).
    pub(crate) fn saw_announcements(&self, now: Duration) {
        *self.last_announcements.lock().unwrap_or_else(|e| e.into_inner()) = Some(now);
        *self.line.lock().unwrap_or_else(|e| e.into_inner()) = true;
    }

    /// Records that a listing found no other writer's announcement: no line waits.
    pub(crate) fn saw_no_line(&self) {
        *self.line.lock().unwrap_or_else(|e| e.into_inner()) = false;
    }

    /// Whether a line waits for this table, as far as this handle knows (see
    /// [`HandleMemory::saw_no_line`]).
    pub(crate) fn line_waits(&self) -> bool {
        *self.line.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Records a line seen in `manifest` by a handle that has not raced yet (a new
    /// process): writers wait in line for this table if the version shows contention
    /// and was made (by its `timestamp`, another machine's clock) within the recent
    /// window of `wall_now`. Contention shows as a transaction another writer's commit
    /// carried, or one rebased over versions others committed (its writer lost a race
    /// for them): a lone writer's versions show neither. Advisory, as all of this
    /// state: a skewed clock only decides whether a newcomer waits in line or races.
    pub(crate) fn saw_start(&self, manifest: &Manifest, wall_now: DateTime<Utc>, now: Duration) {
        let contended = manifest.carried_others() || manifest.transactions.iter().any(|t| !t.rebased_over.is_empty());
        let age = (wall_now - manifest.timestamp).to_std().unwrap_or_default();
        if contended && self.attempt_latency().is_none() && age < self.recent_for() {
            self.saw_announcements(now);
        }
    }

    /// Whether this handle found other writers' announcements recently (see
    /// [`HandleMemory::recent_for`]) before `now` (monotonic).
    pub(crate) fn recent_announcements(&self, now: Duration) -> bool {
        let window = self.recent_for();
        let last = self.last_announcements.lock().unwrap_or_else(|e| e.into_inner());
        last.is_some_and(|at| now.saturating_sub(at) < window)
    }

    /// Records how long a create attempt took.
    pub(crate) fn saw_attempt(&self, latency: Duration) {
        *self.attempt_latency.lock().unwrap_or_else(|e| e.into_inner()) = Some(latency);
    }

    /// How long this handle's last create attempt took.
    pub(crate) fn attempt_latency(&self) -> Option<Duration> {
        *self.attempt_latency.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Records that a waiting writer saw the chain move at `now` (monotonic).
    pub(crate) fn saw_move(&self, now: Duration) {
        let mut moves = self.moves.lock().unwrap_or_else(|e| e.into_inner());
        let interval = match *moves {
            // Longer gaps are not the chain's pace (the handle was not waiting).
            Some((last, interval)) if now.saturating_sub(last) < NEWEST_FRESH_FOR => {
                let seen = now.saturating_sub(last);
                Some(interval.map_or(seen, |i| (i * 3 + seen) / 4))
            }
            Some((_, interval)) => interval,
            None => None,
        };
        *moves = Some((now, interval));
    }

    /// How long the chain takes to move, as the moves this handle saw go.
    pub(crate) fn move_interval(&self) -> Option<Duration> {
        self.moves.lock().unwrap_or_else(|e| e.into_inner()).and_then(|(_, interval)| interval)
    }

    /// The newest version this handle knows of, however old that knowledge.
    pub(crate) fn newest_known(&self) -> Option<Arc<Manifest>> {
        self.newest.lock().unwrap_or_else(|e| e.into_inner()).as_ref().map(|(m, _)| m.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::manifest::Operation;
    use crate::format::schema::Schema;

    fn version(made: DateTime<Utc>, carried: bool) -> Manifest {
        let append = || Operation::Append { fragments: vec![] };
        let carried = carried.then(|| (append(), Some(uuid::Uuid::nil())));
        let transactions = std::iter::once((append(), None)).chain(carried).collect();
        Manifest::test_version(made, Schema::parse("id bigint not null").unwrap(), transactions)
    }

    /// A new handle waits in line when the version it starts from carried others
    /// within the last second; not for an older or an uncarried version, nor once the
    /// handle has raced (it then knows better: its own losses and listings).
    #[test]
    fn a_new_handle_learns_of_a_line_from_a_recent_carrying_version() {
        let wall = Utc::now();
        let now = Duration::from_secs(100);
        let seen = |made: DateTime<Utc>, carried: bool, raced: bool| {
            let state = HandleMemory::default();
            if raced {
                state.saw_attempt(Duration::from_millis(20));
            }
            state.saw_start(&version(made, carried), wall, now);
            state.recent_announcements(now)
        };
        let ago = |ms| wall - chrono::TimeDelta::milliseconds(ms);
        assert!(seen(ago(300), true, false));
        // Another machine's clock a little ahead.
        assert!(seen(wall + chrono::TimeDelta::milliseconds(50), true, false));
        assert!(!seen(ago(1500), true, false));
        assert!(!seen(ago(300), false, false));
        assert!(!seen(ago(300), true, true));
    }

    /// So it does when that version's writer rebased over others' versions (it lost a
    /// race): a version of a lone writer, which never rebases, leaves it racing.
    #[test]
    fn a_new_handle_learns_of_contention_from_a_recent_rebased_version() {
        let wall = Utc::now();
        let now = Duration::from_secs(100);
        let seen = |rebased_over: Vec<u64>, made_ms_ago: i64| {
            let state = HandleMemory::default();
            let mut manifest = version(wall - chrono::TimeDelta::milliseconds(made_ms_ago), false);
            manifest.transactions[0].rebased_over = rebased_over;
            state.saw_start(&manifest, wall, now);
            state.recent_announcements(now)
        };
        assert!(seen(vec![7], 300));
        assert!(!seen(vec![], 300), "a lone writer's version");
        assert!(!seen(vec![7], 1500), "not recent");
    }

    /// Announcements found make a line known until a listing finds none, however long
    /// ago; "recent" (a newcomer waits in line) ends after the window.
    #[test]
    fn a_line_found_is_known_until_a_listing_finds_none() {
        let state = HandleMemory::default();
        assert!(!state.line_waits(), "a handle that found no announcement knows of no line");
        state.saw_announcements(Duration::from_secs(1));
        assert!(state.line_waits() && state.recent_announcements(Duration::from_secs(1)));
        assert!(state.line_waits() && !state.recent_announcements(Duration::from_secs(60)));
        state.saw_no_line();
        assert!(!state.line_waits());
    }
}

//! What a table handle's commits have learned of the table, kept between commits: the
//! newest version seen and when (a write within `NEWEST_FRESH_FOR` starts from it
//! without a lookup), and when a commit race was last lost (a newcomer then yields).
//! Advisory: stale knowledge costs a lost attempt, never a wrong answer.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::table_store::NEWEST_FRESH_FOR;
use crate::format::manifest::Manifest;

#[derive(Debug, Default)]
pub(crate) struct CommitState {
    /// The newest version this handle has seen (opened, looked up, lost a race to or
    /// committed), and when (the env clock's monotonic time).
    newest: Mutex<Option<(Arc<Manifest>, Duration)>>,
    /// When this handle last lost a commit race (monotonic) and how long that attempt
    /// took: a new transaction then yields to the writers already waiting.
    last_contention: Mutex<Option<(Duration, Duration)>>,
    /// When this handle last found other writers' announcements (cooperative commits):
    /// it goes on carrying while it keeps winning.
    last_announcements: Mutex<Option<Duration>>,
}

impl CommitState {
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

    /// If this handle lost a race within [`NEWEST_FRESH_FOR`] of `now`: how long that
    /// attempt took.
    pub(crate) fn recent_contention(&self, now: Duration) -> Option<Duration> {
        let last = self.last_contention.lock().unwrap_or_else(|e| e.into_inner());
        last.filter(|(at, _)| now.saturating_sub(*at) < NEWEST_FRESH_FOR).map(|(_, latency)| latency)
    }

    /// Records that other writers' announcements were found at `now` (monotonic).
    pub(crate) fn saw_announcements(&self, now: Duration) {
        *self.last_announcements.lock().unwrap_or_else(|e| e.into_inner()) = Some(now);
    }

    /// Whether this handle found other writers' announcements within
    /// [`NEWEST_FRESH_FOR`] of `now` (monotonic).
    pub(crate) fn recent_announcements(&self, now: Duration) -> bool {
        let last = self.last_announcements.lock().unwrap_or_else(|e| e.into_inner());
        last.is_some_and(|at| now.saturating_sub(at) < NEWEST_FRESH_FOR)
    }

    /// The newest version this handle knows of, however old that knowledge.
    pub(crate) fn newest_known(&self) -> Option<Arc<Manifest>> {
        self.newest.lock().unwrap_or_else(|e| e.into_inner()).as_ref().map(|(m, _)| m.clone())
    }
}

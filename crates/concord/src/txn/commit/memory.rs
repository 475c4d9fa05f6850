//! One commit's memory: everything the planner decides from, kept across the rounds of
//! one commit (the handle's memory, kept across commits, is `txn/handle.rs`).

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};

use super::Sharing;
use crate::format::manifest::Manifest;
use crate::txn::cooperative::announce::Announced;
use crate::txn::cooperative::line::Line;
use crate::txn::retry::RetryPolicy;
use crate::txn::settle::Attempt;

/// One commit's memory.
pub(crate) struct Memory {
    pub(super) sharing: Sharing,
    /// When the commit began (monotonic): its budget counts from here.
    pub(super) started: Duration,
    /// The version the next attempt builds on.
    pub(super) base: Arc<Manifest>,
    /// When this writer learned of `base` (wall clock, as version timestamps are).
    pub(super) learned: DateTime<Utc>,
    /// How long the last create (or read in line) took: the scale of pauses.
    pub(super) latency: Duration,
    pub(super) contention: Contention,
    pub(super) line: Line,
    /// The first round is still to come (the newcomer step).
    pub(super) first_round: bool,
    /// Cooperative commits: a lone carriable transaction, announced once it lost a race.
    /// Whether its versions hold only its own transactions (a multi-table
    /// transaction's part, an undo): nothing is carried.
    pub(super) solitary: bool,
    pub(super) announces: bool,
    pub(super) announcement: Option<Announcing>,
    /// Announce during the next pause, to be carried until then.
    pub(super) announce_by: Option<DateTime<Utc>>,
    /// This round: whether its version carries announced transactions, and which.
    pub(super) carries: bool,
    pub(super) carry: Option<Announced>,
    /// The last attempt: the version it created, what it showed, how far on its create
    /// read, the time spent by then (measured once: the checks after it agree).
    pub(super) created: u64,
    pub(super) attempt: Option<Attempt>,
    pub(super) read_after: u64,
    pub(super) elapsed: Duration,
    /// How a lost attempt was judged, and the pause before the next.
    pub(super) after: Option<AfterLost>,
    pub(super) pause: Duration,
    /// The announcements the version this writer created carried: it retires them.
    pub(super) carried: Vec<String>,
    /// Set once the commit withdraws its announced transaction.
    pub(super) withdrawal: Option<Withdrawal>,
}

/// A lone transaction's announcement (cooperative commits).
#[derive(Debug)]
pub(super) struct Announcing {
    /// Its name (even if the write failed: it may have landed).
    pub(super) name: String,
    /// Its owner's attempts so far.
    pub(super) attempts: u32,
    /// Whether its owner marked it withdrawn.
    pub(super) marked: bool,
}

/// The withdrawal of an announced transaction (FORMAT.md §8, "Withdraw"): its own
/// budget, counted from its start; its attempts are its creates and failed judgings.
#[derive(Debug)]
pub(super) struct Withdrawal {
    /// The member withdrawn.
    pub(super) member: usize,
    pub(super) retry: RetryPolicy,
    pub(super) started: Duration,
    pub(super) attempts: u32,
    pub(super) errors: u32,
}

impl Memory {
    /// A commit that starts from `base`, learned at `learned`.
    pub(super) fn new(sharing: Sharing, started: Duration, base: Arc<Manifest>, learned: DateTime<Utc>, latency: Duration) -> Memory {
        Memory {
            sharing,
            started,
            base,
            learned,
            latency,
            contention: Contention::default(),
            line: Line::default(),
            first_round: true,
            solitary: false,
            announces: false,
            announcement: None,
            announce_by: None,
            carries: false,
            carry: None,
            created: 0,
            attempt: None,
            read_after: 0,
            elapsed: Duration::ZERO,
            after: None,
            pause: Duration::ZERO,
            carried: Vec::new(),
            withdrawal: None,
        }
    }

    /// The version after `base` is now the base (learned now).
    pub(super) fn moved_to(&mut self, base: Arc<Manifest>, now: DateTime<Utc>) {
        self.base = base;
        self.learned = now;
    }

    /// The announcement's name, once announced.
    pub(super) fn announced(&self) -> Option<&str> {
        self.announcement.as_ref().map(|a| a.name.as_str())
    }
}

/// Races lost, storage errors, and versions found already there in a row, in one
/// commit. Invariant: `lost_races + errors + behind <= attempts`.
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

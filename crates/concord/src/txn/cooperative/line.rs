//! Waiting in line (FORMAT.md §8, steps 3-6): what one commit knows of the line of
//! announced writers, and the decisions it takes from that. Pure: the commit driver
//! (`txn/commit`) lists, reads and sleeps, and tells the line what it found.
//!
//! An announced writer lets the owner of the oldest pending announcement create the
//! next version, which carries the others; it reads the next version until one holds
//! its transaction, and takes over if the line stops moving (the owners before it may
//! be gone). Safety does not depend on any of it: the chain decides; the line only
//! decides who tries when.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use uuid::Uuid;

use super::announce::{self, Announced, Listed};
use crate::format::manifest::Manifest;

/// Versions that pass over an older pending announcement (do not carry it) before a
/// waiting writer presumes its owner gone, or its transaction settled before the
/// waiter's read version, and stops waiting for it.
pub(crate) const PASSED_OVER: u32 = 2;

/// The shortest pause of a waiting writer. A read from memory or the page cache takes
/// microseconds: paced by that, a waiter would read the next version thousands of times
/// per version (a version takes milliseconds: its fsyncs) and, where reading takes no
/// time at all (the simulation's clock), its wait would never end.
const MIN_PAUSE: Duration = Duration::from_millis(1);

/// One commit's place in the line.
#[derive(Debug, Default)]
pub(crate) struct Line {
    /// The announcements listed, kept while the writer waits.
    listing: Option<Vec<Listed>>,
    /// The listing names the announcements without their content: listed again
    /// before carrying.
    names_only: bool,
    /// Transaction ids found in the chain during this commit.
    in_chain: HashSet<Uuid>,
    /// How often a version that carried others passed over each older announcement.
    passed_over: HashMap<Uuid, u32>,
    waiting: Waiting,
    /// Whether it waited since its listing (it lists again before carrying).
    waited: bool,
    /// What it carried in an attempt it lost as the first in line: carried again at
    /// once, with no listing.
    kept: Option<Announced>,
    /// Its last reading found no other announcement: it does not list again until a
    /// version shows others carried (a writer racing one that does not announce would
    /// only slow down).
    alone: bool,
}

/// Where the announcements a build carries come from.
#[derive(Debug)]
pub(crate) enum CarryFrom {
    /// What it carried in the attempt it lost as the first in line.
    Kept(Announced),
    /// The listing it holds; listed again in full first with `relist` (it waited since,
    /// or listed names only).
    Listing { listed: Vec<Listed>, relist: bool },
}

impl Line {
    /// Whether a writer that carries lists before it builds: unless it holds a listing
    /// or what it kept, or found nobody last time.
    pub(crate) fn lists(&self) -> bool {
        self.listing.is_none() && self.kept.is_none() && !self.alone
    }

    /// Takes a listing (`None`: it failed: carrying nobody this time) made before the
    /// build, of names only with `names_only`.
    pub(crate) fn listed_before_build(&mut self, listing: Option<Vec<Listed>>, names_only: bool) {
        self.listing = listing;
        self.names_only = names_only;
    }

    /// Takes a listing made during a pause (`None`: none made, or it failed).
    pub(crate) fn listed(&mut self, listing: Option<Vec<Listed>>) {
        self.listing = listing;
        self.names_only = false;
    }

    /// Whether the pause after a lost attempt lists the announcements (not when it
    /// carries what it kept, nor when it found nobody).
    pub(crate) fn lists_during_pause(&self) -> bool {
        self.kept.is_none() && !self.alone
    }

    /// Whether the writer of the announcement `own` waits at `now`: an older one is
    /// pending (not in the chain up to `base`, not passed over), and the line moved
    /// within its takeover time (`pace`: how long the line takes per version).
    pub(crate) fn waits(&mut self, own: &str, base: &Manifest, now: Duration, pace: Duration) -> bool {
        let (None, Some(listed)) = (&self.kept, &self.listing) else { return false };
        // The base's own transactions are settled (the owners of those it carried may
        // not have retired their announcements yet).
        self.in_chain.extend(base.transactions.iter().map(|t| t.id));
        let (in_chain, passed_over) = (&self.in_chain, &self.passed_over);
        let settled = |id| in_chain.contains(&id) || passed_over.get(&id).is_some_and(|n| *n >= PASSED_OVER);
        let ahead = announce::ahead(listed, own, settled);
        self.waiting.waits(ahead, now, pace)
    }

    /// The pause before a waiting writer's next read (see [`Waiting::pause`]).
    pub(crate) fn pause(&self, latency: Duration, uniform: impl FnOnce(u64) -> u64) -> Duration {
        self.waiting.pause(latency, uniform)
    }

    /// The writer of announcement `own` waited and read the next version at `now`:
    /// `next`, if it was there.
    pub(crate) fn read_next(&mut self, next: Option<&Manifest>, own: &str, now: Duration) {
        self.waited = true;
        // A version that carried nobody (a writer that did not wait) is no progress of
        // the line: the wait goes on counting towards a takeover.
        let progressed = next.is_some_and(Manifest::carried_others);
        self.waiting.read(next.is_some(), progressed, now);
        if let Some(next) = next {
            let carried: HashSet<Uuid> = next.transactions.iter().map(|t| t.id).collect();
            // Passed over by a writer that carried others: its owner is gone, or it
            // settled before this writer's base.
            if let (true, Some(listed)) = (progressed, &self.listing) {
                for l in announce::made_before(listed, own).filter(|l| !carried.contains(&l.id)) {
                    *self.passed_over.entry(l.id).or_default() += 1;
                }
            }
            self.in_chain.extend(carried);
            self.alone &= !progressed;
        }
        if self.waiting.relists() {
            // The line stalls: the announcements ahead may have settled before this
            // writer's base (their owners retire them once they know).
            self.listing = None;
        }
    }

    /// Where the next build's carried announcements come from, if anywhere: what it
    /// kept, or its listing.
    pub(crate) fn take_carry(&mut self) -> Option<CarryFrom> {
        if let Some(kept) = self.kept.take() {
            return Some(CarryFrom::Kept(kept));
        }
        let listed = self.listing.take()?;
        let relist = std::mem::take(&mut self.waited) | std::mem::take(&mut self.names_only);
        Some(CarryFrom::Listing { listed, relist })
    }

    /// `listed` but for the transactions found in the chain (their owners may not have
    /// retired their announcements yet): what the build reads.
    pub(crate) fn to_read(&self, mut listed: Vec<Listed>) -> Vec<Listed> {
        listed.retain(|l| !self.in_chain.contains(&l.id));
        listed
    }

    /// The build read `announced`. Returns whether it found no other announcement: the
    /// writer is alone (its handle then knows of no line).
    pub(crate) fn read(&mut self, announced: &Announced) -> bool {
        self.alone = announced.live.is_empty() && announced.withdrawn.is_empty();
        self.alone
    }

    /// An attempt lost to `holder`. `leading`: it was announced and carried others
    /// (`carried`): the first in line. Beaten by a writer that did not wait (`holder`
    /// carried nobody), it tries again at once with the same announcements (the
    /// speculative read gave it the winner): returns whether it does. Beaten by another
    /// writer that carried, it lists again to find its place (both took themselves for
    /// the first, from listings made as the line formed).
    pub(crate) fn lost(&mut self, holder: &Manifest, leading: bool, carried: Option<Announced>) -> bool {
        self.in_chain.extend(holder.transactions.iter().map(|t| t.id));
        let beaten_by_line = holder.carried_others();
        let again = leading && !beaten_by_line && carried.as_ref().is_some_and(Announced::leads);
        if again {
            self.kept = carried;
        }
        // Others carried, or this announced writer lost again (others may have joined
        // the line behind it since it found itself alone): it lists again.
        if leading || beaten_by_line {
            self.alone = false;
        }
        again
    }

    /// Carries `carried` again at the next attempt, with no listing (its base moved
    /// on before it could create).
    pub(crate) fn keep(&mut self, carried: Option<Announced>) {
        self.kept = carried;
    }

    /// It attempted a create itself: a new wait starts afresh.
    pub(crate) fn raced(&mut self) {
        self.waiting = Waiting::default();
    }
}

/// An announced writer waiting in line: the owner of the oldest pending announcement
/// creates the next version and carries the others; the others read the next version
/// until it does, and take over if the line stops moving.
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
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use chrono::Utc;

    use super::*;
    use crate::format::announcement::Announcement;
    use crate::format::manifest::Operation;
    use crate::format::schema::Schema;
    use crate::format::staged::PreparedTransaction;

    const LATENCY: Duration = Duration::from_millis(10);

    fn version(carried: bool) -> Manifest {
        let append = || Operation::Append { fragments: vec![] };
        let transactions = std::iter::once((append(), None)).chain(carried.then(|| (append(), Some(Uuid::new_v4())))).collect();
        Manifest::test_version(Utc::now(), Schema::parse("id bigint not null").unwrap(), transactions)
    }

    fn carrying_one() -> Announced {
        let transaction = PreparedTransaction::test_append(Uuid::new_v4(), "id bigint not null");
        Announced { live: vec![Arc::new(Announcement { transaction, deadline: Utc::now() })], ..Default::default() }
    }

    /// The first in line beaten by a writer that did not wait tries again at once with
    /// what it carried; beaten by another that carried (both took themselves for the
    /// first), it lists again to find its place.
    #[test]
    fn a_leader_retries_at_once_only_against_a_writer_that_did_not_wait() {
        let mut line = Line::default();
        assert!(line.lost(&version(false), true, Some(carrying_one())));
        assert!(line.kept.is_some() && !line.lists_during_pause());
        let mut line = Line::default();
        assert!(!line.lost(&version(true), true, Some(carrying_one())));
        assert!(line.kept.is_none() && line.lists_during_pause());
        let mut line = Line::default();
        assert!(!line.lost(&version(false), false, None), "a writer that was not leading waits its turn");
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
}

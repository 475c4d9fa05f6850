//! Waiting in line (cooperative commits, FORMAT.md §8). An announced writer lets the
//! owner of the oldest pending announcement create the next version, which carries the
//! others; it reads the next version until one holds its transaction, and takes over
//! if the line stops moving (the owners before it may be gone). On a loaded store this
//! is what keeps requests per transaction few: one writer creates per version, and the
//! others read it once each, where every writer racing would lose a create and read the
//! winner each round.
//!
//! Safety does not depend on any of it: the chain decides (see `cooperate.rs`); the
//! line only decides who tries when.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use uuid::Uuid;

use super::contention::{Waiting, PASSED_OVER};
use super::cooperate::{self, Announced, Listed};
use crate::env::Env;
use crate::format::manifest::Manifest;
use crate::storage::TableStore;

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

impl Line {
    /// Lists the announcements unless it holds a listing (a failed listing only means
    /// carrying nobody this time); `names_only` (an announced writer, likely to wait):
    /// their names without their content.
    pub(crate) async fn list(&mut self, store: &TableStore, names_only: bool) {
        if self.listing.is_none() && self.kept.is_none() && !self.alone {
            let listing = if names_only { cooperate::list_names(store).await } else { cooperate::list(store).await };
            self.listing = listing.ok();
            self.names_only = names_only;
        }
    }

    /// Takes a listing made during a pause.
    pub(crate) fn listed(&mut self, listing: Option<Vec<Listed>>) {
        self.listing = listing;
        self.names_only = false;
    }

    /// Whether the pause after a lost attempt lists the announcements (not when it
    /// carries what it kept).
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
        let ahead = cooperate::ahead(listed, own, settled);
        self.waiting.waits(ahead, now, pace)
    }

    /// One wait: a pause (about one `latency`, which it measures again), then a read of
    /// the version after `base`. Returns that version if it is there.
    pub(crate) async fn wait(
        &mut self,
        store: &TableStore,
        env: &Env,
        own: &str,
        base: &Manifest,
        latency: &mut Duration,
    ) -> Option<Arc<Manifest>> {
        env.clock.sleep(self.waiting.pause(*latency, |max| env.random_below_or_eq(max))).await;
        self.waited = true;
        let read_started = env.clock.monotonic();
        let next = store.read_manifest_now(base.version + 1).await.ok().flatten();
        // A read's round trip is the store's latency too (a writer carried every time
        // never creates).
        *latency = env.clock.monotonic() - read_started;
        store.commits.saw_attempt(*latency);
        // A version that carried nobody (a writer that did not wait) is no progress of
        // the line: the wait goes on counting towards a takeover.
        let progressed = next.as_ref().is_some_and(|n| n.carried_others());
        let now = env.clock.monotonic();
        self.waiting.read(next.is_some(), progressed, now);
        if let Some(next) = &next {
            store.commits.saw_newest(next, now);
            store.commits.saw_move(now);
            let carried: HashSet<Uuid> = next.transactions.iter().map(|t| t.id).collect();
            // Passed over by a writer that carried others: its owner is gone, or it
            // settled before this writer's base.
            if let (true, Some(listed)) = (progressed, &self.listing) {
                for l in cooperate::made_before(listed, own).filter(|l| !carried.contains(&l.id)) {
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
        next
    }

    /// What the next attempt carries (`own`: the ids of its batch): what it kept, or the
    /// announcements listed (listed again, in full, if it waited since, so that those
    /// made meanwhile are carried too, or if it listed names only), each read once per
    /// handle.
    pub(crate) async fn carry(&mut self, store: &TableStore, env: &Env, own: &[Uuid]) -> Option<Announced> {
        if let Some(kept) = self.kept.take() {
            return Some(kept);
        }
        let listed = self.listing.take()?;
        let (waited, names_only) = (std::mem::take(&mut self.waited), std::mem::take(&mut self.names_only));
        let mut listed = if waited || names_only { cooperate::list(store).await.ok()? } else { listed };
        // Not read: the transactions found in the chain (their owners may not have
        // retired their announcements yet).
        listed.retain(|l| !self.in_chain.contains(&l.id));
        let announced = cooperate::read(store, env, &listed, own).await.ok()?;
        self.alone = announced.live.is_empty() && announced.withdrawn.is_empty();
        if self.alone {
            store.commits.saw_no_line();
        }
        Some(announced)
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
        let again = leading && !beaten_by_line && carried.as_ref().is_some_and(|c| !c.live.is_empty());
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
        self.waiting.raced();
    }
}

#[cfg(test)]
mod tests {
    use chrono::Utc;

    use super::*;
    use crate::format::announcement::Announcement;
    use crate::format::manifest::Operation;
    use crate::format::schema::Schema;
    use crate::format::staged::PreparedTransaction;

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
}

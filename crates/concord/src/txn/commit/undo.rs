//! A commit's base that names a multi-table transaction (FORMAT.md §18): waited for
//! while undecided (aborted past its deadline), undone once aborted. Here, not in `txn::multi`, because an undo commits
//! through the commit loop that settles its bases through here.

use std::time::Duration;

use futures::future::BoxFuture;
use uuid::Uuid;

use crate::error::CommitError;
use crate::format::manifest::{Manifest, MultiRef, Operation};
use crate::format::multi::Outcome;
use crate::txn::handle::Writer;
use crate::txn::multi::{decide, outcome, Role};
use crate::txn::{CommitOptions, PreparedTransaction};

/// How long a writer first waits before it reads again a decision it waits for; each
/// wait doubles, up to [`POLL_MAX`], each drawn from half to all of it (many waiters on
/// one table's part do not read its decision all at once, nor all the time).
const POLL: Duration = Duration::from_millis(10);
/// The longest wait between reads of a decision.
const POLL_MAX: Duration = Duration::from_millis(200);

/// `base` as a writer in `role` may build on it: a version of another multi-table
/// transaction not decided yet is waited for until its deadline (then aborted); an
/// aborted one is undone. Returns
/// the base to build on (the undo's version, after an undo), or `None` if `base` is
/// fine. `give_up`: past this (monotonic), the writer stops waiting (too much
/// contention).
pub(crate) fn settle<'a>(
    w: Writer<'a>,
    base: &'a Manifest,
    role: &'a Role,
    give_up: Duration,
) -> BoxFuture<'a, Result<Option<u64>, CommitError>> {
    // Boxed (a future of a known type that is `Send`): an undo commits through the
    // commit loop, which settles its bases through here.
    Box::pin(async move {
        // An undo builds on its aborted version or on nothing (its expected version
        // refuses any other base): it never waits.
        if role.undoing.is_some() {
            return Ok(None);
        }
        let Some(theirs) = base.multi().filter(|m| role.mine.as_ref().is_none_or(|mine| mine.id != m.id)) else {
            return Ok(None);
        };
        let mut pause = POLL;
        loop {
            match outcome(w.store, theirs).await? {
                Some(Outcome::Committed) => return Ok(None),
                Some(Outcome::Aborted) => {
                    undo(w, base, theirs).await?;
                    return Ok(Some(base.version + 1));
                }
                None => {}
            }
            // Past its deadline its owner is taken for gone. No other wait ends it:
            // owners take their tables in one order, so no two wait on each other.
            if w.env.clock.now() > theirs.deadline {
                decide(w.store, w.env, theirs, Outcome::Aborted).await?;
                continue;
            }
            if w.env.clock.monotonic() > give_up {
                let elapsed_ms = give_up.as_millis() as u64;
                return Err(CommitError::TooMuchContention { attempts: 1, elapsed_ms, last_version: base.version + 1 });
            }
            let half = pause.as_micros() as u64 / 2;
            w.env.clock.sleep(Duration::from_micros(half + w.env.random.next_u64() % (half + 1))).await;
            pause = (pause * 2).min(POLL_MAX);
        }
    })
}

/// The idempotency key of the undo of multi-table transaction `id`: one undo each.
fn undo_key(id: Uuid) -> String {
    format!("concord-undo-{id}")
}

/// Undoes `aborted` (a version of `multi`, aborted): a restore of the version before it,
/// committed right on it (expected version), once (its key).
pub(crate) async fn undo(w: Writer<'_>, aborted: &Manifest, multi: &MultiRef) -> Result<(), CommitError> {
    let txn = PreparedTransaction {
        id: w.env.new_uuid(),
        read_version: aborted.version,
        read_schema: aborted.schema.clone(),
        read_next_fragment_id: aborted.next_fragment_id,
        operation: Operation::Restore { version: aborted.version - 1 },
        now: None,
        staged: Default::default(),
    };
    let opts =
        CommitOptions { expect_version: Some(aborted.version), idempotency_key: Some(undo_key(multi.id)), ..CommitOptions::default() };
    let role = Role { mine: None, undoing: Some(multi.id) };
    match super::commit_as(w, &txn, &opts, role).await {
        // Someone undid it first (or the chain moved on past its undo).
        Ok(_) | Err(CommitError::VersionMoved { .. }) => Ok(()),
        Err(e) => Err(e),
    }
}

//! Multi-table transactions (FORMAT.md §18): staged transactions of several tables of
//! one store commit in one step, all or none, with no server. Each table's version
//! holding its part names the transaction; the transaction counts once its decision,
//! record 0 of the chain `_multi/<id>` of its primary table, says committed. Only its
//! owner decides committed, after every table has its version; anyone decides aborted
//! past its deadline, or an older one that waits on it. Until decided, readers read the
//! version before it and writers wait; aborted, the next writer undoes it (a restore of
//! the version before it, once).
//!
//! Invariant: a version that names an undecided or aborted transaction is its chain's
//! latest, or followed by its undo: nothing else is built on it.

pub(crate) mod together;

use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;

use uuid::Uuid;

use super::handle::Writer;
use super::{CommitOptions, PreparedTransaction};
use crate::env::Env;
use crate::error::{CommitError, CorruptObject, OpenError};
use crate::format::manifest::{Manifest, MultiRef, Operation};
use crate::format::multi::{decision_records, Decision, Outcome};
use crate::storage::TableStore;

/// What a commit is, to the multi-table transactions it meets.
#[derive(Debug, Clone, Default)]
pub(crate) struct Role {
    /// The multi-table transaction it is part of.
    pub(crate) mine: Option<MultiRef>,
    /// The aborted one it undoes (it builds on that one's version).
    pub(crate) undoing: Option<Uuid>,
}

/// `multi`'s decision as the store holds it now (`None`: undecided); kept once read.
pub(crate) async fn outcome(store: &TableStore, multi: &MultiRef) -> Result<Option<Outcome>, OpenError> {
    if let Some(known) = store.decided(multi.id) {
        return Ok(Some(known));
    }
    let records = store.sibling_records(&multi.primary, &decision_records(multi.id))?;
    let Some(bytes) = records.read(0).await? else { return Ok(None) };
    let decision: Decision =
        serde_json::from_slice(&bytes).map_err(|e| CorruptObject { path: records.describe(0), reason: e.to_string() })?;
    store.remember_decision(multi.id, decision.outcome);
    Ok(Some(decision.outcome))
}

/// Decides `multi` `wanted`, unless it is decided already: the outcome that holds.
pub(crate) async fn decide(store: &TableStore, env: &Env, multi: &MultiRef, wanted: Outcome) -> Result<Outcome, OpenError> {
    let records = store.sibling_records(&multi.primary, &decision_records(multi.id))?;
    let decision = Decision { outcome: wanted, at: env.clock.now(), writer: env.new_uuid() };
    if records.create(0, serde_json::to_vec(&decision).expect("a decision serializes").into()).await? {
        store.remember_decision(multi.id, wanted);
        return Ok(wanted);
    }
    let reason = "the decision exists and cannot be read".to_string();
    outcome(store, multi).await?.ok_or_else(|| CorruptObject { path: records.describe(0), reason }.into())
}

/// Whether `manifest`'s transactions count: not part of a multi-table transaction, or
/// of one decided committed.
pub(crate) async fn counts(store: &TableStore, manifest: &Manifest) -> Result<bool, OpenError> {
    match manifest.multi() {
        None => Ok(true),
        Some(multi) => Ok(outcome(store, multi).await? == Some(Outcome::Committed)),
    }
}

/// The version a reader reads for `latest`, the newest of a chain: itself if it
/// counts, else the one before it (only a chain's newest, or a version followed by its
/// undo, may not count).
pub(crate) async fn visible(store: &TableStore, latest: Arc<Manifest>) -> Result<Arc<Manifest>, OpenError> {
    if counts(store, &latest).await? || latest.version == 0 {
        return Ok(latest);
    }
    let before = latest.version - 1;
    store.read_manifest(before).await?.ok_or(OpenError::Removed { version: before })
}

/// How long a writer waits between reads of a decision it waits for.
const POLL: Duration = Duration::from_millis(20);

/// `base` as a writer in `role` may build on it: a version of another multi-table
/// transaction not decided yet is waited for until its deadline (then aborted), or
/// aborted at once by an older one that waits on it; an aborted one is undone. Returns
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
        let Some(theirs) = base.multi().filter(|m| Some(m.id) != role.undoing && role.mine.as_ref().is_none_or(|mine| mine.id != m.id))
        else {
            return Ok(None);
        };
        loop {
            match outcome(w.store, theirs).await? {
                Some(Outcome::Committed) => return Ok(None),
                Some(Outcome::Aborted) => {
                    undo(w, base, theirs).await?;
                    return Ok(Some(base.version + 1));
                }
                None => {}
            }
            let expired = w.env.clock.now() > theirs.deadline;
            let wounds = role.mine.as_ref().is_some_and(|mine| mine.older_than(theirs));
            if expired || wounds {
                decide(w.store, w.env, theirs, Outcome::Aborted).await?;
                continue;
            }
            if w.env.clock.monotonic() > give_up {
                let elapsed_ms = give_up.as_millis() as u64;
                return Err(CommitError::TooMuchContention { attempts: 1, elapsed_ms, last_version: base.version + 1 });
            }
            w.env.clock.sleep(POLL).await;
        }
    })
}

/// The idempotency key of the undo of multi-table transaction `id`: one undo each.
fn undo_key(id: Uuid) -> String {
    format!("concord-undo-{id}")
}

/// Undoes `aborted` (a version of `multi`, aborted): a restore of the version before it,
/// committed right on it (expected version), once (its key).
async fn undo(w: Writer<'_>, aborted: &Manifest, multi: &MultiRef) -> Result<(), CommitError> {
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
    match super::commit::commit_as(w, &txn, &opts, role).await {
        // Someone undid it first (or the chain moved on past its undo).
        Ok(_) | Err(CommitError::VersionMoved { .. }) => Ok(()),
        Err(e) => Err(e),
    }
}

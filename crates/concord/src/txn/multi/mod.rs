//! Multi-table transactions (FORMAT.md §18): staged transactions of several tables of
//! one store commit in one step, all or none, with no server. Each table's version
//! holding its part names the transaction; the transaction counts once its decision,
//! record 0 of the chain `_multi/<id>` of its primary table, says committed. Only its
//! owner decides committed, after every table has its version; anyone decides aborted
//! past its deadline. Until decided, readers read the
//! version before it and writers wait; aborted, the next writer undoes it (a restore of
//! the version before it, once).
//!
//! Invariant: a version that names an undecided or aborted transaction is its chain's
//! latest, or followed by its undo: nothing else is built on it.
//! Waiting on a base and undoing it: `txn::commit::undo`; the owner: `txn::together`.

use std::sync::Arc;

use uuid::Uuid;

use crate::env::Env;
use crate::error::{CorruptObject, OpenError};
use crate::format::manifest::{Manifest, MultiRef};
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

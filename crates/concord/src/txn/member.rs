//! One transaction of a commit (alone, or in a shared version): what it has established
//! across attempts (winners judged, re-runs done, attempts made) and its record in the
//! version that commits it.

use std::ops::Range;
use std::sync::Arc;

use chrono::{DateTime, Utc};

use super::action::{self, Action, Cx, NextState};
use super::conflict::{self, RerunScope, Resolution, Winner};
use super::{CommitInfo, CommitOptions, PreparedTransaction};
use crate::env::Env;
use crate::error::CommitError;
use crate::format::manifest::{IsolationLevel, Manifest, Operation, TransactionRecord};
use crate::storage::TableStore;

/// A transaction being committed.
pub(crate) struct Member<'a> {
    pub(crate) txn: &'a PreparedTransaction,
    pub(crate) opts: &'a CommitOptions,
    action: Box<dyn Action>,
    judged: Judged,
    rerun_done: bool,
    /// Attempts that included it (or judged it, before it settled).
    pub(crate) attempts: u32,
}

/// What an attempt found a member to be, before building the version.
pub(crate) enum Ready {
    /// It goes into the version being built.
    Yes,
    /// It is settled without this attempt: already committed (an earlier attempt whose
    /// response was lost, a staged transaction committed twice, its idempotency key in
    /// the history) or nothing to commit.
    Settled(CommitInfo),
}

impl<'a> Member<'a> {
    pub(crate) fn new(txn: &'a PreparedTransaction, opts: &'a CommitOptions) -> Self {
        Member { txn, opts, action: action::for_operation(txn.operation.clone()), judged: Judged::new(txn), rerun_done: false, attempts: 0 }
    }

    /// The operation as it stands (as prepared, plus what re-runs found).
    pub(crate) fn operation(&self) -> &Operation {
        self.action.operation()
    }

    /// Its isolation level on `base`.
    pub(crate) fn isolation(&self, base: &Manifest) -> IsolationLevel {
        self.opts.isolation.unwrap_or_else(|| base.isolation())
    }

    fn cx<'s>(&self, store: &'s TableStore, env: &'s Env, now: DateTime<Utc>) -> Cx<'s> {
        Cx { store, env, now: self.txn.now_or(now) }
    }

    /// Judges the winners up to `base` (the newest version), checks the expected
    /// version, re-runs what winners changed, and says whether it still changes
    /// anything.
    pub(crate) async fn ready_on(&mut self, store: &TableStore, env: &Env, base: &Arc<Manifest>) -> Result<Ready, CommitError> {
        self.attempts += 1;
        let isolation = self.isolation(base);
        if let Some(done) = self.judged.judge_up_to(store, base, self.txn, self.action.as_ref(), self.opts, isolation).await? {
            return Ok(Ready::Settled(done));
        }
        if let Some(expected) = self.opts.expect_version.filter(|e| *e != base.version) {
            return Err(CommitError::VersionMoved { expected, latest: base.version });
        }
        if let Some(scope) = self.judged.pending_rerun.take() {
            let cx = self.cx(store, env, env.clock.now());
            self.action.rerun(&cx, base, &scope).await?;
            store.delete_best_effort(self.action.take_replaced_files().iter().map(String::as_str)).await;
            self.rerun_done = true;
        }
        // Judged on the newest version, after re-runs: a delete that matched nothing
        // when prepared may match rows a winner appended.
        if let Some(reason) = self.action.no_change(self.rerun_done) {
            return Ok(Ready::Settled(CommitInfo::abandoned(base.version, self.txn, self.attempts, self.rerun_done, reason)));
        }
        Ok(Ready::Yes)
    }

    /// Whether it may follow `earlier` (operations already in the version being built,
    /// each with the fragment ids it added and its key) in one version without a re-run:
    /// it would mean the same committed right after them. `Err(k)`: not after the
    /// `k`-th of them.
    pub(crate) fn fits_after(&self, state: &Manifest, earlier: &[(Operation, Range<u64>, Option<String>)]) -> Result<(), usize> {
        let isolation = self.isolation(state);
        for (k, (operation, added, key)) in earlier.iter().enumerate() {
            let same_key = key.is_some() && *key == self.opts.idempotency_key;
            let resolution =
                conflict::resolve(self.operation(), &self.txn.read_schema, isolation, Winner::new(operation, &state.schema, added.clone()));
            if same_key || resolution != Resolution::Rebase {
                return Err(k);
            }
        }
        Ok(())
    }

    /// Its next state on `state` (writing any segments and deletion vectors it needs).
    pub(crate) async fn apply(&mut self, store: &TableStore, env: &Env, state: &Manifest) -> Result<NextState, CommitError> {
        let cx = self.cx(store, env, env.clock.now());
        self.action.apply(&cx, state).await
    }

    /// Its record in the version that commits it.
    pub(crate) fn record(&self, rows_deleted: u64) -> TransactionRecord {
        TransactionRecord {
            id: self.txn.id,
            read_version: Some(self.txn.read_version),
            operation: self.operation().clone(),
            attempts: self.attempts,
            rebased_over: self.judged.rebased_over.clone(),
            rerun: self.rerun_done,
            rows_deleted,
            idempotency_key: self.opts.idempotency_key.clone(),
        }
    }
}

/// What judging the winners so far has established.
struct Judged {
    /// Winners up to this version have been judged.
    up_to: u64,
    /// `next_fragment_id` before the next winner: its added fragments start here.
    next_id: u64,
    rebased_over: Vec<u64>,
    pending_rerun: Option<RerunScope>,
}

impl Judged {
    fn new(txn: &PreparedTransaction) -> Self {
        Judged { up_to: txn.read_version, next_id: txn.read_next_fragment_id, rebased_over: Vec::new(), pending_rerun: None }
    }

    /// Judges every winner up to `base` with the pure conflict rules. `Some(info)`: the
    /// transaction is already committed, or its idempotency key is taken: report that
    /// version.
    async fn judge_up_to(
        &mut self,
        store: &TableStore,
        base: &Arc<Manifest>,
        txn: &PreparedTransaction,
        action: &dyn Action,
        opts: &CommitOptions,
        isolation: IsolationLevel,
    ) -> Result<Option<CommitInfo>, CommitError> {
        for v in self.up_to + 1..=base.version {
            let winner = if v == base.version { base.clone() } else { read_existing(store, v).await? };
            if let Some(ours) = winner.transactions.iter().find(|t| t.id == txn.id) {
                return Ok(Some(CommitInfo::of(&winner, ours)));
            }
            if let Some(key) = opts.idempotency_key.as_deref() {
                if let Some(replay) = CommitInfo::replay_of(&winner, key, txn.operation.name())? {
                    return Ok(Some(replay));
                }
            }
            let added = self.next_id..winner.next_fragment_id.max(self.next_id);
            self.next_id = added.end;
            // Each transaction of a shared version is a winner of its own. Judged against
            // the operation as re-runs have extended it: a winner touching rows a re-run
            // added is as much a conflict as one touching the original rows.
            for theirs in &winner.transactions {
                match conflict::resolve(
                    action.operation(),
                    &txn.read_schema,
                    isolation,
                    Winner::new(&theirs.operation, &winner.schema, added.clone()),
                ) {
                    Resolution::Rebase => {}
                    Resolution::Rerun(scope) => self.pending_rerun = Some(RerunScope::widen(self.pending_rerun.take(), scope)),
                    Resolution::Incompatible { reason } => {
                        return Err(CommitError::Incompatible {
                            winner_version: v,
                            winner_operation: theirs.operation.name().to_string(),
                            reason,
                        });
                    }
                }
            }
            self.rebased_over.push(v);
        }
        self.up_to = base.version;
        Ok(None)
    }
}

/// A version at or below the latest: missing means vacuum removed it.
pub(crate) async fn read_existing(store: &TableStore, version: u64) -> Result<Arc<Manifest>, CommitError> {
    store.read_manifest(version).await?.ok_or(CommitError::HistoryRemoved { version })
}

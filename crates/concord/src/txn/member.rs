//! One transaction of a commit (alone, or in a shared version): what it has established
//! across attempts (winners judged, re-runs done, attempts made) and its record in the
//! version that commits it.

use std::collections::HashMap;
use std::ops::Range;
use std::sync::Arc;

use chrono::{DateTime, Utc};

use uuid::Uuid;

use super::conflict::{self, RerunScope, Resolution, Winner};
use super::keys::{self, Found, Retry};
use super::ops::delete::fragments_in_scope;
use super::ops::{Action, Cx, NextState};
use super::{CommitInfo, CommitOptions, PreparedTransaction};
use crate::env::Env;
use crate::error::{CommitError, IncompatibleReason};
use crate::format::manifest::{
    field_id_block_end, IsolationLevel, Manifest, MergedFrom, MultiRef, Operation, TransactionRecord, MAIN_ROW_IDS, ROW_ID_BLOCK,
};
use crate::format::schema::{ColumnType, Field, Schema};
use crate::storage::TableStore;

/// A transaction being committed.
pub(crate) struct Member<'a> {
    pub(crate) txn: &'a PreparedTransaction,
    pub(crate) opts: &'a CommitOptions,
    /// The idempotency key of the job commit it is part of.
    job_key: Option<&'a str>,
    action: Action,
    judged: Judged,
    rerun_done: bool,
    /// Attempts that included it (creates of a version holding it, its own writer's).
    pub(crate) attempts: u32,
    /// Whether its keys were checked in the history before its first base.
    pub(crate) keys_checked: bool,
    /// How it ended; `None` while it is open (to be committed by a coming attempt).
    pub(crate) outcome: Option<Result<CommitInfo, CommitError>>,
    /// Set when it replays a branch's transaction in a merge.
    pub(crate) merged: Option<&'a Merged>,
    /// A merge's member: what winners on the target made it re-run, done where it is
    /// applied.
    merge_rerun: Option<RerunScope>,
    /// The multi-table transaction it is part of (its record names it).
    multi: Option<MultiRef>,
}

/// A branch transaction a merge replays (FORMAT.md §17): where it comes from and the
/// branch's ids of the fragments it adds (in order), which the merge's version gives
/// new ids (they keep their first row ids). Its operation names fragments the branch
/// added in the merge's range by the branch's ids (another block than the target's:
/// no winner on the target touched them); fragments merged before, by the target's.
#[derive(Debug, Clone)]
pub(crate) struct Merged {
    pub(crate) origin: MergedFrom,
    /// The fragments its transaction added on the branch: (branch id, first row id).
    pub(crate) born: Vec<(u64, u64)>,
}

impl Merged {
    /// `operation` with the fragments the branch added earlier in the merge, named by
    /// the branch's ids, named by the ids `given` them in the version being built.
    pub(crate) fn translated(operation: &Operation, given: &HashMap<u64, u64>) -> Operation {
        let id = |i: &mut u64| {
            if let Some(t) = given.get(i) {
                *i = *t;
            }
        };
        let mut op = operation.clone();
        match &mut op {
            Operation::Delete { deletions, .. }
            | Operation::ReplaceWhere { deletions, .. }
            | Operation::Update { deletions, .. }
            | Operation::Merge { deletions, .. } => deletions.iter_mut().for_each(|d| id(&mut d.fragment_id)),
            Operation::Compact { groups, .. } => groups.iter_mut().flat_map(|g| g.inputs.iter_mut()).for_each(|i| id(&mut i.fragment_id)),
            _ => {}
        }
        op
    }
}

/// What an attempt found a member to be, before building the version.
pub(crate) enum Ready {
    /// It goes into the version being built.
    Yes,
    /// It is settled without this attempt: already committed (an earlier attempt whose
    /// response was lost, a staged transaction committed twice, its idempotency key in
    /// the history) or nothing to commit.
    Settled(CommitInfo),
    /// Its job's key is in the history: the job committed there (this is a retry of
    /// it); the job's transactions' outcomes, as replays.
    JobDone(Vec<CommitInfo>),
    /// This version withdrew it (cooperative commits: its owner gave up on it).
    Withdrawn(u64),
}

impl Ready {
    fn of(found: Found) -> Ready {
        match found {
            Found::Transaction(info) => Ready::Settled(info),
            Found::Job(infos) => Ready::JobDone(infos),
        }
    }
}

/// A member already in the version being built.
#[derive(Debug, Clone)]
pub(crate) struct Earlier {
    pub(crate) id: Uuid,
    pub(crate) operation: Operation,
    /// The fragment ids it added.
    pub(crate) added: Range<u64>,
    pub(crate) key: Option<String>,
}

/// How a member may follow the members already in the version being built.
#[derive(Debug)]
pub(crate) enum Follows {
    /// As it is: it means the same right after them.
    Rebase,
    /// After re-running this part on what they changed.
    Rerun(RerunScope),
    /// Not after the `earlier`-th of them: it carries the same idempotency key
    /// (`reason` None), or no serial order of the two exists.
    Not { earlier: usize, reason: Option<IncompatibleReason> },
}

impl<'a> Member<'a> {
    pub(crate) fn new(txn: &'a PreparedTransaction, opts: &'a CommitOptions, job_key: Option<&'a str>) -> Self {
        let action = Action::new(txn.operation.clone());
        Member {
            txn,
            opts,
            job_key,
            action,
            judged: Judged::new(txn, None),
            rerun_done: false,
            attempts: 0,
            keys_checked: false,
            outcome: None,
            merged: None,
            merge_rerun: None,
            multi: None,
        }
    }

    /// A member holding one table's part of multi-table transaction `multi`.
    pub(crate) fn in_multi(txn: &'a PreparedTransaction, opts: &'a CommitOptions, job_key: Option<&'a str>, multi: MultiRef) -> Self {
        Member { multi: Some(multi), ..Member::new(txn, opts, job_key) }
    }

    /// A member replaying branch transaction `merged` in a merge.
    pub(crate) fn merging(txn: &'a PreparedTransaction, opts: &'a CommitOptions, merged: &'a Merged) -> Self {
        let judged = Judged::new(txn, Some(merged.origin.chain));
        Member { merged: Some(merged), judged, ..Member::new(txn, opts, None) }
    }

    /// The operation as it stands (as prepared, plus what re-runs found).
    pub(crate) fn operation(&self) -> Operation {
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
        if !std::mem::replace(&mut self.keys_checked, true) {
            // Its keys in the retained history up to the base (winners after it are
            // judged below, their keys too): a retry commits nothing.
            for (key, retry) in self.keys() {
                if let Some(found) = keys::in_history(store, key, retry, base.version).await? {
                    return Ok(Ready::of(found));
                }
            }
        }
        let isolation = self.isolation(base);
        match self.judged.judge_up_to(store, base, self.txn, &self.action, &self.keys(), isolation).await? {
            // Carried by another writer's commit (cooperative commits): its attempts are
            // its own conditional creates until it learned that.
            Some(Ready::Settled(info)) if info.transaction_id == self.txn.id => {
                return Ok(Ready::Settled(CommitInfo { attempts: self.attempts.max(1), ..info }))
            }
            Some(done) => return Ok(done),
            None => {}
        }
        // A deleted branch's chain ends: nothing builds on its last version.
        if base.transactions.iter().any(|t| matches!(t.operation, Operation::DeleteBranch)) {
            let reason = IncompatibleReason::BranchDeleted;
            return Err(CommitError::Incompatible { winner_version: base.version, winner_operation: "delete_branch".into(), reason });
        }
        if let Some(expected) = self.opts.expect_version.filter(|e| *e != base.version) {
            return Err(CommitError::VersionMoved { expected, latest: base.version });
        }
        if let (Some(scope), Some(_)) = (&self.judged.pending_rerun, self.merged) {
            // A merge's member re-runs where it is applied, after the branch's
            // transactions before it (whose rows the target's base does not hold).
            self.merge_rerun = Some(RerunScope::widen(self.merge_rerun.take(), scope.clone()));
            self.judged.pending_rerun = None;
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
            return Ok(Ready::Settled(CommitInfo::abandoned(base.version, self.txn, self.attempts.max(1), self.rerun_done, reason)));
        }
        Ok(Ready::Yes)
    }

    /// Whether this (announced, another writer's) transaction may be carried into a
    /// version built on `base`: not already committed, replayed or withdrawn, following
    /// every winner without a re-run, and changing something. Whatever else it meets is
    /// its owner's to meet: it is just not carried.
    ///
    /// Its keys are checked in the versions since its read version only: its owner
    /// checked the history up to its first base before it announced, so together they
    /// cover the chain (no history index is built).
    pub(crate) async fn ready_to_carry(&mut self, store: &TableStore, base: &Arc<Manifest>) -> bool {
        self.attempts += 1;
        let isolation = self.isolation(base);
        let judged = self.judged.judge_up_to(store, base, self.txn, &self.action, &self.keys(), isolation).await;
        matches!(judged, Ok(None))
            && self.judged.pending_rerun.is_none()
            && self.opts.expect_version.is_none()
            && self.action.no_change(false).is_none()
    }

    /// Its idempotency keys: its own, its job's.
    fn keys(&self) -> Vec<(&'a str, Retry)> {
        let own = self.opts.idempotency_key.as_deref().map(|k| (k, Retry::Transaction(self.txn.operation.kind())));
        own.into_iter().chain(self.job_key.map(|k| (k, Retry::Job))).collect()
    }

    /// How it may follow `earlier` (the members already in the version being built,
    /// `state` the version after them): as it is, after a re-run on what they changed,
    /// or not at all.
    pub(crate) fn follows(&self, state: &Manifest, earlier: &[Earlier]) -> Follows {
        // A merge's members are one branch's history, in its order: each follows the
        // ones before it as it did on the branch.
        if self.merged.is_some() {
            return Follows::Rebase;
        }
        let isolation = self.isolation(state);
        let mut scope = None;
        for (k, e) in earlier.iter().enumerate() {
            if e.key.is_some() && e.key == self.opts.idempotency_key {
                return Follows::Not { earlier: k, reason: None };
            }
            match conflict::resolve(
                &self.operation(),
                &self.txn.read_schema,
                isolation,
                Winner::new(&e.operation, &state.schema, e.added.clone()),
            ) {
                Resolution::Rebase => {}
                Resolution::Rerun(more) => scope = Some(RerunScope::widen(scope, more)),
                Resolution::Incompatible { reason } => return Follows::Not { earlier: k, reason: Some(reason) },
            }
        }
        scope.map_or(Follows::Rebase, Follows::Rerun)
    }

    /// Its next state on `state` (writing any segments and deletion vectors it needs).
    pub(crate) async fn apply(&mut self, store: &TableStore, env: &Env, state: &Manifest) -> Result<NextState, CommitError> {
        let cx = self.cx(store, env, env.clock.now());
        self.action.apply(&cx, state).await
    }

    /// As a merge's member: its next state on `state`, its operation there and whether
    /// it re-ran, the branch's fragments added earlier in the merge named by the ids
    /// `given` them (then those it adds are named in `given` too). `rewritten`: the
    /// fragments earlier members' re-runs wrote (rows of the target they rewrote); a
    /// member that re-runs on the target's changes re-runs on those too, where those
    /// rows now are.
    ///
    /// A fragment it names that stays untranslated, or is not in `state`, was rewritten:
    /// by an earlier member's re-run or restore in this merge, or by a compaction on the
    /// target since it was merged. The rows it names there by position moved, so it
    /// re-runs on the whole state, as a concurrent writer re-runs when a winner rewrote
    /// its rows.
    pub(crate) async fn apply_merged(
        &self,
        store: &TableStore,
        env: &Env,
        state: &Manifest,
        given: &mut HashMap<u64, u64>,
        rewritten: &mut Vec<std::ops::Range<u64>>,
    ) -> Result<(NextState, Operation, bool), CommitError> {
        let cx = self.cx(store, env, env.clock.now());
        let operation = Merged::translated(&self.operation(), given);
        let named = operation.named_fragments();
        let moved = named.iter().any(|id| foreign_to(state, *id)) || !all_in(store, state, &named).await?;
        let scope = match (&self.merge_rerun, moved) {
            (_, true) => Some(RerunScope::Everything),
            (Some(scope), false) if rewritten.is_empty() => Some(scope.clone()),
            (Some(scope), false) => Some(RerunScope::widen(Some(scope.clone()), RerunScope::Fragments(rewritten.clone()))),
            (None, false) => None,
        };
        let mut translated = Action::new(operation);
        if let Some(scope) = &scope {
            translated.rerun(&cx, state, scope).await?;
        }
        let next = translated.apply(&cx, state).await?;
        let operation = translated.operation();
        // Fragments take ids in the order the operation lists them; a re-run's own
        // (rows of the target's) are among them, so the branch's are found by row id.
        if let Some(merged) = self.merged {
            for (id, f) in (state.next_fragment_id..).zip(operation.added_fragments()) {
                match merged.born.iter().find(|(_, rows)| f.first_row_id == Some(*rows)) {
                    Some((branch_id, _)) => _ = given.insert(*branch_id, id),
                    None => rewritten.push(id..id + 1),
                }
            }
        }
        Ok((next, operation, scope.is_some()))
    }

    /// Its next state on `state` after re-running `scope` there (a job member after
    /// earlier members that changed rows it depends on), and its operation as re-run.
    /// The re-run is done on a copy: the member stays as judged against committed
    /// winners, for another attempt on another base. (Files the copy writes are left
    /// for cleanup if the attempt loses.)
    pub(crate) async fn apply_rerun(
        &self,
        store: &TableStore,
        env: &Env,
        state: &Manifest,
        scope: &RerunScope,
    ) -> Result<(NextState, Operation), CommitError> {
        let cx = self.cx(store, env, env.clock.now());
        let mut copy = Action::new(self.operation());
        copy.rerun(&cx, state, scope).await?;
        let next = copy.apply(&cx, state).await?;
        Ok((next, copy.operation()))
    }

    /// Its record in the version that commits it, as `operation` (itself, or as re-run
    /// after earlier members: `rerun`).
    pub(crate) fn record(&self, operation: Operation, rows_deleted: u64, rerun: bool) -> TransactionRecord {
        TransactionRecord {
            id: self.txn.id,
            read_version: Some(self.txn.read_version),
            operation,
            attempts: self.attempts,
            rebased_over: self.judged.rebased_over.clone(),
            rerun: self.rerun_done || rerun,
            rows_deleted,
            idempotency_key: self.opts.idempotency_key.clone(),
            job_idempotency_key: self.job_key.map(str::to_string),
            carried_by: None,
            merged_from: self.merged.map(|m| m.origin.clone()),
            multi: self.multi.clone(),
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
    /// A merge's member: the branch's chain, whose transactions merged before are its
    /// own history (not winners).
    merging: Option<Uuid>,
}

impl Judged {
    fn new(txn: &PreparedTransaction, merging: Option<Uuid>) -> Self {
        Judged { up_to: txn.read_version, next_id: txn.read_next_fragment_id, rebased_over: Vec::new(), pending_rerun: None, merging }
    }

    /// Judges every winner up to `base` with the pure conflict rules. `Some`: the
    /// transaction is already committed, or one of its `keys` is taken: report that.
    async fn judge_up_to(
        &mut self,
        store: &TableStore,
        base: &Arc<Manifest>,
        txn: &PreparedTransaction,
        action: &Action,
        keys: &[(&str, Retry)],
        isolation: IsolationLevel,
    ) -> Result<Option<Ready>, CommitError> {
        // The operation as re-runs have extended it (they happen after judging).
        let ours = action.operation();
        for v in self.up_to + 1..=base.version {
            let winner = if v == base.version { base.clone() } else { read_existing(store, v).await? };
            if let Some(ours) = winner.transactions.iter().find(|t| t.id == txn.id) {
                return Ok(Some(Ready::Settled(CommitInfo::of(&winner, ours))));
            }
            if winner
                .transactions
                .iter()
                .any(|t| matches!(&t.operation, Operation::Withdraw { transaction_id } if *transaction_id == txn.id))
            {
                return Ok(Some(Ready::Withdrawn(v)));
            }
            for (key, retry) in keys {
                if let Some(found) = keys::in_version(&winner, key, *retry)? {
                    return Ok(Some(Ready::of(found)));
                }
            }
            let added = self.next_id..winner.next_fragment_id.max(self.next_id);
            self.next_id = added.end;
            // Each transaction of a shared version is a winner of its own. Judged against
            // the operation as re-runs have extended it: a winner touching rows a re-run
            // added is as much a conflict as one touching the original rows.
            let own = |t: &&TransactionRecord| self.merging.is_some() && t.merged_from.as_ref().map(|m| m.chain) == self.merging;
            let schema = match self.merging {
                Some(_) => with_branch_fields(&winner.schema, &txn.read_schema),
                None => winner.schema.clone(),
            };
            for theirs in winner.transactions.iter().filter(|t| !own(t)) {
                match conflict::resolve(&ours, &txn.read_schema, isolation, Winner::new(&theirs.operation, &schema, added.clone())) {
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

/// A winner's schema (`theirs`, of the target) as a merge's member (read on the branch as
/// `ours`) meets it: with the columns and struct fields the branch added, which no
/// winner on the target knew of, grafted in. Those are the ids `theirs` lacks that its
/// chain never gave: of another block, or at or above its counter. (An id it gave and
/// lacks, it dropped: the rules see that.)
fn with_branch_fields(theirs: &Schema, ours: &Schema) -> Schema {
    fn graft(into: &mut Vec<Field>, from: &[Field], never_given: &dyn Fn(u32) -> bool) {
        for f in from {
            match into.iter_mut().find(|g| g.id == f.id) {
                Some(g) => {
                    if let (ColumnType::Struct(children), ColumnType::Struct(added)) = (&mut g.column_type, &f.column_type) {
                        graft(children, added, never_given);
                    }
                }
                None if never_given(f.id) => into.push(f.clone()),
                None => {}
            }
        }
    }
    let mut schema = theirs.clone();
    let next = theirs.next_field_id;
    graft(&mut schema.fields, &ours.fields, &|id| field_id_block_end(id) != field_id_block_end(next) || id >= next);
    schema
}

/// Whether every fragment of `ids` is in `state`.
async fn all_in(store: &TableStore, state: &Manifest, ids: &[u64]) -> Result<bool, CommitError> {
    let mut wanted: Vec<u64> = ids.to_vec();
    wanted.sort_unstable();
    wanted.dedup();
    if wanted.is_empty() {
        return Ok(true);
    }
    let scope = RerunScope::Fragments(wanted.iter().map(|id| *id..id + 1).collect());
    Ok(fragments_in_scope(store, state, &scope).await?.len() == wanted.len())
}

/// A version at or below the latest: missing means vacuum removed it.
pub(crate) async fn read_existing(store: &TableStore, version: u64) -> Result<Arc<Manifest>, CommitError> {
    store.read_manifest(version).await?.ok_or(CommitError::HistoryRemoved { version })
}

/// Whether fragment `id` is of another chain's block than `state`'s (the main chain's
/// ids lie below [`MAIN_ROW_IDS`], a branch's in its block of [`ROW_ID_BLOCK`]).
fn foreign_to(state: &Manifest, id: u64) -> bool {
    let block = |i: u64| i.checked_sub(MAIN_ROW_IDS).map(|above| above / ROW_ID_BLOCK);
    block(id).is_some() && block(id) != block(state.next_fragment_id)
}

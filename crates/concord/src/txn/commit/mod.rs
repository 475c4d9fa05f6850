//! The commit loop (FORMAT.md §8), for one transaction or several sharing a version:
//! a driver that performs, round after round, the steps the planner (`plan.rs`, pure)
//! decides from the commit's memory (`memory.rs`). Each round reads as §8's steps:
//!
//! 1. Judge, 2. Newcomer, 3. List, 4. Wait, 5. Carry, 6. Read on, 7. Build,
//! 8. Create and settle, 9. Learn, 10. Budget, 11. Pause.
//!
//! A withdrawal (cooperative commits) runs through the same rounds, the planner
//! skipping the steps it does not take. The loop knows no operation: each one's logic
//! is in `txn/ops` (an `Action` each member holds); it knows no store: creates go through the
//! coordinator (`settle.rs`).
//!
//! Invariants: nothing of a transaction is visible unless its id is in a version; a
//! version is created only on the base every member (and every carried transaction)
//! was judged against up to; retries are bounded by count and time, per member.

mod memory;
mod plan;
mod reads;
pub(crate) mod undo;

use std::sync::Arc;

use uuid::Uuid;

use self::memory::{Announcing, Memory};
use self::plan::{Facts, Step, PAUSE_READ_ON};
use self::reads::{look_up_latest, read_on, start_base};
use super::build::Building;
use super::cooperative::announce::{self, Announced};
use super::cooperative::carry::{self, withdraw_record};
use super::cooperative::line::CarryFrom;
use super::cooperative::{self as coop, unsettled};
use super::handle::Writer;
use super::member::{Follows, Member, Merged, Ready};
use super::multi::Role;
use super::ops::NextState;
use super::settle::{create_and_settle, Attempt, Create};
use super::{CommitInfo, CommitOptions, PreparedTransaction};
use crate::error::{CommitError, ErrorKind, StorageCause};
use crate::format::manifest::{Manifest, MultiRef};

/// How the members of a batch share their fate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Sharing {
    /// A group commit: each member commits or fails on its own; a member that cannot
    /// follow the others in one version without a re-run waits for the next version.
    Group,
    /// A job commit: all members in one version, or none, each re-run where its rule
    /// needs it on what the members before it changed.
    Together,
}

/// How one member of a group commit ended.
#[derive(Debug)]
pub(crate) enum GroupOutcome {
    Committed(CommitInfo),
    Failed(CommitError),
    /// Not committed, to be committed in a later version (it could not share this one,
    /// or an error of the whole batch was reported to another member).
    Deferred,
}

/// Commits `txn` alone. On error nothing of `txn` is visible.
pub(crate) async fn commit(w: Writer<'_>, txn: &PreparedTransaction, opts: &CommitOptions) -> Result<CommitInfo, CommitError> {
    // A member not in the version made (nothing else can share it) commits again.
    loop {
        if let Some(Some(outcome)) = run(w, &[(txn, opts)], Sharing::Group, None).await?.members.pop() {
            return outcome;
        }
    }
}

/// Commits `txn` alone in `role` (an undo of an aborted multi-table transaction, which
/// builds on that transaction's version).
pub(crate) async fn commit_as(
    w: Writer<'_>,
    txn: &PreparedTransaction,
    opts: &CommitOptions,
    role: Role,
) -> Result<CommitInfo, CommitError> {
    loop {
        let members = vec![Member::new(txn, opts, None)];
        if let Some(Some(outcome)) = run_members(w, members, Sharing::Group, role.clone()).await?.members.pop() {
            return outcome;
        }
    }
}

/// Commits `batch` as a job (all in one version, or none) holding one table's part of
/// the multi-table transaction `multi` (FORMAT.md §18): each record names it.
pub(crate) async fn commit_part(
    w: Writer<'_>,
    batch: &[(&PreparedTransaction, &CommitOptions)],
    multi: &MultiRef,
    job_key: Option<&str>,
) -> Result<Vec<CommitInfo>, CommitError> {
    loop {
        let members = batch.iter().map(|(txn, opts)| Member::in_multi(txn, opts, job_key, multi.clone())).collect();
        let role = Role { mine: Some(multi.clone()), undoing: None };
        let finished = run_members(w, members, Sharing::Together, role).await?;
        if let Some(replayed) = finished.job_replayed {
            return Ok(replayed);
        }
        if let Some(infos) = finished.members.into_iter().collect::<Option<Result<Vec<_>, _>>>() {
            return infos;
        }
    }
}

/// Commits `batch` (in this order) in one version, each member on its own. `Err` is
/// an error of the whole batch: the caller reports it to one member and commits the
/// others again (a transaction's id makes that safe: one already committed finds itself
/// in the history).
pub(crate) async fn commit_group(
    w: Writer<'_>,
    batch: &[(&PreparedTransaction, &CommitOptions)],
) -> Result<Vec<GroupOutcome>, CommitError> {
    let finished = run(w, batch, Sharing::Group, None).await?;
    Ok(finished
        .members
        .into_iter()
        .map(|outcome| match outcome {
            Some(Ok(info)) => GroupOutcome::Committed(info),
            Some(Err(e)) => GroupOutcome::Failed(e),
            None => GroupOutcome::Deferred,
        })
        .collect())
}

/// Commits `batch` as a job: all in one version, in this order, or none; with the job's
/// idempotency key, a job found committed under it is reported as it was (replays). A
/// member's own failure is returned as [`CommitError::JobMember`].
pub(crate) async fn commit_job(
    w: Writer<'_>,
    batch: &[(&PreparedTransaction, &CommitOptions)],
    job_key: Option<&str>,
) -> Result<Vec<CommitInfo>, CommitError> {
    loop {
        let finished = run(w, batch, Sharing::Together, job_key).await?;
        if let Some(replayed) = finished.job_replayed {
            return Ok(replayed);
        }
        // Every member settled (a job fails as a whole); one left open is committed again.
        if let Some(infos) = finished.members.into_iter().collect::<Option<Result<Vec<_>, _>>>() {
            return infos;
        }
    }
}

/// Commits a branch merge (FORMAT.md §17): the branch's transactions `batch`, replayed
/// in their order as one version, all or none. Each is judged against the target's
/// winners since the branch started (the branch's own transactions merged before are
/// not winners) and follows the ones before it as it did on the branch.
pub(crate) async fn commit_merge(
    w: Writer<'_>,
    batch: &[(PreparedTransaction, CommitOptions, Merged)],
) -> Result<Vec<CommitInfo>, CommitError> {
    loop {
        let members = batch.iter().map(|(txn, opts, merged)| Member::merging(txn, opts, merged)).collect();
        let finished = run_members(w, members, Sharing::Together, Role::default()).await?;
        if let Some(infos) = finished.members.into_iter().collect::<Option<Result<Vec<_>, _>>>() {
            return infos;
        }
    }
}

/// How a batch ended: each member's outcome (`None`: not committed, left for a later
/// version), or, for a job, the job as found committed under its key.
struct Finished {
    members: Vec<Option<Result<CommitInfo, CommitError>>>,
    job_replayed: Option<Vec<CommitInfo>>,
}

/// Runs the rounds for `batch`, then settles an announced transaction's outcome by the
/// chain and retires the announcements this writer is to retire.
async fn run(
    w: Writer<'_>,
    batch: &[(&PreparedTransaction, &CommitOptions)],
    sharing: Sharing,
    job_key: Option<&str>,
) -> Result<Finished, CommitError> {
    let members: Vec<Member<'_>> = batch.iter().map(|(txn, opts)| Member::new(txn, opts, job_key)).collect();
    let carriable = sharing == Sharing::Group && matches!(batch, [(txn, opts)] if coop::carriable(txn, opts));
    run_members_announcing(w, members, sharing, carriable, Role::default()).await
}

/// Runs the rounds for `members` (none announced), in `role`.
async fn run_members(w: Writer<'_>, members: Vec<Member<'_>>, sharing: Sharing, role: Role) -> Result<Finished, CommitError> {
    run_members_announcing(w, members, sharing, false, role).await
}

/// Runs the rounds for `members`, the one announcing itself if `announces`.
async fn run_members_announcing(
    w: Writer<'_>,
    members: Vec<Member<'_>>,
    sharing: Sharing,
    announces: bool,
    role: Role,
) -> Result<Finished, CommitError> {
    let started = w.env.clock.monotonic();
    let read_version = members.iter().map(|m| m.txn.read_version).max().unwrap_or(0);
    let base = match start_base(w, read_version).await {
        Ok(base) => base,
        Err(e) => return Err(e),
    };
    let latency = w.memory.attempt_latency().unwrap_or(members[0].opts.retry.min_backoff);
    let mut memory = Memory::new(sharing, started, base, w.env.clock.now(), latency);
    memory.announces = announces;
    // A multi-table transaction's part, or an undo, holds no one else's transaction.
    memory.solitary = role.mine.is_some() || role.undoing.is_some();
    let own = members.iter().map(|m| m.txn.id).collect();
    let mut driver = Driver { w, own, members, memory, job_replayed: None, role };
    let result = driver.rounds().await;
    driver.settle_announced(result).await
}

/// What a step leads to.
enum Flow {
    /// The next step of this round.
    Next,
    /// The next round.
    Again,
    /// The commit is over: every member's outcome is set.
    Done,
}

/// Goes on as a step's [`Flow`] says: `Again`, the next round; `Done`, the end.
macro_rules! flow {
    ($flow:expr) => {
        match $flow {
            Flow::Next => {}
            Flow::Again => continue,
            Flow::Done => return Ok(()),
        }
    };
}

/// Performs the step the planner's `$plan` decides, and goes on as it says.
macro_rules! step {
    ($driver:ident, $($plan:tt)+) => {{
        let step = $driver.memory.$($plan)+;
        flow!($driver.perform(step).await?)
    }};
}

struct Driver<'w, 'b> {
    w: Writer<'w>,
    /// The batch's transaction ids (an includer skips its own announcements).
    own: Vec<Uuid>,
    members: Vec<Member<'b>>,
    memory: Memory,
    job_replayed: Option<Vec<CommitInfo>>,
    /// What the commit is to multi-table transactions it meets.
    role: Role,
}

impl Driver<'_, '_> {
    /// The rounds, one step of FORMAT.md §8 a line.
    async fn rounds(&mut self) -> Result<(), CommitError> {
        loop {
            step!(self, judge()); // 1. Judge
            step!(self, start()); // 2. Newcomer
            let (f, u) = (self.facts(), uniform(self.w));
            step!(self, newcomer(&self.members, &f, u));
            let f = self.facts();
            step!(self, list(&f)); // 3. List
            let (f, u) = (self.facts(), uniform(self.w));
            step!(self, wait(&self.members, &f, u)); // 4. Wait
            step!(self, carry()); // 5. Carry
            let f = self.facts();
            step!(self, read_on(&f)); // 6. Read on
            let reads_while_creating = self.w.store.capabilities().read_while_creating;
            step!(self, build(reads_while_creating)); // 7-8. Build, create and settle
            flow!(self.learn().await?); // 9. Learn
            let now = self.w.env.clock.monotonic();
            step!(self, budget(&self.members, now)); // 10. Budget
            step!(self, rest()); // 11. Pause
        }
    }

    /// What the writer knows now.
    fn facts(&self) -> Facts {
        let now = self.w.env.clock.monotonic();
        Facts {
            now,
            wall: self.w.env.clock.now(),
            lost_recently: self.w.memory.recent_contention(now).is_some(),
            saw_line_recently: self.w.memory.recent_announcements(now),
            knows_line: self.w.memory.line_waits(),
            move_interval: self.w.memory.move_interval(),
        }
    }

    async fn perform(&mut self, step: Step) -> Result<Flow, CommitError> {
        let (w, env) = (self.w, self.w.env);
        match step {
            Step::Skip => {}
            Step::Judge => return self.judge().await,
            Step::JudgeOwner => return self.judge_owner().await,
            Step::LearnStart => w.memory.saw_start(&self.memory.base, env.clock.now(), env.clock.monotonic()),
            Step::Announce { deadline } => {
                let announce_started = env.clock.monotonic();
                let name = announce::announce(w, self.members[0].txn, self.members[0].opts, deadline).await;
                // A new handle has timed no request of this store yet: the announcement's
                // round trip sets the pace of its wait (not the retry policy's minimum,
                // which would let it take over from the writers ahead at once).
                if w.memory.attempt_latency().is_none() {
                    self.memory.latency = self.memory.latency.max(env.clock.monotonic() - announce_started);
                }
                self.memory.announcement = Some(Announcing { name, attempts: 0, marked: false });
            }
            Step::Pause(pause) => env.clock.sleep(pause).await,
            Step::List { names_only } => {
                let listing = if names_only { announce::list_names(w.store).await } else { announce::list(w.store).await };
                self.memory.line.listed_before_build(listing.ok(), names_only);
            }
            Step::Wait { pause } => return Ok(self.wait(pause).await),
            Step::Withdraw { member, in_line } => return self.withdraw(member, in_line).await,
            Step::Carry(from) => self.memory.carry = self.read_carried(from).await,
            Step::ReadOn { ahead } => {
                if let Some(newer) = read_on(w, &self.memory.base, ahead).await {
                    self.memory.moved_to(newer, env.clock.now());
                    self.memory.line.keep(self.memory.carry.take());
                    return Ok(Flow::Again);
                }
            }
            Step::Build { speculate, look_ahead } => return self.build(speculate, look_ahead).await,
            Step::BuildWithdrawal => return self.build_withdrawal().await,
            Step::LookUp => {
                let latest = look_up_latest(w, self.memory.base.version).await?;
                self.memory.moved_to(latest, env.clock.now());
            }
            Step::GiveUp(out) => {
                let elapsed_ms = self.memory.elapsed.as_millis() as u64;
                for i in out {
                    let member = &self.members[i];
                    let e = CommitError::TooMuchContention { attempts: member.attempts, elapsed_ms, last_version: self.memory.created };
                    self.members[i].outcome = Some(fail(self.memory.sharing, member, e)?);
                }
                if self.members.iter().all(|m| m.outcome.is_some()) {
                    return Ok(Flow::Done);
                }
            }
            Step::Fail(e) => return Err(e),
            Step::Unsettled => return Err(self.unsettled()),
            Step::Rest { pause, announce, list, read_on } => self.rest(pause, announce, list, read_on).await,
        }
        Ok(Flow::Next)
    }

    /// Step 1, judge: every open member judges the winners up to the base, checks its
    /// expected version, re-runs what they changed, and settles if it can.
    async fn judge(&mut self) -> Result<Flow, CommitError> {
        let (w, sharing) = (self.w, self.memory.sharing);
        self.settle_base().await?;
        for member in self.members.iter_mut().filter(|m| m.outcome.is_none()) {
            member.outcome = match member.ready_on(w.store, w.env, &self.memory.base).await {
                Ok(Ready::Yes) => None,
                Ok(Ready::Settled(info)) => Some(Ok(info)),
                Ok(Ready::Withdrawn(version)) => Some(Err(withdrawn(member, self.memory.started, w, version))),
                // The whole job committed already: so did every member.
                Ok(Ready::JobDone(infos)) => {
                    self.job_replayed = Some(infos);
                    return Ok(Flow::Done);
                }
                Err(e) => Some(fail(sharing, member, e)?),
            }
        }
        Ok(if self.members.iter().all(|m| m.outcome.is_some()) { Flow::Done } else { Flow::Next })
    }

    /// Step 1, judge (first, withdrawing too): a base that names a multi-table
    /// transaction not decided committed is waited for or undone (FORMAT.md §18), and
    /// the base moves on. Invariant: no version is built on such a base but its undo.
    async fn settle_base(&mut self) -> Result<(), CommitError> {
        let w = self.w;
        let first = self.members.iter().find(|m| m.outcome.is_none()).unwrap_or(&self.members[0]);
        let give_up = self.memory.started + first.opts.retry.timeout;
        while undo::settle(w, &self.memory.base, &self.role, give_up).await?.is_some() {
            let latest = look_up_latest(w, self.memory.base.version).await?;
            self.memory.moved_to(latest, w.env.clock.now());
        }
        Ok(())
    }

    /// Step 1, judge (withdrawing): carried already, or withdrawn already? A failure the chain
    /// decides is the outcome (an includer judges it the same way: not carried); a
    /// storage error is judged again, within the withdrawal's budget.
    async fn judge_owner(&mut self) -> Result<Flow, CommitError> {
        self.settle_base().await?;
        let (w, started) = (self.w, self.memory.started);
        let index = self.memory.withdrawal.as_ref().map_or(0, |w| w.member);
        let member = &mut self.members[index];
        member.outcome = match member.ready_on(w.store, w.env, &self.memory.base).await {
            Ok(Ready::Settled(info)) => Some(Ok(CommitInfo { attempts: member.attempts.max(1), ..info })),
            Ok(Ready::Withdrawn(version)) => Some(Err(withdrawn(member, started, w, version))),
            Ok(Ready::Yes | Ready::JobDone(_)) => return Ok(Flow::Next),
            Err(e) if !matches!(e.kind(), ErrorKind::Storage) => Some(Err(e)),
            Err(_) => match self.memory.owner_unjudged(w.env.clock.monotonic(), uniform(w)) {
                Step::Pause(pause) => {
                    w.env.clock.sleep(pause).await;
                    return Ok(Flow::Again);
                }
                _ => return Err(self.unsettled()),
            },
        };
        Ok(Flow::Done)
    }

    /// The withdrawal did not reach the chain within its budget: the outcome is unknown.
    fn unsettled(&self) -> CommitError {
        let member = &self.members[self.memory.withdrawal.as_ref().map_or(0, |w| w.member)];
        let name = self.memory.announced().unwrap_or_default();
        unsettled(self.w.store, name, self.memory.base.version + 1, member.txn.id)
    }

    /// Step 4, wait: one pause, then a read of the version after the base; the base moves to
    /// it if it is there.
    async fn wait(&mut self, pause: std::time::Duration) -> Flow {
        let (w, env) = (self.w, self.w.env);
        w.memory.saw_announcements(env.clock.monotonic());
        env.clock.sleep(pause).await;
        let read_started = env.clock.monotonic();
        let next = w.store.read_manifest_now(self.memory.base.version + 1).await.ok().flatten();
        // A read's round trip is the store's latency too (a writer carried every time
        // never creates).
        self.memory.latency = env.clock.monotonic() - read_started;
        w.memory.saw_attempt(self.memory.latency);
        let now = env.clock.monotonic();
        if let Some(next) = &next {
            w.memory.saw_newest(next, now);
            w.memory.saw_move(now);
        }
        let own = self.memory.announced().unwrap_or_default().to_string();
        self.memory.line.read_next(next.as_deref(), &own, now);
        if let Some(next) = next {
            self.memory.moved_to(next, env.clock.now());
        }
        Flow::Again
    }

    /// Step 5, carry: the announcements listed (again, in full, if it waited since or listed
    /// names only), each read once per handle; or what it kept.
    async fn read_carried(&mut self, from: CarryFrom) -> Option<Announced> {
        let (listed, relist) = match from {
            CarryFrom::Kept(kept) => return Some(kept),
            CarryFrom::Listing { listed, relist } => (listed, relist),
        };
        let listed = if relist { announce::list(self.w.store).await.ok()? } else { listed };
        let listed = self.memory.line.to_read(listed);
        let announced = announce::read(self.w, &listed, &self.own).await.ok()?;
        if self.memory.line.read(&announced) {
            self.w.memory.saw_no_line();
        }
        Some(announced)
    }

    /// Step 7-8: build version base+1 (the open members, then what it carries), create it
    /// and settle the outcome; won, the commit is done.
    async fn build(&mut self, speculate: bool, look_ahead: u64) -> Result<Flow, CommitError> {
        let (w, env) = (self.w, self.w.env);
        for member in self.members.iter_mut().filter(|m| m.outcome.is_none()) {
            member.attempts += 1;
        }
        let Some((manifest, included)) = self.build_members().await? else { return Ok(Flow::Again) };
        let first = included[0];
        let retry = self.members[first].opts.retry;
        let create = Create {
            version: manifest.version,
            bytes: crate::encode::manifest(&manifest),
            transaction_id: self.members[first].txn.id,
            speculate,
            look_ahead,
        };
        let attempt_started = env.clock.monotonic();
        let outcome = create_and_settle(w.store, env, create, &retry, self.memory.started).await?;
        self.memory.latency = env.clock.monotonic() - attempt_started;
        w.memory.saw_attempt(self.memory.latency);
        self.memory.line.raced();
        self.memory.elapsed = env.clock.monotonic() - self.memory.started;
        self.memory.created = manifest.version;
        let attempts = self.members[0].attempts;
        if let Some(announced) = &mut self.memory.announcement {
            announced.attempts = attempts;
        }
        if !matches!(outcome, Attempt::Won) {
            self.memory.attempt = Some(outcome);
            return Ok(Flow::Next);
        }
        self.memory.won();
        let manifest = self.remember_created(manifest).await;
        self.memory.carried = self.memory.carry.as_ref().map(|c| c.carried_in(&manifest)).unwrap_or_default();
        for (k, i) in included.into_iter().enumerate() {
            self.members[i].outcome = Some(Ok(CommitInfo::of(&manifest, &manifest.transactions[k])));
        }
        Ok(Flow::Done)
    }

    /// Version `base + 1`: the open members applied to the base in turn, each that may
    /// follow the ones before it (a group defers the others to the next version; a job
    /// re-runs a member on what earlier members changed where its rule needs it, and
    /// fails if no serial order exists); then the announced transactions it carries.
    /// Returns the version and the members it holds, `None` if it holds none.
    async fn build_members(&mut self) -> Result<Option<(Manifest, Vec<usize>)>, CommitError> {
        let (w, sharing) = (self.w, self.memory.sharing);
        let mut building = Building::new(w.env, &self.memory.base);
        let mut included = Vec::new();
        // A merge: the ids the version gives the branch's fragments, by the branch's.
        let (mut given, mut rewritten) = (std::collections::HashMap::new(), Vec::new());
        for (i, member) in self.members.iter_mut().enumerate().filter(|(_, m)| m.outcome.is_none()) {
            let applied = match (member.follows(building.state(), building.earlier()), sharing) {
                (Follows::Rebase, _) if member.merged.is_some() => {
                    member.apply_merged(w.store, w.env, building.state(), &mut given, &mut rewritten).await
                }
                (Follows::Rebase, _) => member.apply(w.store, w.env, building.state()).await.map(|next| (next, member.operation(), false)),
                (Follows::Rerun(scope), Sharing::Together) => {
                    member.apply_rerun(w.store, w.env, building.state(), &scope).await.map(|(next, operation)| (next, operation, true))
                }
                (Follows::Rerun(_) | Follows::Not { .. }, Sharing::Group) => continue,
                (Follows::Not { earlier: k, reason }, Sharing::Together) => {
                    let source = CommitError::MembersIncompatible { earlier: building.earlier()[k].id, reason };
                    return Err(CommitError::JobMember { transaction_id: member.txn.id, source: Box::new(source) });
                }
            };
            match applied {
                Ok((next, operation, rerun)) => {
                    let record = member.record(operation, next.rows_deleted, rerun);
                    building.push(record, member.opts.idempotency_key.clone(), next);
                    included.push(i);
                }
                Err(e) => member.outcome = Some(fail(sharing, member, e)?),
            }
        }
        if let (Some(announced), Some(&first)) = (&self.memory.carry, included.first()) {
            carry::carry(w.store, w.env, &mut building, announced, self.members[first].txn.id).await?;
        }
        Ok(building.finish().map(|manifest| (manifest, included)))
    }

    /// 7-8. (withdrawing) Build and create a version holding the withdrawal; won, the
    /// transaction failed (too much contention).
    async fn build_withdrawal(&mut self) -> Result<Flow, CommitError> {
        let (w, env) = (self.w, self.w.env);
        let Some(withdrawal) = &mut self.memory.withdrawal else { return Ok(Flow::Next) };
        let member = &self.members[withdrawal.member];
        let mut building = Building::new(env, &self.memory.base);
        let record = withdraw_record(env, &self.memory.base, member.txn.id, None);
        let transaction_id = record.id;
        building.push(record, None, NextState::unchanged(&self.memory.base));
        let manifest = building.finish().expect("it holds the withdrawal");
        withdrawal.attempts += 1;
        let (retry, started) = (withdrawal.retry, withdrawal.started);
        let attempt_started = env.clock.monotonic();
        let create = Create {
            version: manifest.version,
            bytes: crate::encode::manifest(&manifest),
            transaction_id,
            speculate: false,
            look_ahead: 0,
        };
        let outcome = create_and_settle(w.store, env, create, &retry, started).await?;
        self.memory.latency = env.clock.monotonic() - attempt_started;
        if !matches!(outcome, Attempt::Won) {
            self.memory.attempt = Some(outcome);
            return Ok(Flow::Next);
        }
        let version = manifest.version;
        self.remember_created(manifest).await;
        let index = self.memory.withdrawal.as_ref().map_or(0, |w| w.member);
        let e = withdrawn(&self.members[index], self.memory.started, w, version);
        self.members[index].outcome = Some(Err(e));
        Ok(Flow::Done)
    }

    /// A version this writer created: cached, known as the newest, followed up by the
    /// coordinator.
    async fn remember_created(&self, manifest: Manifest) -> Arc<Manifest> {
        let version = manifest.version;
        let manifest = self.w.store.remember(manifest);
        self.w.memory.saw_newest(&manifest, self.w.env.clock.monotonic());
        self.w.store.after_commit(version).await;
        manifest
    }

    /// Step 9: learn from a lost or unwritten attempt: the holder becomes the base (looked up
    /// past it after several behind), or the same version is created again.
    async fn learn(&mut self) -> Result<Flow, CommitError> {
        let (w, env) = (self.w, self.w.env);
        let first = self.members.iter().position(|m| m.outcome.is_none()).unwrap_or(0);
        let retry = self.members[first].opts.retry;
        match self.memory.attempt.take() {
            None | Some(Attempt::Won) => {}
            Some(Attempt::Lost(holder)) => {
                w.memory.saw_newest(&holder, env.clock.monotonic());
                // A winner that carried others: writers wait in line for this table.
                if holder.carried_others() && self.memory.withdrawal.is_none() {
                    w.memory.saw_announcements(env.clock.monotonic());
                }
                let step = self.memory.lost(holder, &retry, &self.facts(), uniform(w));
                self.perform(step).await?;
                if self.memory.after_lost(&retry, &self.facts()) {
                    w.memory.saw_contention(env.clock.monotonic(), self.memory.latency);
                }
            }
            Some(Attempt::NotWritten(cause)) => {
                let step = self.memory.not_written(cause, &self.members[first], uniform(w));
                self.perform(step).await?;
            }
        }
        Ok(Flow::Next)
    }

    /// Step 4, 10: gives up on member `index`'s announced transaction: marks it withdrawn and
    /// goes on withdrawing (step 1 of the next round judges whether it was carried).
    async fn withdraw(&mut self, index: usize, in_line: bool) -> Result<Flow, CommitError> {
        let w = self.w;
        if in_line {
            w.memory.saw_announcements(w.env.clock.monotonic());
        }
        let Some(announced) = &mut self.memory.announcement else { return Ok(Flow::Next) };
        announced.marked = true;
        // Not marked (a storage error): the withdrawal then lands by the owner's own create.
        let _ = announce::mark_withdrawn(w.store, &announced.name).await;
        self.memory.withdraw(index, &self.members[index], w.env.clock.monotonic());
        Ok(Flow::Again)
    }

    /// Step 11, pause: sleeps `pause`; meanwhile announces, lists, reads on (see `plan.rs`).
    async fn rest(&mut self, pause: std::time::Duration, announce: Option<chrono::DateTime<chrono::Utc>>, list: bool, read_on: bool) {
        let (w, env) = (self.w, self.w.env);
        let (txn, opts) = (self.members[0].txn, self.members[0].opts);
        let announce = announce.map(|deadline| announce::announce(w, txn, opts, deadline));
        let list = list.then(|| announce::list(w.store));
        let base = self.memory.base.clone();
        let ((made, listed, newer), ()) = futures::join!(
            async {
                let made = match announce {
                    Some(announce) => Some(announce.await),
                    None => None,
                };
                let read = async {
                    if read_on {
                        self::read_on(w, &base, PAUSE_READ_ON).await
                    } else {
                        None
                    }
                };
                let listed = async {
                    match list {
                        Some(list) => list.await.ok(),
                        None => None,
                    }
                };
                let (listed, newer) = futures::join!(listed, read);
                (made, listed, newer)
            },
            env.clock.sleep(pause)
        );
        if let Some(name) = made {
            self.memory.announcement = Some(Announcing { name, attempts: self.members[0].attempts, marked: false });
        }
        if let Some(newer) = newer {
            self.memory.moved_to(newer, env.clock.now());
        }
        self.memory.line.listed(listed);
    }

    /// After the rounds: an announced transaction may be carried by another writer until
    /// its deadline, so it fails only where the chain decides that. An outcome the chain
    /// does not decide (a storage error; an unknown one, but a withdrawal's that did not
    /// settle) goes through a withdrawal, which lets the chain decide. Then the
    /// announcements this writer is to retire are removed: those its version carried,
    /// and its own, unless another writer's version carried it (that writer retires it).
    async fn settle_announced(mut self, result: Result<(), CommitError>) -> Result<Finished, CommitError> {
        let Some(name) = self.memory.announcement.as_ref().map(|a| a.name.clone()) else {
            announce::retire(self.w.store, &self.memory.carried, None).await;
            return result.map(|()| self.finished());
        };
        let undecided = |e: &CommitError| match e {
            CommitError::CommitStateUnknown { cause, .. } => !matches!(cause.source, StorageCause::WithdrawalUnsettled),
            e => matches!(e.kind(), ErrorKind::Storage),
        };
        let decided = match &result {
            Ok(()) => !matches!(self.members.as_slice(), [m] if matches!(&m.outcome, Some(Err(e)) if undecided(e))),
            Err(e) => !undecided(e),
        };
        let settled = if decided { result } else { self.withdraw_after(&name).await };
        let marked = self.memory.announcement.as_ref().is_some_and(|a| a.marked);
        let mut carried = std::mem::take(&mut self.memory.carried);
        // Its own too, unless another writer's version carried it (that writer retires it).
        if marked || !(settled.is_ok() && self.carried_elsewhere()) {
            carried.push(name.clone());
        }
        announce::retire(self.w.store, &carried, marked.then_some(name.as_str())).await;
        settled.map(|()| self.finished())
    }

    /// The lone announced transaction, undecided after its rounds: withdrawn from the
    /// latest version on, by a member judged afresh (its key already checked).
    async fn withdraw_after(&mut self, name: &str) -> Result<(), CommitError> {
        let (txn, opts) = (self.members[0].txn, self.members[0].opts);
        let mut member = Member::new(txn, opts, None);
        member.attempts = self.memory.announcement.as_ref().map_or(0, |a| a.attempts);
        member.keys_checked = true;
        self.members = vec![member];
        let Ok(base) = start_base(self.w, txn.read_version).await else {
            return Err(unsettled(self.w.store, name, txn.read_version + 1, txn.id));
        };
        self.memory.base = base;
        self.withdraw(0, false).await?;
        self.rounds().await
    }

    /// Whether a lone transaction committed in a version that carried it (known from
    /// the versions this handle holds).
    fn carried_elsewhere(&self) -> bool {
        let [Member { outcome: Some(Ok(info)), .. }] = self.members.as_slice() else { return false };
        let Some(version) = self.w.store.cached_manifest(info.version) else { return false };
        version.transactions.iter().any(|t| t.id == info.transaction_id && t.carried_by.is_some())
    }

    fn finished(self) -> Finished {
        Finished { members: self.members.into_iter().map(|m| m.outcome).collect(), job_replayed: self.job_replayed }
    }
}

/// `uniform(n)`: a value in `0..=n` from the writer's random source.
fn uniform(w: Writer<'_>) -> impl FnOnce(u64) -> u64 + '_ {
    move |max| w.env.random_below_or_eq(max)
}

/// The failure of a transaction whose withdrawal version `version` recorded.
fn withdrawn(member: &Member<'_>, started: std::time::Duration, w: Writer<'_>, version: u64) -> CommitError {
    let elapsed_ms = (w.env.clock.monotonic() - started).as_millis() as u64;
    CommitError::TooMuchContention { attempts: member.attempts, elapsed_ms, last_version: version }
}

/// A member's failure: its own in a group, the job's in a job commit.
fn fail(sharing: Sharing, member: &Member<'_>, error: CommitError) -> Result<Result<CommitInfo, CommitError>, CommitError> {
    match sharing {
        Sharing::Group => Ok(Err(error)),
        Sharing::Together => Err(CommitError::JobMember { transaction_id: member.txn.id, source: Box::new(error) }),
    }
}

//! The commit loop, for one transaction or several sharing a version. Each attempt:
//! every member judges the winners since its read version (pure `conflict::resolve`)
//! and re-runs what they changed; the members that still change something are applied
//! in turn to the newest version, and the result is created if absent (`settle`).
//! Retries are bounded by count and time, per member. The loop knows no operation:
//! each one's logic is its `Action` (see `member.rs`).
//!
//! Requests (FORMAT.md §8): the first attempt builds on the newest version the handle
//! knows (no lookup when that knowledge is fresh); a lost attempt builds on the version
//! that beat it, read once while settling: no LIST, no second read.

use std::ops::Range;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};

use super::member::{read_existing, Earlier, Follows, Member, Ready};
use super::settle::{create_and_settle, Attempt};
use super::{CommitInfo, CommitOptions, PreparedTransaction};
use crate::env::Env;
use crate::error::CommitError;
use crate::format::manifest::{Manifest, FORMAT_VERSION};
use crate::storage::TableStore;

/// How the members of a batch share their fate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Sharing<'a> {
    /// A group commit: each member commits or fails on its own; a member that cannot
    /// follow the others in one version without a re-run waits for the next version.
    Group,
    /// A job commit: all members in one version, or none, each re-run where its rule
    /// needs it on what the members before it changed; with the job's idempotency key.
    Together { job_key: Option<&'a str> },
}

/// How one member of a group ended.
#[derive(Debug)]
pub(crate) enum Outcome {
    Committed(CommitInfo),
    Failed(CommitError),
    /// Not committed, to be committed in a later version (it could not share this one,
    /// or an error of the whole batch was reported to another member).
    Deferred,
    /// Its job's idempotency key is in this version: the job committed there.
    JobDone(u64),
}

/// Commits `txn` alone; see the module docs. On error nothing of `txn` is visible.
pub(crate) async fn commit(
    store: &TableStore,
    env: &Env,
    txn: &PreparedTransaction,
    opts: &CommitOptions,
) -> Result<CommitInfo, CommitError> {
    let mut outcomes = commit_batch(store, env, &[(txn, opts)], Sharing::Group).await?;
    match outcomes.pop() {
        Some(Outcome::Committed(info)) => Ok(info),
        Some(Outcome::Failed(e)) => Err(e),
        Some(Outcome::Deferred | Outcome::JobDone(_)) | None => unreachable!("a batch of one without a job commits or fails"),
    }
}

/// Commits `batch` (in this order) in one version; see [`Sharing`]. `Err` is an error
/// of the whole batch: for a group, the caller reports it to one member and commits
/// the others again (a transaction's id makes that safe: one already committed finds
/// itself in the history); for a job, it is the job's. With `Together`, a member's
/// own failure is returned as [`CommitError::JobMember`].
pub(crate) async fn commit_batch(
    store: &TableStore,
    env: &Env,
    batch: &[(&PreparedTransaction, &CommitOptions)],
    sharing: Sharing<'_>,
) -> Result<Vec<Outcome>, CommitError> {
    let started = env.clock.monotonic();
    let job_key = match sharing {
        Sharing::Together { job_key } => job_key,
        Sharing::Group => None,
    };
    let mut members: Vec<Member<'_>> = batch.iter().map(|(txn, opts)| Member::new(txn, opts, job_key)).collect();
    let mut outcomes: Vec<Option<Outcome>> = batch.iter().map(|_| None).collect();
    let read_version = batch.iter().map(|(txn, _)| txn.read_version).max().unwrap_or(0);
    let mut base = start_base(store, env, read_version).await?;
    // When this writer learned of `base` (wall clock, as version timestamps are).
    let mut base_learned = env.clock.now();
    let mut contention = Contention::default();
    loop {
        for (i, member) in members.iter_mut().enumerate() {
            if outcomes[i].is_some() {
                continue;
            }
            match member.ready_on(store, env, &base).await {
                Ok(Ready::Yes) => {}
                Ok(Ready::Settled(info)) => outcomes[i] = Some(Outcome::Committed(info)),
                // The whole job committed already: so did every member.
                Ok(Ready::JobDone(version)) => return Ok(batch.iter().map(|_| Outcome::JobDone(version)).collect()),
                Err(e) => outcomes[i] = Some(fail(sharing, member, e)?),
            }
        }
        if outcomes.iter().all(Option::is_some) {
            return Ok(outcomes.into_iter().flatten().collect());
        }
        if contention.attempts == 0 {
            // A newcomer to a contended table lets the writers already waiting go first.
            if let Some(latency) = store.commits.recent_contention(env.clock.monotonic()) {
                let retry = &members[first_open(&outcomes)].opts.retry;
                env.clock.sleep(retry.contention_backoff(0, latency, |max| env.random_below_or_eq(max))).await;
            }
        }
        let (manifest, included) = build(store, env, &mut members, &mut outcomes, &base, sharing).await?;
        let Some(&(first, _)) = included.first() else { continue };
        let version = manifest.version;
        let bytes = crate::encode::manifest(&manifest);
        let retry = members[first].opts.retry;
        let attempt_started = env.clock.monotonic();
        let speculate = contention.lost_races + contention.behind >= SPECULATE_AFTER && store.capabilities().read_while_creating;
        let outcome = create_and_settle(store, env, version, bytes, members[first].txn.id, &retry, started, speculate).await?;
        let latency = env.clock.monotonic() - attempt_started;
        // Measured once: the checks below agree on whether another attempt is allowed.
        let elapsed = env.clock.monotonic() - started;
        contention.attempts += 1;
        let pause = match outcome {
            Attempt::Won => {
                let manifest = store.remember(manifest);
                store.commits.saw_newest(&manifest, env.clock.monotonic());
                store.after_commit(version).await;
                for (k, (i, _)) in included.iter().enumerate() {
                    outcomes[*i] = Some(Outcome::Committed(CommitInfo::of(&manifest, &manifest.transactions[k])));
                }
                return Ok(outcomes.into_iter().map(|o| o.unwrap_or(Outcome::Deferred)).collect());
            }
            Attempt::Lost(holder) => {
                store.commits.saw_newest(&holder, env.clock.monotonic());
                // Built before this writer even knew its base: not a race lost, the
                // handle was behind. Build on it at once; after a few in a row, look the
                // latest up.
                let was_behind = holder.timestamp < base_learned;
                base = holder;
                base_learned = env.clock.now();
                if was_behind {
                    contention.behind += 1;
                    if contention.behind >= MAX_BEHIND {
                        base = look_up_latest(store, env, base.version).await?;
                        base_learned = env.clock.now();
                        contention.behind = 0;
                    }
                    Duration::ZERO
                } else {
                    contention.behind = 0;
                    contention.lost_races += 1;
                    store.commits.saw_contention(env.clock.monotonic(), latency);
                    retry.contention_backoff(contention.lost_races, latency, |max| env.random_below_or_eq(max))
                }
            }
            Attempt::NotWritten(cause) => {
                // Refused for good (permissions, a read-only store): nothing was
                // written, and retrying will not help. Reported at once, as it is.
                if cause.is_definite_refusal() {
                    return Err(CommitError::Storage(cause));
                }
                if !retry.allows_another(members[first].attempts, elapsed) {
                    return Err(CommitError::CommitStateUnknown { version, transaction_id: members[first].txn.id, cause });
                }
                contention.errors += 1;
                retry.error_backoff(contention.errors, latency, |max| env.random_below_or_eq(max))
            }
        };
        for (i, member) in members.iter().enumerate() {
            if outcomes[i].is_none() && !member.opts.retry.allows_another(member.attempts, elapsed) {
                let e = CommitError::TooMuchContention {
                    attempts: member.attempts,
                    elapsed_ms: elapsed.as_millis() as u64,
                    last_version: version,
                };
                outcomes[i] = Some(fail(sharing, member, e)?);
            }
        }
        if outcomes.iter().all(Option::is_some) {
            return Ok(outcomes.into_iter().flatten().collect());
        }
        env.clock.sleep(pause).await;
    }
}

/// A member's failure: its own in a group, the job's in a job commit.
fn fail(sharing: Sharing<'_>, member: &Member<'_>, error: CommitError) -> Result<Outcome, CommitError> {
    match sharing {
        Sharing::Group => Ok(Outcome::Failed(error)),
        Sharing::Together { .. } => Err(CommitError::JobMember { transaction_id: member.txn.id, source: Box::new(error) }),
    }
}

fn first_open(outcomes: &[Option<Outcome>]) -> usize {
    outcomes.iter().position(Option::is_none).expect("some member is open")
}

/// Version `base + 1`: the open members applied to `base` in turn, each that may
/// follow the ones before it (a group defers the others to the next version; a job
/// re-runs a member on what earlier members changed where its rule needs it, and fails
/// if no serial order exists). Returns the manifest and the members it holds, with the
/// fragment ids each added.
async fn build(
    store: &TableStore,
    env: &Env,
    members: &mut [Member<'_>],
    outcomes: &mut [Option<Outcome>],
    base: &Arc<Manifest>,
    sharing: Sharing<'_>,
) -> Result<(Manifest, Vec<(usize, Range<u64>)>), CommitError> {
    let timestamp = commit_timestamp(env.clock.now(), base.timestamp);
    let mut state: Arc<Manifest> = base.clone();
    let mut records = Vec::new();
    let mut included: Vec<(usize, Range<u64>)> = Vec::new();
    let mut earlier: Vec<Earlier> = Vec::new();
    for (i, member) in members.iter_mut().enumerate() {
        if outcomes[i].is_some() {
            continue;
        }
        let applied = match (member.follows(&state, &earlier), sharing) {
            (Follows::Rebase, _) => member.apply(store, env, &state).await.map(|next| (next, member.operation(), false)),
            (Follows::Rerun(scope), Sharing::Together { .. }) => {
                member.apply_rerun(store, env, &state, &scope).await.map(|(next, operation)| (next, operation, true))
            }
            (Follows::Rerun(_) | Follows::Not { .. }, Sharing::Group) => continue,
            (Follows::Not { earlier: k, reason }, Sharing::Together { .. }) => {
                let source = CommitError::MembersIncompatible { earlier: earlier[k].id, reason };
                return Err(CommitError::JobMember { transaction_id: member.txn.id, source: Box::new(source) });
            }
        };
        let (next, operation, rerun) = match applied {
            Ok(applied) => applied,
            Err(e) => {
                outcomes[i] = Some(fail(sharing, member, e)?);
                continue;
            }
        };
        let added = state.next_fragment_id..next.next_fragment_id;
        records.push(member.record(operation.clone(), next.rows_deleted, rerun));
        earlier.push(Earlier { id: member.txn.id, operation, added: added.clone(), key: member.opts.idempotency_key.clone() });
        included.push((i, added));
        state = Arc::new(Manifest {
            format_version: FORMAT_VERSION,
            version: base.version + 1,
            parent_version: Some(base.version),
            timestamp,
            // Filled in below: the state between members is never stored.
            transactions: base.transactions.clone(),
            schema: next.schema,
            segments: next.segments,
            next_fragment_id: next.next_fragment_id,
            properties: next.properties,
        });
    }
    let mut manifest = Arc::unwrap_or_clone(state);
    if !records.is_empty() {
        manifest.transactions = records;
    }
    Ok((manifest, included))
}

/// Races lost, storage errors, and versions found already there in a row, in one commit.
#[derive(Debug, Default)]
struct Contention {
    attempts: u32,
    lost_races: u32,
    errors: u32,
    behind: u32,
}

/// A writer that has lost this many attempts reads the version while creating it (see
/// `settle::create_and_settle`): if it loses again, the winner is in hand with no
/// read-back round trip, which lets it catch up with a winner that needs no read at
/// all before its next attempt (without it, a writer lost 15-17 races in a row to one
/// that kept winning, in the fairness simulation). The price: its winning attempt
/// reads once for nothing (an append that lost once costs 5 requests, not 4).
const SPECULATE_AFTER: u32 = 1;

/// Versions found already committed in a row (the handle was behind) before the latest
/// is looked up instead of walking on one version at a time.
const MAX_BEHIND: u32 = 3;

/// The latest version (at least `known`), looked up: one LIST or probe, one read.
async fn look_up_latest(store: &TableStore, env: &Env, known: u64) -> Result<Arc<Manifest>, CommitError> {
    let latest = store.latest_version(Some(known)).await?.unwrap_or(known);
    let base = read_existing(store, latest).await?;
    store.commits.saw_newest(&base, env.clock.monotonic());
    Ok(base)
}

/// The version the first attempt builds on: the newest the handle knows, if it learned
/// of it recently (see `NEWEST_FRESH_FOR`), else the latest, looked up.
async fn start_base(store: &TableStore, env: &Env, read_version: u64) -> Result<Arc<Manifest>, CommitError> {
    match store.commits.fresh_newest(env.clock.monotonic()).filter(|m| m.version >= read_version) {
        Some(newest) => Ok(newest),
        None => look_up_latest(store, env, read_version).await,
    }
}

/// Version timestamps strictly increase along the chain, so time travel can bisect
/// even when writers' clocks disagree.
pub(crate) fn commit_timestamp(now: DateTime<Utc>, parent: DateTime<Utc>) -> DateTime<Utc> {
    now.max(parent + TimeDelta::microseconds(1))
}

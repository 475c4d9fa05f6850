//! The commit loop. Each attempt: judge the winners since the transaction's read
//! version (pure `conflict::resolve`), re-run what they changed, build the next
//! manifest, create it if absent (`settle`). Retries are bounded by count and time.
//! The loop knows no operation: each one's logic is its [`Action`].
//!
//! Requests (FORMAT.md §7): the first attempt builds on the newest version the handle
//! knows (no lookup when that knowledge is fresh); a lost attempt reads the version
//! that beat it (the read that settles the create) and builds on it. So an attempt
//! costs its conditional create, plus one read per winner; the latest version is
//! looked up (LIST or probe) only when the handle's knowledge is stale.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use chrono::{DateTime, TimeDelta, Utc};

use super::action::{self, Action, Cx};
use super::conflict::{self, RerunScope, Resolution, Winner};
use super::settle::{create_and_settle, Attempt};
use super::{CommitInfo, CommitOptions, PreparedTransaction};
use crate::env::Env;
use crate::error::CommitError;
use crate::format::manifest::{IsolationLevel, Manifest, TransactionRecord, FORMAT_VERSION};
use crate::storage::TableStore;

/// Commit `txn`; see the module docs. On error nothing of `txn` is visible.
pub(crate) async fn commit(store: &TableStore, env: &Env, txn: &PreparedTransaction, opts: &CommitOptions) -> Result<CommitInfo, CommitError> {
    let coordinator = &store.location.coordinator;
    let started = env.clock.monotonic();
    let cx = Cx { store, env, now: txn.now_or(env.clock.now()) };
    let mut action = action::for_operation(txn.operation.clone());
    let mut judged = Judged::new(txn);
    let mut base = start_base(store, env, txn.read_version).await?;
    // When this writer learned of `base` (wall clock, as version timestamps are).
    let mut base_learned = env.clock.now();
    let (mut rerun_done, mut attempts) = (false, 0u32);
    // Races lost, storage errors, and versions found already there in a row.
    let (mut lost_races, mut errors, mut behind) = (0u32, 0u32, 0u32);
    loop {
        attempts += 1;
        let isolation = opts.isolation.unwrap_or_else(|| base.isolation());
        if let Some(done) = judged.judge_up_to(store, &base, txn, action.as_ref(), opts, isolation).await? {
            return Ok(done);
        }
        if let Some(expected) = opts.expect_version.filter(|e| *e != base.version) {
            return Err(CommitError::VersionMoved { expected, latest: base.version });
        }
        if let Some(scope) = judged.pending_rerun.take() {
            action.rerun(&cx, &base, &scope).await?;
            store.delete_best_effort(action.take_replaced_files().iter().map(String::as_str)).await;
            rerun_done = true;
        }
        // Judged on the newest version, after re-runs: a delete that matched nothing
        // when prepared may match rows a winner appended.
        if let Some(reason) = action.no_change(rerun_done) {
            return Ok(CommitInfo::abandoned(base.version, txn, attempts, rerun_done, reason));
        }
        if attempts == 1 {
            // A newcomer to a contended table lets the writers already waiting go first.
            if let Some(latency) = store.recent_contention(env.clock.monotonic()) {
                env.clock.sleep(opts.retry.contention_backoff(0, latency, |max| env.random_below_or_eq(max))).await;
            }
        }
        let version = base.version + 1;
        let manifest = next_manifest(&cx, action.as_mut(), &base, txn, opts, attempts, &judged.rebased_over, rerun_done).await?;
        let bytes = Bytes::from(serde_json::to_vec(&manifest).expect("manifests always serialize"));
        // Backoff spreads contending writers around the contended write, so it scales
        // with that write's round trip, not with work done before it (a re-run): a
        // longer pause there would only let more winners land.
        let attempt_started = env.clock.monotonic();
        let outcome = create_and_settle(store, env, version, bytes, txn, opts, started, lost_races + behind >= SPECULATE_AFTER).await?;
        let latency = env.clock.monotonic() - attempt_started;
        let pause = match outcome {
            Attempt::Won => {
                let manifest = store.remember(manifest);
                store.saw_newest(&manifest, env.clock.monotonic());
                coordinator.after_commit(version).await;
                return Ok(CommitInfo::of(&manifest, manifest.transaction()));
            }
            Attempt::Lost(holder) => {
                store.saw_newest(&holder, env.clock.monotonic());
                // Built before this writer even knew its base: not a race lost, the
                // handle was behind. Build on it at once; after a few in a row, look the
                // latest up.
                let was_behind = holder.timestamp < base_learned;
                base = holder;
                base_learned = env.clock.now();
                if was_behind {
                    behind += 1;
                    if behind >= MAX_BEHIND {
                        base = look_up_latest(store, env, base.version).await?;
                        base_learned = env.clock.now();
                        behind = 0;
                    }
                    Duration::ZERO
                } else {
                    behind = 0;
                    lost_races += 1;
                    store.saw_contention(env.clock.monotonic(), latency);
                    opts.retry.contention_backoff(lost_races, latency, |max| env.random_below_or_eq(max))
                }
            }
            Attempt::NotWritten(cause) => {
                let elapsed = env.clock.monotonic() - started;
                if !opts.retry.allows_another(attempts, elapsed) {
                    return Err(CommitError::CommitStateUnknown { version, transaction_id: txn.id, cause });
                }
                errors += 1;
                opts.retry.error_backoff(errors, latency, |max| env.random_below_or_eq(max))
            }
        };
        let elapsed = env.clock.monotonic() - started;
        if !opts.retry.allows_another(attempts, elapsed) {
            return Err(CommitError::TooMuchContention { attempts, elapsed_ms: elapsed.as_millis() as u64, last_version: version });
        }
        env.clock.sleep(pause).await;
    }
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
    let latest = store.location.coordinator.latest_version(Some(known)).await?.unwrap_or(known);
    let base = read_existing(store, latest).await?;
    store.saw_newest(&base, env.clock.monotonic());
    Ok(base)
}

/// The version the first attempt builds on: the newest the handle knows, if it learned
/// of it recently (see `NEWEST_FRESH_FOR`), else the latest, looked up.
async fn start_base(store: &TableStore, env: &Env, read_version: u64) -> Result<Arc<Manifest>, CommitError> {
    match store.fresh_newest(env.clock.monotonic()).filter(|m| m.version >= read_version) {
        Some(newest) => Ok(newest),
        None => look_up_latest(store, env, read_version).await,
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

    /// Judges every winner up to `base` (the latest version) with the pure conflict
    /// rules. `Some(info)`: the transaction is already committed (an earlier attempt
    /// whose response was lost landed, a staged transaction committed twice, or its
    /// idempotency key is taken): report that version.
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
                match conflict::resolve(action.operation(), &txn.read_schema, isolation, Winner::new(&theirs.operation, &winner.schema, added.clone())) {
                    Resolution::Rebase => {}
                    Resolution::Rerun(scope) => self.pending_rerun = Some(RerunScope::widen(self.pending_rerun.take(), scope)),
                    Resolution::Incompatible { reason } => {
                        return Err(CommitError::Incompatible { winner_version: v, winner_operation: theirs.operation.name().to_string(), reason });
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
async fn read_existing(store: &TableStore, version: u64) -> Result<Arc<Manifest>, CommitError> {
    store.read_manifest(version).await?.ok_or(CommitError::HistoryRemoved { version })
}

/// Version `base + 1`: `action` applied to `base`, recorded with this attempt's facts.
#[allow(clippy::too_many_arguments)]
async fn next_manifest(
    cx: &Cx<'_>,
    action: &mut dyn Action,
    base: &Manifest,
    txn: &PreparedTransaction,
    opts: &CommitOptions,
    attempts: u32,
    rebased_over: &[u64],
    rerun: bool,
) -> Result<Manifest, CommitError> {
    let next = action.apply(cx, base).await?;
    Ok(Manifest {
        format_version: FORMAT_VERSION,
        version: base.version + 1,
        parent_version: Some(base.version),
        timestamp: commit_timestamp(cx.env.clock.now(), base.timestamp),
        transactions: vec![TransactionRecord {
            id: txn.id,
            read_version: Some(txn.read_version),
            operation: action.operation().clone(),
            attempts,
            rebased_over: rebased_over.to_vec(),
            rerun,
            rows_deleted: next.rows_deleted,
            idempotency_key: opts.idempotency_key.clone(),
        }],
        schema: next.schema,
        segments: next.segments,
        next_fragment_id: next.next_fragment_id,
        properties: next.properties,
    })
}

/// Version timestamps strictly increase along the chain, so time travel can bisect
/// even when writers' clocks disagree.
pub(crate) fn commit_timestamp(now: DateTime<Utc>, parent: DateTime<Utc>) -> DateTime<Utc> {
    now.max(parent + TimeDelta::microseconds(1))
}

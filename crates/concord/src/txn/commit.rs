//! The commit loop. Each attempt: find the latest version, judge the new winners
//! (pure `conflict::resolve`), re-run what they changed, build the next manifest,
//! create it if absent (`settle`). Retries are bounded by count and time. The loop
//! knows no operation: each one's logic is its [`Action`].

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
    let mut known = Some(txn.read_version);
    let mut judged = Judged::new(txn);
    let (mut rerun_done, mut attempts, mut failures) = (false, 0u32, 0u32);
    loop {
        attempts += 1;
        let latest = coordinator.latest_version(known).await?.unwrap_or(txn.read_version);
        let base = read_existing(store, latest).await?;
        let isolation = opts.isolation.unwrap_or_else(|| base.isolation());
        if let Some(done) = judged.judge_up_to(store, &base, txn, action.as_ref(), opts, isolation).await? {
            coordinator.after_commit(latest).await;
            return Ok(done);
        }
        if let Some(expected) = opts.expect_version.filter(|e| *e != latest) {
            return Err(CommitError::VersionMoved { expected, latest });
        }
        if let Some(scope) = judged.pending_rerun.take() {
            action.rerun(&cx, &base, &scope).await?;
            store.delete_best_effort(action.take_replaced_files().iter().map(String::as_str)).await;
            rerun_done = true;
        }
        // Judged on the latest version, after re-runs: a delete that matched nothing
        // when prepared may match rows a winner appended.
        if let Some(reason) = action.no_change(rerun_done) {
            return Ok(CommitInfo::abandoned(base.version, txn, attempts, rerun_done, reason));
        }
        let version = latest + 1;
        let manifest = next_manifest(&cx, action.as_mut(), &base, txn, opts, attempts, &judged.rebased_over, rerun_done).await?;
        let bytes = Bytes::from(serde_json::to_vec(&manifest).expect("manifests always serialize"));
        // Backoff spreads contending writers around the contended write, so it scales
        // with that write's round trip, not with work done before it (a re-run): a
        // longer pause there would only let more winners land.
        let attempt_started = env.clock.monotonic();
        let unclear = match create_and_settle(store, env, version, bytes, txn, opts, started).await? {
            Attempt::Won => {
                coordinator.after_commit(version).await;
                return Ok(CommitInfo::of(&manifest));
            }
            Attempt::Lost => {
                failures += 1;
                known = Some(version);
                None
            }
            Attempt::NotWritten(cause) => {
                known = Some(latest);
                Some(cause)
            }
        };
        let elapsed = env.clock.monotonic() - started;
        if !opts.retry.allows_another(attempts, elapsed) {
            return Err(match unclear {
                Some(cause) => CommitError::CommitStateUnknown { version, transaction_id: txn.id, cause },
                None => CommitError::TooMuchContention { attempts, elapsed_ms: elapsed.as_millis() as u64, last_version: version },
            });
        }
        let latency = env.clock.monotonic() - attempt_started;
        let pause = opts.retry.backoff(failures, latency, |max| env.random_below_or_eq(max));
        env.clock.sleep(pause).await;
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
        base: &Manifest,
        txn: &PreparedTransaction,
        action: &dyn Action,
        opts: &CommitOptions,
        isolation: IsolationLevel,
    ) -> Result<Option<CommitInfo>, CommitError> {
        for v in self.up_to + 1..=base.version {
            let read;
            let winner = if v == base.version {
                base
            } else {
                read = read_existing(store, v).await?;
                &read
            };
            if winner.transaction.id == txn.id {
                return Ok(Some(CommitInfo::of(winner)));
            }
            if let Some(key) = opts.idempotency_key.as_deref().filter(|k| winner.transaction.idempotency_key.as_deref() == Some(*k)) {
                return CommitInfo::replay_of(winner, key, txn.operation.name()).map(Some);
            }
            let added = self.next_id..winner.next_fragment_id.max(self.next_id);
            self.next_id = added.end;
            // Judged against the operation as re-runs have extended it: a winner touching
            // rows a re-run added is as much a conflict as one touching the original rows.
            match conflict::resolve(action.operation(), &txn.read_schema, isolation, Winner { manifest: winner, added }) {
                Resolution::Rebase => {}
                Resolution::Rerun(scope) => self.pending_rerun = Some(RerunScope::widen(self.pending_rerun.take(), scope)),
                Resolution::Incompatible { reason } => {
                    return Err(CommitError::Incompatible {
                        winner_version: v,
                        winner_operation: winner.transaction.operation.name().to_string(),
                        reason,
                    });
                }
            }
            self.rebased_over.push(v);
        }
        self.up_to = base.version;
        Ok(None)
    }
}

/// A version at or below the latest: missing means vacuum removed it.
async fn read_existing(store: &TableStore, version: u64) -> Result<Manifest, CommitError> {
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
        transaction: TransactionRecord {
            id: txn.id,
            read_version: Some(txn.read_version),
            operation: action.operation().clone(),
            attempts,
            rebased_over: rebased_over.to_vec(),
            rerun,
            rows_deleted: next.rows_deleted,
            idempotency_key: opts.idempotency_key.clone(),
        },
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

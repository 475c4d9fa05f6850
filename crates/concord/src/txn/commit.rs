//! The commit loop. Each attempt: find the latest version, judge the new winners
//! (pure `conflict::resolve`), build the next manifest, create it if absent. An
//! ambiguous create is settled by reading the version back and comparing transaction
//! ids; nothing is guessed. Retries are bounded by count and time.

use std::time::Duration;

use bytes::Bytes;
use chrono::{DateTime, TimeDelta, Utc};

use super::conflict::{self, RerunScope, Resolution, Winner};
use super::{alter, append, apply, compact, delete, merge, overwrite, restore, update, CommitInfo, CommitOptions, PreparedTransaction};
use crate::env::Env;
use crate::error::{CommitError, CorruptObject, CreateError, StorageError};
use crate::format::manifest::{Manifest, Operation, TransactionRecord, FORMAT_VERSION};
use crate::storage::{CreateOutcome, TableStore};

/// How one create attempt ended, once ambiguity is settled.
enum Attempt {
    Won,
    /// Someone else holds the version.
    Lost,
    /// The create failed with `cause`, and reading back found nobody holding the version:
    /// it did not land (yet). Retried at the same version; if the budget ends here, the
    /// outcome is reported unknown, since a delayed write could still land.
    NotWritten(StorageError),
}

/// Commit `txn`; see the module docs. On error nothing of `txn` is visible.
pub(crate) async fn commit(
    store: &TableStore,
    env: &Env,
    txn: &PreparedTransaction,
    opts: &CommitOptions,
) -> Result<CommitInfo, CommitError> {
    let coordinator = &store.location.coordinator;
    let started = env.clock.monotonic();
    let now = txn.now_or(env.clock.now());
    let mut known = Some(txn.read_version);
    // The operation as it will be recorded: re-runs add to it.
    let mut operation = txn.operation.clone();
    let mut judged = Judged::new(txn);
    let mut scratch = Scratch::default();
    let mut rerun_done = false;
    let mut attempts = 0u32;
    let mut failures = 0u32;
    loop {
        attempts += 1;
        let latest = coordinator.latest_version(known).await?.unwrap_or(txn.read_version);
        let base = read_existing(store, latest).await?;
        let isolation = opts.isolation.unwrap_or_else(|| base.isolation());
        if let Some(done) = judged.judge_up_to(store, &base, txn, &operation, opts, isolation).await? {
            coordinator.after_commit(latest).await;
            return Ok(done);
        }
        if let Some(expected) = opts.expect_version {
            if latest != expected {
                return Err(CommitError::VersionMoved { expected, latest });
            }
        }
        if let Some(scope) = judged.pending_rerun.take() {
            rerun_into(store, env, &base, &mut operation, &scope, now, &mut scratch).await?;
            rerun_done = true;
        }
        // Judged on the latest version, after re-runs: a delete that matched nothing
        // when prepared may match rows a winner appended.
        if let Some(reason) = nothing_to_change(&operation, rerun_done) {
            return Ok(abandoned(base.version, txn, attempts, rerun_done, reason));
        }
        let version = latest + 1;
        let record = Record { operation: &operation, attempts, rebased_over: &judged.rebased_over, rerun: rerun_done };
        let manifest = next_manifest(store, env, &base, txn, opts, record, &mut scratch).await?;
        let bytes = Bytes::from(serde_json::to_vec(&manifest).expect("manifests always serialize"));
        // Backoff spreads contending writers around the contended write, so it scales
        // with that write's round trip, not with work done before it (a re-run): a
        // longer pause there would only let more winners land.
        let attempt_started = env.clock.monotonic();
        let unclear = match create_and_settle(store, env, version, bytes, txn, opts, started).await? {
            Attempt::Won => {
                coordinator.after_commit(version).await;
                return Ok(commit_info(&manifest));
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
        operation: &Operation,
        opts: &CommitOptions,
        isolation: crate::format::manifest::IsolationLevel,
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
                return Ok(Some(commit_info(winner)));
            }
            if let Some(key) = opts.idempotency_key.as_deref().filter(|k| winner.transaction.idempotency_key.as_deref() == Some(*k)) {
                return replay_of(winner, key, txn.operation.name()).map(Some);
            }
            let added = self.next_id..winner.next_fragment_id.max(self.next_id);
            self.next_id = added.end;
            // Judged against the operation as re-runs have extended it: a winner touching
            // rows a re-run added is as much a conflict as one touching the original rows.
            match conflict::resolve(operation, &txn.read_schema, isolation, Winner { manifest: winner, added }) {
                Resolution::Rebase => {}
                Resolution::Rerun(scope) => self.pending_rerun = Some(widen(self.pending_rerun.take(), scope)),
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

/// Creates `version`; on an unclear answer reads it back until it can tell.
async fn create_and_settle(
    store: &TableStore,
    env: &Env,
    version: u64,
    bytes: Bytes,
    txn: &PreparedTransaction,
    opts: &CommitOptions,
    started: Duration,
) -> Result<Attempt, CommitError> {
    let coordinator = &store.location.coordinator;
    let cause = match coordinator.create_version(version, bytes).await {
        Ok(CreateOutcome::Created) => return Ok(Attempt::Won),
        Ok(CreateOutcome::AlreadyExists) => None,
        Err(e) => Some(e),
    };
    let mut last_error: Option<StorageError> = cause;
    let mut failures = 0u32;
    loop {
        match coordinator.read_version(version).await {
            Ok(Some(found)) => {
                let holder = crate::decode::manifest(&coordinator.describe_version(version), version, &found)?;
                return Ok(if holder.transaction.id == txn.id { Attempt::Won } else { Attempt::Lost });
            }
            Ok(None) if last_error.is_some() => return Ok(Attempt::NotWritten(last_error.expect("checked"))),
            // "Already exists" but unreadable: a store that is not read-after-write
            // consistent, or a spurious precondition failure. After a few reads, treat it
            // as not written: creating again is safe (the create is atomic).
            Ok(None) if failures >= 2 => {
                return Ok(Attempt::NotWritten(StorageError {
                    action: "reading back",
                    path: coordinator.describe_version(version),
                    source: object_store::Error::NotFound {
                        path: coordinator.describe_version(version),
                        source: "reported as existing but not readable".into(),
                    },
                }))
            }
            Ok(None) => {}
            Err(e) => last_error = Some(e),
        }
        failures += 1;
        let elapsed = env.clock.monotonic() - started;
        if elapsed >= opts.retry.timeout || failures >= opts.retry.max_attempts {
            let cause = last_error.unwrap_or_else(|| StorageError {
                action: "reading back",
                path: coordinator.describe_version(version),
                source: object_store::Error::NotFound {
                    path: coordinator.describe_version(version),
                    source: "reported as existing but not readable".into(),
                },
            });
            return Err(CommitError::CommitStateUnknown { version, transaction_id: txn.id, cause });
        }
        let pause = opts.retry.backoff(failures, opts.retry.min_backoff, |max| env.random_below_or_eq(max));
        env.clock.sleep(pause).await;
    }
}

/// A version at or below the latest: missing means vacuum removed it.
async fn read_existing(store: &TableStore, version: u64) -> Result<Manifest, CommitError> {
    store.read_manifest(version).await?.ok_or(CommitError::HistoryRemoved { version })
}

/// Work kept between attempts of one commit so that an attempt redoes only what the
/// new winners changed.
#[derive(Default)]
struct Scratch {
    /// A delete's predicate, compiled for this schema.
    compiled: Option<(crate::format::schema::Schema, crate::io::predicate::Predicate)>,
    delete_memo: delete::ApplyMemo,
    /// A merge's source, read back from its data files once per schema.
    merge_source: Option<(crate::format::schema::Schema, merge::Source)>,
}

/// What the new version records about its transaction, besides the prepared parts.
struct Record<'a> {
    operation: &'a Operation,
    attempts: u32,
    rebased_over: &'a [u64],
    rerun: bool,
}

async fn next_manifest(
    store: &TableStore,
    env: &Env,
    base: &Manifest,
    txn: &PreparedTransaction,
    opts: &CommitOptions,
    record: Record<'_>,
    scratch: &mut Scratch,
) -> Result<Manifest, CommitError> {
    let (next, rows_deleted) = match record.operation {
        Operation::Append { fragments } => (append::apply(store, env, base, fragments).await?, 0),
        Operation::Overwrite { fragments } => (overwrite::apply(store, env, base, fragments).await?, base.live_rows()),
        Operation::Restore { version } => (restore::apply(store, base, *version).await?, 0),
        Operation::Delete { deletions, .. } => delete::apply(store, env, base, deletions, &mut scratch.delete_memo).await?,
        Operation::ReplaceWhere { deletions, fragments, .. }
        | Operation::Update { deletions, fragments, .. }
        | Operation::Merge { deletions, fragments, .. } => {
            let (deleted, rows) = delete::apply(store, env, base, deletions, &mut scratch.delete_memo).await?;
            let (segments, next_fragment_id) = apply::add_fragments(store, env, deleted.segments, deleted.next_fragment_id, fragments).await?;
            (apply::NextState { segments, next_fragment_id, ..deleted }, rows)
        }
        Operation::Compact { groups, .. } => (compact::apply(store, env, base, groups).await?, 0),
        Operation::AddColumn { .. } | Operation::DropColumn { .. } | Operation::RenameColumn { .. } | Operation::SetProperties { .. } => {
            let schema = alter::schema_after(&base.schema, record.operation);
            (apply::NextState { schema, segments: base.segments.clone(), next_fragment_id: base.next_fragment_id }, 0)
        }
        Operation::Create => unreachable!("create commits version 0 through create_table"),
    };
    Ok(Manifest {
        format_version: FORMAT_VERSION,
        version: base.version + 1,
        parent_version: Some(base.version),
        timestamp: commit_timestamp(env.clock.now(), base.timestamp),
        transaction: TransactionRecord {
            id: txn.id,
            read_version: Some(txn.read_version),
            operation: record.operation.clone(),
            attempts: record.attempts,
            rebased_over: record.rebased_over.to_vec(),
            rerun: record.rerun,
            rows_deleted,
            idempotency_key: opts.idempotency_key.clone(),
        },
        schema: next.schema,
        segments: next.segments,
        next_fragment_id: next.next_fragment_id,
        properties: alter::properties_after(base, record.operation),
    })
}

/// The union of two re-run scopes.
fn widen(current: Option<RerunScope>, more: RerunScope) -> RerunScope {
    match (current, more) {
        (Some(RerunScope::Everything), _) | (_, RerunScope::Everything) => RerunScope::Everything,
        (Some(RerunScope::Fragments(mut a)), RerunScope::Fragments(b)) => {
            a.extend(b);
            RerunScope::Fragments(a)
        }
        (None, scope) => scope,
    }
}

/// Re-executes the part of `operation` that `scope` covers against `base`, with
/// `now()` at `now`.
async fn rerun_into(
    store: &TableStore,
    env: &Env,
    base: &Manifest,
    operation: &mut Operation,
    scope: &RerunScope,
    now: DateTime<Utc>,
    scratch: &mut Scratch,
) -> Result<(), CommitError> {
    if let Operation::Compact { groups, .. } = operation {
        let replaced = compact::revalidate(store, env, base, groups).await?;
        store.delete_best_effort(replaced.iter().map(String::as_str)).await;
        return Ok(());
    }
    if let Operation::Merge { keys, deletions, fragments, partial, .. } = operation {
        let parts = merge::MergeParts { deletions, fragments, partial };
        let keys = keys.clone();
        merge::rerun(store, env, base, &keys, parts, scope, &mut scratch.merge_source).await?;
        if matches!(scope, RerunScope::Everything) {
            scratch.delete_memo.clear();
        }
        return Ok(());
    }
    if let Operation::Update { predicate, set, deletions, fragments, .. } = operation {
        let failed = |e: &dyn std::fmt::Display| CommitError::RerunFailed { version: base.version, reason: e.to_string() };
        let update = update::compile(&base.schema, predicate.as_deref(), set, now).map_err(|e| failed(&e))?;
        let in_scope = delete::fragments_in_scope(store, base, scope).await?;
        let (more_deletions, more_fragments) = update::run(store, env, &update, &in_scope).await.map_err(|e| match e {
            crate::error::WriteError::Storage(s) => CommitError::Storage(s),
            crate::error::WriteError::Corrupt(c) => CommitError::Corrupt(c),
            other => failed(&other),
        })?;
        match scope {
            RerunScope::Everything => {
                *deletions = more_deletions;
                *fragments = more_fragments;
                scratch.delete_memo.clear();
            }
            RerunScope::Fragments(_) => {
                deletions.extend(more_deletions);
                fragments.extend(more_fragments);
            }
        }
        return Ok(());
    }
    if let Operation::Delete { predicate, deletions, .. } | Operation::ReplaceWhere { predicate, deletions, .. } = operation {
        let predicate = delete::compile_for(base, predicate, now, &mut scratch.compiled)?;
        let found = delete::rerun(store, env, base, predicate, scope).await?;
        match scope {
            RerunScope::Everything => {
                *deletions = found;
                scratch.delete_memo.clear();
            }
            RerunScope::Fragments(_) => deletions.extend(found),
        }
    }
    Ok(())
}

/// Version timestamps strictly increase along the chain, so time travel can bisect
/// even when writers' clocks disagree.
pub(crate) fn commit_timestamp(now: DateTime<Utc>, parent: DateTime<Utc>) -> DateTime<Utc> {
    now.max(parent + TimeDelta::microseconds(1))
}

/// Creates version 0, settling an unclear outcome by reading it back.
/// `Ok(false)`: another writer's version 0 exists (the table exists).
pub(crate) async fn create_table(store: &TableStore, manifest: &Manifest) -> Result<bool, CreateError> {
    let bytes = Bytes::from(serde_json::to_vec(manifest).expect("manifests always serialize"));
    let coordinator = &store.location.coordinator;
    let created = match coordinator.create_version(0, bytes).await {
        Ok(CreateOutcome::Created) => true,
        Ok(CreateOutcome::AlreadyExists) => false,
        Err(cause) => match coordinator.read_version(0).await {
            Ok(Some(found)) => {
                let holder = crate::decode::manifest(&coordinator.describe_version(0), 0, &found)
                    .map_err(|e| CorruptObject { path: coordinator.describe_version(0), reason: e.to_string() })?;
                holder.transaction.id == manifest.transaction.id
            }
            Ok(None) => return Err(CreateError::Storage(cause)),
            Err(_) => return Err(CreateError::StateUnknown { cause }),
        },
    };
    if created {
        coordinator.after_commit(0).await;
    }
    Ok(created)
}

/// Why committing `operation` now would make a version that changes nothing (no rows
/// to append, none matched, a compaction with nothing left to rewrite): then no
/// version is made.
fn nothing_to_change(operation: &Operation, rerun_done: bool) -> Option<&'static str> {
    match operation {
        Operation::Compact { groups, .. } if groups.is_empty() => Some(if rerun_done {
            "newer versions changed or removed every fragment it was rewriting"
        } else {
            "no fragment is smaller than the target or has deleted rows"
        }),
        other => other.no_change(),
    }
}

/// The outcome of a retry whose idempotency `key` version `manifest` carries: a
/// replay, if it is the same operation; a different operation cannot be its retry.
pub(crate) fn replay_of(manifest: &Manifest, key: &str, operation: &str) -> Result<CommitInfo, CommitError> {
    let theirs = manifest.transaction.operation.name();
    if theirs != operation {
        return Err(CommitError::KeyOfAnotherOperation { key: key.to_string(), version: manifest.version, operation: theirs.to_string(), ours: operation.to_string() });
    }
    Ok(CommitInfo { idempotent_replay: true, ..commit_info(manifest) })
}

/// The outcome of a maintenance transaction that gave way: nothing committed, the table
/// stays at `base`.
fn abandoned(version: u64, txn: &PreparedTransaction, attempts: u32, rerun: bool, reason: &str) -> CommitInfo {
    CommitInfo {
        version,
        operation: txn.operation.name().to_string(),
        transaction_id: txn.id,
        attempts,
        rebased_over: Vec::new(),
        rerun,
        rows_written: 0,
        rows_deleted: 0,
        idempotent_replay: false,
        abandoned: Some(reason.to_string()),
    }
}

/// The outcome reported for `manifest`'s transaction (committed now, earlier, or as a
/// replay of an idempotency key).
pub(crate) fn commit_info(manifest: &Manifest) -> CommitInfo {
    let record = &manifest.transaction;
    CommitInfo {
        version: manifest.version,
        operation: record.operation.name().to_string(),
        transaction_id: record.id,
        attempts: record.attempts,
        rebased_over: record.rebased_over.clone(),
        rerun: record.rerun,
        rows_written: record.operation.rows_written(),
        rows_deleted: record.rows_deleted,
        idempotent_replay: false,
        abandoned: None,
    }
}

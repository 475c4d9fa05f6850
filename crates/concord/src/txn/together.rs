//! The owner's side of a multi-table transaction (FORMAT.md §18): every table's part
//! committed (each as a job: all its transactions in one version), one table after the
//! other in the order of their roots, then the decision. A part that fails, or a decision found aborted, aborts it: each committed
//! part is undone (by this owner now, or by the next writer of that table).

use std::time::Duration;

use chrono::TimeDelta;
use sha2::{Digest, Sha256};
use uuid::Uuid;

use super::commit::undo::undo;
use super::multi::{decide, outcome};
use crate::error::{CommitError, TogetherError};
use crate::format::manifest::MultiRef;
use crate::format::multi::Outcome;
use crate::txn::commit::commit_part;
use crate::txn::handle::Writer;
use crate::txn::{CommitInfo, CommitOptions, PreparedTransaction};

/// The longest a multi-table transaction stays undecided before any writer it holds up
/// may abort it (its owner's commits must fit in it).
pub const MULTI_DEADLINE: Duration = Duration::from_secs(30);

/// One table's part: its writer and its staged transactions, in order.
pub(crate) struct Part<'a> {
    pub(crate) writer: Writer<'a>,
    pub(crate) txns: Vec<(&'a PreparedTransaction, &'a CommitOptions)>,
}

/// The id of attempt `attempt` of the multi-table transaction with idempotency key
/// `key`: a retry with the same key runs the same attempts (their decisions are found,
/// not made again: an aborted one is passed, a committed one replayed).
fn id_of_key(key: &str, attempt: u32) -> Uuid {
    let digest = Sha256::digest(format!("concord-multi:{key}:{attempt}"));
    uuid::Builder::from_random_bytes(digest[..16].try_into().expect("16 bytes")).into_uuid()
}

/// Commits `parts` (tables of one store, each once) as one multi-table transaction: all
/// or none. Each part's outcomes, in `parts`' order.
///
/// A transaction another writer aborted while every part committed (it ran past its
/// deadline) is run again under a new id, until `budget` ends.
pub(crate) async fn commit_together(
    parts: &[Part<'_>],
    key: Option<&str>,
    budget: Duration,
) -> Result<Vec<Vec<CommitInfo>>, TogetherError> {
    let Some(first) = parts.first() else { return Ok(Vec::new()) };
    let env = first.writer.env;
    let tables = checked_roots(parts)?;
    let (started, since) = (env.clock.now(), env.clock.monotonic());
    for attempt in 0u32.. {
        let now = env.clock.now();
        let deadline = now + TimeDelta::from_std(budget.min(MULTI_DEADLINE)).unwrap_or(TimeDelta::MAX);
        let id = key.map_or_else(|| env.new_uuid(), |k| id_of_key(k, attempt));
        let multi = MultiRef { id, primary: tables[0].clone(), tables: tables.clone(), started, deadline };
        if key.is_some() {
            match outcome(first.writer.store, &multi).await? {
                Some(Outcome::Committed) => return replayed(parts, &multi).await,
                Some(Outcome::Aborted) => continue,
                None => {}
            }
        }
        let run = Attempt { again: attempt > 0, maybe_landed: key.is_some() };
        match attempt_once(parts, &multi, run).await {
            Err(TogetherError::Aborted { .. }) if env.clock.monotonic() - since < budget => {
                let pause = Duration::from_millis(1 + env.random.next_u64() % (5u64 << attempt.min(5)));
                env.clock.sleep(pause).await;
            }
            other => return other,
        }
    }
    unreachable!("the attempts end with an outcome")
}

/// The tables' roots in one store, sorted (the first is the primary: it holds the
/// decision); refused if they are not in one store or a table is given twice.
fn checked_roots(parts: &[Part<'_>]) -> Result<Vec<String>, TogetherError> {
    let first = &parts[0];
    let mut roots: Vec<String> = Vec::with_capacity(parts.len());
    for part in parts {
        if part.writer.store.store_identity() != first.writer.store.store_identity() {
            return Err(TogetherError::DifferentStores { first: first.writer.store.uri().into(), other: part.writer.store.uri().into() });
        }
        let root = root(part);
        if roots.contains(&root) {
            return Err(TogetherError::SameTable { uri: part.writer.store.uri().into() });
        }
        roots.push(root);
    }
    roots.sort();
    Ok(roots)
}

/// What an attempt may find.
#[derive(Clone, Copy)]
struct Attempt {
    /// An earlier attempt's parts (aborted) hold the transactions' ids, so they commit
    /// under new ones (else they would be found committed there).
    again: bool,
    /// Its id comes from an idempotency key: a process before this one may have
    /// committed parts of it (a fresh id has none: nothing is looked up).
    maybe_landed: bool,
}

/// A part's table's root in its store (its chain's, for a branch).
fn root(part: &Part<'_>) -> String {
    format!("{}{}", part.writer.store.store_root(), part.writer.store.chain().prefix())
}

/// One attempt: the parts committed one after the other in the order of their tables'
/// roots (a part waits while its table's latest is another undecided transaction's
/// part; as every transaction takes its tables in that one order, none waits on one
/// that waits on it), up to the first that fails; then the decision; an aborted
/// attempt's committed parts undone.
async fn attempt_once(parts: &[Part<'_>], multi: &MultiRef, run: Attempt) -> Result<Vec<Vec<CommitInfo>>, TogetherError> {
    let first = &parts[0];
    let id = multi.id;
    let mut order: Vec<usize> = (0..parts.len()).collect();
    order.sort_by_key(|i| root(&parts[*i]));
    let mut committed: Vec<Option<Result<Vec<CommitInfo>, CommitError>>> = (0..parts.len()).map(|_| None).collect();
    for i in order {
        let result = commit_once(&parts[i], multi, run).await;
        let failed = result.is_err();
        committed[i] = Some(result);
        if failed {
            break;
        }
    }
    let failure = committed.iter().position(|r| matches!(r, Some(Err(_))));
    let wanted = if failure.is_some() { Outcome::Aborted } else { Outcome::Committed };
    let decided = decide(first.writer.store, first.writer.env, multi, wanted)
        .await
        .map_err(|e| TogetherError::OutcomeUnknown { id, cause: e.to_string() })?;
    if decided == Outcome::Aborted {
        undo_parts(parts, multi).await;
    }
    match (failure, decided) {
        (Some(i), _) => {
            let e = committed.into_iter().nth(i).flatten().and_then(Result::err).expect("the part that failed");
            Err(TogetherError::Part { uri: parts[i].writer.store.uri().into(), source: Box::new(e) })
        }
        (None, Outcome::Aborted) => Err(TogetherError::Aborted { id }),
        (None, Outcome::Committed) => Ok(committed.into_iter().map(|r| r.and_then(Result::ok).expect("every part committed")).collect()),
    }
}

/// Commits `part` as its table's part of `multi`, unless its table holds it already (an
/// earlier attempt with the same key: then that version's outcomes).
async fn commit_once(part: &Part<'_>, multi: &MultiRef, run: Attempt) -> Result<Vec<CommitInfo>, CommitError> {
    let w = part.writer;
    if run.maybe_landed {
        if let Some(found) = part_in_latest(w, multi).await? {
            return Ok(found);
        }
    }
    if !run.again {
        return commit_part(w, &part.txns, multi, None).await;
    }
    let renamed: Vec<PreparedTransaction> =
        part.txns.iter().map(|(t, _)| PreparedTransaction { id: w.env.new_uuid(), ..(*t).clone() }).collect();
    let txns: Vec<(&PreparedTransaction, &CommitOptions)> = renamed.iter().zip(part.txns.iter().map(|(_, o)| *o)).collect();
    commit_part(w, &txns, multi, None).await
}

/// `multi`'s part in its table's latest version, if it is there (an undecided one's part
/// is its table's latest: writers wait on it).
async fn part_in_latest(w: Writer<'_>, multi: &MultiRef) -> Result<Option<Vec<CommitInfo>>, CommitError> {
    let Some(latest) = w.store.latest_version(None).await? else { return Ok(None) };
    let Some(manifest) = w.store.read_manifest(latest).await? else { return Ok(None) };
    if manifest.multi().is_some_and(|m| m.id == multi.id) {
        return Ok(Some(manifest.transactions.iter().map(|t| CommitInfo::of(&manifest, t)).collect()));
    }
    Ok(None)
}

/// The outcomes of a multi-table transaction found committed (a retry with its key).
async fn replayed(parts: &[Part<'_>], multi: &MultiRef) -> Result<Vec<Vec<CommitInfo>>, TogetherError> {
    let mut out = Vec::with_capacity(parts.len());
    for part in parts {
        let w = part.writer;
        let latest = w.store.latest_version(None).await.map_err(CommitError::from)?.unwrap_or(0);
        let mut found = Vec::new();
        for v in (0..=latest).rev() {
            let Some(m) = w.store.read_manifest(v).await.map_err(CommitError::from)? else { break };
            if m.multi().is_some_and(|x| x.id == multi.id) {
                found = m.transactions.iter().map(|t| CommitInfo { idempotent_replay: true, ..CommitInfo::of(&m, t) }).collect();
                break;
            }
        }
        out.push(found);
    }
    Ok(out)
}

/// Undoes `multi`'s parts that are their table's latest (best effort: the next writer
/// of a table undoes what is left).
async fn undo_parts(parts: &[Part<'_>], multi: &MultiRef) {
    for part in parts {
        let w = part.writer;
        let Ok(Some(latest)) = w.store.latest_version(None).await else { continue };
        let Ok(Some(manifest)) = w.store.read_manifest(latest).await else { continue };
        if manifest.multi().is_some_and(|m| m.id == multi.id) {
            let _ = undo(w, &manifest, multi).await;
        }
    }
}

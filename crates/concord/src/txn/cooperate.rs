//! Cooperative commits (FORMAT.md §8, "Cooperative commits"): writers of different
//! processes and machines share versions with nothing but the object store.
//!
//! A writer that has lost a commit race *announces* its transaction
//! (`_announced/<micros>-<id>.json`; on stores with 1,024-byte keys the name carries the
//! content too, so a listing is all a carrier reads) and goes on trying to commit it. A
//! writer that has lost at least once *carries*, in the version it creates, every
//! announced transaction it may include, in announcement order, each judged on its own
//! as a group commit's members are. The chain stays the only arbiter: a transaction is
//! committed if and only if its id is in a version, and an includer never includes an
//! id already in the chain (it judges every version since the transaction's read
//! version, and its create of v+1 succeeds only if v is the latest). A writer that runs
//! out of budget *withdraws* (a marker beside its announcement, then a `withdraw`
//! transaction in the chain, which an includer that sees the marker also records):
//! whichever the chain shows first, its inclusion or its withdrawal, is its outcome.
//! An announcement past its deadline (its owner's budget plus [`DEADLINE_MARGIN`]) is
//! never carried: a crashed writer's transaction lands soon or never.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::action::NextState;
use super::commit::{self, Building, Outcome};
use super::member::{Follows, Member, Ready};
use super::settle::{create_and_settle, Attempt, Create};
use super::{CommitInfo, CommitOptions, PreparedTransaction, RetryPolicy, StagedOptions};
use crate::env::Env;
use crate::error::{CommitError, StorageCause, StorageError};
use crate::format::announcement::Announcement;
use crate::format::manifest::{Manifest, Operation, TransactionRecord, PROPERTY_COOPERATIVE};
use crate::format::naming;
use crate::storage::TableStore;

/// How much longer than its owner's time budget an announcement may be carried: room
/// for the clocks of different machines to disagree. A live owner's outcome never
/// depends on it (it withdraws within its budget); a crashed owner's transaction may
/// land until then, never after.
pub(crate) const DEADLINE_MARGIN: Duration = Duration::from_secs(60);

/// Whether the table (as of `base`) cooperates: the table property
/// `cooperative_commits`, on unless `false`.
pub(crate) fn enabled(base: &Manifest) -> bool {
    base.properties.get(PROPERTY_COOPERATIVE).is_none_or(|v| !v.trim().eq_ignore_ascii_case("false"))
}

/// Whether `txn` may be announced and carried: an append (an includer judges it from
/// the chain alone, reading no data on its behalf), not a compare-and-swap.
pub(crate) fn carriable(txn: &PreparedTransaction, opts: &CommitOptions) -> bool {
    matches!(txn.operation, Operation::Append { .. }) && opts.expect_version.is_none()
}

/// Announces `txn`, to be carried until `deadline`; returns the announcement's name.
/// A failed write may still have landed: the transaction counts as announced either way.
pub(crate) async fn announce(
    store: &TableStore,
    env: &Env,
    txn: &PreparedTransaction,
    opts: &CommitOptions,
    deadline: DateTime<Utc>,
) -> String {
    let micros = env.clock.now().timestamp_micros();
    let transaction = PreparedTransaction { staged: StagedOptions::of(opts), ..txn.clone() };
    let bytes = crate::encode::announcement(&Announcement { transaction, deadline });
    // Its content in its name too, where the key holds it: includers list it with no read
    // (not even encoded where names cannot carry it).
    let inline = store.long_names().then(|| crate::encode::announcement_inline(&bytes));
    let name = inline
        .map(|inline| naming::announcement_name(micros, txn.id, Some(&inline)))
        .filter(|name| store.name_fits(name))
        .unwrap_or_else(|| naming::announcement_name(micros, txn.id, None));
    let _ = store.put_new(&name, bytes).await;
    name
}

/// Marks the announcement `name` withdrawn: an includer that sees the marker records
/// the withdrawal instead of carrying the transaction.
pub(crate) async fn mark_withdrawn(store: &TableStore, name: &str) -> Result<(), StorageError> {
    store.put_new(&naming::withdrawal_name(name), bytes::Bytes::from_static(b"{}")).await
}

/// Removes settled announcements, `names`, and the withdrawal marker of the announcement
/// `marked`, in one request where the store deletes in bulk (best effort: vacuum removes
/// leftovers). The owner of an announcement retires it once it knows its outcome,
/// unless a version carried it: then the writer of that version retires it, with its
/// own.
pub(crate) async fn retire(store: &TableStore, names: &[String], marked: Option<&str>) {
    let withdrawal = marked.map(naming::withdrawal_name);
    store.delete_best_effort(names.iter().map(String::as_str).chain(withdrawal.as_deref())).await;
}

/// What the announcements folder holds for an includer, in announcement order.
#[derive(Debug, Default)]
pub(crate) struct Announced {
    /// Announcements within their deadline, but the includer's own.
    pub(crate) live: Vec<Arc<Announcement>>,
    /// Transactions whose owners marked them withdrawn.
    pub(crate) withdrawn: HashSet<Uuid>,
    /// The announcements' names, by transaction.
    pub(crate) names: HashMap<Uuid, String>,
}

impl Announced {
    /// The names of the announcements `version` carried (its writer retires them).
    pub(crate) fn carried_in(&self, version: &Manifest) -> Vec<String> {
        let carried = version.transactions.iter().filter(|t| t.carried_by.is_some() && !matches!(t.operation, Operation::Withdraw { .. }));
        carried.filter_map(|t| self.names.get(&t.id).cloned()).collect()
    }
}

/// Announcements (and versions) an includer reads at once.
const READ_AT_ONCE: usize = 16;

/// An announcement as a listing names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Listed {
    pub(crate) name: String,
    pub(crate) id: Uuid,
    /// Its owner marked it withdrawn.
    pub(crate) withdrawn: bool,
}

/// The announcements, in announcement order: one listing, no read.
pub(crate) async fn list(store: &TableStore) -> Result<Vec<Listed>, StorageError> {
    let names = store.list_dir(naming::ANNOUNCED_DIR).await?;
    Ok(listed(names.into_iter().map(|(name, _)| name)))
}

/// The announcements' names only, in announcement order: one listing one level deep,
/// which names an announcement whose name carries its content by its folder (its
/// stem), without the content (on S3, a short entry in place of a long key: what a
/// waiting writer needs to find its place, at a fraction of a full listing's cost).
pub(crate) async fn list_names(store: &TableStore) -> Result<Vec<Listed>, StorageError> {
    let names = store.list_dir_names(naming::ANNOUNCED_DIR).await?;
    Ok(listed(names.into_iter()))
}

/// Announcements (names ending `.json`, or folders of a listing one level deep) and
/// withdrawal markers, by name, in announcement order; other names are skipped.
fn listed(names: impl Iterator<Item = String>) -> Vec<Listed> {
    let mut names: Vec<String> = names.filter(|n| n.ends_with(".json") || n.ends_with(".withdrawn") || n.ends_with('/')).collect();
    names.sort();
    let withdrawn: HashSet<Uuid> = names.iter().filter(|n| n.ends_with(".withdrawn")).filter_map(|n| naming::announced_id(n)).collect();
    names
        .into_iter()
        .filter(|n| !n.ends_with(".withdrawn"))
        .filter_map(|name| {
            let id = naming::announced_id(&name)?;
            Some(Listed { name, id, withdrawn: withdrawn.contains(&id) })
        })
        .collect()
}

/// How many announcements in `listed` were made before `own` (a name) and are still
/// pending: not withdrawn, and not `settled` (found in the chain, or passed over by
/// versions enough times to be presumed dead or settled before).
pub(crate) fn ahead(listed: &[Listed], own: &str, settled: impl Fn(Uuid) -> bool) -> usize {
    made_before(listed, own).filter(|l| !l.withdrawn && !settled(l.id)).count()
}

/// The announcements in `listed` made before `own` (a name), compared by stem: a
/// listing's folder entry and the full name of one announcement are one place.
pub(crate) fn made_before<'a>(listed: &'a [Listed], own: &'a str) -> impl Iterator<Item = &'a Listed> {
    let own = naming::announcement_stem(own);
    listed.iter().take_while(move |l| naming::announcement_stem(&l.name) < own)
}

/// The announcements an includer considers, of those `listed`: a read of each it has
/// not read before (`own`: ids of its own transactions, skipped).
pub(crate) async fn read(store: &TableStore, env: &Env, listed: &[Listed], own: &[Uuid]) -> Result<Announced, StorageError> {
    let mut out = Announced::default();
    let now = env.clock.now();
    out.withdrawn = listed.iter().filter(|l| l.withdrawn).map(|l| l.id).collect();
    let wanted: Vec<&Listed> = listed.iter().filter(|l| !own.contains(&l.id)).collect();
    // Read several at once (each is read once per handle), kept in name order.
    for chunk in wanted.chunks(READ_AT_ONCE) {
        let read = futures::future::join_all(chunk.iter().map(|l| store.read_announcement(&l.name))).await;
        for (listed, announcement) in chunk.iter().zip(read) {
            if let Some(announcement) = announcement? {
                if announcement.transaction.id == listed.id && announcement.deadline >= now {
                    out.names.insert(listed.id, listed.name.clone());
                    out.live.push(announcement);
                }
            }
        }
    }
    if !out.live.is_empty() {
        store.commits.saw_announcements(env.clock.monotonic());
        hold_versions_since(store, out.live.iter().map(|a| a.transaction.read_version).min().unwrap_or(0)).await;
    }
    Ok(out)
}

/// Reads, several at once, the versions after `read_version` this handle does not hold
/// (up to [`HOLD_AT_MOST`]), so that judging announced transactions against them costs
/// no request in the build (an includer judges from versions it holds only). Best
/// effort: a version not read only means not carrying what needs it.
async fn hold_versions_since(store: &TableStore, read_version: u64) {
    let Some(newest) = store.commits.newest_known() else { return };
    let missing: Vec<u64> = (read_version + 1..newest.version).filter(|v| !store.holds_manifests(*v..*v + 1)).collect();
    if missing.len() > HOLD_AT_MOST {
        return;
    }
    for chunk in missing.chunks(READ_AT_ONCE) {
        let _ = futures::future::join_all(chunk.iter().map(|v| store.read_manifest(*v))).await;
    }
}

/// The most versions an includer reads to judge announced transactions.
const HOLD_AT_MOST: usize = 256;

/// The withdrawal of an announced transaction reaches the chain within this many
/// attempts and this time after its owner's budget ended (the extra wait a giving-up
/// writer may take); past it, the outcome is reported unknown (an includer that read
/// the announcement before the withdrawal marker may still carry it, until its
/// deadline).
pub(crate) const WITHDRAW_ATTEMPTS: u32 = 20;
/// See [`WITHDRAW_ATTEMPTS`].
pub(crate) const WITHDRAW_TIMEOUT: Duration = Duration::from_secs(30);

/// Adds to `building` the announced transactions (`announced`) that may follow what it
/// holds, in announcement order, each judged on its own (`carrier`: the including
/// writer's first transaction). An announcement whose owner marked it withdrawn, and
/// that no version settled yet, is recorded withdrawn instead.
pub(crate) async fn carry(
    store: &TableStore,
    env: &Env,
    building: &mut Building,
    announced: &Announced,
    carrier: Uuid,
) -> Result<(), CommitError> {
    for announcement in &announced.live {
        let txn = &announcement.transaction;
        let Ok(opts) = txn.staged.apply_to(&CommitOptions::default()) else { continue };
        // Judged from versions this writer holds only: a read on another's behalf
        // would delay its own commit (the owner, or another includer, meets it).
        if !carriable(txn, &opts) || !store.holds_manifests(txn.read_version + 1..building.base().version) {
            continue;
        }
        // Judged against the committed versions (the base); then against what this
        // version holds before it, as any member is.
        let mut member = Member::new(txn, &opts, None);
        if !member.ready_to_carry(store, building.base()).await {
            continue;
        }
        if announced.withdrawn.contains(&txn.id) {
            let record = withdraw_record(env, building.base(), txn.id, Some(carrier));
            let state = building.state().clone();
            building.push(record, None, NextState::unchanged(&state));
            continue;
        }
        if !matches!(member.follows(building.state(), building.earlier()), Follows::Rebase) {
            continue;
        }
        let state = building.state().clone();
        // A transaction the includer cannot apply (its files unreadable...) is its
        // owner's to meet: not carried.
        let Ok(next) = member.apply(store, env, &state).await else { continue };
        let mut record = member.record(member.operation(), next.rows_deleted, false);
        record.carried_by = Some(carrier);
        building.push(record, opts.idempotency_key.clone(), next);
    }
    Ok(())
}

/// The record of the withdrawal of `withdrawn`, on `base`.
fn withdraw_record(env: &Env, base: &Manifest, withdrawn: Uuid, carried_by: Option<Uuid>) -> TransactionRecord {
    TransactionRecord {
        id: env.new_uuid(),
        read_version: Some(base.version),
        operation: Operation::Withdraw { transaction_id: withdrawn },
        attempts: 1,
        rebased_over: Vec::new(),
        rerun: false,
        rows_deleted: 0,
        idempotency_key: None,
        job_idempotency_key: None,
        carried_by,
    }
}

/// The owner of the announcement `name` (its `member`) ran out of budget: it marks the
/// announcement withdrawn, then settles its outcome by the chain, from `base` on. If a
/// version carries the transaction before one withdraws it, it committed; if a version
/// withdraws it first (the owner's own, or an includer's that saw the marker), it
/// failed (too much contention). The withdrawal takes at most [`WITHDRAW_ATTEMPTS`] and
/// [`WITHDRAW_TIMEOUT`]; past them the outcome is unknown.
pub(crate) async fn withdraw(
    store: &TableStore,
    env: &Env,
    member: &mut Member<'_>,
    mut base: Arc<Manifest>,
    name: &str,
    started: Duration,
) -> Result<Outcome, CommitError> {
    // Not marked (a storage error): the withdrawal then lands by the owner's own create.
    let _ = mark_withdrawn(store, name).await;
    let retry = RetryPolicy { max_attempts: WITHDRAW_ATTEMPTS, timeout: WITHDRAW_TIMEOUT, ..member.opts.retry };
    let withdraw_started = env.clock.monotonic();
    let (mut attempts, mut errors) = (0u32, 0u32);
    // Its attempts are its own creates until now: the withdrawal's are not counted.
    loop {
        match member.ready_on(store, env, &base).await {
            Ok(Ready::Settled(info)) => return Ok(Outcome::Committed(CommitInfo { attempts: member.attempts.max(1), ..info })),
            Ok(Ready::Withdrawn(version)) => return Ok(Outcome::Failed(commit::withdrawn(member, started, env, version))),
            Ok(Ready::Yes | Ready::JobDone(_)) => {}
            // Decided by the chain (an includer judges it the same way): not carried.
            Err(e) if !matches!(e.kind(), crate::ErrorKind::Storage) => return Ok(Outcome::Failed(e)),
            // Not decided: read again within the withdrawal's budget.
            Err(_) => {
                errors += 1;
                attempts += 1;
                if !retry.allows_another(attempts, env.clock.monotonic() - withdraw_started) {
                    return Err(unsettled(store, name, base.version + 1, member.txn.id));
                }
                env.clock.sleep(retry.error_backoff(errors, Duration::ZERO, |max| env.random_below_or_eq(max))).await;
                continue;
            }
        }
        let mut building = Building::new(env, &base);
        let record = withdraw_record(env, &base, member.txn.id, None);
        let record_id = record.id;
        building.push(record, None, NextState::unchanged(&base));
        let manifest = building.finish().expect("it holds the withdrawal");
        let version = manifest.version;
        attempts += 1;
        let attempt_started = env.clock.monotonic();
        let create =
            Create { version, bytes: crate::encode::manifest(&manifest), transaction_id: record_id, speculate: false, look_ahead: 0 };
        let pause = match create_and_settle(store, env, create, &retry, withdraw_started).await? {
            Attempt::Won => {
                let manifest = store.remember(manifest);
                store.commits.saw_newest(&manifest, env.clock.monotonic());
                store.after_commit(version).await;
                return Ok(Outcome::Failed(commit::withdrawn(member, started, env, version)));
            }
            Attempt::Lost(holder) => {
                store.commits.saw_newest(&holder, env.clock.monotonic());
                base = holder;
                let latency = env.clock.monotonic() - attempt_started;
                retry.contention_backoff(attempts, latency, |max| env.random_below_or_eq(max))
            }
            Attempt::NotWritten(cause) if cause.is_definite_refusal() => return Err(CommitError::Storage(cause)),
            Attempt::NotWritten(_) => {
                errors += 1;
                retry.error_backoff(errors, env.clock.monotonic() - attempt_started, |max| env.random_below_or_eq(max))
            }
        };
        if !retry.allows_another(attempts, env.clock.monotonic() - withdraw_started) {
            return Err(unsettled(store, name, base.version + 1, member.txn.id));
        }
        env.clock.sleep(pause).await;
    }
}

/// The outcome of announced transaction `id` (announcement `name`) is unknown: its
/// withdrawal did not reach the chain within its budget (an includer may still carry
/// it, until its deadline).
pub(crate) fn unsettled(store: &TableStore, name: &str, version: u64, id: Uuid) -> CommitError {
    let cause = StorageError::new("withdrawing", store.display(name), StorageCause::WithdrawalUnsettled);
    CommitError::CommitStateUnknown { version, transaction_id: id, cause }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use arrow::array::{Int64Array, RecordBatch};
    use futures::future::BoxFuture;

    use super::*;
    use crate::env::{Clock, SystemClock};
    use crate::table::{Input, Table, Write};
    use crate::{Schema, StoreResolver};

    /// The system clock, its monotonic time an hour on: anything recorded at zero is
    /// long past.
    #[derive(Debug, Default)]
    struct HourOn(SystemClock);

    impl Clock for HourOn {
        fn now(&self) -> DateTime<Utc> {
            self.0.now()
        }
        fn monotonic(&self) -> Duration {
            self.0.monotonic() + Duration::from_secs(3600)
        }
        fn sleep(&self, duration: Duration) -> BoxFuture<'static, ()> {
            self.0.sleep(duration)
        }
    }

    /// Announces an append of one row, prepared by `table` (another writer's handle).
    async fn announce_one(table: &Table, env: &Env) -> Uuid {
        let batch = RecordBatch::try_new(table.schema().arrow_schema(), vec![Arc::new(Int64Array::from(vec![2]))]).unwrap();
        let txn = table.prepare(Write::Append { input: Input::Batches(vec![batch]) }).await.unwrap();
        let deadline = env.clock.now() + chrono::TimeDelta::minutes(10);
        announce(table.store(), env, &txn, &CommitOptions::default(), deadline).await;
        txn.id
    }

    /// A handle that once found announcements carries the line at every commit, however
    /// long ago that was, until a listing finds none (a writer that stopped losing would
    /// otherwise take every version while the line waits); a handle that never found
    /// any carries nobody.
    #[tokio::test]
    async fn a_handle_that_found_a_line_carries_it_until_a_listing_finds_none() {
        let resolver = StoreResolver::default();
        let uri = "memory://line-remembered/t";
        let env = Env { clock: Arc::new(HourOn::default()), ..Env::system() };
        let schema = Schema::parse("id bigint not null").unwrap();
        let a = Table::create(resolver.resolve(uri).unwrap(), env.clone(), schema.clone()).await.unwrap();
        let others = Table::open(resolver.resolve(uri).unwrap(), env.clone()).await.unwrap();
        let batch = || RecordBatch::try_new(schema.arrow_schema(), vec![Arc::new(Int64Array::from(vec![1]))]).unwrap();
        let carried_in_latest = |table: &Table| {
            let table = table.clone();
            async move {
                let latest = table.latest().await.unwrap();
                latest.manifest().transactions.iter().filter(|t| t.carried_by.is_some()).map(|t| t.id).collect::<Vec<_>>()
            }
        };

        // Found announcements an hour ago: no longer recent, but a line is remembered.
        a.store().commits.saw_announcements(Duration::ZERO);
        assert!(!a.store().commits.recent_announcements(env.clock.monotonic()) && a.store().commits.line_waits());
        let waiting = announce_one(&others, &env).await;
        a.append(batch(), &CommitOptions::default()).await.unwrap();
        assert_eq!(carried_in_latest(&a).await, [waiting], "its commit carried the line");
        // Its next listing finds nobody: it forgets the line.
        a.append(batch(), &CommitOptions::default()).await.unwrap();
        assert!(!a.store().commits.line_waits());
        // A handle that knows of no line carries nobody.
        let fresh = Table::open(resolver.resolve(uri).unwrap(), env.clone()).await.unwrap();
        let later = announce_one(&others.latest().await.unwrap(), &env).await;
        fresh.append(batch(), &CommitOptions::default()).await.unwrap();
        assert!(carried_in_latest(&fresh).await.is_empty() && !fresh.store().commits.line_waits());
        assert!(list(a.store()).await.unwrap().iter().any(|l| l.id == later), "the announcement waits for its owner");
    }

    /// A waiting writer lists the names only (on S3 one short entry in place of each
    /// long key): it finds the same announcements, withdrawals and order as a full
    /// listing, and its own place by stem; a line holding such a listing lists in full
    /// before it carries (the content is in the full names).
    #[tokio::test]
    async fn a_names_only_listing_finds_the_same_line_and_carrying_lists_in_full() {
        let resolver = StoreResolver::default();
        let uri = "memory://names-only/t";
        let env = Env::system();
        let schema = Schema::parse("id bigint not null").unwrap();
        let a = Table::create(resolver.resolve(uri).unwrap(), env.clone(), schema).await.unwrap();
        let others = Table::open(resolver.resolve(uri).unwrap(), env.clone()).await.unwrap();
        let mut ids = vec![announce_one(&others, &env).await, announce_one(&others, &env).await, announce_one(&others, &env).await];
        let full = list(a.store()).await.unwrap();
        let names = list_names(a.store()).await.unwrap();
        assert!(full.iter().all(|l| l.name.ends_with(".json") && l.name.len() > 200), "the content is in the names: {full:?}");
        assert!(names.iter().all(|l| l.name.ends_with('/') && l.name.len() < 80), "one folder per announcement: {names:?}");
        let order = |listed: &[Listed]| listed.iter().map(|l| l.id).collect::<Vec<_>>();
        assert_eq!(order(&names), order(&full));
        ids.sort_by_key(|id| full.iter().position(|l| l.id == *id));
        for (place, own) in full.iter().enumerate() {
            assert_eq!(ahead(&names, &own.name, |_| false), place, "its own entry is not ahead of it");
        }

        mark_withdrawn(a.store(), &full[0].name).await.unwrap();
        let names = list_names(a.store()).await.unwrap();
        assert_eq!(order(&names), ids);
        assert_eq!(names.iter().map(|l| l.withdrawn).collect::<Vec<_>>(), [true, false, false]);
        assert_eq!(ahead(&names, &full[2].name, |_| false), 1, "a withdrawn announcement is not ahead");

        let mut line = super::super::line::Line::default();
        line.list(a.store(), true).await;
        let carried = line.carry(a.store(), &env, &[]).await.expect("listed");
        let live: Vec<Uuid> = carried.live.iter().map(|l| l.transaction.id).collect();
        assert_eq!(live, ids, "carried with their content, from a full listing");
        assert_eq!(carried.withdrawn, HashSet::from([ids[0]]));
        assert!(carried.names.values().all(|n| n.ends_with(".json")), "retired by their full names");
    }
}

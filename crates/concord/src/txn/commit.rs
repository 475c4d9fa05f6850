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

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};

use super::action::NextState;
use super::contention::{AfterLost, Contention};
use super::cooperate;
use super::line::Line;
use super::member::{read_existing, Earlier, Follows, Member, Ready};
use super::settle::{create_and_settle, Attempt, Create};
use super::{CommitInfo, CommitOptions, PreparedTransaction};
use crate::env::Env;
use crate::error::CommitError;
use crate::format::manifest::{format_for, Manifest, TransactionRecord};
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
    let mut announcement = None;
    // The announcements the version this writer created carried: it retires them.
    let mut carried = Vec::new();
    let result = commit_rounds(store, env, batch, sharing, started, &mut announcement, &mut carried).await;
    let Some(Announcing { name, attempts, mut marked }) = announcement else {
        cooperate::retire(store, &carried, None).await;
        return result;
    };
    // Announced (cooperative commits): another writer may carry it until its deadline,
    // so it fails only where the chain decides that. An outcome the chain does not decide
    // (a storage error; an unknown one, but a withdrawal's that did not settle) goes
    // through the withdrawal, which lets the chain decide.
    let undecided = |e: &CommitError| match e {
        CommitError::CommitStateUnknown { cause, .. } => !matches!(cause.source, crate::error::StorageCause::WithdrawalUnsettled),
        e => matches!(e.kind(), crate::ErrorKind::Storage),
    };
    let settled = match result {
        Ok(outcomes) if matches!(outcomes.as_slice(), [Outcome::Failed(e)] if undecided(e)) => None,
        Err(e) if undecided(&e) => None,
        decided => Some(decided),
    };
    let settled = match settled {
        Some(decided) => decided,
        None => {
            let (txn, opts) = batch[0];
            let mut member = Member::new(txn, opts, None);
            // Its first attempt checked its key in the history already.
            member.attempts = attempts;
            member.keys_checked = true;
            match start_base(store, env, txn.read_version).await {
                Ok(base) => {
                    marked = true;
                    cooperate::withdraw(store, env, &mut member, base, &name, started).await.map(|o| vec![o])
                }
                Err(_) => Err(cooperate::unsettled(store, &name, txn.read_version + 1, txn.id)),
            }
        }
    };
    // Its own too, unless another writer's version carried it (that writer retires it).
    if marked || !matches!(&settled, Ok(outcomes) if carried_elsewhere(store, outcomes)) {
        carried.push(name.clone());
    }
    cooperate::retire(store, &carried, marked.then_some(name.as_str())).await;
    settled
}

/// Whether a lone transaction committed in a version that carried it (known from the
/// versions this handle holds).
fn carried_elsewhere(store: &TableStore, outcomes: &[Outcome]) -> bool {
    let [Outcome::Committed(info)] = outcomes else { return false };
    let Some(version) = store.cached_manifest(info.version) else { return false };
    version.transactions.iter().any(|t| t.id == info.transaction_id && t.carried_by.is_some())
}

/// A lone transaction's announcement (cooperative commits).
#[derive(Debug)]
struct Announcing {
    /// Its name (even if the write failed: it may have landed).
    name: String,
    /// Its owner's attempts so far.
    attempts: u32,
    /// Whether its owner marked it withdrawn.
    marked: bool,
}

/// The rounds of [`commit_batch`]: `announcement` is set once the lone member is
/// announced.
async fn commit_rounds(
    store: &TableStore,
    env: &Env,
    batch: &[(&PreparedTransaction, &CommitOptions)],
    sharing: Sharing<'_>,
    started: Duration,
    announcement: &mut Option<Announcing>,
    carried: &mut Vec<String>,
) -> Result<Vec<Outcome>, CommitError> {
    let job_key = match sharing {
        Sharing::Together { job_key } => job_key,
        Sharing::Group => None,
    };
    let mut members: Vec<Member<'_>> = batch.iter().map(|(txn, opts)| Member::new(txn, opts, job_key)).collect();
    let read_version = batch.iter().map(|(txn, _)| txn.read_version).max().unwrap_or(0);
    let mut base = start_base(store, env, read_version).await?;
    // When this writer learned of `base` (wall clock, as version timestamps are).
    let mut base_learned = env.clock.now();
    let mut contention = Contention::default();
    // Cooperative commits: a lone transaction that may be carried is announced once it
    // has lost a race (its announcement's name); a writer that has lost carries others.
    let announces = sharing == Sharing::Group && matches!(batch, [(txn, opts)] if cooperate::carriable(txn, opts));
    let mut announce_by = None;
    let own: Vec<uuid::Uuid> = batch.iter().map(|(txn, _)| txn.id).collect();
    let mut line = Line::default();
    // How long this handle's last create took (the scale of pauses).
    let mut latency = store.commits.attempt_latency().unwrap_or(members[0].opts.retry.min_backoff);
    let mut first_round = true;
    loop {
        for member in members.iter_mut().filter(|m| m.outcome.is_none()) {
            member.outcome = match member.ready_on(store, env, &base).await {
                Ok(Ready::Yes) => None,
                Ok(Ready::Settled(info)) => Some(Outcome::Committed(info)),
                Ok(Ready::Withdrawn(version)) => Some(Outcome::Failed(withdrawn(member, started, env, version))),
                // The whole job committed already: so did every member.
                Ok(Ready::JobDone(version)) => return Ok(batch.iter().map(|_| Outcome::JobDone(version)).collect()),
                Err(e) => Some(fail(sharing, member, e)?),
            }
        }
        if members.iter().all(|m| m.outcome.is_some()) {
            return Ok(outcomes_of(members));
        }
        if first_round {
            first_round = false;
            // A newcomer to a contended table (its handle lost a race, or found
            // announcements, recently; a new handle: its first version carried others
            // or rebased over others', recently) lets the writers already waiting go first:
            // announced at once, it waits in line (below); else it pauses.
            let now = env.clock.monotonic();
            store.commits.saw_start(&base, env.clock.now(), now);
            let crowded = store.commits.recent_contention(now).is_some() || store.commits.recent_announcements(now);
            if crowded && announces && cooperate::enabled(&base) {
                let retry = &members[0].opts.retry;
                let left = retry.timeout + cooperate::DEADLINE_MARGIN;
                let deadline = env.clock.now() + TimeDelta::from_std(left).unwrap_or(TimeDelta::MAX);
                let announce_started = env.clock.monotonic();
                let name = cooperate::announce(store, env, members[0].txn, members[0].opts, deadline).await;
                // A new handle has timed no request of this store yet: the announcement's
                // round trip sets the pace of its wait (not the retry policy's minimum,
                // which would let it take over from the writers ahead at once).
                if store.commits.attempt_latency().is_none() {
                    latency = latency.max(env.clock.monotonic() - announce_started);
                }
                *announcement = Some(Announcing { name, attempts: 0, marked: false });
            } else if crowded {
                let retry = &members[first_open(&members)].opts.retry;
                env.clock.sleep(retry.contention_backoff(0, latency, |max| env.random_below_or_eq(max))).await;
            }
        }
        // A writer that has lost a race (in this commit, or through this handle within
        // the last second) carries what others announced; a failed listing only means
        // carrying nobody this time. A lone writer never loses: it pays nothing.
        // (Or whose handle found announcements: recently, or at any time since, until a
        // listing finds none. It carries while it keeps winning, else the writers it
        // beats wait on a first in line slower than it: through a slower store a
        // writer that had carried took up to 20 versions in a row while 14 waited.)
        let now = env.clock.monotonic();
        let contended = contention
            .carries(store.commits.recent_contention(now).is_some(), store.commits.recent_announcements(now) || store.commits.line_waits());
        let carries = contended && sharing == Sharing::Group && cooperate::enabled(&base);
        if carries {
            line.list(store, announcement.is_some()).await;
        }
        // An announced writer waits in line (`line.rs`) while an older announcement is
        // pending: its owner creates the next version and carries the others.
        let now = env.clock.monotonic();
        let pace = store.commits.move_interval().unwrap_or(UNSEEN_PACE).max(latency * 4);
        if let Some(own_name) = announcement.as_ref().map(|a| a.name.clone()).filter(|name| carries && line.waits(name, &base, now, pace)) {
            store.commits.saw_announcements(now);
            if !members[0].opts.retry.allows_another(members[0].attempts, now - started) {
                let announced = announcement.as_mut().expect("announced");
                announced.marked = true;
                return cooperate::withdraw(store, env, &mut members[0], base.clone(), &own_name, started).await.map(|o| vec![o]);
            }
            if let Some(next) = line.wait(store, env, &own_name, &base, &mut latency).await {
                base = next;
                base_learned = env.clock.now();
            }
            continue;
        }
        let carry = if carries { line.carry(store, env, &own).await } else { None };
        // The first in line whose reading of what it carries took longer than an
        // attempt: its base may have been taken meanwhile (a writer that does not wait
        // creates a version every two round trips), and a create on a taken base only
        // loses. It reads the next versions instead and, finding any, judges them
        // before it builds, carrying the same announcements.
        let leads = carry.as_ref().is_some_and(|c| !c.live.is_empty());
        let unwaiting = !base.carried_others();
        let since = (env.clock.now() - base_learned).to_std().unwrap_or_default();
        if leads && unwaiting && since > latency {
            // As many versions as an attempt each could have made meanwhile (4 at most).
            let ahead = (since.as_micros() / latency.as_micros().max(1)).clamp(1, READ_ON_AT_MOST) as u64;
            if let Some(newer) = read_on(store, env, &base, ahead).await {
                base = newer;
                base_learned = env.clock.now();
                line.keep(carry);
                continue;
            }
        }
        for member in members.iter_mut().filter(|m| m.outcome.is_none()) {
            member.attempts += 1;
        }
        let (building, included) = build(store, env, &mut members, &base, sharing, carry.as_ref()).await?;
        let Some(manifest) = building.finish() else { continue };
        let first = included[0];
        let version = manifest.version;
        let reads_while_creating = store.capabilities().read_while_creating;
        let create = Create {
            version,
            bytes: crate::encode::manifest(&manifest),
            transaction_id: members[first].txn.id,
            speculate: contention.speculates() && reads_while_creating,
            // The first in line reads one version further: its winner may be one ahead.
            // So does a first attempt that loses, as it reads the winner back: a writer
            // that does not wait makes its next version while the loser learns of the
            // first (at a table's start, most losers of version 1 lost version 2 so).
            look_ahead: u64::from(carry.as_ref().is_some_and(|c| !c.live.is_empty()) || (!contention.speculates() && reads_while_creating)),
        };
        let retry = members[first].opts.retry;
        // Versions read after the one created, if it loses (see `settle.rs`).
        let read_after = if create.speculate { create.look_ahead } else { 0 };
        let attempt_started = env.clock.monotonic();
        let outcome = create_and_settle(store, env, create, &retry, started).await?;
        latency = env.clock.monotonic() - attempt_started;
        store.commits.saw_attempt(latency);
        line.raced();
        // Measured once: the checks below agree on whether another attempt is allowed.
        let elapsed = env.clock.monotonic() - started;
        let uniform = |max| env.random_below_or_eq(max);
        if let Some(announced) = announcement {
            announced.attempts = members[0].attempts;
        }
        let pause = match outcome {
            Attempt::Won => {
                contention.won();
                let manifest = store.remember(manifest);
                store.commits.saw_newest(&manifest, env.clock.monotonic());
                store.after_commit(version).await;
                *carried = carry.as_ref().map(|c| c.carried_in(&manifest)).unwrap_or_default();
                for (k, i) in included.iter().enumerate() {
                    members[*i].outcome = Some(Outcome::Committed(CommitInfo::of(&manifest, &manifest.transactions[k])));
                }
                return Ok(outcomes_of(members));
            }
            Attempt::Lost(holder) => {
                // The versions read after the winner ended before the last one read: the
                // holder was the newest when read, and looking the latest up would only
                // find it again (a round trip in which a writer that does not wait
                // creates the next version first).
                let newest_when_read = newest_when_read(holder.version, version, read_after);
                store.commits.saw_newest(&holder, env.clock.monotonic());
                // A winner that carried others: writers wait in line for this table.
                if holder.carried_others() {
                    store.commits.saw_announcements(env.clock.monotonic());
                }
                let after = contention.lost(holder.timestamp, base_learned, &retry, latency, uniform);
                // The first in line, beaten (by a writer that did not wait): it tries
                // again at once, carrying what it read, listing nothing.
                let again = line.lost(&holder, announcement.is_some(), carry);
                base = holder;
                base_learned = env.clock.now();
                match after {
                    AfterLost::Behind { look_up } => {
                        if look_up && !newest_when_read {
                            base = look_up_latest(store, env, base.version).await?;
                            base_learned = env.clock.now();
                        }
                        if contention.shared() && announces && announcement.is_none() && cooperate::enabled(&base) {
                            let left = retry.timeout.saturating_sub(elapsed) + cooperate::DEADLINE_MARGIN;
                            announce_by = Some(env.clock.now() + TimeDelta::from_std(left).unwrap_or(TimeDelta::MAX));
                        }
                        Duration::ZERO
                    }
                    AfterLost::Race { .. } if again => {
                        store.commits.saw_contention(env.clock.monotonic(), latency);
                        Duration::ZERO
                    }
                    AfterLost::Race { pause } => {
                        store.commits.saw_contention(env.clock.monotonic(), latency);
                        if announces && announcement.is_none() && cooperate::enabled(&base) {
                            // Carried until its budget ends (and a margin for other clocks).
                            let left = retry.timeout.saturating_sub(elapsed) + cooperate::DEADLINE_MARGIN;
                            announce_by = Some(env.clock.now() + TimeDelta::from_std(left).unwrap_or(TimeDelta::MAX));
                        }
                        pause
                    }
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
                contention.failed(&retry, latency, uniform)
            }
        };
        for member in members.iter_mut().filter(|m| m.outcome.is_none()) {
            if !member.opts.retry.allows_another(member.attempts, elapsed) {
                // An announced transaction may be carried yet: its outcome is whichever
                // the chain shows first, its inclusion or its withdrawal.
                if let Some(announced) = announcement {
                    announced.marked = true;
                    return cooperate::withdraw(store, env, member, base.clone(), &announced.name, started).await.map(|o| vec![o]);
                }
                let e = CommitError::TooMuchContention {
                    attempts: member.attempts,
                    elapsed_ms: elapsed.as_millis() as u64,
                    last_version: version,
                };
                member.outcome = Some(fail(sharing, member, e)?);
            }
        }
        if members.iter().all(|m| m.outcome.is_some()) {
            return Ok(outcomes_of(members));
        }
        // During the pause (costing no time of their own): its announcement (counted as
        // made even if the write failed: it may have landed) and then, for a writer that
        // carries, the others' announcements for its next build. Listed after its own
        // announcement is written: writers that lost the same race announce together,
        // and each listing then holds those made before its own, so only the oldest
        // takes itself for the first in line.
        let announce = announce_by.take().map(|deadline| cooperate::announce(store, env, members[0].txn, members[0].opts, deadline));
        let list = (contention.lists_during_pause() && line.lists_during_pause() && sharing == Sharing::Group && cooperate::enabled(&base))
            .then(|| cooperate::list(store));
        // A writer announcing in its pause spends two round trips there, in which a
        // writer that does not wait makes a version: it reads on from its base while it
        // lists, so that its next create is not on a base taken meanwhile.
        let reads_on = announce.is_some() && list.is_some() && !base.carried_others();
        let ((made, listed, newer), ()) = futures::join!(
            async {
                let made = match announce {
                    Some(announce) => Some(announce.await),
                    None => None,
                };
                let read = async {
                    if reads_on {
                        read_on(store, env, &base, PAUSE_READ_ON).await
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
            *announcement = Some(Announcing { name, attempts: members[0].attempts, marked: false });
        }
        if let Some(newer) = newer {
            base = newer;
            base_learned = env.clock.now();
        }
        line.listed(listed);
    }
}

/// The pace a waiting writer presumes of a line it has not yet seen move (a new
/// process): on a fast store a few latencies are shorter than one leader's round (its
/// listing, its reads, its build), and the waiters would take over from a leader that
/// is not gone.
const UNSEEN_PACE: Duration = Duration::from_millis(25);

/// The versions a writer announcing in its pause reads on from its base.
const PAUSE_READ_ON: u64 = 2;

/// The most versions the first in line reads on from a base it held too long.
const READ_ON_AT_MOST: u128 = 4;

/// The failure of a transaction whose withdrawal version `version` recorded.
pub(crate) fn withdrawn(member: &Member<'_>, started: Duration, env: &Env, version: u64) -> CommitError {
    let elapsed_ms = (env.clock.monotonic() - started).as_millis() as u64;
    CommitError::TooMuchContention { attempts: member.attempts, elapsed_ms, last_version: version }
}

/// A member's failure: its own in a group, the job's in a job commit.
fn fail(sharing: Sharing<'_>, member: &Member<'_>, error: CommitError) -> Result<Outcome, CommitError> {
    match sharing {
        Sharing::Group => Ok(Outcome::Failed(error)),
        Sharing::Together { .. } => Err(CommitError::JobMember { transaction_id: member.txn.id, source: Box::new(error) }),
    }
}

fn first_open(members: &[Member<'_>]) -> usize {
    members.iter().position(|m| m.outcome.is_none()).expect("some member is open")
}

/// Each member's outcome, in batch order; one still open waits for a later version.
fn outcomes_of(members: Vec<Member<'_>>) -> Vec<Outcome> {
    members.into_iter().map(|m| m.outcome.unwrap_or(Outcome::Deferred)).collect()
}

/// Version `base + 1`: the open members applied to `base` in turn, each that may
/// follow the ones before it (a group defers the others to the next version; a job
/// re-runs a member on what earlier members changed where its rule needs it, and fails
/// if no serial order exists); then, for a writer that has lost races, the announced
/// transactions it carries (`carry`). Returns the version being built and the members
/// it holds.
async fn build(
    store: &TableStore,
    env: &Env,
    members: &mut [Member<'_>],
    base: &Arc<Manifest>,
    sharing: Sharing<'_>,
    carry: Option<&cooperate::Announced>,
) -> Result<(Building, Vec<usize>), CommitError> {
    let mut building = Building::new(env, base);
    let mut included = Vec::new();
    for (i, member) in members.iter_mut().enumerate() {
        if member.outcome.is_some() {
            continue;
        }
        let applied = match (member.follows(building.state(), building.earlier()), sharing) {
            (Follows::Rebase, _) => member.apply(store, env, building.state()).await.map(|next| (next, member.operation(), false)),
            (Follows::Rerun(scope), Sharing::Together { .. }) => {
                member.apply_rerun(store, env, building.state(), &scope).await.map(|(next, operation)| (next, operation, true))
            }
            (Follows::Rerun(_) | Follows::Not { .. }, Sharing::Group) => continue,
            (Follows::Not { earlier: k, reason }, Sharing::Together { .. }) => {
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
    if let (Some(announced), Some(&first)) = (carry, included.first()) {
        cooperate::carry(store, env, &mut building, announced, members[first].txn.id).await?;
    }
    Ok((building, included))
}

/// A version being built on a base: transactions applied in turn, each to the state the
/// previous produced (the state between them is never stored).
pub(crate) struct Building {
    base: Arc<Manifest>,
    timestamp: DateTime<Utc>,
    state: Arc<Manifest>,
    records: Vec<TransactionRecord>,
    earlier: Vec<Earlier>,
}

impl Building {
    pub(crate) fn new(env: &Env, base: &Arc<Manifest>) -> Self {
        let timestamp = commit_timestamp(env.clock.now(), base.timestamp);
        Building { base: base.clone(), timestamp, state: base.clone(), records: Vec::new(), earlier: Vec::new() }
    }

    /// The version it builds on.
    pub(crate) fn base(&self) -> &Arc<Manifest> {
        &self.base
    }

    /// The state after the transactions so far.
    pub(crate) fn state(&self) -> &Arc<Manifest> {
        &self.state
    }

    /// The transactions so far, as winners for the next one.
    pub(crate) fn earlier(&self) -> &[Earlier] {
        &self.earlier
    }

    /// Adds a transaction (its `record`, with its idempotency `key`) that makes `next`.
    pub(crate) fn push(&mut self, record: TransactionRecord, key: Option<String>, next: NextState) {
        let added = self.state.next_fragment_id..next.next_fragment_id;
        self.earlier.push(Earlier { id: record.id, operation: record.operation.clone(), added, key });
        self.records.push(record);
        self.state = Arc::new(Manifest {
            format_version: format_for(&next.schema),
            version: self.base.version + 1,
            parent_version: Some(self.base.version),
            timestamp: self.timestamp,
            // Filled in by `finish`.
            transactions: self.base.transactions.clone(),
            schema: next.schema,
            segments: next.segments,
            next_fragment_id: next.next_fragment_id,
            properties: next.properties,
        });
    }

    /// The version, `None` if it holds no transaction.
    pub(crate) fn finish(self) -> Option<Manifest> {
        if self.records.is_empty() {
            return None;
        }
        let mut manifest = Arc::unwrap_or_clone(self.state);
        manifest.transactions = self.records;
        Some(manifest)
    }
}

/// The versions after `base` that are there already (the next `ahead`, read at once;
/// the chain has no gaps): the newest of them, or `None` (also when a read fails: the
/// writer then creates on `base`, and a lost create reads the winner).
async fn read_on(store: &TableStore, env: &Env, base: &Manifest, ahead: u64) -> Option<Arc<Manifest>> {
    let newest = newest_in_order((1..=ahead).map(|k| store.read_manifest_now(base.version + k))).await?;
    store.commits.saw_newest(&newest, env.clock.monotonic());
    Some(newest)
}

/// The last of `reads` (of consecutive versions, all started at once, taken in order)
/// before the first that finds nothing or fails. The chain has no gaps: the reads after
/// that one can only find nothing, and are not waited for.
async fn newest_in_order<T, E>(reads: impl IntoIterator<Item = impl std::future::Future<Output = Result<Option<T>, E>>>) -> Option<T> {
    use futures::StreamExt;
    let mut reads: futures::stream::FuturesOrdered<_> = reads.into_iter().collect();
    let mut newest = None;
    while let Some(Ok(Some(read))) = reads.next().await {
        newest = Some(read);
    }
    newest
}

/// Whether a lost create's winner was the newest version when read: the versions read
/// after it (`read_after`, see `settle.rs`) ended before the last one (one was absent;
/// or a read failed, and if the holder was not the newest, the next create loses and
/// reads the winner: the chain decides, this only saves a lookup).
fn newest_when_read(holder: u64, created: u64, read_after: u64) -> bool {
    holder < created + read_after
}

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

#[cfg(test)]
mod tests {
    use futures::future::{BoxFuture, FutureExt};

    use super::*;

    type Read = BoxFuture<'static, Result<Option<u64>, ()>>;

    #[tokio::test]
    async fn reading_on_takes_the_versions_in_order_up_to_the_first_absent_and_waits_for_no_later_read() {
        let found = |v| async move { Ok(Some(v)) }.boxed();
        let absent = || async { Ok(None) }.boxed();
        let never = || std::future::pending().boxed();
        let reads: Vec<Read> = vec![found(1), found(2), absent(), never(), never()];
        assert_eq!(newest_in_order(reads).await, Some(2), "later reads would only find nothing");
        let failed: Vec<Read> = vec![found(1), async { Err(()) }.boxed(), never()];
        assert_eq!(newest_in_order(failed).await, Some(1), "a failed read ends what is known");
        let none: Vec<Read> = vec![absent(), never()];
        assert_eq!(newest_in_order(none).await, None);
    }

    #[test]
    fn a_winner_is_known_newest_when_the_reads_after_it_found_nothing() {
        assert!(newest_when_read(7, 7, 1), "version 8 was read and absent");
        assert!(!newest_when_read(8, 7, 1), "version 8 was found: the holder is it, the next one unread");
        assert!(!newest_when_read(7, 7, 0), "nothing read after it");
    }
}

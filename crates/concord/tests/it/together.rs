//! Multi-table transactions (FORMAT.md §18): staged transactions of several tables of
//! one store commit all or none; readers never see one table's part without the
//! others'; a part that fails aborts the whole, and what landed is undone; a crashed
//! owner's transaction is aborted and undone by the next writer past its deadline. The
//! seeded simulation below runs owners, single-table writers and readers over a store
//! that injects faults, crashes owners at random points, and checks every run.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};

use concord::store::StoreKind;
use concord::{
    commit_together, CommitOptions, Env, ErrorKind, RandomSource, RetryPolicy, Schema, StdRandom, StoreResolver, Table, TableLocation,
    TogetherError, Write,
};
use object_store::path::Path;

use crate::common::*;
use crate::sim::{Faults, SimClock, SimStore};

async fn staged_append(t: &Table, ids: impl IntoIterator<Item = i64>) -> concord::PreparedTransaction {
    t.prepare(Write::Append { input: rows(t.schema(), ids).into() }).await.expect("prepare")
}

#[tokio::test]
async fn tables_of_one_store_commit_together_or_not_at_all() {
    let dir = tempfile::tempdir().unwrap();
    let (a_uri, b_uri) = (dir.path().join("orders"), dir.path().join("items"));
    let resolver = StoreResolver::new();
    let a = create_table(&resolver, a_uri.to_str().unwrap(), SCHEMA).await;
    let b = create_table(&resolver, b_uri.to_str().unwrap(), SCHEMA).await;
    let (ta, tb) = (staged_append(&a, [1, 2]).await, staged_append(&b, [10, 20, 30]).await);
    let infos =
        commit_together(&[(&a, &[ta.clone()][..]), (&b, &[tb.clone()][..])], &CommitOptions::default(), Some("order-1")).await.unwrap();
    assert_eq!((infos[0][0].version, infos[1][0].version), (1, 1));
    assert_eq!((ids(&a.latest().await.unwrap()).await, ids(&b.latest().await.unwrap()).await), (vec![1, 2], vec![10, 20, 30]));
    // A retry with the same key commits nothing again.
    let again = commit_together(&[(&a, &[ta][..]), (&b, &[tb][..])], &CommitOptions::default(), Some("order-1")).await.unwrap();
    assert!(again[0][0].idempotent_replay && again[1][0].idempotent_replay);
    assert_eq!(a.latest().await.unwrap().version(), 1);
    // Tables of different stores, and one table twice, are refused, nothing written.
    let elsewhere = create_table(&resolver, "memory://together-other/t", SCHEMA).await;
    let tc = staged_append(&elsewhere, [5]).await;
    let ta = staged_append(&a, [3]).await;
    let refused = commit_together(&[(&a, &[ta.clone()][..]), (&elsewhere, &[tc][..])], &CommitOptions::default(), None).await.unwrap_err();
    assert!(matches!(refused, TogetherError::DifferentStores { .. }) && refused.kind() == ErrorKind::InvalidInput, "{refused}");
    let twice = commit_together(&[(&a, &[ta.clone()][..]), (&a, &[ta][..])], &CommitOptions::default(), None).await.unwrap_err();
    assert!(matches!(twice, TogetherError::SameTable { .. }), "{twice}");
    assert_eq!(a.latest().await.unwrap().version(), 1);
}

#[tokio::test]
async fn a_part_that_cannot_commit_aborts_all_and_what_landed_is_undone() {
    let dir = tempfile::tempdir().unwrap();
    let resolver = StoreResolver::new();
    let a = create_table(&resolver, dir.path().join("a").to_str().unwrap(), SCHEMA).await;
    let b = create_table(&resolver, dir.path().join("b").to_str().unwrap(), SCHEMA).await;
    let ta = staged_append(&a, [1]).await;
    // B's part expects a version B has moved past: it cannot commit.
    let tb = staged_append(&b, [2]).await;
    let expecting = CommitOptions { expect_version: Some(0), ..CommitOptions::default() };
    let staged = b.stage(&tb, &expecting).await.unwrap();
    b.append(rows(b.schema(), [3]), &CommitOptions::default()).await.unwrap();
    let tb = b.load_staged(&staged.to_string()).await.unwrap();
    let failed = commit_together(&[(&a, &[ta][..]), (&b, &[tb][..])], &CommitOptions::default(), None).await.unwrap_err();
    assert!(matches!(failed, TogetherError::Part { .. }), "{failed}");
    // Nothing of it reads anywhere; A's part was undone (a restore after it).
    let (a, b) = (a.latest().await.unwrap(), b.latest().await.unwrap());
    assert_eq!((ids(&a).await, ids(&b).await), (vec![], vec![3]));
    assert!(a.checkout(1).await.is_err(), "the aborted part is not read");
    check_feed(&a).await.unwrap();
    a.append(rows(a.schema(), [4]), &CommitOptions::default()).await.unwrap();
    assert_eq!(ids(&a.latest().await.unwrap()).await, vec![4]);
}

/// One multi-table owner's operation and what came of it.
#[derive(Debug, Clone)]
struct Owned {
    ids: Vec<i64>,
    /// `Some(true)`: committed; `Some(false)`: failed for sure; `None`: unknown (crashed,
    /// or the decision's outcome unknown).
    committed: Option<bool>,
}

/// What a run saw.
#[derive(Debug, Default, Clone, PartialEq)]
struct Seen {
    committed: usize,
    failed: usize,
    unknown: usize,
    injected: u64,
}

/// Multi-table owners' row ids: 1000 * owner + 10 * op + (0, 1).
fn owner_ids(owner: u64, op: u64) -> Vec<i64> {
    let base = (1000 * owner + 10 * op) as i64;
    vec![base, base + 1]
}

async fn owner(a: Table, b: Table, owner: u64, ops: u64, out: Arc<Mutex<Vec<Owned>>>) {
    let options = CommitOptions { retry: RetryPolicy { max_attempts: 8, ..RetryPolicy::default() }, ..CommitOptions::default() };
    for op in 0..ops {
        let ids = owner_ids(owner, op);
        out.lock().unwrap().push(Owned { ids: ids.clone(), committed: None });
        let (Ok(ta), Ok(tb)) = (
            a.prepare(Write::Append { input: rows(a.schema(), ids.clone()).into() }).await,
            b.prepare(Write::Append { input: rows(b.schema(), ids.clone()).into() }).await,
        ) else {
            out.lock().unwrap().last_mut().unwrap().committed = Some(false);
            continue;
        };
        let result = commit_together(&[(&a, &[ta][..]), (&b, &[tb][..])], &options, None).await;
        let committed = match &result {
            Ok(_) => Some(true),
            Err(TogetherError::OutcomeUnknown { .. }) => None,
            Err(_) => Some(false),
        };
        out.lock().unwrap().last_mut().unwrap().committed = committed;
    }
}

/// The owners' rows a table's visible latest version holds.
async fn owned_rows(t: &Table) -> Result<BTreeSet<i64>, String> {
    let latest = t.latest().await.map_err(|e| e.to_string())?;
    Ok(try_ids(&latest).await?.into_iter().filter(|id| *id >= 1000).collect())
}

/// A reader: each table's owned rows, read one after the other, only grow, and hold
/// what the other table showed before (a row shown is committed, on every table).
async fn reader(a: Table, b: Table, reads: u64, violations: Arc<Mutex<Vec<String>>>) {
    let mut last = BTreeSet::new();
    for i in 0..reads {
        let t = if i % 2 == 0 { &a } else { &b };
        let Ok(now) = owned_rows(t).await else { continue };
        if let Some(missing) = last.difference(&now).next() {
            violations.lock().unwrap().push(format!("read {i}: row {missing} was read before (in the other table) and is not here"));
        }
        last = now;
        tokio::task::yield_now().await;
    }
}

fn simulate(seed: u64) -> Result<Seen, String> {
    let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
    runtime.block_on(async {
        let setup = StdRandom::seeded(seed);
        let store = Arc::new(SimStore::new(seed ^ 1, Faults::drawn(&setup)));
        let clock = Arc::new(SimClock::default());
        let env = Env { clock: clock.clone(), random: Arc::new(StdRandom::seeded(seed ^ 2)) };
        let location =
            |root: &str| TableLocation::on_store(format!("memory://sim/{root}"), store.clone(), Path::from(root), StoreKind::Memory);
        let schema = Schema::parse(SCHEMA).unwrap();
        let a = Table::create(location("a"), env.clone(), schema.clone()).await.map_err(|e| e.to_string())?;
        let b = Table::create(location("b"), env.clone(), schema).await.map_err(|e| e.to_string())?;
        let owners = 2 + seed % 2;
        let mut opened = Vec::new();
        for _ in 0..owners {
            opened.push((
                Table::open(location("a"), env.clone()).await.map_err(|e| e.to_string())?,
                Table::open(location("b"), env.clone()).await.map_err(|e| e.to_string())?,
            ));
        }
        store.faults_on(true);
        let mut tasks = Vec::new();
        for (o, (ta, tb)) in (1..).zip(opened) {
            let out = Arc::new(Mutex::new(Vec::new()));
            tasks.push((tokio::spawn(owner(ta, tb, o, 3, out.clone())), out));
        }
        // A writer of one table only, and a reader of both.
        let single = {
            let t = if seed.is_multiple_of(2) { a.clone() } else { b.clone() };
            tokio::spawn(async move {
                for i in 0..3 {
                    let _ = t.append(rows(t.schema(), [i]), &CommitOptions::default()).await;
                }
            })
        };
        let violations = Arc::new(Mutex::new(Vec::new()));
        let read = tokio::spawn(reader(a.clone(), b.clone(), 30, violations.clone()));
        // In half the runs an owner crashes after a random number of scheduling steps:
        // its transaction in flight may be left undecided, with parts committed.
        if seed % 2 == 1 {
            for _ in 0..setup.next_u64() % 300 {
                tokio::task::yield_now().await;
            }
            tasks[0].0.abort();
        }
        let mut owned = Vec::new();
        for (task, out) in tasks {
            match task.await {
                Ok(()) => {}
                Err(e) if e.is_cancelled() => {}
                Err(e) => return Err(e.to_string()),
            }
            owned.extend(out.lock().unwrap().drain(..));
        }
        single.await.map_err(|e| e.to_string())?;
        read.await.map_err(|e| e.to_string())?;
        // Liveness: faults off, past every deadline, each table's next writer settles
        // what is undecided (aborts and undoes it) and commits.
        store.faults_on(false);
        concord::Clock::sleep(clock.as_ref(), concord::limits::MULTI_DEADLINE * 2).await;
        for t in [&a, &b] {
            t.append(rows(t.schema(), [999]), &CommitOptions::default()).await.map_err(|e| format!("liveness: {e}"))?;
        }
        if let Some(v) = violations.lock().unwrap().first() {
            return Err(format!("a reader saw one table's part: {v}"));
        }
        let (rows_a, rows_b) = (owned_rows(&a).await?, owned_rows(&b).await?);
        if rows_a != rows_b && std::env::var("CONCORD_SIM_DUMP").is_ok() {
            use futures::TryStreamExt;
            use object_store::{ObjectStore, ObjectStoreExt};
            let all: Vec<_> = store.inner.list(None).try_collect().await.unwrap();
            for meta in all {
                if meta.location.as_ref().contains("/data/") {
                    continue;
                }
                let body = store.inner.get(&meta.location).await.unwrap().bytes().await.unwrap();
                eprintln!("{}: {}", meta.location, String::from_utf8_lossy(&body));
            }
            eprintln!("owned: {owned:?}");
        }
        if rows_a != rows_b {
            return Err(format!("the tables disagree: {:?} against {:?}", rows_a.symmetric_difference(&rows_b).collect::<Vec<_>>(), ()));
        }
        let mut seen = Seen { injected: store.injected(), ..Seen::default() };
        for o in &owned {
            let present = o.ids.iter().all(|id| rows_a.contains(id));
            let absent = o.ids.iter().all(|id| !rows_a.contains(id));
            match o.committed {
                Some(true) if !present => return Err(format!("{o:?} reported committed, not there")),
                Some(false) if !absent => return Err(format!("{o:?} reported failed, there")),
                None if !(present || absent) => return Err(format!("{o:?} half there")),
                Some(true) => seen.committed += 1,
                Some(false) => seen.failed += 1,
                None => seen.unknown += 1,
            }
        }
        for t in [&a, &b] {
            if let Err(e) = check_feed(t).await {
                return Err(format!("change feed: {e}"));
            }
        }
        Ok(seen)
    })
}

/// Seeds that once failed: replayed on every run.
/// 0: a feed starting at an aborted part read its ids from the version before it.
/// 16: a withdrawal was built on an aborted part (its rows then read in one table).
const REGRESSIONS: &[u64] = &[0, 16];

#[test]
fn multi_table_transactions_under_faults_and_crashes_are_all_or_nothing() {
    if let Ok(seed) = std::env::var("CONCORD_SIM_SEED") {
        let seed: u64 = seed.parse().expect("CONCORD_SIM_SEED is a number");
        eprintln!("replaying seed {seed}: {:?}", simulate(seed));
        return;
    }
    let seeds: Vec<u64> = match std::env::var("CONCORD_SIM_SEEDS") {
        Ok(range) => {
            let (start, end) = range.split_once("..").expect("<start>..<end>");
            (start.parse().unwrap()..end.parse().unwrap()).collect()
        }
        Err(_) => REGRESSIONS.iter().copied().chain(0..200).collect(),
    };
    let mut total = Seen::default();
    for &seed in &seeds {
        match simulate(seed) {
            Ok(seen) => {
                total.committed += seen.committed;
                total.failed += seen.failed;
                total.unknown += seen.unknown;
                total.injected += seen.injected;
            }
            Err(e) => panic!("together seed {seed} failed: {e}\nreplay: CONCORD_SIM_SEED={seed} cargo test -p concord --test it together -- --nocapture\nthen add {seed} to REGRESSIONS"),
        }
    }
    eprintln!("{} seeds passed: {total:?}", seeds.len());
    assert!(total.committed > 0 && total.failed + total.unknown > 0, "{total:?}");
}

#[test]
fn a_together_seed_replays_exactly() {
    assert_eq!(simulate(7).unwrap(), simulate(7).unwrap());
}

//! Deterministic simulation: writers on one single-threaded runtime, over a simulated
//! store that injects, from one seeded generator, errors before a write applies,
//! errors after it applies (the caller sees a failure, the write landed), spurious
//! precondition failures, read errors and reordering (random yields). Clock, ids and
//! backoff come from the same seed, so a seed replays exactly.
//!
//! Half the writers share one table handle (tasks of one process: their commits may
//! share a version), the others have their own (processes: their appends may be
//! announced and carried by another's commit, cooperative commits), in half the runs
//! a new one for each operation (CLI processes, which learn of a line from the version
//! they start from). In some runs one
//! writer has a tight budget (2 attempts: it withdraws what it announced) and one
//! crashes (its task is aborted at a random point: its operation in flight may or may
//! not have committed). Each run checks: one chain of versions; every acknowledged
//! operation committed exactly once at its reported version; no failed or withdrawn
//! one committed; a crashed or unknown one at most once; every version equals its
//! predecessor plus its transactions, in order (reference model). Then a liveness
//! phase with faults off: every writer finishes within its retry budget.
//!
//! A failing seed prints `CONCORD_SIM_SEED=<seed>` to replay it; keep it in `REGRESSIONS`.
//! Longer sweeps run locally: `CONCORD_SIM_SEEDS=<start>..<end>` runs that range instead.

use std::collections::BTreeMap;
use std::ops::Range;
use std::sync::{Arc, Mutex};

use concord::store::StoreKind;
use concord::{
    Assignment, CommitError, CommitOptions, Env, RandomSource, RetryPolicy, Schema, StdRandom, Table, TableLocation, WriteError,
};
use object_store::path::Path;

use crate::common::*;
use crate::sim::{Faults, SimClock, SimStore};

/// Seeds that once failed: replayed on every run.
/// 26: an owner whose create lost to a version carrying its transaction took that
/// version for its own manifest (cooperative commits).
/// 5256: an owner reported unknown (its own create unsettled) while its announcement
/// could still be carried; its retry then failed, and it was carried.
/// 5000017, 5000333: a writer waiting in line behind a line it had not seen move paused
/// for its reads' round trip, which takes no time on this clock: it waited forever.
const REGRESSIONS: &[u64] = &[26, 5256, 5000017, 5000333];
/// Fixed seeds per run, besides the regressions and the fresh ones.
const FIXED: Range<u64> = 0..800;
const FRESH: u64 = 200;

/// One writer operation, a pure function of (seed, writer, index).
#[derive(Debug, Clone)]
enum Op {
    Append(Vec<i64>),
    Delete(&'static str),
    Update(&'static str),
    Merge(Vec<i64>),
}

fn plan(seed: u64, writer: u64, index: u64) -> Op {
    let r = StdRandom::seeded(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ (writer << 32) ^ index);
    let pick = |n: u64| r.next_u64() % n;
    let pred = || PREDICATES[pick(PREDICATES.len() as u64) as usize].0;
    match pick(8) {
        0..=3 => Op::Append((0..1 + pick(4)).map(|k| (100 + writer * 1000 + index * 10 + k) as i64).collect()),
        4 => Op::Delete(pred()),
        5 => Op::Update(pred()),
        _ => {
            let mut ids: Vec<i64> = (0..1 + pick(3)).map(|_| pick(40) as i64).collect();
            ids.sort_unstable();
            ids.dedup();
            Op::Merge(ids)
        }
    }
}

fn key(writer: u64, index: u64) -> String {
    format!("w{writer}-o{index}")
}

/// The reference model: id -> score.
fn apply(state: &mut BTreeMap<i64, f64>, op: &Op) {
    match op {
        Op::Append(ids) | Op::Merge(ids) => state.extend(ids.iter().map(|i| (*i, *i as f64))),
        Op::Delete(sql) => {
            let test = oracle_predicate(sql);
            state.retain(|id, _| !test(*id));
        }
        Op::Update(sql) => {
            let test = oracle_predicate(sql);
            state.iter_mut().filter(|(id, _)| test(**id)).for_each(|(_, s)| *s += 1.0);
        }
    }
}

async fn execute(table: &Table, op: &Op, options: &CommitOptions) -> std::result::Result<concord::CommitInfo, WriteError> {
    let schema = table.schema().clone();
    match op {
        // Appended ids are unique, so an append is a merge that matches nothing.
        Op::Append(ids) => table.append(&[rows(&schema, ids.iter().copied())], options).await,
        Op::Merge(ids) => table.merge(&[rows(&schema, ids.iter().copied())], &["id".to_string()], options).await,
        Op::Delete(sql) => table.delete(sql, options).await,
        Op::Update(sql) => table.update(&[Assignment { column: "score".into(), expr: "score + 1".into() }], Some(sql), options).await,
    }
}

/// What one writer saw: (index, Ok(version) | Err(definitely failed)); "unknown" for
/// an outcome it never learned (also the operation a crash interrupted).
type Outcomes = Vec<(u64, std::result::Result<u64, String>)>;

/// A writer's table handle: one for all its operations, or a new one opened for each
/// (a process per operation, as the CLI: it knows nothing of the table's contention).
enum Handle {
    Kept(Table),
    PerOperation(TableLocation, Env),
}

/// Runs `ops` operations of writer `w`, recording each outcome in `out` as it goes (an
/// operation in flight is "unknown" until it returns: what a crash leaves).
async fn writer_into(handle: Handle, seed: u64, w: u64, ops: u64, max_attempts: u32, out: Arc<Mutex<Outcomes>>) {
    for index in 0..ops {
        let table = match &handle {
            Handle::Kept(table) => table.clone(),
            Handle::PerOperation(location, env) => {
                // Opening reads the store too (faults included): up to 20 tries.
                let mut opened = Table::open(location.clone(), env.clone()).await;
                for _ in 1..20 {
                    if opened.is_ok() {
                        break;
                    }
                    opened = Table::open(location.clone(), env.clone()).await;
                }
                match opened {
                    Ok(table) => table,
                    // Nothing was tried: the operation definitely did not commit.
                    Err(e) => {
                        out.lock().unwrap().push((index, Err(format!("open: {e}"))));
                        continue;
                    }
                }
            }
        };
        let op = plan(seed, w, index);
        out.lock().unwrap().push((index, Err("unknown".to_string())));
        let retry = RetryPolicy { max_attempts, ..RetryPolicy::default() };
        let options = CommitOptions { idempotency_key: Some(key(w, index)), retry, ..CommitOptions::default() };
        let mut tries = 0;
        let mut unknown = false;
        let outcome = loop {
            tries += 1;
            match execute(&table, &op, &options).await {
                // Nothing to change (a delete matching no row): no version is made.
                Ok(info) if info.abandoned.is_some() => break Err(format!("committed nothing: {}", info.abandoned.unwrap_or_default())),
                Ok(info) => break Ok(info.version),
                // Unknown: a retry with the same key is safe.
                Err(WriteError::Commit(CommitError::CommitStateUnknown { .. })) if tries < 20 => {
                    unknown = true;
                    continue;
                }
                Err(WriteError::Commit(CommitError::CommitStateUnknown { .. })) => break Err("unknown".to_string()),
                // A retry after an unknown outcome that fails leaves it unknown: the
                // earlier attempt may have committed (or, announced, be carried yet).
                Err(_) if unknown => break Err("unknown".to_string()),
                Err(e) => break Err(e.to_string()),
            }
        };
        *out.lock().unwrap().last_mut().expect("pushed above") = (index, outcome);
    }
}

async fn writer(table: Table, seed: u64, w: u64, ops: u64) -> Outcomes {
    let out = Arc::new(Mutex::new(Vec::new()));
    writer_into(Handle::Kept(table), seed, w, ops, 6, out.clone()).await;
    Arc::try_unwrap(out).expect("the writer is done").into_inner().unwrap()
}

/// What a run saw, beside the check: versions, faults injected, transactions carried by
/// another writer's commit, withdrawals.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
struct Seen {
    versions: u64,
    injected: u64,
    carried: u64,
    withdrawn: u64,
}

/// Checks every invariant; `Err` describes the first violation.
async fn check(table: &Table, seed: u64, outcomes: &[(u64, Outcomes)]) -> std::result::Result<Seen, String> {
    let latest = table.latest().await.map_err(|e| e.to_string())?;
    let history = latest.history().await.map_err(|e| e.to_string())?;
    if history.iter().map(|v| v.version).ne(0..=latest.version()) {
        return Err("versions are not one chain".into());
    }
    let mut by_key: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    for v in &history {
        for k in v.transactions.iter().filter_map(|t| t.idempotency_key.as_ref()) {
            by_key.entry(k.clone()).or_default().push(v.version);
        }
    }
    for (w, list) in outcomes {
        for (index, outcome) in list {
            let k = key(*w, *index);
            match (outcome, by_key.get(&k).map(Vec::as_slice)) {
                (Ok(v), Some([found])) if found == v => {}
                (Err(e), None) if e != "unknown" => {}
                (Err(e), None | Some([_])) if e == "unknown" => {}
                (o, found) => return Err(format!("{k}: outcome {o:?} but in history at {found:?}")),
            }
        }
    }
    let mut state = BTreeMap::new();
    let mut seen = Seen { versions: history.len() as u64, ..Seen::default() };
    for v in history.iter().skip(1) {
        // A shared version is its transactions applied in order.
        for t in &v.transactions {
            seen.carried += u64::from(t.carried_by.is_some());
            if t.operation == "withdraw" {
                seen.withdrawn += 1;
                continue;
            }
            let (w, i) =
                t.idempotency_key.as_deref().and_then(|k| k.strip_prefix('w')?.split_once("-o")).ok_or("a transaction without a key")?;
            apply(&mut state, &plan(seed, w.parse().unwrap(), i.parse().unwrap()));
        }
        let version = latest.checkout(v.version).await.map_err(|e| e.to_string())?;
        let mut actual = BTreeMap::new();
        for b in all_rows(&version).await {
            use concord::arrow::array::AsArray;
            use concord::arrow::datatypes::{Float64Type, Int64Type};
            let (ids, scores) = (b.column(0).as_primitive::<Int64Type>(), b.column(2).as_primitive::<Float64Type>());
            let amounts = b.column(3).as_primitive::<concord::arrow::datatypes::Decimal128Type>();
            let keys = b.column(4).as_struct().column(0).as_primitive::<Int64Type>().clone();
            for r in 0..b.num_rows() {
                if amounts.value(r) != i128::from(ids.value(r)) || keys.value(r) != ids.value(r) {
                    return Err(format!("version {}: id {}'s decimal or nested value changed", v.version, ids.value(r)));
                }
                if actual.insert(ids.value(r), scores.value(r)).is_some() {
                    return Err(format!("version {}: id {} twice", v.version, ids.value(r)));
                }
            }
        }
        if actual != state {
            let context: Vec<String> = history
                .iter()
                .filter(|h| h.version <= v.version)
                .flat_map(|h| {
                    h.transactions.iter().map(move |t| {
                        format!(
                            "v{} {} {:?} read {:?} rebased {:?} rerun {} carried {}",
                            h.version,
                            t.operation,
                            t.idempotency_key,
                            t.read_version,
                            h.rebased_over,
                            t.rerun,
                            t.carried_by.is_some()
                        )
                    })
                })
                .collect();
            let mut frags = Vec::new();
            for h in history.iter().filter(|h| h.version <= v.version) {
                let t = latest.checkout(h.version).await.map_err(|e| e.to_string())?;
                let f: Vec<(u64, u64, u64)> =
                    t.fragments().await.map_err(|e| e.to_string())?.iter().map(|f| (f.id, f.physical_rows, f.live_rows())).collect();
                frags.push(format!("v{} fragments {f:?}", h.version));
            }
            return Err(format!(
                "version {} is not version {} + its {}\n  expected {state:?}\n  actual {actual:?}\n  {}\n  {}",
                v.version,
                v.version - 1,
                v.operation,
                context.join("\n  "),
                frags.join("\n  ")
            ));
        }
    }
    Ok(seen)
}

/// One seeded run: `writers` x `ops` with faults, then one more op each without.
fn simulate(seed: u64) -> std::result::Result<Seen, String> {
    let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
    runtime.block_on(async {
        let setup = StdRandom::seeded(seed);
        let store = Arc::new(SimStore::new(seed ^ 1, Faults::drawn(&setup)));
        let env = Env { clock: Arc::new(SimClock::default()), random: Arc::new(StdRandom::seeded(seed ^ 2)) };
        let location = TableLocation::on_store("memory://sim", store.clone(), Path::from("t"), StoreKind::Memory);
        // A decimal and a nested column ride along with every row (checked below).
        let schema = Schema::parse(&format!("{SCHEMA}, amount decimal(12, 2), meta struct<k bigint, tags list<varchar>>")).unwrap();
        let table = Table::create(location.clone(), env.clone(), schema).await.map_err(|e| e.to_string())?;
        let writers = 2 + seed % 3;
        let ops = 3;
        // Even writers share one handle (as tasks of one process: their commits may
        // share versions); odd ones have their own (as processes), in half the runs a
        // new one for each operation (as CLI processes).
        let per_operation = seed % 2 == 1;
        let mut handles = Vec::new();
        for w in 0..writers {
            handles.push(if w % 2 == 0 {
                Handle::Kept(table.clone())
            } else if per_operation {
                Handle::PerOperation(location.clone(), env.clone())
            } else {
                Handle::Kept(Table::open(location.clone(), env.clone()).await.map_err(|e| e.to_string())?)
            });
        }
        store.faults_on(true);
        // Writer 1 (its own handle) has a tight budget in a third of the runs; the last
        // writer with its own handle crashes in a quarter, after a random number of
        // scheduling steps.
        let tight = seed.is_multiple_of(3);
        let crash_after = (seed % 4 == 1).then(|| setup.next_u64() % 400);
        let victim = if writers.is_multiple_of(2) { writers - 1 } else { writers - 2 } as usize;
        let mut tasks = Vec::new();
        for (w, handle) in handles.into_iter().enumerate() {
            let out = Arc::new(Mutex::new(Vec::new()));
            let max_attempts = if tight && w == 1 { 2 } else { 6 };
            tasks.push((tokio::spawn(writer_into(handle, seed, w as u64, ops, max_attempts, out.clone())), out));
        }
        if let Some(steps) = crash_after {
            for _ in 0..steps {
                tokio::task::yield_now().await;
            }
            tasks[victim].0.abort();
        }
        let mut outcomes = Vec::new();
        for (w, (task, out)) in tasks.into_iter().enumerate() {
            match task.await {
                Ok(()) => {}
                Err(e) if e.is_cancelled() => {}
                Err(e) => return Err(e.to_string()),
            }
            outcomes.push((w as u64, std::mem::take(&mut *out.lock().unwrap())));
        }
        // Liveness: faults off, every writer's next operation commits within its budget.
        store.faults_on(false);
        for w in 0..writers {
            let last = writer(table.clone(), seed, w + 100, 1).await;
            if last.iter().any(|(_, o)| o.as_ref().is_err_and(|e| !e.starts_with("committed nothing"))) {
                return Err(format!("liveness: writer {w} failed with faults off: {last:?}"));
            }
            outcomes.push((w + 100, last));
        }
        let seen = check(&table, seed, &outcomes).await?;
        check_feed(&table).await.map_err(|e| format!("change feed: {e}"))?;
        Ok(Seen { injected: store.injected(), ..seen })
    })
}

fn run_seeds(seeds: impl IntoIterator<Item = u64>) -> (usize, Seen) {
    let (mut runs, mut total) = (0, Seen::default());
    for seed in seeds {
        match simulate(seed) {
            Ok(seen) => {
                runs += 1;
                total.versions += seen.versions;
                total.injected += seen.injected;
                total.carried += seen.carried;
                total.withdrawn += seen.withdrawn;
            }
            Err(e) => panic!("simulation seed {seed} failed: {e}\nreplay: CONCORD_SIM_SEED={seed} cargo test -p concord --test it simulation -- --nocapture\nthen add {seed} to REGRESSIONS"),
        }
    }
    (runs, total)
}

#[test]
fn seeded_simulation_with_injected_faults() {
    if let Ok(seed) = std::env::var("CONCORD_SIM_SEED") {
        let seed: u64 = seed.parse().expect("CONCORD_SIM_SEED is a number");
        eprintln!("replaying seed {seed}: {:?}", simulate(seed));
        return;
    }
    if let Ok(range) = std::env::var("CONCORD_SIM_SEEDS") {
        let (start, end) = range.split_once("..").expect("CONCORD_SIM_SEEDS is <start>..<end>");
        let (start, end): (u64, u64) = (start.parse().expect("a start seed"), end.parse().expect("an end seed"));
        let started = std::time::Instant::now();
        let (runs, seen) = run_seeds(start..end);
        eprintln!("seeds {start}..{end}: {runs} passed, {seen:?}, {:.1} s", started.elapsed().as_secs_f64());
        return;
    }
    let fresh_base =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64 % 1_000_000_000 + 1_000_000;
    eprintln!("fresh seeds {fresh_base}..{}", fresh_base + FRESH);
    let started = std::time::Instant::now();
    let (runs, seen) = run_seeds(REGRESSIONS.iter().copied().chain(FIXED).chain(fresh_base..fresh_base + FRESH));
    eprintln!("{runs} seeds passed: {seen:?}, {:.1} s", started.elapsed().as_secs_f64());
    assert!(runs >= 1000);
    // The runs really exercise cooperative commits: carried and withdrawn transactions.
    assert!(seen.carried > 0 && seen.withdrawn > 0, "{seen:?}");
}

#[test]
fn a_seed_replays_exactly() {
    let first = simulate(42).unwrap();
    let second = simulate(42).unwrap();
    assert_eq!(first, second, "same seed, same versions and the same faults");
}

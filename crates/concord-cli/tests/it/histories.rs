//! Random concurrent histories (seeded): writers race random appends, deletes,
//! overwrites and restores on one table; afterwards every version must equal the
//! reference applied to its predecessor (serializable), and failed transactions must
//! have left nothing. The seed fixes each writer's choice of operations; the
//! interleaving is real (threads), so a failing seed is printed with the message and
//! kept in `SEEDS` as a regression. (Seeded, fault-injected simulation of the
//! interleaving itself is the reliability issue's.)

use std::collections::HashMap;

use concord::{CommitError, CommitOptions, Operation, RandomSource, RetryPolicy, StdRandom, StoreResolver, Table, WriteError};

use crate::common::*;

/// Seeds run on every CI run; failing seeds found later are added here.
/// 858170: a merge lacking a column another writer added updates matched rows in place
/// (duplicates stay); the replay first expected them collapsed.
const SEEDS: [u64; 7] = [1, 2, 3, 4, 5, 6, 858_170];

/// The predicates writers delete with (all in the oracle's table).
const DELETES: [&str; 5] = ["id % 2 = 0", "id < 20", "id >= 80", "id % 3 = 1", "id % 7 = 0"];

/// What one writer did: rows each committed append/overwrite wrote, and the
/// transactions that failed or gave way (committing nothing).
#[derive(Default)]
struct Log {
    written: HashMap<uuid::Uuid, Vec<i64>>,
    failed: Vec<String>,
}

async fn writer(table: Table, seed: u64, ops: usize, tight_budget: bool) -> Log {
    let random = StdRandom::seeded(seed);
    let pick = |n: u64| random.next_u64() % n;
    let retry = if tight_budget { RetryPolicy { max_attempts: 2, ..RetryPolicy::default() } } else { RetryPolicy::default() };
    let options = CommitOptions { retry, ..CommitOptions::default() };
    let mut log = Log::default();
    for _ in 0..ops {
        let outcome = match pick(23) {
            0..=10 => {
                let ids: Vec<i64> = (0..1 + pick(8)).map(|_| pick(100) as i64).collect();
                table.append(&[rows(table.schema(), ids.iter().copied())], &options).await.map(|i| (i, Some(ids)))
            }
            11..=14 => table.delete(DELETES[pick(DELETES.len() as u64) as usize], &options).await.map(|i| (i, None)),
            15 => {
                let mut ids: Vec<i64> = (0..1 + pick(4)).map(|_| 90 + pick(15) as i64).collect();
                ids.sort_unstable();
                ids.dedup();
                table.merge(&[rows(table.schema(), ids.iter().copied())], &["id".to_string()], &options).await.map(|i| (i, Some(ids)))
            }
            16 => {
                let set = [concord::Assignment { column: "score".into(), expr: "score + 1".into() }];
                table.update(&set, Some(DELETES[pick(DELETES.len() as u64) as usize]), &options).await.map(|i| (i, None))
            }
            17 => {
                let ids: Vec<i64> = (0..pick(6)).map(|_| pick(100) as i64).collect();
                table.overwrite(&[rows(table.schema(), ids.iter().copied())], None, &options).await.map(|i| (i, Some(ids)))
            }
            18 => {
                // Only rows the predicate covers: replacing them with others is refused.
                let sql = DELETES[pick(DELETES.len() as u64) as usize];
                let covered = oracle_predicate(sql);
                let ids: Vec<i64> = (0..pick(4)).map(|_| pick(100) as i64).filter(|id| covered(*id)).collect();
                table.overwrite(&[rows(table.schema(), ids.iter().copied())], Some(sql), &options).await.map(|i| (i, Some(ids)))
            }
            19 => {
                let latest = table.latest().await.unwrap().version();
                table.restore(pick(latest + 1), &options).await.map(|i| (i, None))
            }
            // Compaction yields to the others; it may find nothing left to do.
            20 | 21 => table.compact(1 + pick(40), &options).await.map(|i| (i, None)),
            // A column nobody writes: added (or, if there, dropped) concurrently.
            _ => {
                let latest = table.latest().await.unwrap();
                if latest.schema().field("extra").is_some() {
                    table.drop_column("extra", &options).await.map(|i| (i, None))
                } else {
                    table.add_column("extra int default 7", &options).await.map(|i| (i, None))
                }
            }
        };
        match outcome {
            Ok((info, _)) if info.abandoned.is_some() => {
                log.failed.push("committed nothing (a compaction gave way, or nothing to change)".into())
            }
            Ok((info, Some(ids))) => {
                log.written.insert(info.transaction_id, ids);
            }
            Ok((_, None)) => {}
            Err(WriteError::Commit(CommitError::TooMuchContention { .. })) if tight_budget => log.failed.push("contention".into()),
            // Two writers adding "extra" at once: the later one is rightly incompatible;
            // dropping a column another writer dropped first: it no longer exists.
            Err(WriteError::Commit(CommitError::Incompatible { reason, .. })) if reason.to_string().contains("'extra'") => {
                log.failed.push("add race".into())
            }
            Err(WriteError::Alter(concord::AlterError::ColumnExists { .. } | concord::AlterError::Column(_))) => {
                log.failed.push("alter race".into())
            }
            Err(e) => panic!("seed {seed}: unexpected error {e}"),
        }
        tokio::task::yield_now().await;
    }
    log
}

/// `previous` (the ids of the version before) with transaction `t` applied.
pub(crate) fn replay(
    previous: Vec<i64>,
    t: &concord::TransactionRecord,
    written: &HashMap<uuid::Uuid, Vec<i64>>,
    states: &[Vec<i64>],
) -> Vec<i64> {
    match &t.operation {
        Operation::Create => Vec::new(),
        Operation::Append { .. } => previous.iter().chain(&written[&t.id]).copied().collect(),
        Operation::Overwrite { .. } => written[&t.id].clone(),
        Operation::Restore { version } => states[*version as usize].clone(),
        Operation::Delete { predicate, .. } => {
            let matches = oracle_predicate(predicate);
            previous.into_iter().filter(|id| !matches(*id)).collect()
        }
        // An update changes scores, a compaction moves rows, a schema change adds or
        // drops a column: never which rows exist (a lost or resurrected row shows here).
        Operation::Update { .. }
        | Operation::Compact { .. }
        | Operation::AddColumn { .. }
        | Operation::DropColumn { .. }
        | Operation::RenameColumn { .. }
        | Operation::SetProperties { .. } => previous,
        // A source with every column replaces each of its keys' rows by its row; one
        // without some (a column another writer added) updates each matched row in
        // place, keeping the others' values; unmatched keys are inserted once.
        Operation::Merge { partial: None, .. } => {
            let source = &written[&t.id];
            previous.into_iter().filter(|id| !source.contains(id)).chain(source.iter().copied()).collect()
        }
        Operation::Merge { partial: Some(_), .. } => {
            let source = &written[&t.id];
            let inserted: Vec<i64> = source.iter().copied().filter(|id| !previous.contains(id)).collect();
            previous.into_iter().chain(inserted).collect()
        }
        Operation::ReplaceWhere { predicate, .. } => {
            let matches = oracle_predicate(predicate);
            previous.into_iter().filter(|id| !matches(*id)).chain(written[&t.id].iter().copied()).collect()
        }
        // A withdrawn transaction (cooperative commits) changes nothing.
        Operation::Withdraw { .. } => previous,
        other => panic!("no {} in these histories", other.name()),
    }
}

/// The reference: each version from its predecessor and its transactions, over plain
/// sorted lists of ids (duplicates allowed). Returns the transactions committed.
async fn check_replay(table: &Table, written: &HashMap<uuid::Uuid, Vec<i64>>, seed: u64) -> usize {
    let latest = table.latest().await.unwrap();
    let mut states: Vec<Vec<i64>> = Vec::new();
    let history = latest.history().await.unwrap();
    for info in &history {
        let version = latest.checkout(info.version).await.unwrap();
        let previous = states.last().cloned().unwrap_or_default();
        // A shared version is its transactions applied in order.
        let mut expected = previous;
        for t in &version.manifest().transactions {
            expected = replay(expected, t, written, &states);
        }
        expected.sort_unstable();
        let actual = ids(&version).await;
        if actual != expected {
            for v in history.iter().filter(|v| v.version + 6 >= info.version && v.version <= info.version) {
                let m = latest.checkout(v.version).await.unwrap();
                for t in &m.manifest().transactions {
                    let detail = match &t.operation {
                        Operation::Merge { partial, deletions, fragments, .. } => format!(
                            "merge partial={} deletions={:?} fragments={}",
                            partial.is_some(),
                            deletions.iter().map(|d| (d.fragment_id, d.rows)).collect::<Vec<_>>(),
                            fragments.len()
                        ),
                        Operation::Update { deletions, fragments, .. } => format!(
                            "update deletions={:?} fragments={}",
                            deletions.iter().map(|d| (d.fragment_id, d.rows)).collect::<Vec<_>>(),
                            fragments.len()
                        ),
                        Operation::Delete { deletions, .. } => {
                            format!("delete deletions={:?}", deletions.iter().map(|d| (d.fragment_id, d.rows)).collect::<Vec<_>>())
                        }
                        other => other.name().to_string(),
                    };
                    eprintln!(
                        "context: v{} txn {} read {:?} rebased {:?} rerun {} carried_by {:?}: {detail}",
                        v.version, t.id, t.read_version, t.rebased_over, t.rerun, t.carried_by
                    );
                }
                eprintln!(
                    "context: v{} next_fragment_id {} schema {:?} ids {:?}",
                    v.version,
                    m.manifest().next_fragment_id,
                    m.schema().names(),
                    ids(&m).await
                );
            }
        }
        assert_eq!(
            actual,
            expected,
            "seed {seed}: version {} is not version {} + its {} (replay with SEEDS = [{seed}])",
            info.version,
            info.version.saturating_sub(1),
            info.operation
        );
        states.push(actual);
    }
    // Transactions, not versions: a shared version holds several.
    // Withdrawals (cooperative commits) record that a transaction will never commit.
    history.iter().flat_map(|v| &v.transactions).filter(|t| t.operation != "withdraw").count()
}

#[test]
fn random_concurrent_histories_replay_exactly() {
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(4).enable_all().build().unwrap();
    runtime.block_on(async {
        // The fixed seeds, plus a fresh one each run (printed, so a failure can be kept).
        // CONCORD_HISTORY_SEED=<seed> runs that seed alone (its interleaving is real, so
        // a failure may need several runs to show again).
        let fresh = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64 % 1_000_000;
        let seeds: Vec<u64> = match std::env::var("CONCORD_HISTORY_SEED").ok().and_then(|s| s.parse().ok()) {
            Some(seed) => vec![seed],
            None => SEEDS.into_iter().chain([fresh]).collect(),
        };
        for seed in seeds {
            let resolver = StoreResolver::new();
            let table = create_table(&resolver, &format!("memory://history-{seed}"), SCHEMA).await;
            // Odd writers have handles of their own (as processes); even ones share one
            // (as tasks of one process: their commits may share a version).
            let mut writers = Vec::new();
            for w in 0..5u64 {
                let handle = if w % 2 == 0 { table.clone() } else { open_table(&resolver, &format!("memory://history-{seed}")).await };
                writers.push(tokio::spawn(writer(handle, seed * 100 + w, 12, w == 4)));
            }
            let mut written = HashMap::new();
            let mut failed = 0;
            for w in writers {
                let log = w.await.unwrap();
                written.extend(log.written);
                failed += log.failed.len();
            }
            let transactions = check_replay(&table, &written, seed).await;
            let committed = transactions - 1;
            assert_eq!(committed + failed, 5 * 12, "seed {seed}: every operation either committed once or failed");
            eprintln!("seed {seed}: {committed} commits, {failed} failed (tight budget), replay exact");
        }
    });
}

/// The same replay check with every commit its own OS process (`concord ... --json`):
/// 4 threads, each running a seeded random sequence of CLI writes at once.
#[test]
fn random_histories_from_processes_replay_exactly() {
    let seed = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64 % 1_000_000;
    let t = TempTable::create();
    let threads: Vec<_> = (0..4u64)
        .map(|w| {
            let (uri, dir) = (t.uri.clone(), t.dir.path().to_path_buf());
            std::thread::spawn(move || {
                let random = StdRandom::seeded(seed * 10 + w);
                let pick = |n: u64| random.next_u64() % n;
                let mut written = HashMap::new();
                for op in 0..6 {
                    let file = dir.join(format!("w{w}-{op}.csv"));
                    let kind = pick(10);
                    let ids: Vec<i64> = match kind {
                        0..=4 => (0..1 + pick(5)).map(|_| pick(100) as i64).collect(),
                        5 | 6 => {
                            (0..1 + pick(3)).map(|_| 90 + pick(15) as i64).collect::<std::collections::BTreeSet<_>>().into_iter().collect()
                        }
                        _ => Vec::new(),
                    };
                    let csv: String =
                        std::iter::once("id,name,score\n".to_string()).chain(ids.iter().map(|id| format!("{id},n{id},{id}\n"))).collect();
                    std::fs::write(&file, csv).unwrap();
                    let file = file.to_string_lossy().into_owned();
                    let sql = DELETES[pick(DELETES.len() as u64) as usize];
                    let args: Vec<&str> = match (ids.is_empty(), pick(4)) {
                        // Merge sources have unique keys (appended ids may repeat).
                        (false, _) if matches!(kind, 5 | 6) => vec!["merge", &uri, &file, "--on", "id"],
                        (false, _) => vec!["append", &uri, &file],
                        (true, 0) => vec!["update", &uri, "--set", "score = score + 1", "--where", sql],
                        (true, 1) => vec!["compact", &uri, "--target-rows", "8"],
                        _ => vec!["delete", &uri, "--where", sql],
                    };
                    let mut args = args;
                    args.push("--json");
                    let out: serde_json::Value = serde_json::from_str(&ok(&args)).unwrap();
                    if !ids.is_empty() {
                        written.insert(out["transaction_id"].as_str().unwrap().parse::<uuid::Uuid>().unwrap(), ids);
                    }
                }
                written
            })
        })
        .collect();
    let mut written = HashMap::new();
    for th in threads {
        written.extend(th.join().unwrap());
    }
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let versions = runtime.block_on(async {
        let table = open_table(&StoreResolver::new(), &t.uri).await;
        check_replay(&table, &written, seed).await
    });
    eprintln!("processes, seed {seed}: {} versions, replay exact", versions);
    assert!(versions > 1);
}

//! Random concurrent histories (seeded): writers race random appends, deletes,
//! overwrites and restores on one table; afterwards every version must equal the
//! reference applied to its predecessor (serializable), and failed transactions must
//! have left nothing. The seed fixes each writer's choice of operations; the
//! interleaving is real (threads), so a failing seed is printed with the message and
//! kept in `SEEDS` as a regression. (Seeded, fault-injected simulation of the
//! interleaving itself is the reliability issue's.)

use std::collections::HashMap;

use concord::{CommitError, CommitOptions, RandomSource, RetryPolicy, StdRandom, StoreResolver, Table, WriteError};

use crate::common::*;
use crate::replay::{check_replay, DELETES};

/// Seeds run on every CI run; failing seeds found later are added here.
/// 858170: a merge lacking a column another writer added updates matched rows in place
/// (duplicates stay); the replay first expected them collapsed. Later, under load: a
/// partial merge re-run after an overwrite inserted a key it had matched twice twice
/// (now `merge::a_partial_merge_rerun_inserts_a_key_it_had_matched_twice_once`).
const SEEDS: [u64; 7] = [1, 2, 3, 4, 5, 6, 858_170];

/// What one writer did: rows each committed append/overwrite wrote, and the
/// transactions that failed or gave way (committing nothing).
#[derive(Default)]
struct Log {
    written: HashMap<uuid::Uuid, Vec<i64>>,
    failed: Vec<String>,
    /// Committed widenings of the `extra` column.
    widened: usize,
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
            // A column nobody writes, concurrently: added as a `tinyint` or a struct, widened
            // (a struct's field too), given a struct field, or dropped.
            _ => {
                let latest = table.latest().await.unwrap();
                let extra = latest.schema().field("extra").map(|f| f.column_type.clone());
                let field = |name: &str| latest.schema().resolve_path(&format!("extra.{name}")).ok().map(|f| f.column_type.clone());
                match extra {
                    Some(concord::ColumnType::Tinyint) if pick(2) == 0 => {
                        table.widen_column("extra", "smallint", &options).await.map(|i| (i, None))
                    }
                    Some(concord::ColumnType::Struct(_)) if field("n") == Some(concord::ColumnType::Tinyint) && pick(3) == 0 => {
                        table.widen_column("extra.n", "smallint", &options).await.map(|i| (i, None))
                    }
                    Some(concord::ColumnType::Struct(_)) if field("m").is_none() && pick(2) == 0 => {
                        table.add_column("extra.m varchar", &options).await.map(|i| (i, None))
                    }
                    Some(_) => table.drop_column("extra", &options).await.map(|i| (i, None)),
                    None if pick(2) == 0 => table.add_column("extra tinyint default 7", &options).await.map(|i| (i, None)),
                    None => table.add_column("extra struct<n tinyint, d decimal(10, 2)>", &options).await.map(|i| (i, None)),
                }
            }
        };
        match outcome {
            Ok((info, _)) if info.abandoned.is_some() => {
                log.failed.push("committed nothing (a compaction gave way, or nothing to change)".into())
            }
            Ok((info, None)) if info.operation == concord::OperationKind::WidenColumn => log.widened += 1,
            Ok((info, Some(ids))) => {
                log.written.insert(info.transaction_id, ids);
            }
            Ok((_, None)) => {}
            Err(WriteError::Commit(CommitError::TooMuchContention { .. })) if tight_budget => log.failed.push("contention".into()),
            // Two writers adding "extra" at once: the later one is rightly incompatible;
            // dropping a column another writer dropped first: it no longer exists.
            Err(WriteError::Commit(CommitError::Incompatible { reason, .. }))
                if ["'extra'", "'m'", "'n'"].iter().any(|name| reason.to_string().contains(name)) =>
            {
                log.failed.push("add race".into())
            }
            Err(WriteError::Alter(
                concord::AlterError::ColumnExists { .. } | concord::AlterError::Column(_) | concord::AlterError::NotWider { .. },
            )) => log.failed.push("alter race".into()),
            Err(e) => panic!("seed {seed}: unexpected error {e}"),
        }
        tokio::task::yield_now().await;
    }
    log
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
            let (mut failed, mut widened) = (0, 0);
            for w in writers {
                let log = w.await.unwrap();
                written.extend(log.written);
                failed += log.failed.len();
                widened += log.widened;
            }
            let transactions = check_replay(&table, &written, seed).await;
            check_feed(&table).await.unwrap_or_else(|e| panic!("seed {seed}: change feed: {e}"));
            let committed = transactions - 1;
            assert_eq!(committed + failed, 5 * 12, "seed {seed}: every operation either committed once or failed");
            eprintln!("seed {seed}: {committed} commits ({widened} widenings), {failed} failed (tight budget), replay exact");
        }
    });
}

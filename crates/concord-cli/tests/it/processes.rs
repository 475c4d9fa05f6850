//! Writers as OS processes (`concord ... --json`) racing on one local table: every
//! acknowledged append in exactly one version, no row lost or duplicated, and the
//! replay oracle (the library's) reproducing every version.

use std::collections::HashMap;

use concord::{RandomSource, StdRandom, StoreResolver};

use crate::common::*;
use crate::replay::{check_replay, DELETES};

/// The acceptance run: 8 processes × 25 appends on one local table.
#[test]
fn eight_processes_appending_25_times_all_succeed() {
    processes_appending_concurrently(8, 25, 4);
}

#[test]
fn sixteen_processes_appending_at_once_all_succeed() {
    processes_appending_concurrently(16, 5, 10);
}

/// `processes` OS processes each run `appends` CLI appends of `rows` rows at once.
fn processes_appending_concurrently(processes: u64, appends: u64, rows: u64) {
    let t = TempTable::create();
    let files: Vec<String> = (0..processes)
        .flat_map(|p| (0..appends).map(move |k| (p, k)))
        .map(|(p, k)| t.file(&format!("in-{p}-{k}.csv"), &csv_rows((p * appends + k) * rows, rows)))
        .collect();
    let children: Vec<_> = (0..processes)
        .map(|p| {
            let (uri, files) = (t.uri.clone(), files[(p * appends) as usize..((p + 1) * appends) as usize].to_vec());
            std::thread::spawn(move || {
                files
                    .iter()
                    .map(|f| {
                        let (code, out, err) = run(&["append", &uri, f, "--json"]);
                        assert_eq!(code, 0, "append failed: {err}");
                        serde_json::from_str::<serde_json::Value>(&out).unwrap()
                    })
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    let outcomes: Vec<serde_json::Value> = children.into_iter().flat_map(|c| c.join().unwrap()).collect();
    assert_eq!(outcomes.len() as u64, processes * appends);
    assert_eq!(t.count(), processes * appends * rows);
    check_cli_history(&t.history(), &outcomes, processes * appends, "local");
    let scanned = ok(&["scan", &t.uri, "--columns", "id", "--format", "csv"]);
    let mut ids: Vec<u64> = scanned.lines().skip(1).map(|l| l.parse().unwrap()).collect();
    ids.sort_unstable();
    assert_eq!(ids, (0..processes * appends * rows).collect::<Vec<_>>(), "no row lost or duplicated");
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

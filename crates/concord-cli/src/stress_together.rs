//! `concord stress --workload together`: writers commit pairs of appends to two tables
//! of one store (`<uri>` and `<uri>-items`) as multi-table transactions
//! (`concord::commit_together`), killed and replaced at `--kill-rate`; then checked:
//! every pair is in both tables or in neither (none half-applied), at most once each
//! (none duplicated), every acknowledged pair is there, no failed one is.
//!
//! Operation (writer w, index i) appends rows `2k, 2k+1` to the first table and
//! `3k, 3k+1, 3k+2` to the second, k = w * ops + i, under idempotency key
//! `together-s<seed>-w<w>-o<i>`: a replacement writer retries a killed writer's
//! operation with the same key.

use std::collections::BTreeMap;
use std::time::Instant;

use concord::arrow::array::AsArray;
use concord::arrow::datatypes::Int64Type;
use concord::{CommitOptions, Table, TogetherError, Write};
use serde_json::{json, Value};

use crate::exit::Failure;
use crate::stress::{batch, key, StressArgs};

/// The second table's URI.
pub fn items_uri(uri: &str) -> String {
    format!("{}-items", uri.trim_end_matches('/'))
}

fn k(args: &StressArgs, writer: u64, index: u64) -> i64 {
    (writer * args.ops + index) as i64
}

/// Runs operation `index` of `writer`; its log line.
pub async fn run_one(a: &Table, b: &Table, args: &StressArgs, writer: u64, index: u64) -> Value {
    let k = k(args, writer, index);
    let started = Instant::now();
    let key = key(args, writer, index);
    let result = async {
        let ta = a.prepare(Write::Append { input: vec![batch(a.schema(), &[(2 * k, 0), (2 * k + 1, 0)])].into() }).await?;
        let rows = [(3 * k, 0), (3 * k + 1, 0), (3 * k + 2, 0)];
        let tb = b.prepare(Write::Append { input: vec![batch(b.schema(), &rows)].into() }).await?;
        let parts = [(a, &[ta][..]), (b, &[tb][..])];
        Ok::<_, concord::WriteError>(concord::commit_together(&parts, &CommitOptions::default(), Some(&key)).await)
    }
    .await;
    let latency_ms = started.elapsed().as_secs_f64() * 1000.0;
    match result {
        Ok(Ok(infos)) => json!({"index": index, "outcome": "ok", "versions": [infos[0][0].version, infos[1][0].version],
            "replay": infos[0][0].idempotent_replay, "attempts": infos[0][0].attempts.max(infos[1][0].attempts), "latency_ms": latency_ms}),
        Ok(Err(e @ TogetherError::OutcomeUnknown { .. })) => {
            json!({"index": index, "outcome": "unknown", "error": e.to_string(), "latency_ms": latency_ms})
        }
        Ok(Err(e)) => json!({"index": index, "outcome": "failed", "error": e.to_string(), "latency_ms": latency_ms}),
        Err(e) => json!({"index": index, "outcome": "failed", "error": e.to_string(), "latency_ms": latency_ms}),
    }
}

/// How many times each id is in `table`'s latest version.
async fn ids(table: &Table) -> Result<BTreeMap<i64, u32>, Failure> {
    let latest = table.latest().await?;
    let mut out = BTreeMap::new();
    for fragment in latest.fragments().await? {
        for b in latest.read_fragment(&fragment).await? {
            for id in b.column(0).as_primitive::<Int64Type>().values() {
                *out.entry(*id).or_default() += 1;
            }
        }
    }
    Ok(out)
}

/// Checks both tables against the writers' log lines; the report.
pub async fn verify(a: &Table, b: &Table, args: &StressArgs, lines: &[(u64, Value)], killed: u64, elapsed: f64) -> Result<Value, Failure> {
    let (in_a, in_b) = (ids(a).await?, ids(b).await?);
    let mut problems: Vec<String> = Vec::new();
    let (mut half, mut duplicated, mut lost, mut present_failed) = (0, 0, 0, 0);
    for (w, l) in lines {
        let k = k(args, *w, l["index"].as_u64().unwrap_or(0));
        let counts_a: Vec<u32> = [2 * k, 2 * k + 1].iter().map(|id| in_a.get(id).copied().unwrap_or(0)).collect();
        let counts_b: Vec<u32> = [3 * k, 3 * k + 1, 3 * k + 2].iter().map(|id| in_b.get(id).copied().unwrap_or(0)).collect();
        let all = counts_a.iter().chain(&counts_b);
        let (present, absent) = (all.clone().all(|c| *c >= 1), all.clone().all(|c| *c == 0));
        if all.clone().any(|c| *c > 1) {
            duplicated += 1;
            problems.push(format!("operation {k} (writer {w}) is in a table twice"));
        }
        if !present && !absent {
            half += 1;
            problems.push(format!("operation {k} (writer {w}) is half applied: first table {counts_a:?}, second {counts_b:?}"));
        }
        match l["outcome"].as_str() {
            Some("ok") if !present => {
                lost += 1;
                problems.push(format!("acknowledged operation {k} (writer {w}) is not in both tables"));
            }
            Some("failed") if !absent => {
                present_failed += 1;
                problems.push(format!("operation {k} (writer {w}) was reported failed ({}) but is there", l["error"]));
            }
            _ => {}
        }
    }
    let outcome = |o: &str| lines.iter().filter(|(_, l)| l["outcome"] == o).count();
    let mut latencies: Vec<f64> =
        lines.iter().filter(|(_, l)| l["outcome"] == "ok").filter_map(|(_, l)| l["latency_ms"].as_f64()).collect();
    latencies.sort_by(f64::total_cmp);
    let pct = |p: f64| latencies.get(((latencies.len() as f64 - 1.0) * p).round() as usize).copied().unwrap_or(0.0);
    problems.truncate(20);
    Ok(json!({
        "verified": problems.is_empty(),
        "workload": "together",
        "writers": args.writers, "ops": args.ops, "seed": args.seed, "kill_rate": args.kill_rate,
        "commits": outcome("ok"), "failed": outcome("failed"), "unknown": outcome("unknown"), "killed": killed,
        "failure_reasons": crate::stress::failure_reasons(&lines.iter().filter(|(_, l)| l["outcome"] != "ok").collect::<Vec<_>>()),
        "idempotent_replays": lines.iter().filter(|(_, l)| l["replay"] == true).count(),
        "half_applied": half, "duplicated": duplicated, "lost": lost, "failed_but_present": present_failed,
        "versions": [a.latest().await?.version(), b.latest().await?.version()],
        "commits_per_s": outcome("ok") as f64 / elapsed.max(1e-9), "elapsed_s": elapsed,
        "latency_ms": {"p50": pct(0.5), "p99": pct(0.99), "max": latencies.last().copied().unwrap_or(0.0)},
        "problems": problems,
    }))
}

//! Commit benchmark. Prints figures, asserts nothing.
//!
//! 1. One local table grown to each size in CONCORD_BENCH_SIZES (latest version N), then
//!    at each size: CONCORD_BENCH_SAMPLES opens of the latest version, and as many one-row
//!    appends in three styles (a handle kept from one open, a handle refreshed with
//!    `latest()` before each append, a fresh open + append). Measured appends add versions,
//!    so the appends at size N run on versions N .. N + 3 * samples. Timings of opens include
//!    resolving the URI. A throwaway table warms up first.
//! 2. For each count in CONCORD_BENCH_WRITERS (empty: none): that many OS processes (this binary
//!    again, in worker mode) each doing CONCORD_BENCH_OPS one-row appends on one fresh local table.
//!
//! 3. Durability cost: appends of 1 row and of 10,000 rows on the default local store
//!    (every object fsynced, file and directory, before the commit is acknowledged)
//!    and on object_store's LocalFileSystem, which syncs nothing. CONCORD_BENCH_SAMPLES
//!    one-row appends and a tenth as many (at least 5) large ones per store.
//!
//! 4. Group commit: a lone writer's one-row appends with group commit on and off (the
//!    same, within noise: nobody waits for company), and CONCORD_BENCH_TASKS (default
//!    64) tasks sharing one handle, each doing CONCORD_BENCH_OPS one-row appends, with
//!    group commit on and off: transactions/s and versions, on local disk and in memory.
//!
//! Worker mode (internal): CONCORD_BENCH_WORKER=<uri>,<count>,<start at, unix ms>.

use std::error::Error;
use std::process::Stdio;
use std::str::FromStr;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use concord::arrow::array::{ArrayRef, Int64Array, RecordBatch, StringArray};
use concord::object_store::local::LocalFileSystem;
use concord::object_store::ObjectStore;
use concord::store::StoreKind;
use concord::{CommitOptions, Env, Schema, StoreResolver, Table, TableLocation};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

type Result<T, E = Box<dyn Error + Send + Sync>> = std::result::Result<T, E>;

const WORKER_VAR: &str = "CONCORD_BENCH_WORKER";

fn main() -> Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    match std::env::var(WORKER_VAR) {
        Ok(spec) => runtime.block_on(worker(&spec)),
        Err(_) => runtime.block_on(run(Config::from_env()?)),
    }
}

struct Config {
    sizes: Vec<u64>,
    samples: usize,
    writers: Vec<usize>,
    ops: usize,
}

impl Config {
    fn from_env() -> Result<Config> {
        let mut sizes: Vec<u64> = list("CONCORD_BENCH_SIZES", "10,1000,10000")?;
        sizes.sort_unstable();
        sizes.dedup();
        let one = |var, default| -> Result<usize> { Ok(list(var, default)?.first().copied().unwrap_or(1)) };
        Ok(Config {
            sizes,
            samples: one("CONCORD_BENCH_SAMPLES", "200")?.max(1),
            writers: list("CONCORD_BENCH_WRITERS", "1,4,8,16")?,
            ops: one("CONCORD_BENCH_OPS", "25")?.max(1),
        })
    }
}

fn list<T: FromStr>(var: &str, default: &str) -> Result<Vec<T>>
where
    T::Err: Error + Send + Sync + 'static,
{
    let text = std::env::var(var).unwrap_or_else(|_| default.to_string());
    let parsed = text.split(',').filter(|s| !s.trim().is_empty()).map(|s| s.trim().replace('_', "").parse::<T>());
    parsed.collect::<Result<_, _>>().map_err(|e| format!("{var}={text}: {e}").into())
}

/// Latency figures of a set of samples, in milliseconds.
#[derive(Debug, Clone, Copy, Serialize)]
struct Stats {
    n: usize,
    p50_ms: f64,
    p99_ms: f64,
    mean_ms: f64,
}

fn stats(samples: &[Duration]) -> Stats {
    let mut ms: Vec<f64> = samples.iter().map(|d| d.as_secs_f64() * 1e3).collect();
    ms.sort_by(f64::total_cmp);
    // Nearest rank.
    let rank = |p: f64| ms.get(((p * ms.len() as f64).ceil() as usize).clamp(1, ms.len().max(1)) - 1).copied().unwrap_or(f64::NAN);
    Stats { n: ms.len(), p50_ms: rank(0.50), p99_ms: rank(0.99), mean_ms: ms.iter().sum::<f64>() / ms.len().max(1) as f64 }
}

fn schema() -> Schema {
    Schema::parse("id bigint not null, name varchar").expect("valid schema")
}

fn one_row(id: i64) -> RecordBatch {
    rows_from(id, 1)
}

fn rows_from(first: i64, n: usize) -> RecordBatch {
    let ids: ArrayRef = Arc::new(Int64Array::from_iter_values(first..first + n as i64));
    let names: ArrayRef = Arc::new(StringArray::from_iter_values((first..first + n as i64).map(|id| format!("row-{id}"))));
    RecordBatch::try_new(schema().arrow_schema(), vec![ids, names]).expect("batch matches schema")
}

async fn append_one(table: &Table, id: i64) -> Result<concord::CommitInfo> {
    Ok(table.append(&[one_row(id)], &CommitOptions::default()).await?)
}

async fn open(resolver: &StoreResolver, uri: &str) -> Result<Table> {
    Ok(Table::open(resolver.resolve(uri)?, Env::system()).await?)
}

fn unix_micros() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_micros() as u64)
}

fn ms(x: f64) -> String {
    format!("{x:.3}")
}

async fn run(cfg: Config) -> Result<()> {
    let dir = tempfile::tempdir()?;
    let (sizes, samples, writers, ops) = (&cfg.sizes, cfg.samples, &cfg.writers, cfg.ops);
    eprintln!("commit bench: sizes {sizes:?}, samples {samples}, writers {writers:?}, ops {ops} (in {})", dir.path().display());
    let single = single_writer(&cfg, &dir.path().join("single").to_string_lossy()).await?;
    let ratios = ratios(&single);
    let mut concurrent = Vec::new();
    for &n in &cfg.writers {
        concurrent.push(processes(n, cfg.ops, &dir.path().join(format!("writers-{n}")).to_string_lossy()).await?);
    }
    let durability = durability_cost(&cfg, &dir.path().join("durability")).await?;
    print_summary(&cfg, &single, &ratios, &concurrent, &durability);
    let group = group_commit(&cfg, dir.path()).await?;
    print_group(&group);
    Ok(())
}

/// One group-commit measurement.
#[derive(Debug, Clone, Serialize)]
struct GroupRow {
    store: &'static str,
    tasks: usize,
    group_commit: bool,
    transactions: usize,
    versions: u64,
    transactions_per_s: f64,
    #[serde(flatten)]
    latency: Stats,
}

async fn group_commit(cfg: &Config, dir: &std::path::Path) -> Result<Vec<GroupRow>> {
    let tasks: usize = list("CONCORD_BENCH_TASKS", "64")?.first().copied().unwrap_or(64);
    let resolver = StoreResolver::new();
    let mut out = Vec::new();
    let mut n = 0;
    for (store, base) in [("local disk", dir.join("group").to_string_lossy().into_owned()), ("memory", "memory://bench-group".to_string())]
    {
        for (count, ops) in [(1usize, cfg.samples), (tasks, cfg.ops)] {
            for on in [true, false] {
                n += 1;
                let table = Table::create(resolver.resolve(&format!("{base}-{n}"))?, Env::system(), schema()).await?.with_group_commit(on);
                let start = table.version();
                let started = Instant::now();
                let runs: Vec<_> = (0..count)
                    .map(|t| {
                        let table = table.clone();
                        tokio::spawn(async move {
                            let mut samples = Vec::with_capacity(ops);
                            for i in 0..ops {
                                let at = Instant::now();
                                append_one(&table, (t * 1_000_000 + i) as i64).await?;
                                samples.push(at.elapsed());
                            }
                            Ok::<_, Box<dyn Error + Send + Sync>>(samples)
                        })
                    })
                    .collect();
                let mut samples = Vec::new();
                for r in runs {
                    samples.extend(r.await??);
                }
                let elapsed = started.elapsed().as_secs_f64();
                let versions = table.latest().await?.version() - start;
                eprintln!(
                    "group commit: {store}, {count} tasks, group {}: {} in {versions} versions",
                    if on { "on" } else { "off" },
                    samples.len()
                );
                out.push(GroupRow {
                    store,
                    tasks: count,
                    group_commit: on,
                    transactions: samples.len(),
                    versions,
                    transactions_per_s: samples.len() as f64 / elapsed,
                    latency: stats(&samples),
                });
            }
        }
    }
    Ok(out)
}

fn print_group(rows: &[GroupRow]) {
    println!("\n## Group commit: tasks sharing one handle, one-row appends\n");
    println!("| store | tasks | group commit | transactions | versions | transactions/s | p50 ms | p99 ms |");
    println!("|---|---:|---|---:|---:|---:|---:|---:|");
    for r in rows {
        let on = if r.group_commit { "on" } else { "off" };
        println!(
            "| {} | {} | {on} | {} | {} | {:.0} | {} | {} |",
            r.store,
            r.tasks,
            r.transactions,
            r.versions,
            r.transactions_per_s,
            ms(r.latency.p50_ms),
            ms(r.latency.p99_ms)
        );
    }
    println!("\n{}", json!({"group_commit": rows}));
}

/// Appends of `rows_per_append` rows on one store variant.
#[derive(Debug, Clone, Serialize)]
struct DurabilityRow {
    store: &'static str,
    rows_per_append: usize,
    #[serde(flatten)]
    stats: Stats,
}

/// `path` on object_store's LocalFileSystem, which does not fsync: the baseline.
fn unsynced(path: &std::path::Path) -> Result<TableLocation> {
    std::fs::create_dir_all(path)?;
    let root = concord::object_store::path::Path::from_absolute_path(path)?;
    let store: Arc<dyn ObjectStore> = Arc::new(LocalFileSystem::new());
    Ok(TableLocation::on_store(path.to_string_lossy(), store, root, StoreKind::Local))
}

async fn durability_cost(cfg: &Config, dir: &std::path::Path) -> Result<Vec<DurabilityRow>> {
    let mut out = Vec::new();
    let resolver = StoreResolver::new();
    let synced_path = dir.join("synced");
    let variants =
        [("synced (default)", resolver.resolve(&synced_path.to_string_lossy())?), ("unsynced", unsynced(&dir.join("unsynced"))?)];
    for (store, location) in variants {
        let table = Table::create(location, Env::system(), schema()).await?;
        let mut next = 0i64;
        for rows_per_append in [1usize, 10_000] {
            let n = if rows_per_append == 1 { cfg.samples } else { (cfg.samples / 10).max(5) };
            let mut samples = Vec::with_capacity(n);
            for _ in 0..n {
                let batch = rows_from(next, rows_per_append);
                let t = Instant::now();
                table.append(&[batch], &CommitOptions::default()).await?;
                samples.push(t.elapsed());
                next += rows_per_append as i64;
            }
            eprintln!("durability: {store}, {rows_per_append}-row appends: p50 {} ms", ms(stats(&samples).p50_ms));
            out.push(DurabilityRow { store, rows_per_append, stats: stats(&samples) });
        }
    }
    Ok(out)
}

/// One measured (measurement, versions) cell.
#[derive(Debug, Clone, Serialize)]
struct Row {
    measurement: &'static str,
    versions: u64,
    #[serde(flatten)]
    stats: Stats,
}

const MEASUREMENTS: [&str; 4] = ["open latest", "append, handle kept", "append, latest() + append", "open + append"];

async fn single_writer(cfg: &Config, uri: &str) -> Result<Vec<Row>> {
    let resolver = StoreResolver::new();
    // Warm up (page cache, allocator, runtime) on a throwaway table so the first size is not penalized.
    let scratch = format!("{uri}-warmup");
    Table::create(resolver.resolve(&scratch)?, Env::system(), schema()).await?;
    for id in 0..cfg.samples.min(100) as i64 {
        append_one(&open(&resolver, &scratch).await?, id).await?;
    }
    let mut table = Table::create(resolver.resolve(uri)?, Env::system(), schema()).await?;
    let mut next_id = 0i64;
    let mut rows = Vec::new();
    for &size in &cfg.sizes {
        let (started, from) = (Instant::now(), table.version());
        while table.version() < size {
            append_one(&table, next_id).await?;
            next_id += 1;
            table = table.latest().await?;
            if table.version() % 1000 == 0 {
                eprintln!("  built version {} ({:.1}s)", table.version(), started.elapsed().as_secs_f64());
            }
        }
        let versions = table.version();
        eprintln!("table at version {versions} (built {} versions in {:.1}s); measuring", versions - from, started.elapsed().as_secs_f64());
        let mut samples: [Vec<Duration>; 4] = Default::default();
        for _ in 0..cfg.samples {
            let t = Instant::now();
            open(&resolver, uri).await?;
            samples[0].push(t.elapsed());
        }
        let kept = open(&resolver, uri).await?;
        for _ in 0..cfg.samples {
            let t = Instant::now();
            append_one(&kept, next_id).await?;
            samples[1].push(t.elapsed());
            next_id += 1;
        }
        let mut current = kept;
        for _ in 0..cfg.samples {
            let t = Instant::now();
            current = current.latest().await?;
            append_one(&current, next_id).await?;
            samples[2].push(t.elapsed());
            next_id += 1;
        }
        for _ in 0..cfg.samples {
            let t = Instant::now();
            append_one(&open(&resolver, uri).await?, next_id).await?;
            samples[3].push(t.elapsed());
            next_id += 1;
        }
        table = table.latest().await?;
        if table.row_count() != next_id as u64 {
            return Err(format!("row count {} after {next_id} one-row appends", table.row_count()).into());
        }
        for (measurement, s) in MEASUREMENTS.into_iter().zip(&samples) {
            rows.push(Row { measurement, versions, stats: stats(s) });
        }
    }
    Ok(rows)
}

/// Largest size over smallest size, per measurement: (measurement, from, to, p50 ratio, p99 ratio).
fn ratios(rows: &[Row]) -> Vec<(&'static str, u64, u64, f64, f64)> {
    MEASUREMENTS
        .iter()
        .filter_map(|m| {
            let of = |r: &&Row| r.measurement == *m;
            let (first, last) = (rows.iter().find(of)?, rows.iter().rfind(of)?);
            let (a, b) = (first.stats, last.stats);
            Some((*m, first.versions, last.versions, b.p50_ms / a.p50_ms, b.p99_ms / a.p99_ms))
        })
        .collect()
}

/// What a worker process prints: one JSON line.
#[derive(Debug, Default, Serialize, Deserialize)]
struct WorkerReport {
    latencies_us: Vec<u64>,
    attempts: Vec<u32>,
    errors: Vec<String>,
    first_start_unix_us: u64,
    last_end_unix_us: u64,
}

/// Worker mode: open the table once, wait for the common start, append `count` rows.
async fn worker(spec: &str) -> Result<()> {
    let mut parts = spec.rsplitn(3, ',');
    let (start_at, count, uri) = (parts.next(), parts.next(), parts.next());
    let (Some(start_at), Some(count), Some(uri)) = (start_at, count, uri) else {
        return Err(format!("{WORKER_VAR}={spec}: expected <uri>,<count>,<start unix ms>").into());
    };
    let (start_at, count): (u64, usize) = (start_at.parse()?, count.parse()?);
    let table = open(&StoreResolver::new(), uri).await?;
    let wait = (start_at * 1000).saturating_sub(unix_micros());
    tokio::time::sleep(Duration::from_micros(wait)).await;
    let id_base = std::process::id() as i64 * 1_000_000;
    let mut report = WorkerReport { first_start_unix_us: unix_micros(), ..WorkerReport::default() };
    for i in 0..count {
        let t = Instant::now();
        match append_one(&table, id_base + i as i64).await {
            Ok(info) => {
                report.latencies_us.push(t.elapsed().as_micros() as u64);
                report.attempts.push(info.attempts);
            }
            Err(e) => report.errors.push(e.to_string()),
        }
    }
    report.last_end_unix_us = unix_micros();
    println!("{}", serde_json::to_string(&report)?);
    Ok(())
}

/// The outcome of one concurrent run.
#[derive(Debug, Serialize)]
struct Concurrent {
    processes: usize,
    appends_per_process: usize,
    commits: usize,
    errors: usize,
    failed_processes: usize,
    rows: u64,
    verified: bool,
    /// Commits over the window from the first append's start to the last append's end.
    commits_per_s: f64,
    append_window_s: f64,
    wall_s_with_process_start: f64,
    latency: Stats,
    mean_attempts: f64,
    max_attempts: u32,
}

/// N concurrent appending processes on one fresh table.
async fn processes(n: usize, ops: usize, uri: &str) -> Result<Concurrent> {
    let resolver = StoreResolver::new();
    Table::create(resolver.resolve(uri)?, Env::system(), schema()).await?;
    eprintln!("{n} writer process(es) x {ops} appends");
    let exe = std::env::current_exe()?;
    // All workers open the table first, then start appending at the same instant.
    let start_at = unix_micros() / 1000 + 500 + 100 * n as u64;
    let wall = Instant::now();
    let mut children = Vec::new();
    for _ in 0..n {
        let mut command = tokio::process::Command::new(&exe);
        command.env(WORKER_VAR, format!("{uri},{ops},{start_at}")).stdout(Stdio::piped()).stderr(Stdio::inherit());
        children.push(command.spawn()?);
    }
    let outputs = futures::future::try_join_all(children.into_iter().map(|c| c.wait_with_output())).await?;
    let wall = wall.elapsed();
    let (mut latencies, mut attempts, mut errors, mut failed_processes) = (Vec::new(), Vec::new(), Vec::new(), 0);
    let (mut first, mut last) = (u64::MAX, 0u64);
    for output in &outputs {
        let report = String::from_utf8_lossy(&output.stdout).lines().find_map(|l| serde_json::from_str::<WorkerReport>(l).ok());
        let Some(report) = report.filter(|_| output.status.success()) else {
            failed_processes += 1;
            continue;
        };
        latencies.extend(report.latencies_us.iter().map(|&us| Duration::from_micros(us)));
        attempts.extend(report.attempts);
        errors.extend(report.errors);
        first = first.min(report.first_start_unix_us);
        last = last.max(report.last_end_unix_us);
    }
    for e in errors.iter().take(5) {
        eprintln!("  append error: {e}");
    }
    let commits = latencies.len();
    let rows = open(&resolver, uri).await?.row_count();
    let window = Duration::from_micros(last.saturating_sub(first)).as_secs_f64();
    Ok(Concurrent {
        processes: n,
        appends_per_process: ops,
        commits,
        errors: errors.len(),
        failed_processes,
        rows,
        verified: rows == commits as u64 && commits == n * ops && failed_processes == 0,
        commits_per_s: commits as f64 / window.max(1e-9),
        append_window_s: window,
        wall_s_with_process_start: wall.as_secs_f64(),
        latency: stats(&latencies),
        mean_attempts: attempts.iter().map(|&a| a as f64).sum::<f64>() / attempts.len().max(1) as f64,
        max_attempts: attempts.iter().copied().max().unwrap_or(0),
    })
}

fn print_summary(
    cfg: &Config,
    single: &[Row],
    ratios: &[(&'static str, u64, u64, f64, f64)],
    concurrent: &[Concurrent],
    durability: &[DurabilityRow],
) {
    println!("\n## Single writer, one-row appends, local disk ({} samples each)\n", cfg.samples);
    println!("| measurement | table at version | n | p50 ms | p99 ms | mean ms |");
    println!("|---|---:|---:|---:|---:|---:|");
    for r in single {
        let s = &r.stats;
        println!("| {} | {} | {} | {} | {} | {} |", r.measurement, r.versions, s.n, ms(s.p50_ms), ms(s.p99_ms), ms(s.mean_ms));
    }
    println!("\n## Largest vs smallest history (target: within 1.5x)\n");
    println!("| measurement | versions | p50 ratio | p99 ratio |");
    println!("|---|---|---:|---:|");
    for (m, from, to, p50, p99) in ratios {
        println!("| {m} | {to} vs {from} | {p50:.2}x | {p99:.2}x |");
    }
    println!("\n## Concurrent appending processes, one local table ({} appends each)\n", cfg.ops);
    println!("| processes | commits | commits/s | p50 ms | p99 ms | mean ms | mean attempts | max attempts | verified |");
    println!("|---:|---:|---:|---:|---:|---:|---:|---:|---|");
    for c in concurrent {
        let l = &c.latency;
        println!(
            "| {} | {} | {:.1} | {} | {} | {} | {:.2} | {} | {} |",
            c.processes,
            c.commits,
            c.commits_per_s,
            ms(l.p50_ms),
            ms(l.p99_ms),
            ms(l.mean_ms),
            c.mean_attempts,
            c.max_attempts,
            c.verified
        );
    }
    println!("\n## Durability cost: fsync of every object before the commit is acknowledged\n");
    println!("| store | rows per append | n | p50 ms | p99 ms | mean ms |");
    println!("|---|---:|---:|---:|---:|---:|");
    for d in durability {
        let s = &d.stats;
        println!("| {} | {} | {} | {} | {} | {} |", d.store, d.rows_per_append, s.n, ms(s.p50_ms), ms(s.p99_ms), ms(s.mean_ms));
    }
    let ratios: Vec<Value> = ratios
        .iter()
        .map(|(m, from, to, p50, p99)| json!({"measurement": m, "from_versions": from, "to_versions": to, "p50_ratio": p50, "p99_ratio": p99}))
        .collect();
    let config = json!({"sizes": cfg.sizes, "samples": cfg.samples, "writers": cfg.writers, "ops": cfg.ops});
    println!(
        "\n{}",
        json!({"summary": {"config": config, "single_writer": single, "ratios": ratios, "concurrent": concurrent, "durability": durability}})
    );
}

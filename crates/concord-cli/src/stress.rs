//! `concord stress`: N writer processes race K random operations each on one table,
//! optionally killed with SIGKILL and replaced; then every claim of the concurrency
//! contract that can be checked from outside is checked:
//! - versions form one chain (0..=n, no gap);
//! - every acknowledged operation is in the history exactly once, at the version it
//!   reported; no definitely failed operation is; no idempotency key appears twice;
//! - replay: every version equals its predecessor with its transaction applied, by a
//!   reference model over plain maps (serializable);
//! - bank workload: the total balance is the same in every version.
//!
//! Each operation is a pure function of (seed, writer, operation index), named by its
//! idempotency key `<workload>-s<seed>-w<writer>-o<index>`, so the checker recomputes what it did, and a
//! replacement writer retries a killed writer's in-flight operation with the same key
//! (it commits at most once).

use std::collections::BTreeMap;
use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use concord::arrow::array::{Array, AsArray, Int64Array, RecordBatch};
use concord::arrow::datatypes::Int64Type;
use concord::{Assignment, CommitError, CommitOptions, RandomSource, Schema, StdRandom, Table, WriteError};
use serde_json::{json, Value};

use crate::exit::{usage, Failure};

/// The mixed workload's rows also carry a decimal and a nested column (derived from
/// the id), so that every kind of write moves them; the model checks `val`.
const MIXED_SCHEMA: &str = "id bigint not null, val bigint not null, meta struct<w decimal(12, 2), tags list<varchar>>";
const BANK_SCHEMA: &str = "id bigint not null, val bigint not null";
const BANK_ACCOUNTS: i64 = 16;
const BANK_OPENING: i64 = 1000;
const SETUP_KEY: &str = "stress-setup";

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Workload {
    Mixed,
    Bank,
    /// Pairs of appends to two tables as multi-table transactions (`stress_together`).
    Together,
}

impl Workload {
    fn name(self) -> &'static str {
        match self {
            Workload::Mixed => "mixed",
            Workload::Bank => "bank",
            Workload::Together => "together",
        }
    }
}

/// What the workers share: the run's parameters.
#[derive(Debug, Clone, clap::Args)]
pub struct StressArgs {
    pub uri: String,
    #[arg(long, default_value_t = 4)]
    pub writers: u64,
    #[arg(long, default_value_t = 50)]
    pub ops: u64,
    /// Relative weights of append, delete, update, merge and compact (mixed workload);
    /// compact keeps the fragment count, and so each scan's requests, bounded
    /// (mixed workload; default append=4,delete=1,update=1,merge=1)
    #[arg(long)]
    pub mix: Option<String>,
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Probability, every 100 ms, of SIGKILLing one random writer (then replaced)
    #[arg(long = "kill-rate", default_value_t = 0.0)]
    pub kill_rate: f64,
    #[arg(long, value_enum, default_value = "mixed")]
    pub workload: Workload,
    /// Rows per append or merge (mixed workload; default 100)
    #[arg(long)]
    pub rows: Option<u64>,
    /// Concurrent tasks in each writer process, sharing one table handle: what they
    /// commit at the same moment shares a version (group commit)
    #[arg(long, default_value_t = 1)]
    pub tasks: u64,
    /// Group commit in each writer process (on: tasks committing at the same moment
    /// share a version; off: every transaction gets a version of its own), to compare
    #[arg(long = "group-commit", value_enum, default_value = "on")]
    pub group_commit: Switch,
}

/// A setting that is on or off.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Switch {
    On,
    Off,
}

const DEFAULT_MIX: &str = "append=4,delete=1,update=1,merge=1";
const DEFAULT_ROWS: u64 = 100;

impl StressArgs {
    fn mix(&self) -> &str {
        self.mix.as_deref().unwrap_or(DEFAULT_MIX)
    }
    fn rows(&self) -> u64 {
        self.rows.unwrap_or(DEFAULT_ROWS)
    }
}

/// One operation, recomputable from (seed, writer, index).
#[derive(Debug, Clone, PartialEq)]
enum Op {
    Append(Vec<i64>),
    Delete {
        modulus: i64,
        rest: i64,
    },
    Update {
        modulus: i64,
        rest: i64,
    },
    Merge(Vec<(i64, i64)>),
    Transfer {
        from: i64,
        to: i64,
        amount: i64,
    },
    /// Maintenance: rows unchanged; keeps the fragment count (and so scan cost) bounded.
    Compact,
}

fn parse_mix(mix: &str) -> Result<Vec<(String, u64)>, String> {
    let mut out = Vec::new();
    for part in mix.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (name, weight) = part.split_once('=').ok_or_else(|| format!("'{part}' is not name=weight"))?;
        if !["append", "delete", "update", "merge", "compact"].contains(&name) {
            return Err(format!("unknown operation '{name}' in --mix; use append, delete, update, merge, compact"));
        }
        out.push((name.to_string(), weight.parse().map_err(|_| format!("'{weight}' is not a whole number"))?));
    }
    if out.iter().map(|(_, w)| w).sum::<u64>() == 0 {
        return Err("--mix has no operation with a positive weight".into());
    }
    Ok(out)
}

fn plan(args: &StressArgs, mix: &[(String, u64)], writer: u64, index: u64) -> Op {
    let rng = StdRandom::seeded(args.seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ (writer << 40) ^ index);
    let pick = |n: u64| rng.next_u64() % n.max(1);
    if args.workload == Workload::Bank {
        let from = pick(BANK_ACCOUNTS as u64) as i64;
        let to = (from + 1 + pick(BANK_ACCOUNTS as u64 - 1) as i64) % BANK_ACCOUNTS;
        return Op::Transfer { from, to, amount: 1 + pick(50) as i64 };
    }
    let base = |i: u64| ((writer + 1) * 1_000_000_000 + i * 10_000) as i64;
    let total: u64 = mix.iter().map(|(_, w)| w).sum();
    let mut choice = pick(total);
    let name = mix
        .iter()
        .find(|(_, w)| {
            if choice < *w {
                true
            } else {
                choice -= w;
                false
            }
        })
        .map(|(n, _)| n.as_str())
        .unwrap_or("append");
    match name {
        "delete" => Op::Delete { modulus: 97, rest: pick(97) as i64 },
        "update" => Op::Update { modulus: 89, rest: pick(89) as i64 },
        "merge" => {
            let half = (args.rows() / 2).max(1);
            let earlier = pick(index + 1);
            let mut keys: BTreeMap<i64, i64> = (0..half).map(|r| (base(earlier) + r as i64, 1000 + index as i64)).collect();
            keys.extend((0..half).map(|r| (base(index) + 5000 + r as i64, 1000 + index as i64)));
            Op::Merge(keys.into_iter().collect())
        }
        "compact" => Op::Compact,
        _ => Op::Append((0..args.rows()).map(|r| base(index) + r as i64).collect()),
    }
}

/// The idempotency key of operation `index` of `writer`: `<workload>-s<seed>-w<writer>-o<index>`.
/// The run's workload and seed are part of it, so a later run on the same table never
/// takes an earlier run's operation for its own (a key names one operation).
pub(crate) fn key(args: &StressArgs, writer: u64, index: u64) -> String {
    format!("{}w{writer}-o{index}", run_prefix(args))
}

fn run_prefix(args: &StressArgs) -> String {
    format!("{}-s{}-", args.workload.name(), args.seed)
}

/// (writer, index) of a key of this run.
fn parse_key(args: &StressArgs, key: &str) -> Option<(u64, u64)> {
    let (w, o) = key.strip_prefix(&run_prefix(args))?.strip_prefix('w')?.split_once("-o")?;
    Some((w.parse().ok()?, o.parse().ok()?))
}

pub(crate) fn batch(schema: &Schema, pairs: &[(i64, i64)]) -> RecordBatch {
    let mut columns: Vec<Arc<dyn Array>> = vec![
        Arc::new(Int64Array::from(pairs.iter().map(|p| p.0).collect::<Vec<_>>())),
        Arc::new(Int64Array::from(pairs.iter().map(|p| p.1).collect::<Vec<_>>())),
    ];
    if let Some(meta) = schema.fields.get(2) {
        columns.push(meta_values(meta, pairs.iter().map(|p| p.0)));
    }
    RecordBatch::try_new(schema.arrow_schema(), columns).expect("the workload's columns")
}

/// `meta` of rows `ids`: `w` = id / 100 (a decimal), `tags` = [the id as text] (NULL for
/// ids divisible by 7).
fn meta_values(meta: &concord::Field, ids: impl Iterator<Item = i64>) -> Arc<dyn Array> {
    use concord::arrow::array::{Decimal128Array, ListBuilder, StringBuilder, StructArray};
    let concord::arrow::datatypes::DataType::Struct(fields) = meta.column_type.arrow_type() else { unreachable!("meta is a struct") };
    let ids: Vec<i64> = ids.collect();
    let w = Decimal128Array::from(ids.iter().map(|&i| i128::from(i)).collect::<Vec<_>>()).with_precision_and_scale(12, 2).expect("fits");
    let mut tags = ListBuilder::new(StringBuilder::new()).with_field(match &fields[1].data_type() {
        concord::arrow::datatypes::DataType::List(item) => item.clone(),
        _ => unreachable!("tags is a list"),
    });
    for id in &ids {
        if id % 7 == 0 {
            tags.append_null();
        } else {
            tags.values().append_value(id.to_string());
            tags.append(true);
        }
    }
    Arc::new(StructArray::new(fields, vec![Arc::new(w), Arc::new(tags.finish())], None))
}

async fn execute(table: &Table, op: &Op, options: &CommitOptions) -> Result<concord::CommitInfo, WriteError> {
    let schema = table.schema().clone();
    let set = |expr: String| vec![Assignment { column: "val".into(), expr }];
    match op {
        Op::Append(ids) => table.append(&[batch(&schema, &ids.iter().map(|i| (*i, 0)).collect::<Vec<_>>())], options).await,
        Op::Delete { modulus, rest } => table.delete(&format!("id % {modulus} = {rest}"), options).await,
        Op::Update { modulus, rest } => table.update(&set("val + 1".into()), Some(&format!("id % {modulus} = {rest}")), options).await,
        Op::Merge(rows) => table.merge(&[batch(&schema, rows)], &["id".to_string()], options).await,
        Op::Transfer { from, to, amount } => {
            let expr = format!("val + CASE WHEN id = {from} THEN -{amount} WHEN id = {to} THEN {amount} ELSE 0 END");
            table.update(&set(expr), Some(&format!("id IN ({from}, {to})")), options).await
        }
        Op::Compact => table.compact(concord::limits::DEFAULT_COMPACT_TARGET_ROWS, options).await,
    }
}

/// The reference model: applies `op` to `state` (id -> val).
fn apply(state: &mut BTreeMap<i64, i64>, op: &Op) {
    match op {
        Op::Append(ids) => state.extend(ids.iter().map(|i| (*i, 0))),
        Op::Delete { modulus, rest } => state.retain(|id, _| id % modulus != *rest),
        Op::Update { modulus, rest } => state.iter_mut().filter(|(id, _)| *id % modulus == *rest).for_each(|(_, v)| *v += 1),
        Op::Merge(rows) => state.extend(rows.iter().copied()),
        Op::Transfer { from, to, amount } => {
            *state.entry(*from).or_default() -= amount;
            *state.entry(*to).or_default() += amount;
        }
        Op::Compact => {}
    }
}

/// A worker process: runs the operations `start..ops` of `writer` its log does not hold
/// yet (a killed predecessor's are done), one JSON line each, on `--tasks` tasks sharing
/// one table handle.
pub async fn worker(cx_table: Table, items: Option<Table>, args: &StressArgs, writer: u64, start: u64, log: &Path) -> Result<(), Failure> {
    let mix = parse_mix(args.mix()).map_err(usage)?;
    let mut out = std::fs::OpenOptions::new().create(true).append(true).open(log)?;
    // A killed predecessor may have left half a line: start on a fresh one.
    if std::fs::read(log)?.last().is_some_and(|b| *b != b'\n') {
        writeln!(out)?;
    }
    let done: std::collections::HashSet<u64> = read_log(log).iter().filter_map(|l| l["index"].as_u64()).collect();
    let todo: Vec<u64> = (start..args.ops).filter(|i| !done.contains(i)).collect();
    let out = Arc::new(std::sync::Mutex::new(out));
    let tasks = args.tasks.max(1) as usize;
    let cx_table = cx_table.with_group_commit(args.group_commit == Switch::On);
    let runs = (0..tasks).map(|t| {
        let (table, items, out, mix) = (cx_table.clone(), items.clone(), out.clone(), mix.clone());
        let mine: Vec<u64> = todo.iter().copied().skip(t).step_by(tasks).collect();
        async move {
            for index in mine {
                let line = match &items {
                    Some(items) => crate::stress_together::run_one(&table, items, args, writer, index).await,
                    None => run_one(&table, args, &mix, writer, index).await,
                };
                let mut out = out.lock().unwrap_or_else(|e| e.into_inner());
                writeln!(out, "{line}")?;
                out.flush()?;
            }
            Ok::<(), Failure>(())
        }
    });
    for result in futures::future::join_all(runs).await {
        result?;
    }
    Ok(())
}

/// Runs operation `index` of `writer`; its log line.
async fn run_one(table: &Table, args: &StressArgs, mix: &[(String, u64)], writer: u64, index: u64) -> Value {
    let op = plan(args, mix, writer, index);
    let options = CommitOptions { idempotency_key: Some(key(args, writer, index)), ..CommitOptions::default() };
    let started = Instant::now();
    let mut tries = 0;
    loop {
        tries += 1;
        match execute(table, &op, &options).await {
            // A compaction that gave way to concurrent writers, or a write that
            // changed nothing, committed nothing.
            Ok(info) if info.abandoned.is_some() => {
                break json!({"index": index, "outcome": "abandoned", "reason": info.abandoned, "latency_ms": started.elapsed().as_secs_f64() * 1000.0});
            }
            Ok(info) => {
                break json!({"index": index, "outcome": "ok", "version": info.version, "transaction_id": info.transaction_id.to_string(),
                    "attempts": info.attempts, "rebased": info.rebased_over.len(), "rerun": info.rerun,
                    "replay": info.idempotent_replay, "latency_ms": started.elapsed().as_secs_f64() * 1000.0});
            }
            // Unknown outcome: the same key makes the retry safe.
            Err(WriteError::Commit(CommitError::CommitStateUnknown { .. })) if tries < 5 => continue,
            Err(e) => {
                break json!({"index": index, "outcome": "failed", "error": e.to_string(), "latency_ms": started.elapsed().as_secs_f64() * 1000.0})
            }
        }
    }
}

/// Log lines of `writer` so far.
fn read_log(path: &Path) -> Vec<Value> {
    std::fs::File::open(path)
        .map(|f| std::io::BufReader::new(f).lines().map_while(Result::ok).filter_map(|l| serde_json::from_str(&l).ok()).collect())
        .unwrap_or_default()
}

/// `global_args`: the store settings and coordinator flags the workers need too.
fn spawn_worker(args: &StressArgs, global_args: &[String], writer: u64, start: u64, log: &Path) -> std::io::Result<Child> {
    let exe = std::env::current_exe()?;
    let mut cmd = Command::new(exe);
    cmd.args(global_args).arg("stress-worker").arg(&args.uri);
    cmd.args(["--writers", &args.writers.to_string(), "--ops", &args.ops.to_string(), "--seed", &args.seed.to_string()])
        .args(["--workload", args.workload.name()]);
    if let Some(mix) = &args.mix {
        cmd.args(["--mix", mix]);
    }
    if let Some(rows) = args.rows {
        cmd.args(["--rows", &rows.to_string()]);
    }
    cmd.args(["--tasks", &args.tasks.to_string()]);
    cmd.args(["--group-commit", if args.group_commit == Switch::On { "on" } else { "off" }]);
    cmd.args(["--writer", &writer.to_string(), "--start", &start.to_string(), "--log"])
        .arg(log)
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    cmd.spawn()
}

/// Most writer processes a run starts.
const MAX_WRITERS: u64 = 1024;
/// Most tasks per writer process.
const MAX_TASKS: u64 = 4096;
/// Most rows per append or merge: ids of one operation stay apart from the next's.
const MAX_ROWS: u64 = 10_000;

/// Checks the arguments (before anything is created); returns the parsed mix.
fn validate(args: &StressArgs) -> Result<Vec<(String, u64)>, Failure> {
    if args.workload != Workload::Mixed && (args.mix.is_some() || args.rows.is_some()) {
        return Err(usage(format!("--mix and --rows apply to the mixed workload, not to the {} workload", args.workload.name())));
    }
    let mix = parse_mix(args.mix()).map_err(usage)?;
    if !(1..=MAX_WRITERS).contains(&args.writers) {
        return Err(usage(format!("--writers {} is out of range: give 1 to {MAX_WRITERS}", args.writers)));
    }
    if args.ops == 0 {
        return Err(usage("--ops must be at least 1".into()));
    }
    if !(1..=MAX_TASKS).contains(&args.tasks) {
        return Err(usage(format!("--tasks {} is out of range: give 1 to {MAX_TASKS}", args.tasks)));
    }
    if !(0.0..=1.0).contains(&args.kill_rate) {
        return Err(usage(format!("--kill-rate {} is not a probability: give a number from 0 to 1", args.kill_rate)));
    }
    if !(1..=MAX_ROWS).contains(&args.rows()) {
        return Err(usage(format!("--rows {} is out of range: give 1 to {MAX_ROWS}", args.rows())));
    }
    Ok(mix)
}

/// The schema of the workload's table.
pub fn schema(args: &StressArgs) -> Schema {
    Schema::parse(if args.workload == Workload::Mixed { MIXED_SCHEMA } else { BANK_SCHEMA }).expect("valid")
}

/// Creates the table if missing (bank: with its opening balances).
pub async fn ensure_table(
    open: impl std::future::Future<Output = Result<Table, concord::OpenError>>,
    create: impl std::future::Future<Output = Result<Table, concord::CreateError>>,
    args: &StressArgs,
) -> Result<Table, Failure> {
    validate(args)?;
    let table = match open.await {
        Ok(t) => t,
        Err(concord::OpenError::NotFound { .. }) => match create.await {
            Ok(t) => t,
            Err(concord::CreateError::AlreadyExists { .. }) => {
                return Err(crate::exit::storage("the table appeared while creating it; run again".into()))
            }
            Err(e) => return Err(e.into()),
        },
        Err(e) => return Err(e.into()),
    };
    let wanted = schema(args);
    // The mixed workload also runs on a table of the bank's columns (without `meta`).
    let names = table.schema().names();
    if names != wanted.names() && names != wanted.names()[..2] {
        return Err(usage(format!(
            "stress needs a table with columns {}; '{}' has {}",
            wanted.definition(),
            args.uri,
            table.schema().definition()
        )));
    }
    if args.workload == Workload::Bank && table.version() == 0 {
        let accounts: Vec<(i64, i64)> = (0..BANK_ACCOUNTS).map(|a| (a, BANK_OPENING)).collect();
        let options = CommitOptions { idempotency_key: Some(SETUP_KEY.into()), ..CommitOptions::default() };
        table.append(&[batch(table.schema(), &accounts)], &options).await?;
    }
    Ok(table.latest().await?)
}

/// How often the parent looks for writers that exited.
const POLL: Duration = Duration::from_millis(5);
/// How often a kill is drawn (`--kill-rate` is a probability per period).
const KILL_PERIOD: Duration = Duration::from_millis(100);

/// Runs the stress test and prints its JSON report; `Err` (exit 1) if not verified.
pub async fn run(table: Table, items: Option<Table>, args: &StressArgs, global_args: &[String]) -> Result<(), Failure> {
    let mix = validate(args)?;
    let start_version = table.version();
    let dir = std::env::temp_dir().join(format!("concord-stress-{}-{}", std::process::id(), args.seed));
    std::fs::create_dir_all(&dir)?;
    let logs: Vec<PathBuf> = (0..args.writers).map(|w| dir.join(format!("writer-{w}.jsonl"))).collect();
    let mut children: Vec<Option<Child>> = Vec::new();
    for (w, log) in logs.iter().enumerate() {
        children.push(Some(spawn_worker(args, global_args, w as u64, 0, log)?));
    }
    let killer = StdRandom::seeded(args.seed ^ 0x5EED);
    let (mut killed, started, mut last_report, mut last_draw) = (0u64, Instant::now(), Instant::now(), Instant::now());
    loop {
        // Exits are seen within POLL (the elapsed time, and so commits/s, is exact to it:
        // a run shorter than the kill draw's period is timed too); kills are drawn every
        // KILL_PERIOD.
        std::thread::sleep(POLL);
        let mut live = Vec::new();
        for (w, child) in children.iter_mut().enumerate() {
            if let Some(c) = child {
                if c.try_wait()?.is_some() {
                    *child = None;
                } else {
                    live.push(w);
                }
            }
        }
        if live.is_empty() {
            break;
        }
        let draw = last_draw.elapsed() >= KILL_PERIOD;
        if draw {
            last_draw = Instant::now();
        }
        if draw && args.kill_rate > 0.0 && (killer.next_u64() % 1_000_000) as f64 / 1_000_000.0 < args.kill_rate {
            let w = live[(killer.next_u64() % live.len() as u64) as usize];
            if let Some(mut c) = children[w].take() {
                let _ = c.kill(); // SIGKILL
                let _ = c.wait();
                killed += 1;
                let done = read_log(&logs[w]).len() as u64;
                if done < args.ops {
                    children[w] = Some(spawn_worker(args, global_args, w as u64, done, &logs[w])?);
                }
            }
        }
        if last_report.elapsed() >= Duration::from_secs(1) {
            let done: usize = logs.iter().map(|l| read_log(l).len()).sum();
            eprintln!(
                "stress: {done}/{} operations, {killed} writers killed, {:.0} s",
                args.writers * args.ops,
                started.elapsed().as_secs_f64()
            );
            last_report = Instant::now();
        }
    }
    let elapsed = started.elapsed().as_secs_f64();
    let lines: Vec<(u64, Value)> = logs.iter().enumerate().flat_map(|(w, l)| read_log(l).into_iter().map(move |v| (w as u64, v))).collect();
    eprintln!("stress: all writers done in {elapsed:.1} s; verifying every version...");
    let report = match &items {
        Some(items) => crate::stress_together::verify(&table, items, args, &lines, killed, elapsed).await?,
        None => verify(&table, args, &mix, start_version, &lines, killed, elapsed).await?,
    };
    let _ = std::fs::remove_dir_all(&dir);
    eprintln!("{}", summary(&report));
    println!("{report}");
    if report["verified"] == json!(true) {
        Ok(())
    } else {
        Err(crate::exit::storage(format!("verification failed: {}", report["problems"])))
    }
}

/// Failed operations by error message (digits folded to #), most frequent first.
pub(crate) fn failure_reasons(failed: &[&(u64, Value)]) -> Value {
    let mut counts: BTreeMap<String, u64> = BTreeMap::new();
    for (_, line) in failed {
        let message = line["error"].as_str().unwrap_or("?");
        let folded: String = message.chars().map(|c| if c.is_ascii_digit() { '#' } else { c }).collect();
        *counts.entry(folded).or_default() += 1;
    }
    let mut sorted: Vec<(String, u64)> = counts.into_iter().collect();
    sorted.sort_by_key(|(_, count)| std::cmp::Reverse(*count));
    Value::Array(sorted.into_iter().take(5).map(|(reason, count)| json!({"count": count, "error": reason})).collect())
}

/// The report in one readable paragraph (stderr; stdout has the JSON).
fn summary(r: &Value) -> String {
    let verdict = if r["verified"] == json!(true) { "VERIFIED".to_string() } else { format!("NOT VERIFIED: {}", r["problems"]) };
    let f = |v: &Value| v.as_f64().unwrap_or(f64::NAN);
    format!(
        "stress: {verdict}\n  {} commits, {} failed, {} compactions abandoned and {} writes without change (committed nothing), {} writers killed, {} idempotent replays; {} versions replayed against the reference model\n  \
         {:.2} commits/s in {} versions; latency p50 {:.0} ms, p99 {:.0} ms, max {:.0} ms; attempts mean {:.2}, max {}; {} rebases, {} partial re-runs; {} carried by another writer's commit, {} withdrawn",
        r["commits"], r["failed"], r["abandoned_compactions"], r["no_change"], r["killed"], r["idempotent_replays"], r["versions_replayed"],
        f(&r["commits_per_s"]), r["versions"], f(&r["latency_ms"]["p50"]), f(&r["latency_ms"]["p99"]), f(&r["latency_ms"]["max"]),
        f(&r["attempts"]["mean"]), r["attempts"]["max"], r["rebases"], r["reruns"], r["carried"], r["withdrawn"]
    )
}

/// The rows of one version. Fragments are immutable and a fragment's deletion vector
/// is named by its path, so each (fragment, deletion vector) pair is read once across
/// all the versions checked (`cache`).
async fn rows_of(
    table: &Table,
    cache: &mut std::collections::HashMap<(u64, Option<String>), Arc<Vec<(i64, i64)>>>,
) -> Result<Vec<(i64, i64)>, Failure> {
    let mut out = Vec::new();
    for fragment in table.fragments().await? {
        let key = (fragment.id, fragment.deletion.as_ref().map(|d| d.path.clone()));
        let rows = match cache.get(&key) {
            Some(rows) => rows.clone(),
            None => {
                let mut rows = Vec::new();
                for b in table.read_fragment(&fragment).await? {
                    let (ids, vals) = (b.column(0).as_primitive::<Int64Type>(), b.column(1).as_primitive::<Int64Type>());
                    rows.extend((0..b.num_rows()).map(|i| (ids.value(i), if vals.is_null(i) { 0 } else { vals.value(i) })));
                }
                let rows = Arc::new(rows);
                cache.insert(key, rows.clone());
                rows
            }
        };
        out.extend(rows.iter().copied());
    }
    Ok(out)
}

/// Applies the change feed of every version after `start` to the rows of `start` (all
/// read in the latest schema) and compares with the latest rows; returns the versions
/// checked.
async fn check_feed(latest: &Table, start: u64) -> Result<u64, String> {
    use concord::changes::RowsById;
    use concord::{ChangeOptions, ScanOptions};
    use futures::TryStreamExt;
    let last = latest.version();
    let rows_of = |table: Table| async move {
        let scan = table.scan(ScanOptions { row_ids: true, ..ScanOptions::default() }).await.map_err(|e| e.to_string())?;
        let schema = scan.schema();
        let batches: Vec<concord::arrow::array::RecordBatch> = scan.into_stream().try_collect().await.map_err(|e| e.to_string())?;
        Ok::<_, String>((schema, batches))
    };
    let (schema, expected) = rows_of(latest.clone()).await?;
    let expected = RowsById::new(schema.clone(), &expected).map_err(|e| e.to_string())?;
    let (_, initial) = rows_of(latest.checkout(start).await.map_err(|e| e.to_string())?).await?;
    let mut state = RowsById::new(schema, &initial).map_err(|e| e.to_string())?;
    let options = ChangeOptions { schema_of: Some(last), ..ChangeOptions::default() };
    for v in start + 1..=last {
        let feed = latest.changes(v - 1, Some(v), &options).await.map_err(|e| format!("version {v}: {e}"))?;
        state.apply(&feed.collect().await.map_err(|e| format!("version {v}: {e}"))?).map_err(|e| format!("version {v}: {e}"))?;
    }
    match state.first_difference(&expected) {
        Some(id) => Err(format!("row {id}: the changes do not give the latest rows")),
        None => Ok(last - start),
    }
}

#[allow(clippy::too_many_arguments)]
async fn verify(
    table: &Table,
    args: &StressArgs,
    mix: &[(String, u64)],
    start: u64,
    lines: &[(u64, Value)],
    killed: u64,
    elapsed: f64,
) -> Result<Value, Failure> {
    let mut problems: Vec<String> = Vec::new();
    let latest = table.latest().await?;
    let history = latest.history().await?;
    // A branch's chain starts at the version it was made from.
    let first = history.first().map_or(0, |v| v.version);
    if history.iter().map(|v| v.version).ne(first..=latest.version()) {
        problems.push(format!("versions do not form one chain {first}..={}", latest.version()));
    }
    let mut by_key: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    for v in &history {
        for k in v.transactions.iter().filter_map(|t| t.idempotency_key.as_ref()) {
            by_key.entry(k.clone()).or_default().push(v.version);
        }
    }
    for (k, vs) in &by_key {
        if vs.len() > 1 {
            problems.push(format!("key {k} committed {} times: versions {vs:?}", vs.len()));
        }
    }
    let ok: Vec<&(u64, Value)> = lines.iter().filter(|(_, l)| l["outcome"] == "ok").collect();
    let failed: Vec<&(u64, Value)> = lines.iter().filter(|(_, l)| l["outcome"] == "failed").collect();
    let abandoned: Vec<&(u64, Value)> = lines.iter().filter(|(_, l)| l["outcome"] == "abandoned").collect();
    // A compaction that gave way, or a write that changed nothing (a delete matching no
    // row): neither makes a version.
    let compactions = abandoned.iter().filter(|(w, l)| plan(args, mix, *w, l["index"].as_u64().unwrap_or(0)) == Op::Compact).count();
    for (w, l) in &ok {
        let k = key(args, *w, l["index"].as_u64().unwrap_or(0));
        let version = l["version"].as_u64().unwrap_or(u64::MAX);
        if by_key.get(&k).map(Vec::as_slice) != Some(&[version][..]) {
            problems.push(format!("acknowledged {k} (version {version}) is not in the history exactly there"));
        }
    }
    for (w, l) in &failed {
        let k = key(args, *w, l["index"].as_u64().unwrap_or(0));
        if by_key.contains_key(&k) {
            problems.push(format!("{k} was reported failed ({}) but is in the history", l["error"]));
        }
    }
    for (w, l) in &abandoned {
        let k = key(args, *w, l["index"].as_u64().unwrap_or(0));
        if by_key.contains_key(&k) {
            problems.push(format!("{k} was reported abandoned ({}) but is in the history", l["reason"]));
        }
    }
    // Replay every version from its predecessor with the reference model.
    let mut state: BTreeMap<i64, i64> = BTreeMap::new();
    let mut replayed = 0;
    let mut cache = std::collections::HashMap::new();
    for v in &history {
        let version = latest.checkout(v.version).await?;
        // A shared version is its transactions applied in order.
        for t in &v.transactions {
            match t.idempotency_key.as_deref().and_then(|k| parse_key(args, k)) {
                Some((w, i)) => apply(&mut state, &plan(args, mix, w, i)),
                // A withdrawn announcement (cooperative commits) changes nothing.
                None if t.operation == "withdraw" => {}
                None if v.version <= start || t.idempotency_key.as_deref() == Some(SETUP_KEY) => {
                    state = rows_of(&version, &mut cache).await?.into_iter().collect();
                }
                None => problems.push(format!("version {} ({}) is not a stress operation", v.version, t.operation)),
            }
        }
        if v.version > start {
            let actual = rows_of(&version, &mut cache).await?;
            let as_map: BTreeMap<i64, i64> = actual.iter().copied().collect();
            if as_map.len() != actual.len() {
                problems.push(format!("version {} holds a row twice", v.version));
            } else if as_map != state {
                problems.push(format!("version {} is not version {} + its {}", v.version, v.version - 1, v.operation));
                state = as_map;
            }
            if args.workload == Workload::Bank && state.values().sum::<i64>() != BANK_ACCOUNTS * BANK_OPENING {
                problems.push(format!(
                    "version {}: total balance {} != {}",
                    v.version,
                    state.values().sum::<i64>(),
                    BANK_ACCOUNTS * BANK_OPENING
                ));
            }
            replayed += 1;
        }
    }
    // The change feed: the rows before the run with each version's changes applied in
    // turn (every preimage matching the row it removes) are the rows after it.
    let feed_checked = match check_feed(&latest, start).await {
        Ok(n) => n,
        Err(problem) => {
            problems.push(format!("change feed: {problem}"));
            0
        }
    };
    let mut latencies: Vec<f64> = ok.iter().filter_map(|(_, l)| l["latency_ms"].as_f64()).collect();
    latencies.sort_by(f64::total_cmp);
    let pct = |p: f64| latencies.get(((latencies.len() as f64 - 1.0) * p).round() as usize).copied().unwrap_or(0.0);
    let attempts: Vec<u64> = ok.iter().filter_map(|(_, l)| l["attempts"].as_u64()).collect();
    problems.truncate(20);
    let after_start = || history.iter().filter(|v| v.version > start).flat_map(|v| &v.transactions);
    Ok(json!({
        "verified": problems.is_empty(),
        "workload": args.workload.name(),
        "writers": args.writers, "ops": args.ops, "seed": args.seed, "kill_rate": args.kill_rate,
        "commits": ok.len(), "failed": failed.len(), "abandoned_compactions": compactions, "no_change": abandoned.len() - compactions, "killed": killed,
        "failure_reasons": failure_reasons(&failed),
        "idempotent_replays": ok.iter().filter(|(_, l)| l["replay"] == true).count(),
        "tasks": args.tasks, "group_commit": args.group_commit == Switch::On,
        "versions": history.iter().filter(|v| v.version > start).count(),
        "transactions": after_start().filter(|t| t.operation != "withdraw").count(),
        "carried": after_start().filter(|t| t.carried_by.is_some()).count(),
        "withdrawn": after_start().filter(|t| t.operation == "withdraw").count(),
        "versions_replayed": replayed,
        "feed_versions_checked": feed_checked,
        "bank_total": if args.workload == Workload::Bank { json!({"expected": BANK_ACCOUNTS * BANK_OPENING, "versions_checked": replayed}) } else { Value::Null },
        "commits_per_s": ok.len() as f64 / elapsed.max(1e-9), "elapsed_s": elapsed,
        "latency_ms": {"p50": pct(0.5), "p99": pct(0.99), "max": latencies.last().copied().unwrap_or(0.0)},
        "attempts": {"mean": attempts.iter().sum::<u64>() as f64 / attempts.len().max(1) as f64, "max": attempts.iter().max().copied().unwrap_or(0)},
        "rebases": ok.iter().filter(|(_, l)| l["rebased"].as_u64().unwrap_or(0) > 0).count(),
        "reruns": ok.iter().filter(|(_, l)| l["rerun"] == true).count(),
        "problems": problems,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args() -> StressArgs {
        StressArgs {
            uri: "x".into(),
            writers: 2,
            ops: 5,
            mix: None,
            seed: 7,
            kill_rate: 0.0,
            workload: Workload::Mixed,
            rows: Some(10),
            tasks: 1,
            group_commit: Switch::On,
        }
    }

    #[test]
    fn operations_are_pure_functions_of_their_key() {
        let mix = parse_mix(args().mix()).unwrap();
        for i in 0..20 {
            assert_eq!(plan(&args(), &mix, 1, i), plan(&args(), &mix, 1, i));
        }
        assert_eq!(parse_key(&args(), &key(&args(), 3, 17)), Some((3, 17)));
        assert_eq!(parse_key(&StressArgs { seed: 8, ..args() }, &key(&args(), 3, 17)), None, "another run's key");
        assert!(parse_mix("append=0").is_err() && parse_mix("drop=1").is_err());
        assert_eq!(parse_mix("compact=1").unwrap(), vec![("compact".to_string(), 1)]);
        let bank = StressArgs { workload: Workload::Bank, ..args() };
        let mut state: BTreeMap<i64, i64> = (0..BANK_ACCOUNTS).map(|a| (a, BANK_OPENING)).collect();
        for i in 0..50 {
            apply(&mut state, &plan(&bank, &mix, 0, i));
        }
        assert_eq!(state.values().sum::<i64>(), BANK_ACCOUNTS * BANK_OPENING);
    }
}

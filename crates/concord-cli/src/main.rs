//! The `concord` command. Its names, flags, outputs and exit codes are a contract
//! (../shared/cli-contract.md): add freely, change nothing.

mod context;
mod doctor;
mod exit;
mod output;
mod progress;
mod query;
mod refs;
mod stress;
mod stress_together;
mod together;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use chrono::{DateTime, Utc};
use clap::{Args, Parser, Subcommand};
use concord::{
    AlterError, Assignment, CommitOptions, Env, IsolationLevel, RetryPolicy, ScanOptions, Schema, StoreResolver, Table, VersionRef, Write,
    WriteError,
};
use futures::TryStreamExt;

use context::Context;
use exit::{usage, Failure};
use output::{ListFormat, RowFormat, RowWriter};

#[derive(Parser)]
#[command(name = "concord", version, about = "Versioned Arrow tables that many writers change at once, safely")]
struct Cli {
    #[command(subcommand)]
    command: Command,
    /// Store setting, object_store's names (repeatable), e.g. AWS_REGION=us-east-1;
    /// AWS_*, AZURE_* and GOOGLE_* variables of the environment are read too
    #[arg(long = "storage-option", value_name = "KEY=VALUE", global = true)]
    storage_options: Vec<String>,
    /// Commit through a DynamoDB table (S3-compatible stores without conditional writes)
    #[arg(long = "commit-coordinator", value_name = "dynamodb://TABLE", env = "CONCORD_COMMIT_COORDINATOR", global = true)]
    commit_coordinator: Option<String>,
    /// Read and write branch NAME (default: main)
    #[arg(long, value_name = "NAME", global = true)]
    branch: Option<String>,
}

#[derive(Args, Clone)]
struct VersionArgs {
    /// Read this version (a number, or a tag's name)
    #[arg(long, conflicts_with = "as_of", value_parser = refs::parse_version_ref)]
    version: Option<VersionRef>,
    /// Read the newest version committed at or before this time (RFC 3339)
    #[arg(long = "as-of", value_parser = parse_time)]
    as_of: Option<DateTime<Utc>>,
}

#[derive(Args, Clone)]
struct WriteArgs {
    /// Isolation level for this write (default: the table's)
    #[arg(long, value_parser = parse_isolation)]
    isolation: Option<IsolationLevel>,
    /// Commit only if the latest version is still N (exit 5 otherwise)
    #[arg(long = "expect-version", value_name = "N")]
    expect_version: Option<u64>,
    /// Retries after losing a commit race
    #[arg(long = "max-retries", value_name = "N")]
    max_retries: Option<u32>,
    /// Total time budget for the commit, e.g. 30s, 5m
    #[arg(long, value_parser = concord::time::parse_duration)]
    timeout: Option<Duration>,
    /// If a retained version already carries KEY, write nothing and report it
    #[arg(long = "idempotency-key", value_name = "KEY")]
    idempotency_key: Option<String>,
    /// Print one JSON object describing the outcome
    #[arg(long)]
    json: bool,
    /// Write the data and the transaction record but commit nothing; print the staged
    /// id (finish with `concord commit`)
    #[arg(long)]
    stage: bool,
}

#[derive(Subcommand)]
enum Command {
    /// Create an empty table
    Create {
        uri: String,
        /// e.g. "id bigint not null, name varchar, score double". Types: boolean, tinyint, smallint, int, bigint, utinyint, usmallint, uint, ubigint, float, double, decimal(p, s), varchar, binary, fixed(n), uuid, date, time, timestamp, timestamp_ns, timestamp_ntz, timestamp_ntz_ns
        #[arg(long)]
        schema: String,
        /// A table property, e.g. isolation=snapshot (repeatable)
        #[arg(long = "property", value_name = "KEY=VALUE")]
        properties: Vec<String>,
    },
    /// Append rows from .csv (header row), .json/.jsonl/.ndjson or .parquet files
    Append {
        uri: String,
        #[arg(required = true)]
        files: Vec<PathBuf>,
        #[command(flatten)]
        write: WriteArgs,
    },
    /// Print rows
    Scan {
        uri: String,
        #[command(flatten)]
        at: VersionArgs,
        /// Comma-separated output columns
        #[arg(long, value_delimiter = ',')]
        columns: Option<Vec<String>>,
        /// SQL predicate, e.g. "score > 0.5"
        #[arg(long = "where")]
        filter: Option<String>,
        #[arg(long)]
        limit: Option<usize>,
        #[arg(long, value_enum, default_value = "table")]
        format: RowFormat,
    },
    /// Print the number of rows (one integer)
    Count {
        uri: String,
        #[command(flatten)]
        at: VersionArgs,
        #[arg(long = "where")]
        filter: Option<String>,
    },
    /// Replace all rows (or, with --where, the matching rows) with the rows of the given files
    Overwrite {
        uri: String,
        #[arg(required = true)]
        files: Vec<PathBuf>,
        /// Replace only the rows matching this SQL predicate
        #[arg(long = "where")]
        filter: Option<String>,
        #[command(flatten)]
        write: WriteArgs,
    },
    /// Delete the rows matching a SQL predicate
    Delete {
        uri: String,
        #[arg(long = "where")]
        filter: String,
        #[command(flatten)]
        write: WriteArgs,
    },
    /// Set columns to SQL expressions on the rows matching a predicate (all rows without one)
    Update {
        uri: String,
        /// "column = SQL expression" (repeatable)
        #[arg(long = "set", required = true, value_parser = parse_assignment)]
        set: Vec<Assignment>,
        #[arg(long = "where")]
        filter: Option<String>,
        #[command(flatten)]
        write: WriteArgs,
    },
    /// Upsert from a file on key columns: update matched rows, insert the rest
    Merge {
        uri: String,
        file: PathBuf,
        /// Key columns, comma-separated
        #[arg(long, value_delimiter = ',', required = true)]
        on: Vec<String>,
        #[command(flatten)]
        write: WriteArgs,
    },
    /// Commit transactions prepared with --stage, in the order given
    Commit {
        uri: String,
        #[arg(required = true)]
        staged_ids: Vec<String>,
        /// All in one version, or none (a job commit): if one is incompatible with what
        /// landed meanwhile, nothing commits (exit 3, naming it and the winner). With
        /// `URI=ID` pairs (other tables' staged transactions, in one store): every table
        /// moves in one atomic step, or none does
        #[arg(long)]
        together: bool,
        #[command(flatten)]
        write: WriteArgs,
    },
    /// Make an old version (a number, or a tag's name) the newest state (as a new version)
    Restore {
        uri: String,
        #[arg(value_parser = refs::parse_version_ref)]
        version: VersionRef,
        #[command(flatten)]
        write: WriteArgs,
    },
    /// List versions, oldest first
    History {
        uri: String,
        #[arg(long, value_enum, default_value = "table")]
        format: ListFormat,
        /// Only the newest N versions (still oldest first)
        #[arg(long, value_name = "N")]
        limit: Option<usize>,
    },
    /// Change the schema (by stable field id: no data file is rewritten) or table properties
    Alter {
        uri: String,
        #[command(subcommand)]
        action: AlterAction,
    },
    /// Rewrite small fragments and fragments with deleted rows into larger ones
    Compact {
        uri: String,
        /// Rows per rewritten fragment (fragments with fewer live rows are compacted)
        #[arg(long = "target-rows", value_name = "N", default_value_t = concord::limits::DEFAULT_COMPACT_TARGET_ROWS)]
        target_rows: u64,
        #[command(flatten)]
        write: WriteArgs,
    },
    /// Race N writer processes doing K random operations each (optionally killing them),
    /// then verify every version; prints a JSON report, exit 1 if not verified
    Stress(stress::StressArgs),
    #[command(hide = true)]
    StressWorker {
        #[command(flatten)]
        args: stress::StressArgs,
        #[arg(long)]
        writer: u64,
        #[arg(long)]
        start: u64,
        #[arg(long)]
        log: PathBuf,
    },
    /// Probe the store: is it safe for concurrent commits? (exit 6 if not without a coordinator)
    Doctor { uri: String },
    /// Set up a commit coordinator
    Coordinator {
        #[command(subcommand)]
        action: CoordinatorAction,
    },
    /// Remove versions older than DURATION (never the latest) and the files only they used
    Vacuum {
        uri: String,
        /// e.g. 7d, 12h; at least 1h unless --allow-short-retention
        #[arg(long = "older-than", value_parser = concord::time::parse_duration)]
        older_than: Duration,
        /// Allow a retention under 1h (safe only if no write takes longer than it)
        #[arg(long = "allow-short-retention")]
        allow_short_retention: bool,
        #[arg(long)]
        json: bool,
    },
    /// Run a SQL query (DataFusion SQL, read-only) over the table, named t, and the
    /// tables given with --table; prints its rows
    Sql {
        uri: String,
        /// e.g. "SELECT name, count(*) FROM t GROUP BY name"
        query: String,
        /// --version applies to t; --as-of to every table of the query
        #[command(flatten)]
        at: VersionArgs,
        /// Another table for the query, at its latest version or --as-of (repeatable)
        #[arg(long = "table", value_name = "NAME=URI", value_parser = parse_named_table)]
        tables: Vec<(String, String)>,
        /// Read the --table named NAME at version N (repeatable)
        #[arg(long = "table-version", value_name = "NAME=N", value_parser = parse_table_version)]
        table_versions: Vec<(String, VersionRef)>,
        #[arg(long, value_enum, default_value = "table")]
        format: RowFormat,
    },
    /// Iceberg metadata over the table's files, for any Iceberg reader (DuckDB, pyiceberg,
    /// polars, Spark)
    Iceberg {
        #[command(subcommand)]
        action: IcebergAction,
    },
    /// Print the changes after a version, row by row, on stable row ids: the table's
    /// columns, then _change_type (insert, delete, update_preimage, update_postimage),
    /// _row_id, _version, _txn_id, _committed_at
    Changes {
        uri: String,
        /// The changes after this version (exclusive; a number or a tag)
        #[arg(long, value_name = "V", conflicts_with_all = ["from_time", "consumer"], value_parser = refs::parse_version_ref)]
        from: Option<VersionRef>,
        /// Up to this version (inclusive; default: the latest)
        #[arg(long, value_name = "W", conflicts_with = "to_time", value_parser = refs::parse_version_ref)]
        to: Option<VersionRef>,
        /// The changes after the version current at this time (RFC 3339, UTC)
        #[arg(long = "from-time", value_parser = parse_time, conflicts_with = "consumer")]
        from_time: Option<DateTime<Utc>>,
        /// Up to the version current at this time
        #[arg(long = "to-time", value_parser = parse_time)]
        to_time: Option<DateTime<Utc>>,
        /// The changes after consumer NAME's position (reading moves nothing:
        /// `concord consumer advance` does)
        #[arg(long, value_name = "NAME")]
        consumer: Option<String>,
        /// One change a row over the range: its state before it and at its end
        #[arg(long)]
        net: bool,
        /// Comma-separated table columns to print (the feed's own columns always follow)
        #[arg(long, value_delimiter = ',')]
        columns: Option<Vec<String>>,
        /// SQL predicate on the table's columns (an update's two rows go together)
        #[arg(long = "where")]
        filter: Option<String>,
        #[arg(long, value_enum, default_value = "table")]
        format: RowFormat,
    },
    /// Named cursors of the change feed, stored in the table (vacuum keeps the versions
    /// they have not read yet)
    Consumer {
        #[command(subcommand)]
        action: refs::ConsumerAction,
    },
    /// Names of versions (vacuum keeps the versions they name)
    Tag {
        #[command(subcommand)]
        action: refs::TagAction,
    },
    /// Chains of versions of their own, sharing the table's files, that merge back
    Branch {
        #[command(subcommand)]
        action: refs::BranchAction,
    },
    /// Print the schema
    Schema {
        uri: String,
        #[command(flatten)]
        at: VersionArgs,
        #[arg(long, value_enum, default_value = "table")]
        format: ListFormat,
    },
}

#[derive(Subcommand)]
enum IcebergAction {
    /// Write the Iceberg metadata of version N (default: the latest) and of every earlier
    /// version not yet published; idempotent. Prints the metadata file
    Publish {
        uri: String,
        #[arg(long, value_parser = refs::parse_version_ref)]
        version: Option<VersionRef>,
        /// Print instead a metadata file of main's latest version with every tag and
        /// branch as an Iceberg ref (read by name: pyiceberg's `snapshot_by_name`)
        #[arg(long, conflicts_with = "version")]
        refs: bool,
    },
    /// Print the Iceberg metadata file of version N (default: the latest), publishing it
    /// first if needed
    Path {
        uri: String,
        #[arg(long, value_parser = refs::parse_version_ref)]
        version: Option<VersionRef>,
    },
}

#[derive(Subcommand)]
enum CoordinatorAction {
    /// Create the DynamoDB table the coordinator uses (key: tablePath string, version number)
    CreateTable {
        #[arg(value_name = "dynamodb://TABLE")]
        spec: String,
    },
}

#[derive(Subcommand)]
enum AlterAction {
    /// Add a column: "name type [not null] [default <SQL expression>]"; existing rows read the default (or NULL)
    AddColumn {
        definition: String,
        #[command(flatten)]
        write: WriteArgs,
    },
    /// Remove a column (its data stays in old files, unread)
    DropColumn {
        name: String,
        #[command(flatten)]
        write: WriteArgs,
    },
    /// Rename a column
    RenameColumn {
        old: String,
        new: String,
        #[command(flatten)]
        write: WriteArgs,
    },
    /// Widen a column's type without rewriting files: an integer to a wider one, float to double, decimal(p, s) to decimal(q, s) with q > p
    WidenColumn {
        name: String,
        #[arg(value_name = "TYPE")]
        to: String,
        #[command(flatten)]
        write: WriteArgs,
    },
    /// Set table properties, e.g. isolation=snapshot (the default isolation of writes)
    SetProperty {
        #[arg(required = true, value_name = "KEY=VALUE")]
        assignments: Vec<String>,
        #[command(flatten)]
        write: WriteArgs,
    },
    /// Remove table properties (back to their defaults)
    UnsetProperty {
        #[arg(required = true, value_name = "KEY")]
        keys: Vec<String>,
        #[command(flatten)]
        write: WriteArgs,
    },
}

impl Command {
    /// Whether the command was asked for its outcome as one JSON object (`--json`).
    fn prints_json(&self) -> bool {
        match self {
            Command::Append { write, .. }
            | Command::Overwrite { write, .. }
            | Command::Delete { write, .. }
            | Command::Update { write, .. }
            | Command::Merge { write, .. }
            | Command::Commit { write, .. }
            | Command::Restore { write, .. }
            | Command::Compact { write, .. } => write.json,
            Command::Alter { action, .. } => match action {
                AlterAction::AddColumn { write, .. }
                | AlterAction::DropColumn { write, .. }
                | AlterAction::RenameColumn { write, .. }
                | AlterAction::WidenColumn { write, .. }
                | AlterAction::SetProperty { write, .. }
                | AlterAction::UnsetProperty { write, .. } => write.json,
            },
            Command::Vacuum { json, .. } => *json,
            Command::Branch { action: refs::BranchAction::Merge { json, .. } } => *json,
            _ => false,
        }
    }
}

impl AlterAction {
    fn into_write(self) -> Result<(Write, WriteArgs), Failure> {
        Ok(match self {
            AlterAction::AddColumn { definition, write } => (Write::AddColumn { definition }, write),
            AlterAction::DropColumn { name, write } => (Write::DropColumn { name }, write),
            AlterAction::RenameColumn { old, new, write } => (Write::RenameColumn { from: old, to: new }, write),
            AlterAction::WidenColumn { name, to, write } => (Write::WidenColumn { name, to }, write),
            AlterAction::SetProperty { assignments, write } => {
                (Write::SetProperties { set: property_assignments(&assignments)?, unset: Vec::new() }, write)
            }
            AlterAction::UnsetProperty { keys, write } => (Write::SetProperties { set: BTreeMap::new(), unset: keys }, write),
        })
    }
}

/// `KEY=VALUE` pairs of table properties.
fn property_assignments(assignments: &[String]) -> Result<BTreeMap<String, String>, Failure> {
    let mut set = BTreeMap::new();
    for a in assignments {
        let (key, value) = a.split_once('=').ok_or_else(|| WriteError::from(AlterError::BadPropertyAssignment { given: a.clone() }))?;
        set.insert(key.trim().to_string(), value.trim().to_string());
    }
    Ok(set)
}

fn parse_time(s: &str) -> Result<DateTime<Utc>, String> {
    concord::time::parse_time(s).map_err(|e| e.to_string())
}

/// `column = expression`: the column is everything before the first `=`.
fn parse_assignment(s: &str) -> Result<Assignment, String> {
    let bad = || format!("'{s}' is not of the form \"column = SQL expression\"");
    let (column, expr) = s.split_once('=').ok_or_else(bad)?;
    // A quoted column name ("Id") keeps its quotes: it then matches exactly.
    let (column, expr) = (column.trim(), expr.trim());
    if column.is_empty() || expr.is_empty() || (column.contains(char::is_whitespace) && !column.starts_with('"')) {
        return Err(bad());
    }
    Ok(Assignment { column: column.to_string(), expr: expr.to_string() })
}

/// `NAME=URI` of `--table`.
fn parse_named_table(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((name, uri)) if !name.trim().is_empty() && !uri.trim().is_empty() => Ok((name.trim().to_string(), uri.trim().to_string())),
        _ => Err(format!("'{s}' is not of the form NAME=URI, e.g. --table orders=./orders")),
    }
}

/// `NAME=N` (or `NAME=TAG`) of `--table-version`.
fn parse_table_version(s: &str) -> Result<(String, VersionRef), String> {
    let bad = || format!("'{s}' is not of the form NAME=VERSION, e.g. --table-version orders=12");
    let (name, version) = s.split_once('=').ok_or_else(bad)?;
    Ok((name.trim().to_string(), refs::parse_version_ref(version).map_err(|_| bad())?))
}

fn parse_isolation(s: &str) -> Result<IsolationLevel, String> {
    IsolationLevel::parse(s).ok_or_else(|| format!("'{s}' is not an isolation level; use serializable or snapshot"))
}

impl WriteArgs {
    /// Flags that only apply when committing are refused with `--stage` (which commits
    /// nothing): `concord commit` takes them.
    fn check_stage(&self) -> Result<(), Failure> {
        let given = [("--max-retries", self.max_retries.is_some()), ("--timeout", self.timeout.is_some())];
        match given.iter().find(|(_, set)| *set) {
            Some((flag, _)) if self.stage => {
                Err(usage(format!("{flag} applies when committing, and --stage commits nothing; give it to `concord commit` instead")))
            }
            _ => Ok(()),
        }
    }

    fn options(&self) -> CommitOptions {
        let mut retry = RetryPolicy::default();
        if let Some(n) = self.max_retries {
            retry.max_attempts = n.saturating_add(1);
        }
        if let Some(t) = self.timeout {
            retry.timeout = t;
        }
        CommitOptions {
            isolation: self.isolation,
            expect_version: self.expect_version,
            retry,
            idempotency_key: self.idempotency_key.clone(),
        }
    }
}

/// Store settings from the environment: object_store reads these names.
fn ambient_options() -> Vec<(String, String)> {
    std::env::vars().filter(|(k, _)| ["AWS_", "AZURE_", "GOOGLE_"].iter().any(|p| k.starts_with(p))).collect()
}

async fn run(cli: Cli) -> Result<(), Failure> {
    // What worker processes (stress) need to reach the same store the same way.
    let mut global_args: Vec<String> = cli.storage_options.iter().flat_map(|o| ["--storage-option".to_string(), o.clone()]).collect();
    if let Some(c) = &cli.commit_coordinator {
        global_args.extend(["--commit-coordinator".to_string(), c.clone()]);
    }
    if let Some(b) = &cli.branch {
        global_args.extend(["--branch".to_string(), b.clone()]);
    }
    let explicit: Vec<(String, String)> = cli
        .storage_options
        .iter()
        .map(|o| {
            let (k, v) = o.split_once('=').expect("checked in main");
            (k.trim().to_string(), v.to_string())
        })
        .collect();
    let resolver = StoreResolver::new()
        .with_ambient_options(ambient_options())
        .with_options(explicit)
        .with_commit_coordinator(cli.commit_coordinator.clone());
    let cx = Context { resolver, env: Env::system(), branch: cli.branch.clone() };
    match cli.command {
        Command::Create { uri, schema, properties } => {
            let schema = Schema::parse(&schema)?;
            let properties = property_assignments(&properties)?;
            let table = Table::create_with_properties(cx.location(&uri)?, cx.env.clone(), schema, &properties).await?;
            println!("created {} at version {}", table.uri(), table.version());
        }
        Command::Append { uri, files, write } => cx.write(&uri, Write::Append { input: files.into() }, &write).await?,
        Command::Overwrite { uri, files, filter, write } => {
            cx.write(&uri, Write::Overwrite { input: files.into(), filter }, &write).await?
        }
        Command::Restore { uri, version, write } => {
            let version = cx.open(&uri).await?.version_of(&version).await?;
            cx.write(&uri, Write::Restore { version }, &write).await?
        }
        Command::Delete { uri, filter, write } => cx.write(&uri, Write::Delete { filter }, &write).await?,
        Command::Update { uri, set, filter, write } => cx.write(&uri, Write::Update { set, filter }, &write).await?,
        Command::Merge { uri, file, on, write } => cx.write(&uri, Write::Merge { input: file.into(), on }, &write).await?,
        Command::Alter { uri, action } => {
            let (op, write) = action.into_write()?;
            cx.write(&uri, op, &write).await?
        }
        Command::Compact { uri, target_rows, write } => cx.write(&uri, Write::Compact { target_rows }, &write).await?,
        Command::Commit { uri, staged_ids, together, write } => {
            if write.stage {
                return Err(usage("`concord commit` commits staged transactions; --stage does not apply to it".into()));
            }
            match (together::parts(&uri, &staged_ids), together) {
                (Some(parts), true) => return together::commit(&cx, parts, &write).await,
                (Some(_), false) => return Err(together::pairs_need_together()),
                (None, _) => {}
            }
            let table = cx.open(&uri).await?;
            let mut txns = Vec::with_capacity(staged_ids.len());
            for id in &staged_ids {
                txns.push(table.load_staged(id).await?);
            }
            for info in table.commit_staged(&txns, together, &write.options()).await? {
                output::print_commit(&info, write.json)?;
            }
        }
        Command::Scan { uri, at, columns, filter, limit, format } => {
            let table = cx.open_at(&uri, &at).await?;
            let scan = table.scan(ScanOptions { columns, filter, limit, ..ScanOptions::default() }).await?;
            let mut writer = RowWriter::stdout(format, scan.schema());
            let mut stream = scan.into_stream();
            while let Some(batch) = stream.try_next().await? {
                writer.write(&batch)?;
            }
            writer.finish()?;
        }
        Command::Count { uri, at, filter } => {
            let table = cx.open_at(&uri, &at).await?;
            println!("{}", table.count(filter.as_deref()).await?);
        }
        Command::History { uri, format, limit } => {
            let history = cx.open(&uri).await?.history_newest(limit.unwrap_or(usize::MAX)).await?;
            output::print_history(&history, format)?;
        }
        Command::Doctor { uri } => doctor::doctor(&cx, &uri).await?,
        Command::Vacuum { uri, older_than, allow_short_retention, json } => {
            let r = cx.open(&uri).await?.vacuum(older_than, allow_short_retention).await?;
            if json {
                println!(
                    "{}",
                    serde_json::json!({"versions_removed": r.versions_removed, "oldest_retained": r.oldest_retained,
                    "objects_removed": r.objects_removed, "bytes_removed": r.bytes_removed, "objects_kept": r.objects_kept,
                    "held_by_consumers": r.held_by_consumers.iter().map(|(name, v)| serde_json::json!({"consumer": name, "version": v})).collect::<Vec<_>>(),
                    "held_by_tags": r.held_by_tags.iter().map(|(name, v)| serde_json::json!({"tag": name, "version": v})).collect::<Vec<_>>(),
                    "held_by_branches": r.held_by_branches.iter().map(|(name, v)| serde_json::json!({"branch": name, "version": v})).collect::<Vec<_>>()})
                );
            } else {
                println!(
                    "removed {} versions (oldest kept: {}) and {} objects ({} bytes); kept {} objects",
                    r.versions_removed, r.oldest_retained, r.objects_removed, r.bytes_removed, r.objects_kept
                );
                for (name, version) in &r.held_by_consumers {
                    println!("consumer {name} holds versions from {version} on (it has not read their changes yet)");
                }
                for (name, version) in &r.held_by_branches {
                    println!("branch {name} holds versions from {version} on (it started there; its merges are judged from there)");
                }
                for (name, version) in &r.held_by_tags {
                    println!("tag {name} holds version {version}");
                }
            }
        }
        Command::Stress(args) => {
            let location = cx.location(&args.uri)?;
            let open = Table::open(location.clone(), cx.env.clone());
            let create = Table::create(location, cx.env.clone(), stress::schema(&args));
            let mut table = stress::ensure_table(open, create, &args).await?;
            if let Some(name) = &cx.branch {
                // On a branch (made from main's latest if missing): its own chain.
                table = match table.branch(name).await {
                    Err(concord::BranchError::NotFound { .. }) => table.create_branch(name, None).await?,
                    other => other?,
                };
            }
            let items = match args.workload {
                stress::Workload::Together => {
                    let location = cx.location(&stress_together::items_uri(&args.uri))?;
                    let open = Table::open(location.clone(), cx.env.clone());
                    let create = Table::create(location, cx.env.clone(), stress::schema(&args));
                    Some(stress::ensure_table(open, create, &args).await?)
                }
                _ => None,
            };
            stress::run(table, items, &args, &global_args).await?
        }
        Command::StressWorker { args, writer, start, log } => {
            let items = match args.workload {
                stress::Workload::Together => Some(cx.open(&stress_together::items_uri(&args.uri)).await?),
                _ => None,
            };
            stress::worker(cx.open(&args.uri).await?, items, &args, writer, start, &log).await?
        }
        Command::Coordinator { action: CoordinatorAction::CreateTable { spec } } => {
            let created = concord::store::create_coordinator_table(&spec, &cx.resolver.options()).await?;
            println!("{} {spec}", if created { "created" } else { "already exists:" });
        }
        Command::Sql { uri, query, at, tables, table_versions, format } => {
            query::sql(&cx, &uri, &query, &at, &tables, &table_versions, format).await?
        }
        Command::Iceberg { action: IcebergAction::Publish { uri, refs: true, .. } } => {
            println!("{}", cx.open(&uri).await?.publish_iceberg_refs().await?);
        }
        Command::Iceberg { action: IcebergAction::Publish { uri, version, .. } | IcebergAction::Path { uri, version } } => {
            let at = VersionArgs { version, as_of: None };
            println!("{}", cx.open_at(&uri, &at).await?.publish_iceberg().await?);
        }
        Command::Changes { uri, from, to, from_time, to_time, consumer, net, columns, filter, format } => {
            let table = cx.open(&uri).await?;
            let options = concord::ChangeOptions { columns, filter, net, ..Default::default() };
            let to = match (to, to_time) {
                (Some(v), _) => Some(table.version_of(&v).await?),
                (None, Some(t)) => Some(table.checkout_as_of(t).await?.version()),
                (None, None) => None,
            };
            let feed = match (from, from_time, consumer) {
                (Some(v), _, _) => table.changes(table.version_of(&v).await?, to, &options).await?,
                (None, Some(t), _) => table.changes(table.checkout_as_of(t).await?.version(), to, &options).await?,
                (None, None, Some(name)) => table.consumer_changes(&name, to, &options).await?.1,
                (None, None, None) => return Err(usage("give where the changes start: --from V, --from-time T or --consumer NAME".into())),
            };
            output::print_changes(feed, format).await?;
        }
        Command::Consumer { action } => refs::consumer(&cx, action).await?,
        Command::Tag { action } => refs::tag(&cx, action).await?,
        Command::Branch { action } => refs::branch(&cx, action).await?,
        Command::Schema { uri, at, format } => {
            let table = cx.open_at(&uri, &at).await?;
            output::print_schema(table.schema(), &table.manifest().properties, format)?;
        }
    }
    Ok(())
}

/// glibc maps large blocks on their own (over 128 KiB at first, a threshold it raises
/// as they are freed), unmaps them when freed and trims its heaps as soon as they
/// shrink, so each batch's buffers are faulted in again, page by page.
/// A command is a short-lived process: it keeps what it frees (blocks up to 32 MiB come
/// from the heaps, which are trimmed only past 256 MiB free): TPC-H's q6 took 4x fewer
/// page faults, a 10M-row append 2x fewer. The library sets nothing process-wide (the
/// Python package leaves its host's allocator alone).
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn keep_freed_memory() {
    // SAFETY: mallopt only sets allocator parameters, here before any other thread
    // starts; a parameter it refuses stays at its default.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 32 << 20);
        libc::mallopt(libc::M_TRIM_THRESHOLD, 256 << 20);
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn keep_freed_memory() {}

fn main() {
    keep_freed_memory();
    let cli = Cli::parse();
    let json = cli.command.prints_json();
    if let Some(bad) = cli.storage_options.iter().find(|o| !o.contains('=')) {
        eprintln!("error: --storage-option '{bad}' is not of the form KEY=VALUE");
        std::process::exit(exit::USAGE);
    }
    // Planning and evaluating a SQL expression recurse once per operator; the library
    // caps expressions at MAX_EXPRESSION_OPERATORS, and these stacks hold that depth
    // even in debug builds. Stack memory is only committed when used.
    const STACK_BYTES: usize = 64 << 20;
    // A panic the library turns into a typed error (a corrupt Parquet file) is reported
    // by that error; only other panics print here.
    concord::quiet_caught_panics();
    let runtime =
        tokio::runtime::Builder::new_multi_thread().enable_all().thread_stack_size(STACK_BYTES).build().expect("tokio runtime starts");
    let outcome = std::thread::Builder::new()
        .name("concord".into())
        .stack_size(STACK_BYTES)
        .spawn(move || runtime.block_on(run(cli)))
        .expect("main thread starts")
        .join();
    let Ok(result) = outcome else {
        // The panic message is already printed.
        std::process::exit(exit::OTHER);
    };
    if let Err(failure) = result {
        if !failure.message.is_empty() {
            eprintln!("error: {}", failure.message);
        }
        if json && failure.code != exit::SUCCESS {
            // Scripts read the outcome from stdout, failures too (the contract's kinds).
            println!("{}", serde_json::json!({"error": failure.kind, "exit": failure.code, "message": failure.message}));
        }
        std::process::exit(failure.code);
    }
}

//! What commands print on stdout. Diagnostics go to stderr.

use std::io::Write;

use arrow::array::RecordBatch;
use arrow::datatypes::SchemaRef;
use concord::{CommitInfo, Schema, VersionInfo};
use serde_json::json;

use crate::exit::Failure;

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum RowFormat {
    Table,
    Csv,
    Json,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ListFormat {
    Table,
    Json,
}

/// Writes scan results. Table format needs all rows (column widths), the others stream.
pub struct RowWriter {
    format: RowFormat,
    schema: SchemaRef,
    buffered: Vec<RecordBatch>,
    csv: Option<arrow::csv::Writer<std::io::Stdout>>,
    wrote_any: bool,
}

impl RowWriter {
    pub fn new(format: RowFormat, schema: SchemaRef) -> Self {
        let csv = (format == RowFormat::Csv).then(|| arrow::csv::WriterBuilder::new().with_header(true).build(std::io::stdout()));
        RowWriter { format, schema, buffered: Vec::new(), csv, wrote_any: false }
    }

    pub fn write(&mut self, batch: &RecordBatch) -> Result<(), Failure> {
        self.wrote_any = true;
        match self.format {
            RowFormat::Table => self.buffered.push(batch.clone()),
            RowFormat::Csv => self.csv.as_mut().expect("csv writer").write(batch)?,
            RowFormat::Json => {
                let mut out = std::io::stdout().lock();
                let mut writer = arrow::json::WriterBuilder::new()
                    .with_explicit_nulls(true)
                    .build::<_, arrow::json::writer::LineDelimited>(&mut out);
                writer.write(batch)?;
                writer.finish()?;
            }
        }
        Ok(())
    }

    pub fn finish(self) -> Result<(), Failure> {
        match self.format {
            RowFormat::Table => {
                let batches = if self.buffered.is_empty() { vec![RecordBatch::new_empty(self.schema)] } else { self.buffered };
                writeln!(std::io::stdout(), "{}", arrow::util::pretty::pretty_format_batches(&batches)?)?;
            }
            RowFormat::Csv => {
                let mut csv = self.csv.expect("csv writer");
                if !self.wrote_any {
                    csv.write(&RecordBatch::new_empty(self.schema))?;
                }
            }
            RowFormat::Json => {}
        }
        std::io::stdout().flush()?;
        Ok(())
    }
}

pub fn print_commit(info: &CommitInfo, as_json: bool) -> Result<(), Failure> {
    let mut out = std::io::stdout().lock();
    if as_json {
        let value = json!({
            "version": info.version,
            "operation": info.operation,
            "attempts": info.attempts,
            "rows_written": info.rows_written,
            "rows_deleted": info.rows_deleted,
            "transaction_id": info.transaction_id.to_string(),
            "rebased_over": info.rebased_over,
            "rerun": info.rerun,
            "idempotent_replay": info.idempotent_replay,
            "abandoned": info.abandoned,
        });
        writeln!(out, "{value}")?;
    } else if let Some(reason) = &info.abandoned {
        writeln!(out, "nothing committed ({}): {reason}; the table stays at version {}", info.operation, info.version)?;
    } else if info.idempotent_replay {
        writeln!(out, "already committed as version {} ({}); nothing written", info.version, info.operation)?;
    } else {
        let mut line = format!("committed version {} ({}", info.version, info.operation);
        if info.rows_written > 0 {
            line.push_str(&format!(", {} written", rows(info.rows_written)));
        }
        if info.rows_deleted > 0 {
            line.push_str(&format!(", {} deleted", rows(info.rows_deleted)));
        }
        if info.rerun {
            line.push_str(", re-ran on concurrent changes");
        }
        line.push_str(&format!(", {} attempt{}", info.attempts, if info.attempts == 1 { "" } else { "s" }));
        if !info.rebased_over.is_empty() {
            line.push_str(&format!(", rebased over {} concurrent commit{}", info.rebased_over.len(), if info.rebased_over.len() == 1 { "" } else { "s" }));
        }
        writeln!(out, "{line})")?;
    }
    Ok(())
}

fn rows(n: u64) -> String {
    format!("{n} row{}", if n == 1 { "" } else { "s" })
}

pub fn print_history(history: &[VersionInfo], format: ListFormat) -> Result<(), Failure> {
    let mut out = std::io::stdout().lock();
    match format {
        ListFormat::Json => writeln!(out, "{}", serde_json::to_string(history).expect("history serializes"))?,
        ListFormat::Table => {
            writeln!(out, "{:>8}  {:<27}  {:<14}  {:>6}  {:>8}  {:>10}  {:>10}  {:>10}  rebased_over", "version", "timestamp", "operation", "read", "attempts", "written", "deleted", "rows")?;
            for v in history {
                let read = v.read_version.map_or("-".to_string(), |r| r.to_string());
                let rebased = match v.rebased_over.as_slice() {
                    [] => "-".to_string(),
                    [one] => format!("[{one}]"),
                    many if many.len() <= 6 => format!("{many:?}"),
                    many => format!("{} versions, {}..={}", many.len(), many[0], many[many.len() - 1]),
                };
                let rebased = if v.rerun { format!("{rebased} (re-ran)") } else { rebased };
                let ts = v.timestamp.to_rfc3339_opts(chrono::SecondsFormat::Micros, true);
                writeln!(out, "{:>8}  {:<27}  {:<14}  {:>6}  {:>8}  {:>10}  {:>10}  {:>10}  {}", v.version, ts, v.operation, read, v.attempts, v.rows_written, v.rows_deleted, v.rows, rebased)?;
            }
        }
    }
    Ok(())
}

pub fn print_schema(schema: &Schema, format: ListFormat) -> Result<(), Failure> {
    let mut out = std::io::stdout().lock();
    match format {
        ListFormat::Json => writeln!(out, "{}", serde_json::to_string(&schema.fields).expect("schema serializes"))?,
        ListFormat::Table => {
            for f in &schema.fields {
                let default = f.default.as_deref().map_or(String::new(), |d| format!(" default {}", concord::sql_literal(d)));
                writeln!(out, "{} {}{}{default}", f.name, f.column_type, if f.nullable { "" } else { " not null" })?;
            }
        }
    }
    Ok(())
}

//! What commands print on stdout. Diagnostics go to stderr.

use std::io::Write;

use std::sync::Arc;

use arrow::array::{Array, ArrowPrimitiveType, AsArray, PrimitiveArray, RecordBatch};
use arrow::datatypes::{DataType, Float32Type, Float64Type, SchemaRef};
use arrow::json::writer::{Encoder, EncoderFactory, EncoderOptions, NullableEncoder};
use arrow::util::display::{ArrayFormatter, FormatOptions};
use concord::{CommitInfo, Schema, VersionInfo};
use serde_json::json;

use crate::exit::Failure;

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum RowFormat {
    Table,
    Csv,
    Json,
    /// An Arrow IPC stream (for pyarrow.ipc.open_stream, DuckDB, polars, ...).
    Arrow,
    /// A Parquet file (written whole at the end).
    Parquet,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ListFormat {
    Table,
    Json,
}

/// Writes scan results as they arrive: every format streams in bounded memory (the
/// table format sizes its columns from the first batch).
pub struct RowWriter<W: Write> {
    format: RowFormat,
    schema: SchemaRef,
    out: W,
    /// Table format: column widths, set by the first batch.
    widths: Option<Vec<usize>>,
    /// Arrow format: the stream's encoder (its bytes go to `out` as each batch is encoded).
    ipc: Option<arrow_ipc::writer::StreamWriter<Vec<u8>>>,
    /// Table format: some value was cut to its column's width.
    cut: bool,
    /// Parquet format: the rows, encoded at the end.
    parquet: Vec<RecordBatch>,
}

impl RowWriter<std::io::BufWriter<std::io::StdoutLock<'static>>> {
    pub fn stdout(format: RowFormat, schema: SchemaRef) -> Self {
        RowWriter::new(format, schema, std::io::BufWriter::new(std::io::stdout().lock()))
    }
}

impl<W: Write> RowWriter<W> {
    pub fn new(format: RowFormat, schema: SchemaRef, out: W) -> Self {
        RowWriter { format, schema, out, widths: None, ipc: None, cut: false, parquet: Vec::new() }
    }

    pub fn write(&mut self, batch: &RecordBatch) -> Result<(), Failure> {
        match self.format {
            RowFormat::Table => {
                let cells = cells(batch, "NULL")?;
                if self.widths.is_none() {
                    self.start_table(Some(&cells))?;
                }
                let widths = self.widths.as_ref().expect("set above");
                for row in 0..batch.num_rows() {
                    let line: Vec<String> = cells
                        .iter()
                        .zip(widths)
                        .map(|(column, w)| {
                            let cell = &column[row];
                            // Columns are sized by the first batch (the table streams): a
                            // wider value later is cut, so that every row stays aligned.
                            if cell.chars().count() > *w {
                                self.cut = true;
                                let kept: String = cell.chars().take(w.saturating_sub(1)).collect();
                                format!(" {kept}\u{2026} ")
                            } else {
                                format!(" {cell:<w$} ")
                            }
                        })
                        .collect();
                    writeln!(self.out, "|{}|", line.join("|"))?;
                }
            }
            RowFormat::Csv => {
                if self.widths.is_none() {
                    self.csv_header()?;
                }
                let columns = cells(batch, "")?;
                let mut line = String::new();
                for row in 0..batch.num_rows() {
                    line.clear();
                    for (i, column) in columns.iter().enumerate() {
                        if i > 0 {
                            line.push(',');
                        }
                        if batch.column(i).is_valid(row) {
                            quote_csv_field(&column[row], &mut line);
                        }
                    }
                    writeln!(self.out, "{line}")?;
                }
            }
            RowFormat::Json => {
                let batch = &text_map_keys(batch)?;
                let mut writer = arrow::json::WriterBuilder::new()
                    .with_explicit_nulls(true)
                    .with_encoder_factory(Arc::new(SpecialFloats))
                    .build::<_, arrow::json::writer::LineDelimited>(&mut self.out);
                writer.write(batch)?;
                writer.finish()?;
            }
            RowFormat::Arrow => {
                self.ipc()?.write(batch)?;
                self.drain_ipc()?;
            }
            RowFormat::Parquet => self.parquet.push(batch.clone()),
        }
        self.out.flush()?;
        Ok(())
    }

    /// The IPC encoder, created (schema written) on first use.
    fn ipc(&mut self) -> Result<&mut arrow_ipc::writer::StreamWriter<Vec<u8>>, Failure> {
        if self.ipc.is_none() {
            self.ipc = Some(arrow_ipc::writer::StreamWriter::try_new(Vec::new(), &self.schema)?);
        }
        Ok(self.ipc.as_mut().expect("set above"))
    }

    fn drain_ipc(&mut self) -> Result<(), Failure> {
        let bytes = std::mem::take(self.ipc()?.get_mut());
        self.out.write_all(&bytes)?;
        Ok(())
    }

    pub fn finish(mut self) -> Result<(), Failure> {
        match self.format {
            RowFormat::Table => {
                if self.widths.is_none() {
                    self.start_table(None)?;
                }
                let border = border(self.widths.as_ref().expect("set above"));
                writeln!(self.out, "{border}")?;
                if self.cut {
                    eprintln!(
                        "note: values wider than their column (sized by the first rows) were cut; --format csv or json prints them whole"
                    );
                }
            }
            RowFormat::Csv if self.widths.is_none() => self.csv_header()?,
            RowFormat::Csv | RowFormat::Json => {}
            RowFormat::Arrow => {
                self.ipc()?.finish()?;
                self.drain_ipc()?;
            }
            RowFormat::Parquet => {
                let mut writer = parquet::arrow::ArrowWriter::try_new(Vec::new(), self.schema.clone(), None)?;
                for batch in &self.parquet {
                    writer.write(batch)?;
                }
                self.out.write_all(&writer.into_inner()?)?;
            }
        }
        self.out.flush()?;
        Ok(())
    }

    /// The table's top border, header and separator, sized by the header and `first`.
    fn start_table(&mut self, first: Option<&[Vec<String>]>) -> Result<(), Failure> {
        let widths: Vec<usize> = self
            .schema
            .fields()
            .iter()
            .enumerate()
            .map(|(i, f)| {
                first.map_or(0, |cells| cells[i].iter().map(|c| c.chars().count()).max().unwrap_or(0)).max(f.name().chars().count())
            })
            .collect();
        let border = border(&widths);
        let header: Vec<String> = self.schema.fields().iter().zip(&widths).map(|(f, w)| format!(" {:<w$} ", f.name())).collect();
        writeln!(self.out, "{border}\n|{}|\n{border}", header.join("|"))?;
        self.widths = Some(widths);
        Ok(())
    }

    /// CSV: an unquoted empty field is NULL, a quoted `""` the empty string.
    fn csv_header(&mut self) -> Result<(), Failure> {
        let nested = |t: &DataType| matches!(t, DataType::List(_) | DataType::FixedSizeList(..) | DataType::Struct(_) | DataType::Map(..));
        if let Some(f) = self.schema.fields().iter().find(|f| nested(f.data_type())) {
            return Err(crate::exit::usage(format!(
                "column '{}' is nested ({}): CSV holds flat values only; print it with --format json (or arrow), or leave it out with --columns",
                f.name(),
                concord::ColumnType::from_arrow(f).map(|t| t.to_string()).unwrap_or_else(|_| f.data_type().to_string())
            )));
        }
        let mut line = String::new();
        for (i, f) in self.schema.fields().iter().enumerate() {
            if i > 0 {
                line.push(',');
            }
            quote_csv_field(f.name(), &mut line);
        }
        writeln!(self.out, "{line}")?;
        self.widths = Some(Vec::new());
        Ok(())
    }
}

/// Each column's values as text, NULL as `null`.
fn cells(batch: &RecordBatch, null: &str) -> Result<Vec<Vec<String>>, Failure> {
    let options = FormatOptions::default().with_null(null);
    batch
        .columns()
        .iter()
        .map(|c| {
            let f = ArrayFormatter::try_new(c.as_ref(), &options)?;
            Ok((0..batch.num_rows()).map(|i| f.value(i).to_string()).collect())
        })
        .collect()
}

/// `batch` with every map's keys as text (JSON object keys are strings; appends read
/// them back into the map's key type).
fn text_map_keys(batch: &RecordBatch) -> Result<RecordBatch, Failure> {
    fn texted(t: &DataType) -> DataType {
        let field = |f: &arrow::datatypes::FieldRef| Arc::new(f.as_ref().clone().with_data_type(texted(f.data_type())));
        match t {
            DataType::List(f) => DataType::List(field(f)),
            DataType::FixedSizeList(f, n) => DataType::FixedSizeList(field(f), *n),
            DataType::Struct(fs) => DataType::Struct(fs.iter().map(field).collect()),
            DataType::Map(entries, sorted) => {
                let DataType::Struct(kv) = entries.data_type() else { return t.clone() };
                let key = Arc::new(kv[0].as_ref().clone().with_data_type(DataType::Utf8));
                let kv = DataType::Struct(vec![key, field(&kv[1])].into());
                DataType::Map(Arc::new(entries.as_ref().clone().with_data_type(kv)), *sorted)
            }
            other => other.clone(),
        }
    }
    if batch.schema().fields().iter().all(|f| texted(f.data_type()) == *f.data_type()) {
        return Ok(batch.clone());
    }
    let columns = batch.columns().iter().map(|c| arrow::compute::cast(c, &texted(c.data_type()))).collect::<Result<Vec<_>, _>>()?;
    let fields: Vec<_> =
        batch.schema().fields().iter().zip(&columns).map(|(f, c)| f.as_ref().clone().with_data_type(c.data_type().clone())).collect();
    Ok(RecordBatch::try_new(Arc::new(arrow::datatypes::Schema::new(fields)), columns)?)
}

/// JSON has no literal for infinities and NaN (arrow's writer prints null, which
/// re-imports as NULL): they are written as the strings "NaN", "Infinity" and
/// "-Infinity", which appends read back into float columns.
#[derive(Debug)]
struct SpecialFloats;

impl EncoderFactory for SpecialFloats {
    fn make_default_encoder<'a>(
        &self,
        _field: &'a arrow::datatypes::FieldRef,
        array: &'a dyn Array,
        _options: &'a EncoderOptions,
    ) -> Result<Option<NullableEncoder<'a>>, arrow::error::ArrowError> {
        let encoder: Box<dyn Encoder + 'a> = match array.data_type() {
            DataType::Float64 => Box::new(FloatEncoder(array.as_primitive::<Float64Type>(), |v| format!("{v:?}"))),
            DataType::Float32 => Box::new(FloatEncoder(array.as_primitive::<Float32Type>(), |v| format!("{v:?}"))),
            _ => return Ok(None),
        };
        Ok(Some(NullableEncoder::new(encoder, array.logical_nulls())))
    }
}

/// Floats as JSON; `shortest` prints the shortest text that reads back as the same float.
struct FloatEncoder<'a, T: ArrowPrimitiveType>(&'a PrimitiveArray<T>, fn(T::Native) -> String);

impl<T: ArrowPrimitiveType> Encoder for FloatEncoder<'_, T> {
    fn encode(&mut self, idx: usize, out: &mut Vec<u8>) {
        let text = (self.1)(self.0.value(idx));
        let special = match text.as_str() {
            "NaN" => Some("\"NaN\""),
            "inf" => Some("\"Infinity\""),
            "-inf" => Some("\"-Infinity\""),
            _ => None,
        };
        out.extend_from_slice(special.unwrap_or(&text).as_bytes());
    }
}

fn border(widths: &[usize]) -> String {
    let parts: Vec<String> = widths.iter().map(|w| "-".repeat(w + 2)).collect();
    format!("+{}+", parts.join("+"))
}

/// `--stage`'s output: the staged id (one line), or with `--json` an object.
pub fn print_staged(id: impl std::fmt::Display, as_json: bool) -> Result<(), Failure> {
    let mut out = std::io::stdout().lock();
    if as_json {
        writeln!(out, "{}", json!({ "staged_id": id.to_string() }))?;
    } else {
        writeln!(out, "{id}")?;
    }
    Ok(())
}

pub fn print_commit(info: &CommitInfo, as_json: bool) -> Result<(), Failure> {
    let mut out = std::io::stdout().lock();
    if as_json {
        let value = json!({
            "version": info.version,
            "operation": info.operation.name(),
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
            line.push_str(&format!(
                ", rebased over {} concurrent commit{}",
                info.rebased_over.len(),
                if info.rebased_over.len() == 1 { "" } else { "s" }
            ));
        }
        writeln!(out, "{line})")?;
    }
    Ok(())
}

fn rows(n: u64) -> String {
    format!("{n} row{}", if n == 1 { "" } else { "s" })
}

/// A change feed, as scans print rows.
pub async fn print_changes(feed: concord::ChangeFeed, format: RowFormat) -> Result<(), Failure> {
    use futures::TryStreamExt;
    let mut writer = RowWriter::stdout(format, feed.schema());
    let mut stream = feed.into_stream();
    while let Some(batch) = stream.try_next().await? {
        writer.write(&batch)?;
    }
    writer.finish()
}

/// Consumers of a change feed and their positions.
pub fn print_consumers(consumers: &[concord::ConsumerInfo], format: ListFormat) -> Result<(), Failure> {
    let mut out = std::io::stdout().lock();
    match format {
        ListFormat::Json => writeln!(out, "{}", serde_json::to_string(consumers).expect("consumers serialize"))?,
        ListFormat::Table => {
            writeln!(out, "{:<32}  {:>8}  updated_at", "consumer", "version")?;
            for c in consumers {
                writeln!(out, "{:<32}  {:>8}  {}", c.name, c.version, c.updated_at.to_rfc3339_opts(chrono::SecondsFormat::Micros, true))?;
            }
        }
    }
    Ok(())
}

/// Tags and the versions they name.
pub fn print_tags(tags: &[concord::TagInfo], format: ListFormat) -> Result<(), Failure> {
    let mut out = std::io::stdout().lock();
    match format {
        ListFormat::Json => writeln!(out, "{}", serde_json::to_string(tags).expect("tags serialize"))?,
        ListFormat::Table => {
            writeln!(out, "{:<32}  {:<24}  {:>8}  created_at", "tag", "branch", "version")?;
            for t in tags {
                let at = t.created_at.to_rfc3339_opts(chrono::SecondsFormat::Micros, true);
                writeln!(out, "{:<32}  {:<24}  {:>8}  {at}", t.name, t.branch, t.version)?;
            }
        }
    }
    Ok(())
}

/// Branches and where each started.
pub fn print_branches(branches: &[concord::BranchInfo], format: ListFormat) -> Result<(), Failure> {
    let mut out = std::io::stdout().lock();
    match format {
        ListFormat::Json => writeln!(out, "{}", serde_json::to_string(branches).expect("branches serialize"))?,
        ListFormat::Table => {
            writeln!(out, "{:<32}  {:<32}  created_at", "branch", "from")?;
            for b in branches {
                let from = b.from.as_ref().map_or_else(|| "-".to_string(), |(branch, v)| format!("{branch} at version {v}"));
                let at = b.created_at.map_or_else(|| "-".to_string(), |t| t.to_rfc3339_opts(chrono::SecondsFormat::Micros, true));
                writeln!(out, "{:<32}  {from:<32}  {at}", b.name)?;
            }
        }
    }
    Ok(())
}

pub fn print_history(history: &[VersionInfo], format: ListFormat) -> Result<(), Failure> {
    let mut out = std::io::stdout().lock();
    match format {
        ListFormat::Json => writeln!(out, "{}", serde_json::to_string(history).expect("history serializes"))?,
        ListFormat::Table => {
            writeln!(
                out,
                "{:>8}  {:<27}  {:<14}  {:>6}  {:>8}  {:>10}  {:>10}  {:>10}  rebased_over",
                "version", "timestamp", "operation", "read", "attempts", "written", "deleted", "rows"
            )?;
            for v in history {
                let read = v.read_version.map_or("-".to_string(), |r| r.to_string());
                let rebased = match v.rebased_over.as_slice() {
                    [] => "-".to_string(),
                    [one] => format!("[{one}]"),
                    many if many.len() <= 6 => format!("{many:?}"),
                    many => format!("{} versions, {} to {}", many.len(), many[0], many[many.len() - 1]),
                };
                let rebased = if v.rerun { format!("{rebased} (re-ran)") } else { rebased };
                let ts = v.timestamp.to_rfc3339_opts(chrono::SecondsFormat::Micros, true);
                writeln!(
                    out,
                    "{:>8}  {:<27}  {:<14}  {:>6}  {:>8}  {:>10}  {:>10}  {:>10}  {}",
                    v.version, ts, v.operation, read, v.attempts, v.rows_written, v.rows_deleted, v.rows, rebased
                )?;
                // A shared version: each further transaction on a line of its own.
                for t in v.transactions.iter().skip(1) {
                    let read = t.read_version.map_or("-".to_string(), |r| r.to_string());
                    let carried = t.carried_by.map_or(String::new(), |by| format!("carried by {by}"));
                    writeln!(
                        out,
                        "{:>8}  {:<27}  {:<14}  {:>6}  {:>8}  {:>10}  {:>10}  {:>10}  {}",
                        "+", t.transaction_id, t.operation, read, t.attempts, t.rows_written, t.rows_deleted, "", carried
                    )?;
                }
            }
        }
    }
    Ok(())
}

/// The schema; the table format ends with the table's properties, one `property
/// key=value` line each.
pub fn print_schema(schema: &Schema, properties: &std::collections::BTreeMap<String, String>, format: ListFormat) -> Result<(), Failure> {
    let mut out = std::io::stdout().lock();
    match format {
        ListFormat::Json => writeln!(out, "{}", serde_json::to_string(&schema.fields).expect("schema serializes"))?,
        ListFormat::Table => {
            for column in schema.definition_columns() {
                writeln!(out, "{column}")?;
            }
            for (key, value) in properties {
                writeln!(out, "property {key}={value}")?;
            }
        }
    }
    Ok(())
}

/// `text` as a CSV field that `concord append` reads back as itself: quoted when it is
/// empty (so that it reads back as the empty string, not NULL), has a delimiter, quote
/// or line break, or starts or ends with whitespace; quotes inside are doubled.
fn quote_csv_field(text: &str, out: &mut String) {
    let needs = text.is_empty()
        || text.contains([',', '"', '\n', '\r'])
        || text.starts_with(char::is_whitespace)
        || text.ends_with(char::is_whitespace);
    if needs {
        out.push('"');
        out.push_str(&text.replace('"', "\"\""));
        out.push('"');
    } else {
        out.push_str(text);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Int64Array, StringArray};
    use std::sync::Arc;

    #[test]
    fn csv_fields_are_quoted_where_they_would_not_read_back_as_themselves() {
        let mut out = String::new();
        for t in ["", "plain", "a,b", "say \"hi\"", " pad"] {
            quote_csv_field(t, &mut out);
            out.push('|');
        }
        assert_eq!(out, "\"\"|plain|\"a,b\"|\"say \"\"hi\"\"\"|\" pad\"|");
    }

    /// A writer whose bytes the test reads while the scan is still going.
    #[derive(Clone, Default)]
    struct Shared(Arc<std::sync::Mutex<Vec<u8>>>);
    impl Write for Shared {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    fn batch(ids: &[i64], names: &[Option<&str>]) -> RecordBatch {
        RecordBatch::try_from_iter_with_nullable([
            ("id", Arc::new(Int64Array::from(ids.to_vec())) as arrow::array::ArrayRef, false),
            ("name", Arc::new(StringArray::from(names.to_vec())) as arrow::array::ArrayRef, true),
        ])
        .unwrap()
    }

    /// Each batch is out before the next arrives, in every format.
    #[test]
    fn every_format_writes_each_batch_as_it_comes() {
        for format in [RowFormat::Table, RowFormat::Csv, RowFormat::Json, RowFormat::Arrow] {
            let out = Shared::default();
            let first = batch(&[1, 2], &[Some("a"), Some("")]);
            let mut writer = RowWriter::new(format, first.schema(), out.clone());
            writer.write(&first).unwrap();
            let after_first = String::from_utf8_lossy(&out.0.lock().unwrap()).into_owned();
            if format == RowFormat::Arrow {
                let bytes = out.0.lock().unwrap().clone();
                let mut reader = arrow_ipc::reader::StreamReader::try_new(std::io::Cursor::new(bytes), None).unwrap();
                assert_eq!(reader.next().unwrap().unwrap().num_rows(), 2, "the first batch is written at once");
            } else {
                assert!(after_first.contains('2'), "{format:?}: the first batch is written at once: {after_first:?}");
            }
            writer.write(&batch(&[333], &[None])).unwrap();
            writer.finish().unwrap();
            if format == RowFormat::Arrow {
                let bytes = out.0.lock().unwrap().clone();
                let reader = arrow_ipc::reader::StreamReader::try_new(std::io::Cursor::new(bytes), None).unwrap();
                let rows: usize = reader.map(|b| b.unwrap().num_rows()).sum();
                assert_eq!(rows, 3, "an Arrow IPC stream of both batches");
                continue;
            }
            let all = String::from_utf8(out.0.lock().unwrap().clone()).unwrap();
            // The table sizes its columns by the first batch: a wider value later is cut
            // (rows stay aligned); the other formats print it whole.
            let later = if format == RowFormat::Table { "| 3\u{2026} | NULL |" } else { "333" };
            assert!(all.starts_with(&after_first) && all.contains(later), "{format:?}: {all}");
            if format == RowFormat::Csv {
                assert_eq!(all, "id,name\n1,a\n2,\"\"\n333,\n");
            }
            if format == RowFormat::Table {
                assert_eq!(all.lines().filter(|l| l.contains("name")).count(), 1, "one header: {all}");
            }
        }
    }
}

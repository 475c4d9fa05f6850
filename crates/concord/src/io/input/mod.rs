//! Reads input files (CSV, NDJSON, Parquet) and caller batches into the table's exact Arrow
//! schema (`Schema::arrow_schema()`), ready to be written as they are.
//!
//! Everything is checked before anything is returned: column names (by
//! [`Schema::resolve`]: exact, else the one case-insensitive match), types, values (by
//! [`crate::io::values`]: exactly or not at all) and nullability. Errors name the file, the
//! column, and what was expected and found; a file is accepted whole or not at all.

pub(crate) mod csv_fields;
pub(crate) mod parquet_input;
pub(crate) mod splice;

use std::collections::HashSet;
use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, RecordBatch, RecordBatchOptions, StringArray};
use arrow::datatypes::{DataType, Schema as ArrowSchema, SchemaRef};
use parquet::arrow::arrow_reader::{ArrowReaderMetadata, ArrowReaderOptions};
use parquet::file::metadata::ParquetMetaDataReader;

use self::csv_fields::{CsvField, CsvRecords};
use crate::error::InputError;
use crate::format::schema::{ColumnNameError, ColumnType, Field, Schema};
use crate::io::input::parquet_input::Positioned;
use crate::io::parquet::guard;
use crate::io::values::{self, sql_type_name, CastFailure, Source};
use crate::io::write::Spliced;

/// Rows per returned batch.
pub(crate) const BATCH_SIZE: usize = 8192;

/// Supported input file formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum InputFormat {
    Csv,
    Json,
    Parquet,
}

/// Whether every required (not null, no default) column must be in the input.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Required {
    /// Appends and overwrites: every row is new.
    Always,
    /// Merges: only rows that are inserted need them, and which rows those are is
    /// known later; absent columns are filled with their default or NULL, unchecked.
    WhenInserted,
}

/// Rows read from one source, in the table's schema.
#[derive(Debug, Clone)]
pub(crate) struct Rows {
    pub batches: Vec<RecordBatch>,
    /// Field ids of the table columns the source has (the others were filled in).
    pub present: Vec<u32>,
}

/// By extension (case-insensitive): .csv -> Csv; .json/.jsonl/.ndjson -> Json;
/// .parquet/.parq -> Parquet; anything else is `UnsupportedFileType`.
pub(crate) fn detect_format(path: &Path) -> Result<InputFormat, InputError> {
    let ext = path.extension().and_then(|e| e.to_str()).map(str::to_ascii_lowercase);
    match ext.as_deref() {
        Some("csv") => Ok(InputFormat::Csv),
        Some("json" | "jsonl" | "ndjson") => Ok(InputFormat::Json),
        Some("parquet" | "parq") => Ok(InputFormat::Parquet),
        _ => Err(InputError::UnsupportedFileType { file: path.display().to_string() }),
    }
}

/// Receives a file's batches (or spliced data files) as they are read, with the field
/// ids of the table columns the file has. An error stops the reading.
pub(crate) type Emit<'e, T = RecordBatch> = dyn FnMut(T, &[u32]) -> Result<(), InputError> + 'e;

/// Reads a local file, handing `emit` its batches in file order (no empty ones), each
/// with exactly `schema.arrow_schema()`; blocking I/O (run it on a blocking thread).
/// Returns the field ids of the table columns the file has.
pub(crate) fn read_file_each(path: &Path, schema: &Schema, required: Required, emit: &mut Emit<'_>) -> Result<Vec<u32>, InputError> {
    let file = path.display().to_string();
    let source = if detect_format(path)? == InputFormat::Parquet { Source::Typed } else { Source::Any };
    let mut ctx = Ctx::new(&file, schema, required, source);
    let mut emit_rows = |batch: RecordBatch, ctx: &Ctx<'_>| if batch.num_rows() > 0 { emit(batch, &ctx.present()) } else { Ok(()) };
    match detect_format(path)? {
        InputFormat::Csv => read_csv(path, &mut ctx, &mut emit_rows)?,
        InputFormat::Json => read_json(path, &mut ctx, &mut emit_rows)?,
        InputFormat::Parquet => read_parquet(path, &mut ctx, &mut emit_rows)?,
    };
    Ok(ctx.present())
}

/// A whole local file's batches (see [`read_file_each`]).
#[cfg(test)]
pub(crate) fn read_file(path: &Path, schema: &Schema, required: Required) -> Result<Rows, InputError> {
    let mut batches = Vec::new();
    let present = read_file_each(path, schema, required, &mut |b, _| {
        batches.push(b);
        Ok(())
    })?;
    Ok(Rows { batches, present })
}

/// What a reader hands its conformed batches to.
type Sink<'s> = dyn FnMut(RecordBatch, &Ctx<'_>) -> Result<(), InputError> + 's;

/// Applies the Parquet rules (names, lossless widenings, nullability) to a caller's batch.
/// Strings are not parsed into other types here. `source` names the batch in errors.
pub(crate) fn conform_batch(batch: &RecordBatch, schema: &Schema, source: &str, required: Required) -> Result<Rows, InputError> {
    let mut ctx = Ctx::new(source, schema, required, Source::Typed);
    ctx.check_types(&batch.schema())?;
    let batch = ctx.conform(batch, 0, &|row| row as u64 + 1)?;
    Ok(Rows { batches: vec![batch], present: ctx.present() })
}

/// The file being read and the table it must fit.
struct Ctx<'a> {
    file: &'a str,
    schema: &'a Schema,
    target: SchemaRef,
    required: Required,
    /// Input column `i` holds table column `names[i]` (set by `map_names`).
    names: Vec<String>,
    /// What the input's values are: text to parse (CSV, NDJSON: binary columns take
    /// hex text, as scans print them) or typed (Parquet, caller batches).
    source: Source,
}

impl<'a> Ctx<'a> {
    fn new(file: &'a str, schema: &'a Schema, required: Required, source: Source) -> Self {
        let target = match required {
            Required::Always => schema.arrow_schema(),
            // Absent required columns are NULL until the rows needing them are known.
            Required::WhenInserted => Arc::new(ArrowSchema::new(
                schema.arrow_schema().fields().iter().map(|f| f.as_ref().clone().with_nullable(true)).collect::<Vec<_>>(),
            )),
        };
        Ctx { file, schema, target, required, names: Vec::new(), source }
    }

    fn unparsable(&self, reason: impl std::fmt::Display) -> InputError {
        InputError::Unparsable { file: self.file.to_string(), reason: reason.to_string() }
    }

    fn open(&self, path: &Path) -> Result<File, InputError> {
        File::open(path).map_err(|source| InputError::Io { file: self.file.to_string(), source })
    }

    fn mismatch(&self, column: &str, expected: &ColumnType, found: impl Into<String>) -> InputError {
        InputError::TypeMismatch {
            file: self.file.to_string(),
            column: column.to_string(),
            expected: expected.sql_name(),
            found: found.into(),
        }
    }

    /// Resolves the input's column names to table columns (once each), and checks that
    /// every required column is present (see [`Required`]).
    fn map_names<'n>(&mut self, names: impl IntoIterator<Item = &'n str>) -> Result<(), InputError> {
        let mut seen = HashSet::new();
        let mut mapped = Vec::new();
        for name in names {
            let field = self.schema.resolve(name).map_err(|e| match e {
                ColumnNameError::Unknown { known, .. } => {
                    InputError::UnknownColumn { file: self.file.to_string(), column: name.to_string(), known }
                }
                ColumnNameError::Ambiguous { candidates, .. } => {
                    InputError::AmbiguousColumn { file: self.file.to_string(), column: name.to_string(), candidates }
                }
                other => self.unparsable(other),
            })?;
            if !seen.insert(field.id) {
                return Err(self.unparsable(format!("column '{}' appears more than once", field.name)));
            }
            mapped.push(field.name.clone());
        }
        self.names = mapped;
        if self.required == Required::Always {
            if let Some(f) = self.schema.fields.iter().find(|f| !f.nullable && f.default.is_none() && !seen.contains(&f.id)) {
                return Err(InputError::MissingColumn { file: self.file.to_string(), column: f.name.clone() });
            }
        }
        Ok(())
    }

    /// Field ids of the table columns the input has, in table order.
    fn present(&self) -> Vec<u32> {
        self.schema.fields.iter().filter(|f| self.names.contains(&f.name)).map(|f| f.id).collect()
    }

    /// Names, and the types of typed input (Parquet and caller batches): each column
    /// of its table column's kind (its values are then checked one by one).
    fn check_types(&mut self, input: &ArrowSchema) -> Result<(), InputError> {
        self.map_names(input.fields().iter().map(|f| f.name().as_str()))?;
        for (f, name) in input.fields().iter().zip(&self.names) {
            let ty = &self.column(name).column_type;
            if !values::accepts(f.data_type(), ty, Source::Typed) {
                return Err(self.mismatch(name, ty, sql_type_name(f.data_type())));
            }
        }
        Ok(())
    }

    /// A table column already known to exist.
    fn column(&self, name: &str) -> &'a Field {
        self.schema.field(name).expect("column names are checked first")
    }

    /// Maps a type-checked input batch (columns in input order, see `map_names`) onto
    /// the table schema: casts each column, fills absent columns with their default
    /// (NULL without one) and rejects nulls in not-null columns. `first_row` is the
    /// 0-based index of the batch's first row in the file; `line_of` maps a row index
    /// to the line number reported in `InvalidValue`.
    fn conform(&self, batch: &RecordBatch, first_row: usize, line_of: &dyn Fn(usize) -> u64) -> Result<RecordBatch, InputError> {
        let rows = batch.num_rows();
        let mut columns = Vec::with_capacity(self.schema.fields.len());
        for field in &self.schema.fields {
            let input = self.names.iter().position(|n| *n == field.name).map(|i| batch.column(i));
            let column = match input {
                Some(input) => self.cast_checked(input, field, first_row, line_of)?,
                None => field.default_array(rows),
            };
            let checked = input.is_some() || self.required == Required::Always;
            if checked && !field.nullable && column.null_count() > 0 {
                let row = (0..rows).find(|&i| column.is_null(i)).unwrap_or(0);
                return Err(InputError::NullInNonNullable {
                    file: self.file.to_string(),
                    column: field.name.clone(),
                    row: (first_row + row + 1) as u64,
                });
            }
            columns.push(column);
        }
        let options = RecordBatchOptions::new().with_row_count(Some(rows));
        RecordBatch::try_new_with_options(self.target.clone(), columns, &options).map_err(|e| self.unparsable(e))
    }

    /// Casts one column to its table type, exactly (see [`crate::io::values`]): a value that
    /// does not convert is an `InvalidValue` naming its line and the value.
    fn cast_checked(
        &self,
        input: &ArrayRef,
        field: &Field,
        first_row: usize,
        line_of: &dyn Fn(usize) -> u64,
    ) -> Result<ArrayRef, InputError> {
        let hex: ArrayRef;
        let bytes = matches!(field.column_type, ColumnType::Binary | ColumnType::Fixed(_) | ColumnType::Uuid);
        let input = match self.source {
            Source::Any if bytes && input.data_type() == &DataType::Utf8 => {
                let text = input.as_string::<i32>();
                // A UUID may be written with its hyphens (8-4-4-4-12).
                let dehyphenated: StringArray;
                let text = if field.column_type == ColumnType::Uuid {
                    dehyphenated = text.iter().map(|v| v.map(|v| v.replace('-', ""))).collect();
                    &dehyphenated
                } else {
                    text
                };
                hex = Arc::new(values::unhex(text).map_err(|row| InputError::InvalidValue {
                    file: self.file.to_string(),
                    line: line_of(first_row + row),
                    column: field.name.clone(),
                    value: input.as_string::<i32>().value(row).to_string(),
                    expected: format!("{} value in hex (two hex digits a byte, e.g. 616263 for 'abc')", field.column_type),
                })?);
                &hex
            }
            _ => input,
        };
        values::to_column(input, &field.column_type, self.source).map_err(|e| match e {
            CastFailure::Type { found } => self.mismatch(&field.name, &field.column_type, found),
            CastFailure::Value { row, value } => InputError::InvalidValue {
                file: self.file.to_string(),
                line: line_of(first_row + row),
                column: field.name.clone(),
                value,
                expected: field.column_type.sql_name(),
            },
        })
    }
}

/// CSV with a header row (names trimmed): every field is read as text, then parsed into
/// the table type. An unquoted empty field is NULL, a quoted `""` the empty string.
/// Line numbers count the header as line 1.
fn read_csv(path: &Path, ctx: &mut Ctx<'_>, sink: &mut Sink<'_>) -> Result<(), InputError> {
    let mut records = CsvRecords::new(BufReader::new(ctx.open(path)?));
    let mut fields: Vec<CsvField> = Vec::new();
    if records.next_record(&mut fields).map_err(|e| ctx.unparsable(e))?.is_none() {
        return Err(ctx.unparsable("no header row"));
    }
    let header: Vec<String> = fields.iter().map(|f| f.text.trim().to_string()).collect();
    ctx.map_names(header.iter().map(String::as_str))?;
    if let Some(name) = ctx.names.iter().find(|n| ctx.column(n).column_type.is_nested()) {
        let expected = &ctx.column(name).column_type;
        return Err(ctx.mismatch(name, expected, "CSV text (CSV holds flat values: append nested columns from NDJSON, Parquet or Arrow)"));
    }
    let text_schema =
        Arc::new(ArrowSchema::new(header.iter().map(|h| arrow::datatypes::Field::new(h, DataType::Utf8, true)).collect::<Vec<_>>()));
    let mut first_row = 0usize;
    let mut columns: Vec<Vec<Option<String>>> = vec![Vec::with_capacity(BATCH_SIZE); header.len()];
    let mut lines: Vec<u64> = Vec::with_capacity(BATCH_SIZE);
    loop {
        let line = records.next_record(&mut fields).map_err(|e| ctx.unparsable(e))?;
        if let Some(line) = line {
            if fields.len() != header.len() {
                return Err(ctx.unparsable(format!("line {line} has {} fields, the header has {}", fields.len(), header.len())));
            }
            for (column, field) in columns.iter_mut().zip(fields.drain(..)) {
                column.push(if field.text.is_empty() && !field.quoted { None } else { Some(field.text) });
            }
            lines.push(line);
        }
        if lines.len() == BATCH_SIZE || (line.is_none() && !lines.is_empty()) {
            let arrays: Vec<ArrayRef> = columns.iter_mut().map(|c| Arc::new(StringArray::from(std::mem::take(c))) as ArrayRef).collect();
            let rows = lines.len();
            let batch =
                RecordBatch::try_new_with_options(text_schema.clone(), arrays, &RecordBatchOptions::new().with_row_count(Some(rows)))
                    .map_err(|e| ctx.unparsable(e))?;
            let batch_lines = std::mem::take(&mut lines);
            sink(ctx.conform(&batch, first_row, &|row| batch_lines[row - first_row])?, ctx)?;
            first_row += rows;
        }
        if line.is_none() {
            return Ok(());
        }
    }
}

/// Newline-delimited JSON: one object per non-blank line. A first pass checks every
/// line's syntax (an error names its line) and collects the keys (the columns the file
/// has); the second reads each value in its JSON kind: a number for a numeric column
/// (or, for a float column, one of the strings "NaN", "Infinity", "-Infinity"), a string
/// for text, dates, timestamps and binary (hex), a boolean for a boolean column. Each
/// value is then converted by the one rule (`crate::io::values`), as CSV text is; errors name
/// the line.
fn read_json(path: &Path, ctx: &mut Ctx<'_>, sink: &mut Sink<'_>) -> Result<(), InputError> {
    let lines = |ctx: &Ctx<'_>| -> Result<_, InputError> {
        Ok(BufReader::new(ctx.open(path)?).lines().enumerate().map(|(i, l)| (i as u64 + 1, l)))
    };
    let mut keys = std::collections::BTreeSet::new();
    for (line, text) in lines(ctx)? {
        let text = text.map_err(|source| InputError::Io { file: ctx.file.to_string(), source })?;
        if text.trim().is_empty() {
            continue;
        }
        let record: std::collections::BTreeMap<String, serde::de::IgnoredAny> =
            serde_json::from_str(&text).map_err(|e| ctx.unparsable(format!("line {line}: {}", json_error(&e))))?;
        keys.extend(record.into_keys());
    }
    ctx.map_names(keys.iter().map(String::as_str))?;
    let keys: Vec<String> = keys.into_iter().collect();
    let text_schema =
        Arc::new(ArrowSchema::new(keys.iter().map(|k| arrow::datatypes::Field::new(k, DataType::Utf8, true)).collect::<Vec<_>>()));
    let kinds: Vec<JsonKind> = ctx.names.iter().map(|name| JsonKind::of(&ctx.column(name).column_type)).collect();
    let mut columns: Vec<Vec<Option<String>>> = vec![Vec::with_capacity(BATCH_SIZE); keys.len()];
    let mut batch_lines: Vec<u64> = Vec::with_capacity(BATCH_SIZE);
    let mut first_row = 0usize;
    let mut records = lines(ctx)?.filter(|(_, t)| t.as_ref().map_or(true, |t| !t.trim().is_empty())).peekable();
    while let Some((line, text)) = records.next() {
        let text = text.map_err(|source| InputError::Io { file: ctx.file.to_string(), source })?;
        // Raw values: a number's text as written (a decimal keeps every digit).
        let record: std::collections::HashMap<String, Box<serde_json::value::RawValue>> =
            serde_json::from_str(&text).map_err(|e| ctx.unparsable(format!("line {line}: {}", json_error(&e))))?;
        for (k, key) in keys.iter().enumerate() {
            let raw = record.get(key).map(|r| r.get());
            let value = raw.map(json_value).transpose().map_err(|e| ctx.unparsable(format!("line {line}: {}", json_error(&e))))?;
            let cell = match (&value, raw) {
                (None | Some(serde_json::Value::Null), _) | (_, None) => None,
                (Some(value), Some(raw)) => Some(kinds[k].text(value, raw).ok_or_else(|| InputError::InvalidValue {
                    file: ctx.file.to_string(),
                    line,
                    column: ctx.names[k].clone(),
                    value: raw.to_string(),
                    expected: kinds[k].expected(&ctx.column(&ctx.names[k]).column_type, value),
                })?),
            };
            columns[k].push(cell);
        }
        batch_lines.push(line);
        if batch_lines.len() == BATCH_SIZE || records.peek().is_none() {
            let rows = batch_lines.len();
            let arrays: Vec<ArrayRef> = columns.iter_mut().map(|c| Arc::new(StringArray::from(std::mem::take(c))) as ArrayRef).collect();
            let batch =
                RecordBatch::try_new_with_options(text_schema.clone(), arrays, &RecordBatchOptions::new().with_row_count(Some(rows)))
                    .map_err(|e| ctx.unparsable(e))?;
            let at = std::mem::take(&mut batch_lines);
            sink(ctx.conform(&batch, first_row, &|row| at[row - first_row])?, ctx)?;
            first_row += rows;
        }
    }
    Ok(())
}

/// A raw JSON value, parsed unless it is a number: a number stands for its text (the
/// one rule then reads it, so `1e400` is refused as out of range, not as bad JSON).
fn json_value(raw: &str) -> Result<serde_json::Value, serde_json::Error> {
    if raw.trim_start().starts_with(|c: char| c == '-' || c.is_ascii_digit()) {
        return Ok(serde_json::Value::Number(0.into()));
    }
    serde_json::from_str(raw)
}

/// serde_json's message without its own position (the line is named by the caller;
/// the column is kept).
fn json_error(e: &serde_json::Error) -> String {
    let text = e.to_string();
    match text.rfind(" at line ") {
        Some(at) => format!("{} (column {})", &text[..at], e.column()),
        None => text,
    }
}

/// The JSON kind of value a column takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum JsonKind {
    Number {
        float: bool,
    },
    /// A number, or a string of one (JSON readers that hold numbers as doubles would
    /// round a long decimal: writing it as a string keeps it exact).
    Decimal,
    Text,
    Boolean,
    /// A JSON array (a list or vector) or object (a struct or map), as its raw text.
    Nested,
}

impl JsonKind {
    fn of(column: &ColumnType) -> Self {
        match column {
            t if t.is_nested() => JsonKind::Nested,
            ColumnType::Decimal { .. } => JsonKind::Decimal,
            t if t.is_integer() => JsonKind::Number { float: false },
            ColumnType::Float | ColumnType::Double => JsonKind::Number { float: true },
            ColumnType::Boolean => JsonKind::Boolean,
            _ => JsonKind::Text,
        }
    }

    /// A value of this kind as the text the one rule converts (numbers as written:
    /// `raw` is the value's JSON text).
    fn text(self, value: &serde_json::Value, raw: &str) -> Option<String> {
        match (self, value) {
            (JsonKind::Number { .. } | JsonKind::Decimal, serde_json::Value::Number(_)) => Some(raw.trim().to_string()),
            (JsonKind::Decimal, serde_json::Value::String(s)) => Some(s.clone()),
            (JsonKind::Number { float: true }, serde_json::Value::String(s)) if ["NaN", "Infinity", "-Infinity"].contains(&s.as_str()) => {
                Some(s.clone())
            }
            (JsonKind::Text, serde_json::Value::String(s)) => Some(s.clone()),
            (JsonKind::Boolean, serde_json::Value::Bool(b)) => Some(b.to_string()),
            (JsonKind::Nested, serde_json::Value::Array(_) | serde_json::Value::Object(_)) => Some(raw.trim().to_string()),
            _ => None,
        }
    }

    /// What a value of a column of this kind must be, and what `found` is, for messages.
    fn expected(self, column: &ColumnType, found: &serde_json::Value) -> String {
        let must = match self {
            JsonKind::Number { float: true } => "a JSON number, or \"NaN\", \"Infinity\", \"-Infinity\"",
            JsonKind::Number { float: false } => "a JSON number",
            JsonKind::Decimal => "a JSON number, or a string of one",
            JsonKind::Boolean => "true or false",
            JsonKind::Nested if matches!(column, ColumnType::Struct(_) | ColumnType::Map(..)) => "a JSON object",
            JsonKind::Nested => "a JSON array",
            JsonKind::Text if matches!(column, ColumnType::Binary | ColumnType::Fixed(_)) => "a JSON string of hex digits",
            JsonKind::Text if *column == ColumnType::Uuid => "a JSON string of a UUID (hex digits, hyphens optional)",
            JsonKind::Text => "a JSON string",
        };
        let found = match found {
            serde_json::Value::Null => "null",
            serde_json::Value::Bool(_) => "a boolean",
            serde_json::Value::Number(_) => "a number",
            serde_json::Value::String(_) => "a string",
            serde_json::Value::Array(_) => "an array",
            serde_json::Value::Object(_) => "an object",
        };
        format!("{column} ({must}; found {found})")
    }
}

/// Parquet: typed columns of their table column's kind, each value checked.
fn read_parquet(path: &Path, ctx: &mut Ctx<'_>, sink: &mut Sink<'_>) -> Result<(), InputError> {
    let (file, metadata) = open_parquet(path, ctx, true)?;
    let ctx: &Ctx<'_> = ctx;
    let mut first_row = 0;
    let mut each = |batch: RecordBatch| {
        sink(ctx.conform(&batch, first_row, &|row| row as u64 + 1)?, ctx)?;
        first_row += batch.num_rows();
        Ok(())
    };
    let source = Positioned::new(&file).map_err(|e| ctx.unparsable(e))?;
    crate::io::input::parquet_input::read_batches(source, &metadata, None, BATCH_SIZE, &mut each, &|e| ctx.unparsable(e))
}

/// A Parquet input's footer, checked, and its columns mapped to table columns and
/// type-checked; with `pages`, every page header checked too.
fn open_parquet(path: &Path, ctx: &mut Ctx<'_>, pages: bool) -> Result<(File, ArrowReaderMetadata), InputError> {
    let file = ctx.open(path)?;
    let size = file.metadata().map_err(|e| ctx.unparsable(e))?.len();
    crate::io::parquet::footer_check::check_file(&file, size).map_err(|e| ctx.unparsable(e))?;
    let metadata = ParquetMetaDataReader::new().parse_and_finish(&file).map_err(|e| ctx.unparsable(e))?;
    crate::io::parquet::file_reader::check_metadata(&metadata, size).map_err(|e| ctx.unparsable(e))?;
    if pages {
        crate::io::parquet::page_check::check_file(&file, &metadata).map_err(|e| ctx.unparsable(e))?;
    }
    // The embedded Arrow schema restores what Parquet cannot say (second timestamps,
    // time zones); one that arrow-ipc might panic on is ignored.
    let skip = !guard::embedded_arrow_schema_is_safe(&metadata);
    let options = ArrowReaderOptions::new().with_skip_arrow_metadata(skip);
    let metadata = guard::catch_panic(|| ArrowReaderMetadata::try_new(Arc::new(metadata), options))
        .map_err(|e| ctx.unparsable(e))?
        .map_err(|e| ctx.unparsable(e))?;
    ctx.check_types(metadata.schema())?;
    Ok((file, metadata))
}

/// An append's Parquet input as data files of its own column chunks (see
/// [`crate::io::input::splice`]), each handed to `emit`, its rows checked as [`read_file_each`]
/// checks them. `Ok(None)` (nothing handed out) when the file must be read as rows
/// instead; else the field ids of the table columns the file has.
pub(crate) fn splice_parquet(path: &Path, schema: &Schema, emit: &mut Emit<'_, Spliced>) -> Result<Option<Vec<u32>>, InputError> {
    if detect_format(path)? != InputFormat::Parquet {
        return Ok(None);
    }
    let name = path.display().to_string();
    let mut ctx = Ctx::new(&name, schema, Required::Always, Source::Typed);
    let (file, metadata) = open_parquet(path, &mut ctx, false)?;
    let Some(plan) = splice::plan(schema, &ctx.names, &metadata) else { return Ok(None) };
    let ctx = &ctx;
    let len = file.metadata().map_err(|e| ctx.unparsable(e))?.len();
    let read = |range: std::ops::Range<u64>| {
        let mut bytes = vec![0u8; (range.end - range.start) as usize];
        std::os::unix::fs::FileExt::read_exact_at(&file, &mut bytes, range.start)
            .map_err(|source| InputError::Io { file: name.clone(), source })?;
        Ok(bytes)
    };
    let conform = |batch: RecordBatch, first_row: usize| ctx.conform(&batch, first_row, &|row| row as u64 + 1);
    let source = splice::Source { metadata: &metadata, len, read: &read, conform: &conform, failed: &|e| ctx.unparsable(e) };
    let present = ctx.present();
    splice::splice(&plan, schema, &source, &mut |file| emit(file, &present))?;
    Ok(Some(present))
}

#[cfg(test)]
mod tests;

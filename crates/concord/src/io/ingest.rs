//! Reads input files (CSV, NDJSON, Parquet) and caller batches into the table's exact Arrow
//! schema (`Schema::arrow_schema()`), ready to be written as they are.
//!
//! Everything is checked before anything is returned: column names (by
//! [`Schema::resolve`]: exact, else the one case-insensitive match), types, values (by
//! [`super::cast`]: exactly or not at all) and nullability. Errors name the file, the
//! column, and what was expected and found; a file is accepted whole or not at all.

use std::collections::HashSet;
use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, RecordBatch, RecordBatchOptions, StringArray};
use arrow::datatypes::{DataType, Schema as ArrowSchema, SchemaRef};
use parquet::arrow::arrow_reader::{ArrowReaderMetadata, ArrowReaderOptions, ParquetRecordBatchReaderBuilder};
use parquet::file::metadata::ParquetMetaDataReader;

use super::cast::{self, sql_type_name, CastFailure};
use super::csv_fields::{CsvField, CsvRecords};
use super::guard;
use crate::error::InputError;
use crate::format::schema::{ColumnNameError, ColumnType, Field, Schema};

/// Rows per returned batch.
const BATCH_SIZE: usize = 8192;

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
pub(crate) struct Input {
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

/// Receives a file's batches as they are read, with the field ids of the table columns
/// the file has. An error stops the reading.
pub(crate) type Emit<'e> = dyn FnMut(RecordBatch, &[u32]) -> Result<(), InputError> + 'e;

/// Reads a local file, handing `emit` its batches in file order (no empty ones), each
/// with exactly `schema.arrow_schema()`; blocking I/O (run it on a blocking thread).
/// Returns the field ids of the table columns the file has.
pub(crate) fn read_file_each(path: &Path, schema: &Schema, required: Required, emit: &mut Emit<'_>) -> Result<Vec<u32>, InputError> {
    let file = path.display().to_string();
    let mut ctx = Ctx::new(&file, schema, required);
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
pub(crate) fn read_file(path: &Path, schema: &Schema, required: Required) -> Result<Input, InputError> {
    let mut batches = Vec::new();
    let present = read_file_each(path, schema, required, &mut |b, _| {
        batches.push(b);
        Ok(())
    })?;
    Ok(Input { batches, present })
}

/// What a reader hands its conformed batches to.
type Sink<'s> = dyn FnMut(RecordBatch, &Ctx<'_>) -> Result<(), InputError> + 's;

/// Applies the Parquet rules (names, lossless widenings, nullability) to a caller's batch.
/// Strings are not parsed into other types here. `source` names the batch in errors.
pub(crate) fn conform_batch(batch: &RecordBatch, schema: &Schema, source: &str, required: Required) -> Result<Input, InputError> {
    let mut ctx = Ctx::new(source, schema, required);
    ctx.check_widenings(&batch.schema())?;
    let batch = ctx.conform(batch, 0, &|row| row as u64 + 1)?;
    Ok(Input { batches: vec![batch], present: ctx.present() })
}

/// The file being read and the table it must fit.
struct Ctx<'a> {
    file: &'a str,
    schema: &'a Schema,
    target: SchemaRef,
    required: Required,
    /// Input column `i` holds table column `names[i]` (set by `map_names`).
    names: Vec<String>,
}

impl<'a> Ctx<'a> {
    fn new(file: &'a str, schema: &'a Schema, required: Required) -> Self {
        let target = match required {
            Required::Always => schema.arrow_schema(),
            // Absent required columns are NULL until the rows needing them are known.
            Required::WhenInserted => Arc::new(ArrowSchema::new(
                schema.arrow_schema().fields().iter().map(|f| f.as_ref().clone().with_nullable(true)).collect::<Vec<_>>(),
            )),
        };
        Ctx { file, schema, target, required, names: Vec::new() }
    }

    fn unparsable(&self, reason: impl std::fmt::Display) -> InputError {
        InputError::Unparsable { file: self.file.to_string(), reason: reason.to_string() }
    }

    fn open(&self, path: &Path) -> Result<File, InputError> {
        File::open(path).map_err(|source| InputError::Io { file: self.file.to_string(), source })
    }

    fn mismatch(&self, column: &str, expected: ColumnType, found: impl Into<String>) -> InputError {
        InputError::TypeMismatch {
            file: self.file.to_string(),
            column: column.to_string(),
            expected: expected.sql_name().to_string(),
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

    /// Names plus the lossless-widening type rules (Parquet and caller batches).
    fn check_widenings(&mut self, input: &ArrowSchema) -> Result<(), InputError> {
        self.map_names(input.fields().iter().map(|f| f.name().as_str()))?;
        for (f, name) in input.fields().iter().zip(&self.names) {
            let ty = self.column(name).column_type;
            if !widens_to(f.data_type(), ty) {
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

    /// Casts one column to its table type, exactly (see [`super::cast`]): a value that
    /// does not convert is an `InvalidValue` naming its line and the value.
    fn cast_checked(
        &self,
        input: &ArrayRef,
        field: &Field,
        first_row: usize,
        line_of: &dyn Fn(usize) -> u64,
    ) -> Result<ArrayRef, InputError> {
        cast::to_column(input, field.column_type).map_err(|e| match e {
            CastFailure::Type { found } => self.mismatch(&field.name, field.column_type, found),
            CastFailure::Value { row, value } => InputError::InvalidValue {
                file: self.file.to_string(),
                line: line_of(first_row + row),
                column: field.name.clone(),
                value,
                expected: field.column_type.sql_name().to_string(),
            },
        })
    }
}

/// Lossless conversions accepted from typed inputs (Parquet, caller batches).
fn widens_to(from: &DataType, to: ColumnType) -> bool {
    use DataType::*;
    match from {
        // An all-null column fits any type (not-null columns are then rejected by row).
        Null => true,
        // Dictionary-encoded values are judged by their value type.
        Dictionary(_, values) => widens_to(values, to),
        _ => match to {
            ColumnType::Boolean => matches!(from, Boolean),
            ColumnType::Int => matches!(from, Int8 | Int16 | Int32 | UInt8 | UInt16),
            ColumnType::Bigint => matches!(from, Int8 | Int16 | Int32 | Int64 | UInt8 | UInt16 | UInt32),
            ColumnType::Float => matches!(from, Float32),
            ColumnType::Double => matches!(from, Float32 | Float64 | Int8 | Int16 | Int32 | UInt8 | UInt16 | UInt32),
            ColumnType::Varchar => matches!(from, Utf8 | LargeUtf8 | Utf8View),
            ColumnType::Binary => matches!(from, Binary | LargeBinary | BinaryView),
            ColumnType::Date => matches!(from, Date32),
            // Any unit; no timezone means UTC; the instant is kept.
            ColumnType::Timestamp => matches!(from, Timestamp(_, _)),
        },
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

/// Newline-delimited JSON objects. Column types are inferred over the whole file and checked
/// against the table; values are decoded in their JSON type, then cast to the table type.
fn read_json(path: &Path, ctx: &mut Ctx<'_>, sink: &mut Sink<'_>) -> Result<(), InputError> {
    let mut reader = BufReader::new(ctx.open(path)?);
    let (inferred, records) = arrow::json::reader::infer_json_schema_from_seekable(&mut reader, None).map_err(|e| ctx.unparsable(e))?;
    let mut fields: Vec<_> = inferred.fields().iter().cloned().collect();
    fields.sort_by(|a, b| a.name().cmp(b.name()));
    ctx.map_names(fields.iter().map(|f| f.name().as_str()))?;
    for (f, name) in fields.iter().zip(&ctx.names) {
        let ty = ctx.column(name).column_type;
        if !json_fits(f.data_type(), ty) {
            return Err(ctx.mismatch(name, ty, json_type_name(f.data_type())));
        }
    }
    let line_of = |row: usize| json_record_line(path, row);
    if fields.is_empty() {
        // Only empty objects (or no records): every present row is all nulls.
        let batch = RecordBatch::try_new_with_options(
            Arc::new(ArrowSchema::empty()),
            vec![],
            &RecordBatchOptions::new().with_row_count(Some(records)),
        )
        .map_err(|e| ctx.unparsable(e))?;
        return sink(ctx.conform(&batch, 0, &line_of)?, ctx);
    }
    let decode_schema = Arc::new(ArrowSchema::new(fields));
    let decoder =
        arrow::json::ReaderBuilder::new(decode_schema.clone()).with_batch_size(BATCH_SIZE).build(reader).map_err(|e| ctx.unparsable(e))?;
    let mut first_row = 0;
    for batch in decoder {
        let batch = batch.map_err(|e| json_decode_error(path, ctx, &decode_schema, e))?;
        sink(ctx.conform(&batch, first_row, &line_of)?, ctx)?;
        first_row += batch.num_rows();
    }
    Ok(())
}

/// Which inferred JSON types a table type accepts.
fn json_fits(inferred: &DataType, to: ColumnType) -> bool {
    use ColumnType::*;
    match inferred {
        DataType::Null => true,
        DataType::Int64 => matches!(to, Int | Bigint | Float | Double),
        DataType::Float64 => matches!(to, Float | Double),
        DataType::Utf8 => matches!(to, Varchar | Date | Timestamp | Binary),
        DataType::Boolean => to == Boolean,
        _ => false,
    }
}

/// A readable name for an inferred JSON type.
fn json_type_name(inferred: &DataType) -> String {
    match inferred {
        DataType::Null => "null".into(),
        DataType::Int64 => "number".into(),
        DataType::Float64 => "double".into(),
        DataType::Utf8 => "string".into(),
        DataType::Boolean => "boolean".into(),
        DataType::Struct(_) => "object".into(),
        DataType::List(_) | DataType::LargeList(_) => "array".into(),
        other => other.to_string(),
    }
}

/// The 1-based line of the `record`-th (0-based) record: NDJSON has one record per non-blank line.
fn json_record_line(path: &Path, record: usize) -> u64 {
    let line = File::open(path).ok().and_then(|f| {
        BufReader::new(f)
            .lines()
            .map_while(Result::ok)
            .enumerate()
            .filter(|(_, l)| !l.trim().is_empty())
            .nth(record)
            .map(|(i, _)| i as u64 + 1)
    });
    line.unwrap_or(record as u64 + 1)
}

/// Turns an arrow-json decode error into `InvalidValue` by finding the first value whose JSON
/// kind does not match its column's decode type (e.g. a number among strings); else `Unparsable`.
fn json_decode_error(path: &Path, ctx: &Ctx<'_>, decode_schema: &ArrowSchema, error: arrow::error::ArrowError) -> InputError {
    let fits = |v: &serde_json::Value, t: &DataType| match t {
        _ if v.is_null() => true,
        DataType::Utf8 => v.is_string(),
        DataType::Int64 => v.as_i64().is_some(),
        DataType::Float64 => v.is_number(),
        DataType::Boolean => v.is_boolean(),
        _ => false,
    };
    if let Ok(file) = File::open(path) {
        for (i, line) in BufReader::new(file).lines().map_while(Result::ok).enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            let Ok(serde_json::Value::Object(record)) = serde_json::from_str::<serde_json::Value>(&line) else { break };
            for (f, name) in decode_schema.fields().iter().zip(&ctx.names) {
                match record.get(f.name()) {
                    Some(v) if !fits(v, f.data_type()) => {
                        return InputError::InvalidValue {
                            file: ctx.file.to_string(),
                            line: i as u64 + 1,
                            column: name.clone(),
                            value: v.to_string(),
                            expected: ctx.column(name).column_type.sql_name().to_string(),
                        };
                    }
                    _ => {}
                }
            }
        }
    }
    ctx.unparsable(error)
}

/// Parquet: typed columns, accepted when they widen losslessly to the table type.
fn read_parquet(path: &Path, ctx: &mut Ctx<'_>, sink: &mut Sink<'_>) -> Result<(), InputError> {
    let file = ctx.open(path)?;
    let size = file.metadata().map_err(|e| ctx.unparsable(e))?.len();
    super::footer_check::check_file(&file, size).map_err(|e| ctx.unparsable(e))?;
    let metadata = ParquetMetaDataReader::new().parse_and_finish(&file).map_err(|e| ctx.unparsable(e))?;
    super::file_reader::check_metadata(&metadata, size).map_err(|e| ctx.unparsable(e))?;
    super::page_check::check_file(&file, &metadata).map_err(|e| ctx.unparsable(e))?;
    // The embedded Arrow schema restores what Parquet cannot say (second timestamps,
    // time zones); one that arrow-ipc might panic on is ignored.
    let skip = !guard::embedded_arrow_schema_is_safe(&metadata);
    let options = ArrowReaderOptions::new().with_skip_arrow_metadata(skip);
    let metadata = guard::catch_panic(|| ArrowReaderMetadata::try_new(Arc::new(metadata), options))
        .map_err(|e| ctx.unparsable(e))?
        .map_err(|e| ctx.unparsable(e))?;
    let builder = ParquetRecordBatchReaderBuilder::new_with_metadata(file, metadata);
    ctx.check_widenings(builder.schema())?;
    let mut reader = builder.with_batch_size(BATCH_SIZE).build().map_err(|e| ctx.unparsable(e))?;
    let mut first_row = 0;
    while let Some(batch) = guard::catch_panic(|| reader.next()).map_err(|e| ctx.unparsable(e))? {
        let batch = batch.map_err(|e| ctx.unparsable(e))?;
        sink(ctx.conform(&batch, first_row, &|row| row as u64 + 1)?, ctx)?;
        first_row += batch.num_rows();
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{AsArray, Int32Array, Int64Array};
    use arrow::datatypes::Int64Type;
    use arrow::datatypes::TimestampMicrosecondType;
    use parquet::arrow::ArrowWriter;

    fn write(dir: &tempfile::TempDir, name: &str, contents: &str) -> std::path::PathBuf {
        let path = dir.path().join(name);
        std::fs::write(&path, contents).unwrap();
        path
    }

    fn write_parquet(dir: &tempfile::TempDir, name: &str, batch: &RecordBatch) -> std::path::PathBuf {
        let path = dir.path().join(name);
        let mut writer = ArrowWriter::try_new(File::create(&path).unwrap(), batch.schema(), None).unwrap();
        writer.write(batch).unwrap();
        writer.close().unwrap();
        path
    }

    fn read(path: &Path, schema: &Schema) -> Result<Vec<RecordBatch>, InputError> {
        read_file(path, schema, Required::Always).map(|input| input.batches)
    }

    fn schema() -> Schema {
        Schema::parse("id bigint not null, name varchar, score double, note varchar").unwrap()
    }

    #[test]
    fn detects_formats_by_extension() {
        assert_eq!(detect_format(Path::new("a.CSV")).unwrap(), InputFormat::Csv);
        assert_eq!(detect_format(Path::new("a.ndjson")).unwrap(), InputFormat::Json);
        assert_eq!(detect_format(Path::new("a.parq")).unwrap(), InputFormat::Parquet);
        assert!(matches!(detect_format(Path::new("a.txt")), Err(InputError::UnsupportedFileType { .. })));
    }

    #[test]
    fn csv_happy_path_fills_missing_nullable_column() {
        let dir = tempfile::tempdir().unwrap();
        let path = write(&dir, "in.csv", "name,id,score\na,1,1.5\n,2,\n");
        let batches = read(&path, &schema()).unwrap();
        assert_eq!(batches.len(), 1);
        let b = &batches[0];
        assert_eq!(b.schema(), schema().arrow_schema());
        assert_eq!(b.column(0).as_primitive::<Int64Type>().values(), &[1, 2]);
        assert_eq!(b.column(1).as_string::<i32>(), &StringArray::from(vec![Some("a"), None]));
        assert!(b.column(2).is_null(1));
        assert_eq!(b.column(3).null_count(), 2);
    }

    #[test]
    fn csv_unknown_column() {
        let dir = tempfile::tempdir().unwrap();
        let path = write(&dir, "in.csv", "id,bogus\n1,x\n");
        match read(&path, &schema()) {
            Err(InputError::UnknownColumn { file, column, known }) => {
                assert_eq!(file, path.display().to_string());
                assert_eq!(column, "bogus");
                assert_eq!(known, "id, name, score, note");
            }
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn csv_bad_bigint_names_line_3() {
        let dir = tempfile::tempdir().unwrap();
        let path = write(&dir, "in.csv", "id,name\n1,a\nx2,b\n");
        match read(&path, &schema()) {
            Err(InputError::InvalidValue { line, column, value, expected, .. }) => {
                assert_eq!((line, column.as_str(), value.as_str(), expected.as_str()), (3, "id", "x2", "bigint"));
            }
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn csv_null_in_not_null_column() {
        let dir = tempfile::tempdir().unwrap();
        let path = write(&dir, "in.csv", "id,name\n1,a\n,b\n");
        match read(&path, &schema()) {
            Err(InputError::NullInNonNullable { column, row, .. }) => assert_eq!((column.as_str(), row), ("id", 2)),
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn csv_missing_required_empty_and_ragged() {
        let dir = tempfile::tempdir().unwrap();
        let missing = write(&dir, "m.csv", "name\na\n");
        assert!(matches!(read(&missing, &schema()), Err(InputError::MissingColumn { column, .. }) if column == "id"));
        let empty = write(&dir, "e.csv", "");
        assert!(matches!(read(&empty, &schema()), Err(InputError::Unparsable { reason, .. }) if reason == "no header row"));
        let ragged = write(&dir, "r.csv", "id,name\n1,a,extra\n");
        assert!(matches!(read(&ragged, &schema()), Err(InputError::Unparsable { .. })));
        let header_only = write(&dir, "h.csv", "id,name\n");
        assert!(read(&header_only, &schema()).unwrap().is_empty());
        let io = read(&dir.path().join("nope.csv"), &schema());
        assert!(matches!(io, Err(InputError::Io { .. })));
    }

    #[test]
    fn csv_timestamps_dates_booleans_binary() {
        let dir = tempfile::tempdir().unwrap();
        let schema = Schema::parse("at timestamp, day date, ok boolean, raw binary").unwrap();
        let csv = "at,day,ok,raw\n2024-01-02T03:04:05Z,2024-01-02,true,ab\n2024-01-02 03:04:05,,false,\n";
        let path = write(&dir, "t.csv", csv);
        let b = &read(&path, &schema).unwrap()[0];
        assert_eq!(b.schema(), schema.arrow_schema());
        let at = b.column(0).as_primitive::<TimestampMicrosecondType>();
        assert_eq!(at.values(), &[1_704_164_645_000_000, 1_704_164_645_000_000]);
        assert_eq!(b.column(1).as_primitive::<arrow::datatypes::Date32Type>().value(0), 19724);
        assert!(b.column(2).as_boolean().value(0) && !b.column(2).as_boolean().value(1));
        assert_eq!(b.column(3).as_binary::<i32>().value(0), b"ab");
        let bad = write(&dir, "bad.csv", "at\nyesterday\n");
        assert!(matches!(read(&bad, &schema), Err(InputError::InvalidValue { line: 2, .. })));
    }

    #[test]
    fn ndjson_happy_path() {
        let dir = tempfile::tempdir().unwrap();
        let schema = Schema::parse("id bigint not null, n int, score double, name varchar, at timestamp, ok boolean").unwrap();
        let json = "{\"id\": 1, \"n\": 7, \"score\": 2, \"name\": \"a\", \"at\": \"2024-01-02T03:04:05Z\", \"ok\": true}\n\n{\"id\": 2, \"score\": 2.5, \"name\": null}\n";
        let path = write(&dir, "in.jsonl", json);
        let batches = read(&path, &schema).unwrap();
        assert_eq!(batches.len(), 1);
        let b = &batches[0];
        assert_eq!(b.schema(), schema.arrow_schema());
        assert_eq!(b.column(0).as_primitive::<Int64Type>().values(), &[1, 2]);
        assert_eq!(b.column(1).as_primitive::<arrow::datatypes::Int32Type>().value(0), 7);
        assert_eq!(b.column(2).as_primitive::<arrow::datatypes::Float64Type>().values(), &[2.0, 2.5]);
        assert_eq!(b.column(4).as_primitive::<TimestampMicrosecondType>().value(0), 1_704_164_645_000_000);
        assert!(b.column(3).is_null(1) && b.column(5).is_null(1));
    }

    #[test]
    fn ndjson_type_mismatch_and_bad_values() {
        let dir = tempfile::tempdir().unwrap();
        let schema = Schema::parse("id bigint, n int, name varchar").unwrap();
        let path = write(&dir, "s.json", "{\"id\": \"1\"}\n");
        match read(&path, &schema) {
            Err(InputError::TypeMismatch { column, expected, found, .. }) => {
                assert_eq!((column.as_str(), expected.as_str(), found.as_str()), ("id", "bigint", "string"))
            }
            other => panic!("unexpected {other:?}"),
        }
        let float = write(&dir, "f.json", "{\"id\": 1.5}\n");
        assert!(matches!(read(&float, &schema), Err(InputError::TypeMismatch { found, .. }) if found == "double"));
        let overflow = write(&dir, "o.json", "{\"n\": 1}\n\n{\"n\": 3000000000}\n");
        assert!(matches!(read(&overflow, &schema), Err(InputError::InvalidValue { line: 3, column, .. }) if column == "n"));
        let mixed = write(&dir, "x.json", "{\"name\": \"a\"}\n{\"name\": 5}\n");
        assert!(matches!(read(&mixed, &schema), Err(InputError::InvalidValue { line: 2, value, .. }) if value == "5"));
        let unknown = write(&dir, "u.json", "{\"zzz\": 1}\n");
        assert!(matches!(read(&unknown, &schema), Err(InputError::UnknownColumn { .. })));
    }

    #[test]
    fn parquet_int32_widens_to_bigint() {
        let dir = tempfile::tempdir().unwrap();
        let input = RecordBatch::try_from_iter([("id", Arc::new(Int32Array::from(vec![1, 2, 3])) as ArrayRef)]).unwrap();
        let path = write_parquet(&dir, "in.parquet", &input);
        let batches = read(&path, &schema()).unwrap();
        assert_eq!(batches[0].schema(), schema().arrow_schema());
        assert_eq!(batches[0].column(0).as_primitive::<Int64Type>().values(), &[1, 2, 3]);
        assert_eq!(batches[0].column(1).null_count(), 3);
    }

    /// Other tools compress with zstd (Polars' default), gzip, lz4 or brotli: all are read.
    #[test]
    fn parquet_of_every_common_codec_is_read() {
        use parquet::basic::{Compression, GzipLevel, ZstdLevel};
        use parquet::file::properties::WriterProperties;
        let dir = tempfile::tempdir().unwrap();
        let input = RecordBatch::try_from_iter([("id", Arc::new(Int64Array::from_iter_values(0..1000)) as ArrayRef)]).unwrap();
        let codecs = [
            Compression::SNAPPY,
            Compression::ZSTD(ZstdLevel::default()),
            Compression::GZIP(GzipLevel::default()),
            Compression::LZ4_RAW,
            Compression::BROTLI(Default::default()),
            Compression::UNCOMPRESSED,
        ];
        for codec in codecs {
            let path = dir.path().join(format!("{codec}.parquet"));
            let props = WriterProperties::builder().set_compression(codec).build();
            let mut writer = ArrowWriter::try_new(File::create(&path).unwrap(), input.schema(), Some(props)).unwrap();
            writer.write(&input).unwrap();
            writer.close().unwrap();
            let batches = read(&path, &schema()).unwrap_or_else(|e| panic!("{codec}: {e}"));
            assert_eq!(batches.iter().map(RecordBatch::num_rows).sum::<usize>(), 1000, "{codec}");
        }
    }

    #[test]
    fn parquet_utf8_for_double_is_type_mismatch() {
        let dir = tempfile::tempdir().unwrap();
        let input = RecordBatch::try_from_iter([
            ("id", Arc::new(arrow::array::Int64Array::from(vec![1])) as ArrayRef),
            ("score", Arc::new(StringArray::from(vec!["1.5"])) as ArrayRef),
        ])
        .unwrap();
        let path = write_parquet(&dir, "in.parquet", &input);
        match read(&path, &schema()) {
            Err(InputError::TypeMismatch { column, expected, found, .. }) => {
                assert_eq!((column.as_str(), expected.as_str(), found.as_str()), ("score", "double", "varchar"))
            }
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn parquet_timestamps_of_any_unit_become_utc_micros() {
        let dir = tempfile::tempdir().unwrap();
        let nanos = arrow::array::TimestampNanosecondArray::from(vec![1_704_164_645_000_000_123]);
        let secs = arrow::array::TimestampSecondArray::from(vec![1_704_164_645]).with_timezone("+01:00");
        let input = RecordBatch::try_from_iter([("a", Arc::new(nanos) as ArrayRef), ("b", Arc::new(secs) as ArrayRef)]).unwrap();
        let path = write_parquet(&dir, "ts.parquet", &input);
        let schema = Schema::parse("a timestamp, b timestamp").unwrap();
        let b = &read(&path, &schema).unwrap()[0];
        assert_eq!(b.schema(), schema.arrow_schema());
        assert_eq!(b.column(0).as_primitive::<TimestampMicrosecondType>().value(0), 1_704_164_645_000_000);
        assert_eq!(b.column(1).as_primitive::<TimestampMicrosecondType>().value(0), 1_704_164_645_000_000);
    }

    #[test]
    fn ndjson_empty_objects_and_no_rows() {
        let dir = tempfile::tempdir().unwrap();
        let schema = Schema::parse("name varchar").unwrap();
        let path = write(
            &dir, "e.ndjson", "{}
{}
",
        );
        assert_eq!(read(&path, &schema).unwrap()[0].num_rows(), 2);
        let empty = write(&dir, "z.json", "");
        assert!(read(&empty, &schema).unwrap().is_empty());
    }

    #[test]
    fn conform_batch_applies_widening_rules() {
        let input = RecordBatch::try_from_iter([("id", Arc::new(Int32Array::from(vec![5])) as ArrayRef)]).unwrap();
        let out = conform_batch(&input, &schema(), "batch 0", Required::Always).unwrap().batches.remove(0);
        assert_eq!(out.schema(), schema().arrow_schema());
        let text = RecordBatch::try_from_iter([("id", Arc::new(StringArray::from(vec!["5"])) as ArrayRef)]).unwrap();
        assert!(
            matches!(conform_batch(&text, &schema(), "batch 0", Required::Always), Err(InputError::TypeMismatch { file, .. }) if file == "batch 0")
        );
    }
}

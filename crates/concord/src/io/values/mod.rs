//! The one rule for putting values into a column, used by every write (append, merge,
//! overwrite, update's SET, a new column's default) and by predicate literals.
//!
//! A value is stored only if it converts exactly: text must parse as the column's
//! type; a number must be in range, whole for an integer column, and read back as the
//! same number from a float column (16777217 does not fit a `float`; a finite value
//! never becomes infinite, a non-zero one never zero); a timestamp keeps its precision
//! (nanoseconds do not fit microseconds unless they are zero); a date is a timestamp
//! at midnight UTC. Timestamps are instants: one without a zone is read as UTC.
//! Anything else is refused, never stored as NULL, rounded or truncated.

pub(crate) mod nested;

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, StringArray};
use arrow::compute::kernels::cmp::eq;
use arrow::compute::{cast, cast_with_options, CastOptions};
use arrow::datatypes::{DataType, Float32Type, Float64Type, TimeUnit};
use arrow::util::display::{ArrayFormatter, FormatOptions};

use crate::format::schema::ColumnType;

/// Why a column of values cannot go into a column of the table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum CastFailure {
    /// Values of this type never go into the column (e.g. booleans into a date column).
    Type { found: String },
    /// The value at `row` does not convert exactly.
    Value { row: usize, value: String },
}

/// Which input types a column accepts, each value then checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Source {
    /// Values computed by SQL or read as text (CSV): text parses into any type, and
    /// numbers, dates and booleans become text in a `varchar` column.
    Any,
    /// Typed input (Parquet, Arrow): values of the column's kind only (numbers into
    /// numeric columns, text into `varchar`, dates and timestamps into either).
    Typed,
}

/// `input` as values of `to`, exactly (see the module docs). NULLs stay NULL.
pub(crate) fn to_column(input: &ArrayRef, to: &ColumnType, source: Source) -> Result<ArrayRef, CastFailure> {
    to_type(input, &to.arrow_type(), source)
}

/// `input` as values of `target`, the Arrow type of a column type.
pub(crate) fn to_type(input: &ArrayRef, target: &DataType, source: Source) -> Result<ArrayRef, CastFailure> {
    // Nested values are checked field by field even in the column's own type: Arrow
    // input may hold NULLs in a field declared not null.
    if crate::io::values::nested::is_nested(target) {
        return crate::io::values::nested::to_nested(input, target, source);
    }
    if input.data_type() == target {
        return Ok(input.clone());
    }
    let from = input.data_type();
    if !accepts_type(from, target, source) {
        return Err(CastFailure::Type { found: sql_type_name(from) });
    }
    let input = plain(input);
    if input.data_type() == target {
        return Ok(input);
    }
    let text = is_text(input.data_type()).then(|| cast(&input, &DataType::Utf8).expect("text casts to Utf8"));
    if let Some(text) = &text {
        check_text_precision(text.as_string::<i32>(), target)?;
    }
    let options = CastOptions { safe: true, ..Default::default() };
    let output = match target {
        // Via a zone-less timestamp (values are UTC instants), then labelled with the
        // column's zone: avoids needing named-timezone support.
        DataType::Timestamp(unit, Some(zone)) => {
            cast_with_options(&input, &DataType::Timestamp(*unit, None), &options).map(|a| relabel(&a, Some(zone.clone())))
        }
        _ => cast_with_options(&input, target, &options),
    }
    .map_err(|_| CastFailure::Type { found: sql_type_name(from) })?;
    let lost = match &text {
        Some(text) => first_lost_nulls(&input, &output).or_else(|| first_inexact_float_text(text.as_string::<i32>(), &output)),
        None => first_lost(&input, &output),
    };
    if let Some(row) = lost {
        return Err(CastFailure::Value { row, value: display_value(&input, row) });
    }
    Ok(output)
}

/// Whether a column of type `to` takes values of type `from` from `source` (each value
/// is then checked).
pub(crate) fn accepts(from: &DataType, to: &ColumnType, source: Source) -> bool {
    accepts_type(from, &to.arrow_type(), source)
}

fn accepts_type(from: &DataType, to: &DataType, source: Source) -> bool {
    if crate::io::values::nested::is_nested(to) {
        return from == to || crate::io::values::nested::accepts(from, to, source);
    }
    from == to
        || match source {
            Source::Any => assignable(from, to),
            Source::Typed => same_kind(from, to),
        }
}

fn is_text(t: &DataType) -> bool {
    matches!(t, DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View)
}

fn is_binary(t: &DataType) -> bool {
    matches!(t, DataType::Binary | DataType::LargeBinary | DataType::BinaryView | DataType::FixedSizeBinary(_))
}

fn is_temporal(t: &DataType) -> bool {
    matches!(t, DataType::Date32 | DataType::Date64 | DataType::Timestamp(..))
}

/// Dictionary arrays as their values, and timestamps without their zone label (the
/// values are UTC instants whatever the label: a date or a UTC column then reads them
/// as such).
fn plain(input: &ArrayRef) -> ArrayRef {
    match input.data_type() {
        DataType::Dictionary(_, values) => plain(&cast(input, values).expect("a dictionary casts to its value type")),
        DataType::Timestamp(_, Some(_)) => relabel(input, None),
        _ => input.clone(),
    }
}

/// A timestamp array with another zone label (same instants).
fn relabel(input: &ArrayRef, zone: Option<Arc<str>>) -> ArrayRef {
    use arrow::datatypes::{
        TimestampMicrosecondType as Us, TimestampMillisecondType as Ms, TimestampNanosecondType as Ns, TimestampSecondType as S,
    };
    match input.data_type() {
        DataType::Timestamp(TimeUnit::Second, _) => Arc::new(input.as_primitive::<S>().clone().with_timezone_opt(zone)),
        DataType::Timestamp(TimeUnit::Millisecond, _) => Arc::new(input.as_primitive::<Ms>().clone().with_timezone_opt(zone)),
        DataType::Timestamp(TimeUnit::Microsecond, _) => Arc::new(input.as_primitive::<Us>().clone().with_timezone_opt(zone)),
        DataType::Timestamp(TimeUnit::Nanosecond, _) => Arc::new(input.as_primitive::<Ns>().clone().with_timezone_opt(zone)),
        _ => input.clone(),
    }
}

/// Text more precise than the column: sub-microsecond digits for a microsecond
/// timestamp or time, a time of day other than midnight for a date, more fractional
/// digits than a decimal's scale (parsing would drop them); and a zone (or offset) on
/// text for a zone-less timestamp column (a wall clock has no zone to convert from).
fn check_text_precision(text: &StringArray, target: &DataType) -> Result<(), CastFailure> {
    let refuse = |row: usize, value: &str| Err(CastFailure::Value { row, value: value.to_string() });
    if let DataType::Decimal128(_, scale) | DataType::Decimal256(_, scale) = target {
        for (row, value) in text.iter().enumerate() {
            if let Some(value) = value.map(str::trim) {
                if fractional_digits(value).is_some_and(|digits| digits > i64::from(*scale)) {
                    return refuse(row, value);
                }
            }
        }
        return Ok(());
    }
    if let DataType::Time64(TimeUnit::Microsecond) = target {
        for (row, value) in text.iter().enumerate() {
            let Some(value) = value.map(str::trim) else { continue };
            let Some(fraction) = value.split_once('.').map(|(_, f)| f) else { continue };
            if fraction.trim_end_matches('0').len() > 6 {
                return refuse(row, value);
            }
        }
        return Ok(());
    }
    if let DataType::Timestamp(_, None) = target {
        if let Some(row) = (0..text.len()).find(|&i| text.is_valid(i) && has_zone(text.value(i).trim())) {
            return refuse(row, text.value(row).trim());
        }
    }
    let divisor: u32 = match target {
        DataType::Timestamp(TimeUnit::Second, _) => 1_000_000_000,
        DataType::Timestamp(TimeUnit::Millisecond, _) => 1_000_000,
        DataType::Timestamp(TimeUnit::Microsecond, _) => 1_000,
        DataType::Date32 => 0,
        _ => return Ok(()),
    };
    for (row, value) in text.iter().enumerate() {
        let Some(value) = value.map(str::trim) else { continue };
        if divisor == 0 && value.len() <= 10 {
            continue; // a date alone
        }
        // Unparsable text is refused by the cast itself.
        let Ok(at) = arrow::compute::kernels::cast_utils::string_to_datetime(&chrono::Utc, value) else { continue };
        let exact = match divisor {
            0 => at.naive_utc().time() == chrono::NaiveTime::MIN,
            d => chrono::Timelike::nanosecond(&at) % d == 0,
        };
        if !exact {
            return refuse(row, value);
        }
    }
    Ok(())
}

/// The digits a decimal number written as text has after its point, ignoring trailing
/// zeros and counting its exponent (`1.50` 1, `1.5e-3` 4, `15e1` 0); `None` if it is
/// not a number (the cast refuses it).
fn fractional_digits(text: &str) -> Option<i64> {
    let unsigned = text.strip_prefix(['+', '-']).unwrap_or(text);
    let (mantissa, exponent) = match unsigned.find(['e', 'E']) {
        Some(at) => (&unsigned[..at], unsigned[at + 1..].parse::<i64>().ok()?),
        None => (unsigned, 0),
    };
    let fraction = mantissa.split_once('.').map_or("", |(_, f)| f);
    if !mantissa.bytes().all(|b| b.is_ascii_digit() || b == b'.') {
        return None;
    }
    Some((fraction.trim_end_matches('0').len() as i64 - exponent).max(0))
}

/// Whether date-time text carries a zone or offset (`Z`, `+02:00`, `-0500`).
fn has_zone(text: &str) -> bool {
    let Some(time) = text.get(10..) else { return false };
    time.ends_with(['Z', 'z']) || time.contains('+') || time.contains('-') || time.to_ascii_uppercase().ends_with("UTC")
}

/// The first present value that became NULL.
fn first_lost_nulls(input: &ArrayRef, output: &ArrayRef) -> Option<usize> {
    if output.null_count() == input.logical_null_count() {
        return None;
    }
    (0..input.len()).find(|&i| present(input, i) && output.is_null(i))
}

fn present(array: &ArrayRef, i: usize) -> bool {
    array.logical_nulls().is_none_or(|n| n.is_valid(i))
}

/// The first present value that did not survive the cast: it became NULL, or it does
/// not read back as itself.
fn first_lost(input: &ArrayRef, output: &ArrayRef) -> Option<usize> {
    if let Some(row) = first_lost_nulls(input, output) {
        return Some(row);
    }
    let (from, to) = (input.data_type(), output.data_type());
    if let (DataType::Float64, DataType::Float32) = (from, to) {
        let (wide, narrow) = (input.as_primitive::<Float64Type>(), output.as_primitive::<Float32Type>());
        return (0..input.len()).find(|&i| wide.is_valid(i) && !float32_reads_as(narrow.value(i), &wide.value(i).to_string()));
    }
    if !may_round(from, to) {
        return None;
    }
    let back = match cast(output, from) {
        Ok(back) => back,
        Err(_) => return (0..input.len()).find(|&i| present(input, i)),
    };
    let same = eq(&back, input).ok()?;
    (0..input.len()).find(|&i| present(input, i) && !(same.is_valid(i) && same.value(i)))
}

/// Whether the float `stored` reads back as the number `written`: the same value, or a
/// shortest decimal form of it (0.1 is stored as the float nearest it). A float exactly
/// halfway between two shortest forms has both (269.390625 prints as 269.39062 or
/// 269.39063 depending on the printer), so a form counts if it has no more digits than
/// Rust's and is no farther from the float.
fn float32_reads_as(stored: f32, written: &str) -> bool {
    let Ok(meant) = written.trim().parse::<f64>() else { return false };
    if meant.is_nan() {
        return stored.is_nan();
    }
    let exact = f64::from(stored);
    if exact == meant {
        return true;
    }
    let shortest = stored.to_string();
    let Ok(short) = shortest.parse::<f64>() else { return false };
    short == meant || (significant_digits(written) <= significant_digits(&shortest) && (meant - exact).abs() <= (short - exact).abs())
}

/// The significant digits of a number written as text (`0.0120` 2, `1600` 2).
fn significant_digits(text: &str) -> usize {
    let mantissa = text.trim().trim_start_matches(['+', '-']).split(['e', 'E']).next().unwrap_or_default();
    mantissa.replace('.', "").trim_start_matches('0').trim_end_matches('0').len()
}

/// Conversions that succeed while changing the value: a fraction into an integer, a
/// time of day into a date, finer time units into coarser ones, integers and decimals
/// into floats that cannot hold them.
fn may_round(from: &DataType, to: &DataType) -> bool {
    use DataType::*;
    let fractional = matches!(from, Float16 | Float32 | Float64 | Decimal32(..) | Decimal64(..) | Decimal128(..) | Decimal256(..));
    let into_float = matches!(to, Float16 | Float32 | Float64);
    match (from, to) {
        (Timestamp(a, _), Timestamp(b, _)) | (Time32(a) | Time64(a), Time32(b) | Time64(b)) => unit_nanos(*a) < unit_nanos(*b),
        (Decimal32(_, a) | Decimal64(_, a) | Decimal128(_, a) | Decimal256(_, a), Decimal128(_, b) | Decimal256(_, b)) => a > b,
        (Float16 | Float32 | Float64, Decimal128(..) | Decimal256(..)) => true,
        (Timestamp(..) | Date64, Date32) => true,
        (Float16 | Float32, Float32 | Float64) => false,
        _ => (fractional && to.is_integer()) || (into_float && (from.is_integer() || fractional)),
    }
}

fn unit_nanos(unit: TimeUnit) -> i64 {
    match unit {
        TimeUnit::Second => 1_000_000_000,
        TimeUnit::Millisecond => 1_000_000,
        TimeUnit::Microsecond => 1_000,
        TimeUnit::Nanosecond => 1,
    }
}

/// Text parsed into a float column that does not read back as the text's number: a
/// finite value that overflowed to infinity, a non-zero one that became zero, and (for
/// `float`) more digits than the column holds. `inf`, `infinity` and `nan` are values.
fn first_inexact_float_text(text: &StringArray, output: &ArrayRef) -> Option<usize> {
    let value = |i: usize| -> f64 {
        match output.data_type() {
            DataType::Float32 => output.as_primitive::<Float32Type>().value(i) as f64,
            _ => output.as_primitive::<Float64Type>().value(i),
        }
    };
    if !matches!(output.data_type(), DataType::Float32 | DataType::Float64) {
        return None;
    }
    (0..text.len()).find(|&i| {
        if text.is_null(i) || output.is_null(i) {
            return false;
        }
        let written = text.value(i).trim();
        let stored = value(i);
        let spelled = written.trim_start_matches(['+', '-']).to_ascii_lowercase();
        if !stored.is_finite() {
            return !matches!(spelled.as_str(), "inf" | "infinity" | "nan");
        }
        let mantissa = spelled.split('e').next().unwrap_or_default();
        if stored == 0.0 && mantissa.bytes().any(|b| (b'1'..=b'9').contains(&b)) {
            return true;
        }
        match output.data_type() {
            DataType::Float32 => !float32_reads_as(stored as f32, written),
            _ => false,
        }
    })
}

/// Which types of values a column of Arrow type `to` accepts from SQL values and text
/// (each value then checked).
fn assignable(from: &DataType, to: &DataType) -> bool {
    let text = is_text(from);
    let number = from.is_numeric();
    match from {
        DataType::Null => true,
        DataType::Dictionary(_, values) => assignable(values, to),
        _ => match to {
            DataType::Boolean => text || matches!(from, DataType::Boolean),
            DataType::Utf8 => text || number || is_temporal(from) || matches!(from, DataType::Boolean) || is_binary(from),
            DataType::Binary | DataType::FixedSizeBinary(_) => text || is_binary(from),
            DataType::Timestamp(_, None) => text || zoneless(from),
            DataType::Date32 | DataType::Timestamp(..) => text || is_temporal(from),
            DataType::Time64(_) => text || is_time(from),
            to if to.is_numeric() => text || number,
            _ => false,
        },
    }
}

fn is_time(t: &DataType) -> bool {
    matches!(t, DataType::Time32(_) | DataType::Time64(_))
}

/// Dates and timestamps without a zone: what a zone-less (wall clock) column takes. A
/// zoned instant has no wall clock until a zone is chosen, so it is refused.
fn zoneless(t: &DataType) -> bool {
    matches!(t, DataType::Date32 | DataType::Date64 | DataType::Timestamp(_, None))
}

/// Which typed input (Parquet, Arrow) a column of Arrow type `to` accepts: values of
/// its kind (each value then checked).
fn same_kind(from: &DataType, to: &DataType) -> bool {
    match from {
        DataType::Null => true,
        DataType::Dictionary(_, values) => same_kind(values, to),
        _ => match to {
            DataType::Boolean => matches!(from, DataType::Boolean),
            DataType::Utf8 => is_text(from),
            DataType::Binary | DataType::FixedSizeBinary(_) => is_binary(from),
            DataType::Timestamp(_, None) => zoneless(from),
            DataType::Date32 | DataType::Timestamp(..) => is_temporal(from),
            DataType::Time64(_) => is_time(from),
            to if to.is_numeric() => from.is_numeric(),
            _ => false,
        },
    }
}

/// One value of an array as text, for error messages.
pub(crate) fn display_value(array: &dyn Array, row: usize) -> String {
    ArrayFormatter::try_new(array, &FormatOptions::default()).map(|f| f.value(row).to_string()).unwrap_or_default()
}

/// An Arrow type by the SQL name users see in schemas (`varchar`, `bigint`, ...); types
/// a table does not store are named as Arrow names them.
pub(crate) fn sql_type_name(t: &DataType) -> String {
    let name = match t {
        DataType::Null => "null",
        DataType::Boolean => "boolean",
        DataType::Int8 => "tinyint",
        DataType::Int16 => "smallint",
        DataType::Int32 => "int",
        DataType::Int64 => "bigint",
        DataType::UInt8 => "utinyint",
        DataType::UInt16 => "usmallint",
        DataType::UInt32 => "uint",
        DataType::UInt64 => "ubigint",
        DataType::Float16 => "half float",
        DataType::Float32 => "float",
        DataType::Float64 => "double",
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => "varchar",
        DataType::Binary | DataType::LargeBinary | DataType::BinaryView => "binary",
        DataType::FixedSizeBinary(n) => return format!("fixed({n})"),
        DataType::Date32 => "date",
        DataType::Date64 => "date64 (milliseconds)",
        DataType::Timestamp(TimeUnit::Microsecond, Some(_)) => "timestamp",
        DataType::Timestamp(TimeUnit::Microsecond, None) => "timestamp_ntz",
        DataType::Timestamp(TimeUnit::Nanosecond, Some(_)) => "timestamp_ns",
        DataType::Timestamp(TimeUnit::Nanosecond, None) => "timestamp_ntz_ns",
        DataType::Timestamp(unit, zone) => {
            let unit = if *unit == TimeUnit::Second { "seconds" } else { "milliseconds" };
            return format!("timestamp ({unit}{})", if zone.is_some() { "" } else { ", no zone" });
        }
        DataType::Time32(_) | DataType::Time64(_) => "time",
        DataType::Interval(_) => "interval",
        DataType::Duration(_) => "duration",
        DataType::Decimal32(p, s) | DataType::Decimal64(p, s) | DataType::Decimal128(p, s) | DataType::Decimal256(p, s) => {
            return format!("decimal({p}, {s})")
        }
        DataType::Dictionary(_, values) => return sql_type_name(values),
        DataType::List(f) | DataType::LargeList(f) | DataType::ListView(f) | DataType::LargeListView(f) => {
            return format!("list<{}>", sql_type_name(f.data_type()))
        }
        DataType::FixedSizeList(f, n) => return format!("{}[{n}]", sql_type_name(f.data_type())),
        DataType::Struct(_) => "struct",
        DataType::Map(..) => "map",
        DataType::Union(..) => "union",
        DataType::RunEndEncoded(_, values) => return sql_type_name(values.data_type()),
    };
    name.to_string()
}

/// Binary values from their hex text (as scans print them; case-insensitive, two
/// digits a byte). `Err(row)`: the first value that is not hex.
pub(crate) fn unhex(text: &arrow::array::StringArray) -> Result<arrow::array::BinaryArray, usize> {
    use arrow::array::Array;
    fn digit(b: u8) -> Option<u8> {
        (b as char).to_digit(16).map(|d| d as u8)
    }
    let mut out = arrow::array::BinaryBuilder::with_capacity(text.len(), text.value_data().len() / 2);
    let mut bytes = Vec::new();
    for (row, value) in text.iter().enumerate() {
        let Some(value) = value else {
            out.append_null();
            continue;
        };
        let hex = value.as_bytes();
        if hex.len() % 2 != 0 {
            return Err(row);
        }
        bytes.clear();
        for pair in hex.chunks(2) {
            match (digit(pair[0]), digit(pair[1])) {
                (Some(high), Some(low)) => bytes.push(high << 4 | low),
                _ => return Err(row),
            }
        }
        out.append_value(&bytes);
    }
    Ok(out.finish())
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{
        BooleanArray, Float32Array, Float64Array, Int64Array, StringArray, TimestampMicrosecondArray, TimestampNanosecondArray,
    };

    fn value(input: ArrayRef, to: impl std::borrow::Borrow<ColumnType>) -> Result<String, CastFailure> {
        to_column(&input, to.borrow(), Source::Any).map(|a| display_value(a.as_ref(), 0))
    }

    fn text(s: &str) -> ArrayRef {
        Arc::new(StringArray::from(vec![s]))
    }

    fn bad(row: usize, v: &str) -> Result<String, CastFailure> {
        Err(CastFailure::Value { row, value: v.to_string() })
    }

    #[test]
    fn exact_values_convert_and_the_rest_are_refused() {
        let float = |f: f64| Arc::new(Float64Array::from(vec![f])) as ArrayRef;
        let int = |i: i64| Arc::new(Int64Array::from(vec![i])) as ArrayRef;
        assert_eq!(value(text("4.25"), ColumnType::Double), Ok("4.25".into()));
        assert_eq!(value(text("abc"), ColumnType::Double), bad(0, "abc"));
        assert_eq!(value(text("maybe"), ColumnType::Boolean), bad(0, "maybe"));
        assert_eq!(value(text("notadate"), ColumnType::Date), bad(0, "notadate"));
        assert_eq!(value(text("2026-13-01"), ColumnType::Timestamp), bad(0, "2026-13-01"));
        assert_eq!(value(int(3_000_000_000), ColumnType::Int), bad(0, "3000000000"));
        assert_eq!(value(float(1.7), ColumnType::Int), bad(0, "1.7"));
        assert_eq!(value(float(2.0), ColumnType::Int), Ok("2".into()));
        assert_eq!(value(float(1e300), ColumnType::Float), bad(0, "1e300"));
        assert_eq!(value(int(7), ColumnType::Varchar), Ok("7".into()));
        let noon = Arc::new(TimestampMicrosecondArray::from(vec![43_200_000_000])) as ArrayRef;
        assert_eq!(value(noon, ColumnType::Date), bad(0, "1970-01-01T12:00:00"));
        let midnight = Arc::new(TimestampMicrosecondArray::from(vec![86_400_000_000])) as ArrayRef;
        assert_eq!(value(midnight, ColumnType::Date), Ok("1970-01-02".into()));
        let truth = Arc::new(BooleanArray::from(vec![true])) as ArrayRef;
        assert_eq!(value(truth.clone(), ColumnType::Int), Err(CastFailure::Type { found: "boolean".into() }));
        assert_eq!(value(int(1), ColumnType::Date), Err(CastFailure::Type { found: "bigint".into() }));
        let nulls = Arc::new(StringArray::from(vec![None, Some("5")])) as ArrayRef;
        let out = to_column(&nulls, &ColumnType::Int, Source::Any).unwrap();
        assert_eq!((out.is_null(0), display_value(out.as_ref(), 1)), (true, "5".into()));
    }

    #[test]
    fn precision_is_never_dropped() {
        // Nanoseconds into microseconds: only when they are zero.
        let nanos = Arc::new(TimestampNanosecondArray::from(vec![1_700_000_000_123_456_000, 1_700_000_000_123_456_789])) as ArrayRef;
        assert_eq!(
            to_column(&nanos, &ColumnType::Timestamp, Source::Typed),
            Err(CastFailure::Value { row: 1, value: "2023-11-14T22:13:20.123456789".into() })
        );
        assert_eq!(value(text("2024-01-01T00:00:00.123456789Z"), ColumnType::Timestamp), bad(0, "2024-01-01T00:00:00.123456789Z"));
        assert_eq!(value(text("2024-01-01T00:00:00.123456000Z"), ColumnType::Timestamp), Ok("2024-01-01T00:00:00.123456Z".into()));
        // A date is a day: a time of day other than midnight (UTC) does not fit.
        assert_eq!(value(text("2024-03-03T10:00:00"), ColumnType::Date), bad(0, "2024-03-03T10:00:00"));
        assert_eq!(value(text("2024-03-03T00:00:00+02:00"), ColumnType::Date), bad(0, "2024-03-03T00:00:00+02:00"));
        assert_eq!(value(text("2024-03-03T00:00:00Z"), ColumnType::Date), Ok("2024-03-03".into()));
        // Floats: out of range, underflow, and integers a float cannot hold.
        assert_eq!(value(text("1e400"), ColumnType::Double), bad(0, "1e400"));
        assert_eq!(value(text("1e-400"), ColumnType::Double), bad(0, "1e-400"));
        assert_eq!(value(text("-inf"), ColumnType::Double), Ok("-inf".into()));
        assert_eq!(value(text("NaN"), ColumnType::Float), Ok("NaN".into()));
        assert_eq!(value(text("16777217"), ColumnType::Float), bad(0, "16777217"));
        assert_eq!(value(text("16777216"), ColumnType::Float), Ok("16777216.0".into()));
        assert_eq!(value(text("0.1"), ColumnType::Float), Ok("0.1".into()));
        // The shortest text of a float (as `scan` prints it) reads back as that float.
        assert_eq!(value(text("269.39062"), ColumnType::Float), Ok("269.39062".into()));
        assert_eq!(value(text("1e39"), ColumnType::Float), bad(0, "1e39"));
        let big = Arc::new(Int64Array::from(vec![16_777_217])) as ArrayRef;
        assert_eq!(value(big, ColumnType::Float), bad(0, "16777217"));
        let huge = Arc::new(Int64Array::from(vec![i64::MAX])) as ArrayRef;
        assert_eq!(value(huge, ColumnType::Double), bad(0, "9223372036854775807"));
        let tenth = Arc::new(Float64Array::from(vec![0.1, 0.123456789])) as ArrayRef;
        assert_eq!(to_column(&tenth, &ColumnType::Float, Source::Typed), Err(CastFailure::Value { row: 1, value: "0.123456789".into() }));
        let narrow = Arc::new(Float32Array::from(vec![0.1f32])) as ArrayRef;
        assert!(to_column(&narrow, &ColumnType::Double, Source::Typed).is_ok());
    }

    #[test]
    fn new_types_keep_every_digit_or_refuse() {
        let money = &ColumnType::Decimal { precision: 5, scale: 2 };
        assert_eq!(value(text("123.45"), money), Ok("123.45".into()));
        assert_eq!(value(text("1.2300"), money), Ok("1.23".into()));
        assert_eq!(value(text("1.234"), money), bad(0, "1.234"));
        assert_eq!(value(text("1234.5"), money), bad(0, "1234.5"));
        assert_eq!(value(text("1.5e-3"), money), bad(0, "1.5e-3"));
        let float = Arc::new(Float64Array::from(vec![0.1, 0.125])) as ArrayRef;
        assert_eq!(to_column(&float, money, Source::Typed), Err(CastFailure::Value { row: 1, value: "0.125".into() }));
        assert_eq!(value(text("-1"), ColumnType::Uint), bad(0, "-1"));
        assert_eq!(value(text("255"), ColumnType::Utinyint), Ok("255".into()));
        assert_eq!(value(text("256"), ColumnType::Utinyint), bad(0, "256"));
        assert_eq!(value(text("10:30:00.123456"), ColumnType::Time), Ok("10:30:00.123456".into()));
        assert_eq!(value(text("10:30:00.1234567"), ColumnType::Time), bad(0, "10:30:00.1234567"));
        // A wall clock takes zone-less text and timestamps; a zoned one has no wall clock.
        assert_eq!(value(text("2024-01-01T10:00:00"), ColumnType::TimestampNtz), Ok("2024-01-01T10:00:00".into()));
        assert_eq!(value(text("2024-01-01T10:00:00Z"), ColumnType::TimestampNtz), bad(0, "2024-01-01T10:00:00Z"));
        assert_eq!(value(text("2024-01-01T10:00:00+02:00"), ColumnType::TimestampNtz), bad(0, "2024-01-01T10:00:00+02:00"));
        let utc = Arc::new(TimestampMicrosecondArray::from(vec![0]).with_timezone("UTC")) as ArrayRef;
        assert_eq!(to_column(&utc, &ColumnType::TimestampNtz, Source::Typed), Err(CastFailure::Type { found: "timestamp".into() }));
        let nanos = Arc::new(TimestampNanosecondArray::from(vec![1_700_000_000_123_456_789])) as ArrayRef;
        assert!(to_column(&nanos, &ColumnType::TimestampNtzNs, Source::Typed).is_ok());
        assert_eq!(value(text("2023-11-14T22:13:20.123456789Z"), ColumnType::TimestampNs), Ok("2023-11-14T22:13:20.123456789Z".into()));
    }

    #[test]
    fn typed_input_is_checked_by_value_within_its_kind() {
        let small = Arc::new(Int64Array::from(vec![1, 2, 3])) as ArrayRef;
        assert!(to_column(&small, &ColumnType::Int, Source::Typed).is_ok());
        let large = Arc::new(Int64Array::from(vec![1, 3_000_000_000])) as ArrayRef;
        assert_eq!(to_column(&large, &ColumnType::Int, Source::Typed), Err(CastFailure::Value { row: 1, value: "3000000000".into() }));
        assert_eq!(to_column(&text("1.5"), &ColumnType::Double, Source::Typed), Err(CastFailure::Type { found: "varchar".into() }));
        assert_eq!(to_column(&small, &ColumnType::Varchar, Source::Typed), Err(CastFailure::Type { found: "bigint".into() }));
    }
}

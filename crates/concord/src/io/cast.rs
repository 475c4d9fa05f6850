//! The one rule for putting values into a column, used by every write (append, merge,
//! overwrite, update's SET, a new column's default).
//!
//! A value is stored only if it converts exactly: text must parse as the column's
//! type, a number must be in range and, for an integer column, whole; a timestamp
//! stored in a date column must be at midnight. Anything else is refused, never stored
//! as NULL or rounded.

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray};
use arrow::compute::kernels::cmp::eq;
use arrow::compute::{cast_with_options, CastOptions};
use arrow::datatypes::{DataType, Float32Type, Float64Type, TimeUnit, TimestampMicrosecondType};
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

/// `input` as values of `to`, exactly (see the module docs). NULLs stay NULL.
pub(crate) fn to_column(input: &ArrayRef, to: ColumnType) -> Result<ArrayRef, CastFailure> {
    let target = to.arrow_type();
    if input.data_type() == &target {
        return Ok(input.clone());
    }
    let from = input.data_type();
    if !assignable(from, to) {
        return Err(CastFailure::Type { found: sql_type_name(from) });
    }
    let options = CastOptions { safe: true, ..Default::default() };
    let output = match to {
        // Via a zone-less timestamp (values are UTC instants), then labelled UTC: avoids
        // needing named-timezone support; naive strings and timestamps are taken as UTC.
        ColumnType::Timestamp => cast_with_options(input, &DataType::Timestamp(TimeUnit::Microsecond, None), &options)
            .map(|a| Arc::new(a.as_primitive::<TimestampMicrosecondType>().clone().with_timezone("UTC")) as ArrayRef),
        _ => cast_with_options(input, &target, &options),
    }
    .map_err(|_| CastFailure::Type { found: sql_type_name(from) })?;
    if let Some(row) = first_lost(input, &output) {
        return Err(CastFailure::Value { row, value: display_value(input, row) });
    }
    Ok(output)
}

/// The first present value that did not survive the cast: it became NULL, or (for
/// conversions that can round) it does not convert back to itself.
fn first_lost(input: &ArrayRef, output: &ArrayRef) -> Option<usize> {
    let present = |i: usize| input.logical_nulls().is_none_or(|n| n.is_valid(i));
    if output.null_count() != input.logical_null_count() {
        if let Some(i) = (0..input.len()).find(|&i| present(i) && output.is_null(i)) {
            return Some(i);
        }
    }
    if output.data_type() == &DataType::Float32 {
        return first_overflow(input, output);
    }
    if !may_round(input.data_type(), output.data_type()) {
        return None;
    }
    let back = arrow::compute::cast(output, input.data_type()).ok()?;
    let same = eq(&back, input).ok()?;
    (0..input.len()).find(|&i| present(i) && !same.value(i))
}

/// A finite value too large for a `float` column (it became infinite).
fn first_overflow(input: &ArrayRef, output: &ArrayRef) -> Option<usize> {
    let wide = arrow::compute::cast(input, &DataType::Float64).ok()?;
    let (wide, narrow) = (wide.as_primitive::<Float64Type>(), output.as_primitive::<Float32Type>());
    (0..input.len()).find(|&i| wide.is_valid(i) && wide.value(i).is_finite() && narrow.value(i).is_infinite())
}

/// Conversions that succeed while changing the value: a fraction into an integer, a
/// time of day into a date.
fn may_round(from: &DataType, to: &DataType) -> bool {
    let fractional =
        matches!(from, DataType::Float16 | DataType::Float32 | DataType::Float64 | DataType::Decimal128(..) | DataType::Decimal256(..));
    (fractional && to.is_integer()) || (matches!(from, DataType::Timestamp(..) | DataType::Date64) && matches!(to, DataType::Date32))
}

/// Which types of values a column of type `to` accepts (each value then checked).
pub(crate) fn assignable(from: &DataType, to: ColumnType) -> bool {
    use ColumnType::*;
    let text = matches!(from, DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View);
    let number = from.is_numeric();
    let temporal = matches!(from, DataType::Date32 | DataType::Date64 | DataType::Timestamp(..));
    match from {
        DataType::Null => true,
        DataType::Dictionary(_, values) => assignable(values, to),
        _ => match to {
            Boolean => text || matches!(from, DataType::Boolean),
            Int | Bigint | Float | Double => text || number,
            Varchar => {
                text || number
                    || temporal
                    || matches!(from, DataType::Boolean | DataType::Binary | DataType::LargeBinary | DataType::BinaryView)
            }
            Binary => text || matches!(from, DataType::Binary | DataType::LargeBinary | DataType::BinaryView),
            Date | Timestamp => text || temporal,
        },
    }
}

/// One value of an array as text, for error messages.
pub(crate) fn display_value(array: &dyn Array, row: usize) -> String {
    ArrayFormatter::try_new(array, &FormatOptions::default()).map(|f| f.value(row).to_string()).unwrap_or_default()
}

/// An Arrow type by the SQL name users see in schemas (`varchar`, `bigint`, ...).
pub fn sql_type_name(t: &DataType) -> String {
    let name = match t {
        DataType::Null => "null",
        DataType::Boolean => "boolean",
        DataType::Int8 => "tinyint",
        DataType::Int16 => "smallint",
        DataType::Int32 => "int",
        DataType::Int64 => "bigint",
        DataType::UInt8 => "unsigned tinyint",
        DataType::UInt16 => "unsigned smallint",
        DataType::UInt32 => "unsigned int",
        DataType::UInt64 => "unsigned bigint",
        DataType::Float16 => "half float",
        DataType::Float32 => "float",
        DataType::Float64 => "double",
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => "varchar",
        DataType::Binary | DataType::LargeBinary | DataType::BinaryView | DataType::FixedSizeBinary(_) => "binary",
        DataType::Date32 | DataType::Date64 => "date",
        DataType::Timestamp(..) => "timestamp",
        DataType::Time32(_) | DataType::Time64(_) => "time",
        DataType::Interval(_) => "interval",
        DataType::Duration(_) => "duration",
        DataType::Decimal32(p, s) | DataType::Decimal64(p, s) | DataType::Decimal128(p, s) | DataType::Decimal256(p, s) => {
            return format!("decimal({p}, {s})")
        }
        DataType::Dictionary(_, values) => return sql_type_name(values),
        DataType::List(f) | DataType::LargeList(f) | DataType::ListView(f) | DataType::LargeListView(f) | DataType::FixedSizeList(f, _) => {
            return format!("list of {}", sql_type_name(f.data_type()))
        }
        DataType::Struct(_) => "struct",
        DataType::Map(..) => "map",
        DataType::Union(..) => "union",
        DataType::RunEndEncoded(_, values) => return sql_type_name(values.data_type()),
    };
    name.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{BooleanArray, Float64Array, Int64Array, StringArray, TimestampMicrosecondArray};

    fn value(input: ArrayRef, to: ColumnType) -> Result<String, CastFailure> {
        to_column(&input, to).map(|a| display_value(a.as_ref(), 0))
    }

    #[test]
    fn exact_values_convert_and_the_rest_are_refused() {
        let text = |s: &str| Arc::new(StringArray::from(vec![s])) as ArrayRef;
        let float = |f: f64| Arc::new(Float64Array::from(vec![f])) as ArrayRef;
        let int = |i: i64| Arc::new(Int64Array::from(vec![i])) as ArrayRef;
        let bad = |row, v: &str| Err(CastFailure::Value { row, value: v.to_string() });
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
        let out = to_column(&nulls, ColumnType::Int).unwrap();
        assert_eq!((out.is_null(0), display_value(out.as_ref(), 1)), (true, "5".into()));
    }
}

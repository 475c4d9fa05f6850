//! Column statistics of data files (FORMAT.md §6): computed when a file is written,
//! read to skip whole fragments before any data file is opened.
//!
//! Invariants: a recorded bound holds for every physical row of the file (deleted ones
//! included), so it bounds the live rows of every version holding the fragment; a
//! value is recorded only if its text parses back to exactly the same value; a
//! column a file lacks holds its default in every row.

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, BooleanArray, RecordBatch, UInt64Array};
use arrow::datatypes::{ArrowPrimitiveType, Date32Type, Float32Type, Float64Type, Int32Type, Int64Type, TimestampMicrosecondType};
use chrono::{DateTime, Datelike, NaiveDate, SecondsFormat};
use datafusion::common::pruning::PruningStatistics;
use datafusion::common::{Column, ScalarValue};

mod leaf;

use crate::format::manifest::{ColumnStats, Fragment};
use crate::format::schema::{ColumnType, Field};
use leaf::leaf_summary;
pub(crate) use leaf::{as_leaf_columns, Leaf};

/// Longest text value recorded as a bound; longer ones leave the bound unknown.
pub(crate) const MAX_STAT_BYTES: usize = 64;

/// Statistics of `field`'s values in `arrays` (the pieces of one file's column).
pub(crate) fn column_stats(field: &Field, arrays: &[&ArrayRef]) -> ColumnStats {
    let nulls = arrays.iter().map(|a| a.null_count() as u64).sum();
    let (min, max) = match bounds(&field.column_type, arrays) {
        Some((min, max)) if round_trips(&field.column_type, &min) && round_trips(&field.column_type, &max) => (Some(min), Some(max)),
        _ => (None, None),
    };
    ColumnStats { field: field.id, nulls, min, max }
}

/// Statistics of every column of `batches` (all with `fields`, in order), then of
/// their struct leaves (`crate::io::write::stats`).
pub(crate) fn file_stats(fields: &[Field], columns: &[usize], batches: &[RecordBatch]) -> Vec<ColumnStats> {
    let arrays = |i: usize| -> Vec<&ArrayRef> { batches.iter().map(|b| b.column(i)).collect() };
    let mut stats: Vec<ColumnStats> = columns.iter().map(|&i| column_stats(&fields[i], &arrays(i))).collect();
    stats.extend(columns.iter().flat_map(|&i| leaf::leaf_stats(&fields[i], &arrays(i))));
    stats
}

/// The smallest and largest non-NULL value as text, if the type records them.
fn bounds(t: &ColumnType, arrays: &[&ArrayRef]) -> Option<(String, String)> {
    match t {
        ColumnType::Int => fold(arrays, primitive::<Int32Type>).map(|(a, b)| (a.to_string(), b.to_string())),
        ColumnType::Bigint => fold(arrays, primitive::<Int64Type>).map(|(a, b)| (a.to_string(), b.to_string())),
        ColumnType::Float => floats::<Float32Type>(arrays, f64::from).map(|(lo, hi)| (float_text(lo as f32), float_text(hi as f32))),
        ColumnType::Double => floats::<Float64Type>(arrays, |v| v).map(|(lo, hi)| (float_text(lo), float_text(hi))),
        ColumnType::Date => fold(arrays, primitive::<Date32Type>).and_then(|(a, b)| Some((date_text(a)?, date_text(b)?))),
        ColumnType::Timestamp => {
            fold(arrays, primitive::<TimestampMicrosecondType>).and_then(|(a, b)| Some((timestamp_text(a)?, timestamp_text(b)?)))
        }
        ColumnType::Boolean => fold(arrays, |a| {
            let b = a.as_boolean();
            Some((arrow::compute::min_boolean(b)?, arrow::compute::max_boolean(b)?))
        })
        .map(|(a, b)| (a.to_string(), b.to_string())),
        ColumnType::Varchar => {
            let (min, max) = fold(arrays, |a| {
                let s = a.as_string::<i32>();
                Some((arrow::compute::min_string(s)?.to_string(), arrow::compute::max_string(s)?.to_string()))
            })?;
            (min.len() <= MAX_STAT_BYTES && max.len() <= MAX_STAT_BYTES).then_some((min, max))
        }
        // Bytes are compared as bytes; no text form is kept for them.
        ColumnType::Binary | ColumnType::Fixed(_) | ColumnType::Uuid => None,
        // Nested columns keep no bounds (their values have no order readers prune by).
        t if t.is_nested() => None,
        _ => {
            let lo = extreme(t, arrays, false)?;
            let hi = extreme(t, arrays, true)?;
            Some((scalar_text(&lo)?, scalar_text(&hi)?))
        }
    }
}

/// The smallest (or largest) non-NULL value of a column of the types the explicit
/// arms of [`bounds`] do not cover (integers of other widths, decimals, times, other
/// timestamps), by DataFusion's min/max, which orders them as comparisons do.
fn extreme(t: &ColumnType, arrays: &[&ArrayRef], largest: bool) -> Option<ScalarValue> {
    use datafusion::functions_aggregate::min_max::{MaxAccumulator, MinAccumulator};
    use datafusion::logical_expr::Accumulator;
    let data_type = t.arrow_type();
    let mut acc: Box<dyn Accumulator> =
        if largest { Box::new(MaxAccumulator::try_new(&data_type).ok()?) } else { Box::new(MinAccumulator::try_new(&data_type).ok()?) };
    for a in arrays {
        acc.update_batch(&[Arc::clone(a)]).ok()?;
    }
    acc.evaluate().ok().filter(|v| !v.is_null())
}

/// A value's text as Arrow casts it (decimals with their scale's digits, timestamps in
/// RFC 3339 form); [`round_trips`] checks it parses back to the same value.
fn scalar_text(value: &ScalarValue) -> Option<String> {
    let text = value.cast_to(&arrow::datatypes::DataType::Utf8).ok()?;
    match text {
        ScalarValue::Utf8(Some(text)) => Some(text),
        _ => None,
    }
}

fn primitive<T: ArrowPrimitiveType>(a: &ArrayRef) -> Option<(T::Native, T::Native)> {
    let p = a.as_primitive::<T>();
    Some((arrow::compute::min(p)?, arrow::compute::max(p)?))
}

/// Folds each array's (min, max) into the whole column's.
fn fold<V: PartialOrd>(arrays: &[&ArrayRef], each: impl Fn(&ArrayRef) -> Option<(V, V)>) -> Option<(V, V)> {
    arrays.iter().filter_map(|a| each(a)).reduce(|(lo, hi), (a, b)| (if a < lo { a } else { lo }, if b > hi { b } else { hi }))
}

/// Floats: no bounds if any value is NaN (comparisons order it above everything);
/// otherwise ordered as the compute kernels order them (`-0 < 0`).
fn floats<T: ArrowPrimitiveType>(arrays: &[&ArrayRef], wide: impl Fn(T::Native) -> f64) -> Option<(f64, f64)> {
    let mut bounds: Option<(f64, f64)> = None;
    for a in arrays {
        for v in a.as_primitive::<T>().iter().flatten().map(&wide) {
            if v.is_nan() {
                return None;
            }
            bounds = Some(match bounds {
                None => (v, v),
                Some((lo, hi)) => (if v.total_cmp(&lo).is_lt() { v } else { lo }, if v.total_cmp(&hi).is_gt() { v } else { hi }),
            });
        }
    }
    bounds
}

/// The shortest text that parses back to `v`: plain, or with an exponent when long.
fn float_text<F: std::fmt::Display + std::fmt::LowerExp>(v: F) -> String {
    let plain = v.to_string();
    if plain.len() <= 24 {
        plain
    } else {
        format!("{v:e}")
    }
}

fn date_text(days: i32) -> Option<String> {
    let day = NaiveDate::from_num_days_from_ce_opt(days.checked_add(719_163)?)?;
    Some(day.format("%Y-%m-%d").to_string())
}

fn timestamp_text(micros: i64) -> Option<String> {
    Some(DateTime::from_timestamp_micros(micros)?.to_rfc3339_opts(SecondsFormat::AutoSi, true))
}

/// `text` as a value of type `t` (`None` if it is not one).
pub(crate) fn parse_value(t: &ColumnType, text: &str) -> Option<ScalarValue> {
    Some(match t {
        ColumnType::Int => ScalarValue::Int32(Some(text.parse().ok()?)),
        ColumnType::Bigint => ScalarValue::Int64(Some(text.parse().ok()?)),
        ColumnType::Float => ScalarValue::Float32(Some(text.parse().ok()?)),
        ColumnType::Double => ScalarValue::Float64(Some(text.parse().ok()?)),
        ColumnType::Boolean => ScalarValue::Boolean(Some(text.parse().ok()?)),
        ColumnType::Varchar => ScalarValue::Utf8(Some(text.to_string())),
        ColumnType::Date => {
            let day = NaiveDate::parse_from_str(text, "%Y-%m-%d").ok()?;
            ScalarValue::Date32(Some(day.num_days_from_ce().checked_sub(719_163)?))
        }
        ColumnType::Timestamp => {
            let at = DateTime::parse_from_rfc3339(text).ok()?;
            ScalarValue::TimestampMicrosecond(Some(at.timestamp_micros()), Some("UTC".into()))
        }
        ColumnType::Binary | ColumnType::Fixed(_) | ColumnType::Uuid => return None,
        t if t.is_nested() => return None,
        _ => ScalarValue::try_from_string(text.to_string(), &t.arrow_type()).ok().filter(|v| !v.is_null())?,
    })
}

/// Whether `text` parses back to a value that prints as `text` (so the bound is exact).
fn round_trips(t: &ColumnType, text: &str) -> bool {
    let Some(value) = parse_value(t, text) else { return false };
    let again = match (&value, t) {
        (ScalarValue::Float32(Some(v)), _) => float_text(*v),
        (ScalarValue::Float64(Some(v)), _) => float_text(*v),
        (ScalarValue::Date32(Some(d)), _) => date_text(*d).unwrap_or_default(),
        (ScalarValue::TimestampMicrosecond(Some(m), Some(_)), ColumnType::Timestamp) => timestamp_text(*m).unwrap_or_default(),
        (ScalarValue::Int32(_) | ScalarValue::Int64(_) | ScalarValue::Boolean(_) | ScalarValue::Utf8(_), _) => value.to_string(),
        (other, _) => scalar_text(other).unwrap_or_default(),
    };
    again == text
}

/// What a fragment's statistics say about one table column: its bounds and NULL count
/// over the fragment's physical rows (`None`: unknown).
#[derive(Debug, Clone, Default)]
pub(crate) struct Summary {
    pub min: Option<ScalarValue>,
    pub max: Option<ScalarValue>,
    pub nulls: Option<u64>,
}

/// The summary of `field` in `fragment`.
pub(crate) fn summary(fragment: &Fragment, field: &Field) -> Summary {
    let [file] = fragment.files.as_slice() else { return Summary::default() };
    if !file.fields.contains(&field.id) {
        // Every row holds the default (NULL without one).
        let default = ScalarValue::try_from_array(&field.default_array(1), 0).ok().filter(|v| !v.is_null());
        let nulls = if default.is_some() { 0 } else { fragment.physical_rows };
        return Summary { min: default.clone(), max: default, nulls: Some(nulls) };
    }
    file.stats.iter().find(|s| s.field == field.id).map(|s| summary_of(s, field)).unwrap_or_default()
}

/// What recorded statistics `s` say about `field`.
pub(crate) fn summary_of(s: &ColumnStats, field: &Field) -> Summary {
    // A float's bound text ("0.1") parsed as a double is another number than the float
    // it bounds (0.100000001...): the bounds of a widened float are unknown.
    if field.widened_from == Some(ColumnType::Float) {
        return Summary { nulls: Some(s.nulls), ..Summary::default() };
    }
    Summary {
        min: s.min.as_deref().and_then(|t| parse_value(&field.column_type, t)),
        max: s.max.as_deref().and_then(|t| parse_value(&field.column_type, t)),
        nulls: Some(s.nulls),
    }
}

/// Fragment statistics as DataFusion's pruning sees them: one container per fragment,
/// columns by (table) name.
pub(crate) struct FragmentPruning<'a> {
    fragments: &'a [Fragment],
    fields: &'a [Field],
    /// Struct leaves, named by their paths (`crate::io::write::stats`).
    leaves: &'a [Leaf],
}

impl<'a> FragmentPruning<'a> {
    pub(crate) fn new(fragments: &'a [Fragment], fields: &'a [Field], leaves: &'a [Leaf]) -> Self {
        FragmentPruning { fragments, fields, leaves }
    }

    /// Each fragment's summary of `column`, and its type; `None` for no such column.
    fn summaries(&self, column: &Column) -> Option<(Vec<Summary>, ColumnType)> {
        if let Some(field) = self.fields.iter().find(|f| f.name == column.name) {
            return Some((self.fragments.iter().map(|f| summary(f, field)).collect(), field.column_type.clone()));
        }
        let leaf = self.leaves.iter().find(|l| l.path == column.name)?;
        Some((self.fragments.iter().map(|f| leaf_summary(f, leaf)).collect(), leaf.field.column_type.clone()))
    }

    fn values(&self, column: &Column, pick: impl Fn(Summary) -> Option<ScalarValue>) -> Option<ArrayRef> {
        let (summaries, column_type) = self.summaries(column)?;
        let null = ScalarValue::try_from(column_type.arrow_type()).ok()?;
        let values = summaries.into_iter().map(|s| pick(s).unwrap_or_else(|| null.clone()));
        ScalarValue::iter_to_array(values).ok()
    }
}

impl PruningStatistics for FragmentPruning<'_> {
    fn min_values(&self, column: &Column) -> Option<ArrayRef> {
        self.values(column, |s| s.min)
    }
    fn max_values(&self, column: &Column) -> Option<ArrayRef> {
        self.values(column, |s| s.max)
    }
    fn num_containers(&self) -> usize {
        self.fragments.len()
    }
    fn null_counts(&self, column: &Column) -> Option<ArrayRef> {
        let counts: UInt64Array = self.summaries(column)?.0.into_iter().map(|s| s.nulls).collect();
        Some(Arc::new(counts))
    }
    fn row_counts(&self) -> Option<ArrayRef> {
        let counts: UInt64Array = self.fragments.iter().map(|f| Some(f.physical_rows)).collect();
        Some(Arc::new(counts))
    }
    fn contained(&self, _column: &Column, _values: &std::collections::HashSet<ScalarValue>) -> Option<BooleanArray> {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::schema::Schema;
    use arrow::array::{BinaryArray, Date32Array, Float64Array, Int64Array, StringArray, TimestampMicrosecondArray};

    fn field(t: &str) -> Field {
        Schema::parse(&format!("c {t}")).unwrap().fields[0].clone()
    }

    fn stats(t: &str, array: ArrayRef) -> ColumnStats {
        column_stats(&field(t), &[&array])
    }

    #[test]
    fn bounds_of_each_type_parse_back_to_the_same_values() {
        let s = stats("bigint", Arc::new(Int64Array::from(vec![Some(5), None, Some(-3), Some(i64::MAX)])));
        assert_eq!((s.nulls, s.min.as_deref(), s.max.as_deref()), (1, Some("-3"), Some("9223372036854775807")));
        let s = stats("double", Arc::new(Float64Array::from(vec![0.1, -0.0, 1e300, f64::INFINITY])));
        assert_eq!((s.min.as_deref(), s.max.as_deref()), (Some("-0"), Some("inf")));
        let s = stats("double", Arc::new(Float64Array::from(vec![1e300, 2.5])));
        assert_eq!((s.min.as_deref(), s.max.as_deref()), (Some("2.5"), Some("1e300")));
        let s = stats("float", Arc::new(arrow::array::Float32Array::from(vec![0.1f32, 3.0])));
        assert_eq!((s.min.as_deref(), s.max.as_deref()), (Some("0.1"), Some("3")));
        assert_eq!(parse_value(&ColumnType::Double, "0.1"), Some(ScalarValue::Float64(Some(0.1))));
        let s = stats("date", Arc::new(Date32Array::from(vec![0, 19_000])));
        assert_eq!((s.min.as_deref(), s.max.as_deref()), (Some("1970-01-01"), Some("2022-01-08")));
        assert_eq!(parse_value(&ColumnType::Date, "2022-01-08"), Some(ScalarValue::Date32(Some(19_000))));
        let ts = TimestampMicrosecondArray::from(vec![1_700_000_000_123_456, -1]).with_timezone("UTC");
        let s = stats("timestamp", Arc::new(ts));
        assert_eq!((s.min.as_deref(), s.max.as_deref()), (Some("1969-12-31T23:59:59.999999Z"), Some("2023-11-14T22:13:20.123456Z")));
        assert_eq!(
            parse_value(&ColumnType::Timestamp, "2023-11-14T22:13:20.123456Z"),
            Some(ScalarValue::TimestampMicrosecond(Some(1_700_000_000_123_456), Some("UTC".into())))
        );
        let s = stats("varchar", Arc::new(StringArray::from(vec![Some("b"), Some("a"), None, Some("é")])));
        assert_eq!((s.nulls, s.min.as_deref(), s.max.as_deref()), (1, Some("a"), Some("é")));
    }

    #[test]
    fn unknowable_bounds_are_left_out() {
        let nan = stats("double", Arc::new(Float64Array::from(vec![1.0, f64::NAN])));
        assert_eq!((nan.min, nan.max), (None, None));
        let long = stats("varchar", Arc::new(StringArray::from(vec!["a".repeat(MAX_STAT_BYTES + 1)])));
        assert_eq!((long.min, long.max), (None, None));
        let nulls = stats("bigint", Arc::new(Int64Array::from(vec![None, None])));
        assert_eq!((nulls.nulls, nulls.min), (2, None));
        let bytes = stats("binary", Arc::new(BinaryArray::from(vec![b"x".as_ref()])));
        assert_eq!((bytes.nulls, bytes.min), (0, None));
    }
}

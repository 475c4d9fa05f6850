//! Column bounds of data files in Iceberg's single-value binary form (the spec's
//! appendix D), from the statistics text of Concord's manifests (FORMAT.md §6). A bound
//! that cannot be said exactly is left out: readers then prune less, never wrongly.

use std::collections::BTreeMap;

use chrono::{DateTime, NaiveDate, NaiveDateTime};

use crate::format::manifest::DataFile;
use crate::format::schema::types::ColumnType;
use crate::format::schema::{Field, Schema};

/// The flat fields statistics are kept for (reached through structs only), by id.
pub(super) fn leaf_types(schema: &Schema) -> BTreeMap<u32, &Field> {
    fn walk<'a>(field: &'a Field, out: &mut BTreeMap<u32, &'a Field>) {
        match &field.column_type {
            ColumnType::Struct(fields) => fields.iter().for_each(|f| walk(f, out)),
            ColumnType::List(_) | ColumnType::Vector(..) | ColumnType::Map(..) => {}
            _ => {
                out.insert(field.id, field);
            }
        }
    }
    let mut out = BTreeMap::new();
    schema.fields.iter().for_each(|f| walk(f, &mut out));
    out
}

/// The widened flat fields and their types now: a bound's bytes depend on the type, so
/// a data manifest's name carries these (FORMAT.md §16).
pub(super) fn widened(leaves: &BTreeMap<u32, &Field>) -> String {
    leaves.values().filter(|f| f.widened_from.is_some()).map(|f| format!("{}:{};", f.id, f.column_type.sql_name())).collect()
}

/// (lower, upper) bounds of `file`'s columns, as (field id, bytes).
pub(super) fn of(file: &DataFile, leaves: &BTreeMap<u32, &Field>) -> (Vec<(i32, Vec<u8>)>, Vec<(i32, Vec<u8>)>) {
    let mut lower = Vec::new();
    let mut upper = Vec::new();
    for s in &file.stats {
        let Some(field) = leaves.get(&s.field) else { continue };
        let bytes = |text: &Option<String>| text.as_deref().and_then(|t| bound(&field.column_type, t));
        if let (Some(min), Some(max)) = (bytes(&s.min), bytes(&s.max)) {
            lower.push((s.field as i32, min));
            upper.push((s.field as i32, max));
        }
    }
    (lower, upper)
}

/// `text` (a statistic of a `column_type` column) as Iceberg's bound bytes.
fn bound(column_type: &ColumnType, text: &str) -> Option<Vec<u8>> {
    let epoch = NaiveDate::from_ymd_opt(1970, 1, 1)?;
    match column_type {
        ColumnType::Boolean => match text {
            "true" => Some(vec![1]),
            "false" => Some(vec![0]),
            _ => None,
        },
        ColumnType::Tinyint | ColumnType::Smallint | ColumnType::Int | ColumnType::Utinyint | ColumnType::Usmallint => {
            text.parse::<i32>().ok().map(|v| v.to_le_bytes().to_vec())
        }
        ColumnType::Bigint | ColumnType::Uint => text.parse::<i64>().ok().map(|v| v.to_le_bytes().to_vec()),
        ColumnType::Float => text.parse::<f32>().ok().filter(|v| !v.is_nan()).map(|v| v.to_le_bytes().to_vec()),
        ColumnType::Double => text.parse::<f64>().ok().filter(|v| !v.is_nan()).map(|v| v.to_le_bytes().to_vec()),
        ColumnType::Varchar => Some(text.as_bytes().to_vec()),
        ColumnType::Date => {
            let days = (NaiveDate::parse_from_str(text, "%Y-%m-%d").ok()? - epoch).num_days();
            i32::try_from(days).ok().map(|d| d.to_le_bytes().to_vec())
        }
        ColumnType::Timestamp => DateTime::parse_from_rfc3339(text).ok().map(|t| t.timestamp_micros().to_le_bytes().to_vec()),
        ColumnType::TimestampNtz => {
            NaiveDateTime::parse_from_str(text, "%Y-%m-%dT%H:%M:%S%.f").ok().map(|t| t.and_utc().timestamp_micros().to_le_bytes().to_vec())
        }
        ColumnType::Decimal { scale, .. } => decimal(text, *scale),
        _ => None,
    }
}

/// A decimal's unscaled value, two's complement big-endian in the fewest bytes.
fn decimal(text: &str, scale: u8) -> Option<Vec<u8>> {
    let (negative, digits) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text),
    };
    let (whole, fraction) = digits.split_once('.').unwrap_or((digits, ""));
    if fraction.len() != usize::from(scale) || !format!("{whole}{fraction}").bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let magnitude: i128 = format!("{whole}{fraction}").parse().ok()?;
    let bytes = (if negative { -magnitude } else { magnitude }).to_be_bytes();
    let mut start = 0;
    while start < bytes.len() - 1 {
        let (b, next) = (bytes[start], bytes[start + 1]);
        if (b == 0x00 && next & 0x80 == 0) || (b == 0xff && next & 0x80 != 0) {
            start += 1;
        } else {
            break;
        }
    }
    Some(bytes[start..].to_vec())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounds_are_iceberg_single_values() {
        assert_eq!(bound(&ColumnType::Int, "-2"), Some((-2i32).to_le_bytes().to_vec()));
        assert_eq!(bound(&ColumnType::Bigint, "7"), Some(7i64.to_le_bytes().to_vec()));
        assert_eq!(bound(&ColumnType::Date, "1970-01-02"), Some(1i32.to_le_bytes().to_vec()));
        assert_eq!(bound(&ColumnType::Timestamp, "1970-01-01T00:00:01.5Z"), Some(1_500_000i64.to_le_bytes().to_vec()));
        assert_eq!(bound(&ColumnType::TimestampNtz, "1970-01-01T00:00:01"), Some(1_000_000i64.to_le_bytes().to_vec()));
        assert_eq!(bound(&ColumnType::Double, "NaN"), None);
        let dec = |t: &str| bound(&ColumnType::Decimal { precision: 10, scale: 2 }, t);
        assert_eq!(dec("-12.50"), Some(vec![0xfb, 0x1e]));
        assert_eq!(dec("1.28"), Some(vec![0x00, 0x80]));
        assert_eq!(dec("0.00"), Some(vec![0x00]));
        assert_eq!(dec("-0.01"), Some(vec![0xff]));
        assert_eq!(dec("1.5"), None, "a text of another scale is not guessed");
    }
}

//! Nested values written as JSON text (an NDJSON append's objects and arrays): decoded
//! with every leaf kept as its text, then converted by the one rule, leaf by leaf.
//!
//! Invariant: a number is never read as a float on the way: its text as written goes
//! to `crate::io::values`, so a decimal keeps every digit and `1.5` is refused by an integer.

use std::sync::Arc;

use arrow::array::{new_null_array, Array, ArrayRef, AsArray, StringArray};
use arrow::datatypes::{DataType, Field as ArrowField, Fields, Schema as ArrowSchema};
use arrow::error::ArrowError;
use arrow::json::ReaderBuilder;

use super::{convert, hex_leaf};
use crate::io::values::{to_type, CastFailure, Source};

/// `text` (one JSON value a row; NULL rows stay NULL) as values of the nested type
/// `target`, exactly.
pub(crate) fn from_json_text(text: &StringArray, target: &DataType) -> Result<ArrayRef, CastFailure> {
    let mirror = text_mirror(target);
    let decoded = match decode(text, &mirror, 0..text.len()) {
        Ok(decoded) => decoded,
        Err(_) => {
            let row = (0..text.len()).find(|&i| decode(text, &mirror, i..i + 1).is_err()).unwrap_or(0);
            let why = decode(text, &mirror, row..row + 1).err().map(|e| e.to_string()).unwrap_or_default();
            return Err(CastFailure::Value { row, value: format!("{} ({})", text.value(row), why.trim_start_matches("Json error: ")) });
        }
    };
    convert(&decoded, target, &|leaf, to| {
        if let Some(text) = leaf.as_string_opt::<i32>() {
            if let Some(bytes) = hex_leaf(text, to)? {
                return to_type(&bytes, to, Source::Typed);
            }
        }
        to_type(leaf, to, Source::Any)
    })
}

/// `target`'s shape with text leaves (vectors as lists: their length is checked when
/// converted), every field nullable (`convert` checks `not null`).
fn text_mirror(target: &DataType) -> DataType {
    let field = |f: &ArrowField| ArrowField::new(f.name(), text_mirror(f.data_type()), true);
    match target {
        DataType::List(f) | DataType::FixedSizeList(f, _) => DataType::List(Arc::new(field(f))),
        DataType::Struct(fs) => DataType::Struct(fs.iter().map(|f| field(f)).collect::<Fields>()),
        DataType::Map(entries, sorted) => {
            let DataType::Struct(kv) = entries.data_type() else { return DataType::Utf8 };
            let key = ArrowField::new(kv[0].name(), text_mirror(kv[0].data_type()), false);
            let entries = ArrowField::new(entries.name(), DataType::Struct(Fields::from(vec![key, field(&kv[1])])), false);
            DataType::Map(Arc::new(entries), *sorted)
        }
        _ => DataType::Utf8,
    }
}

/// Rows `rows` of `text` decoded as `mirror`.
fn decode(text: &StringArray, mirror: &DataType, rows: std::ops::Range<usize>) -> Result<ArrayRef, ArrowError> {
    let schema = Arc::new(ArrowSchema::new(vec![ArrowField::new("v", mirror.clone(), true)]));
    let count = rows.len();
    let mut decoder = ReaderBuilder::new(schema).with_coerce_primitive(true).with_batch_size(count.max(1)).build_decoder()?;
    let mut lines = String::new();
    for i in rows {
        if text.is_valid(i) {
            lines.push_str("{\"v\":");
            lines.push_str(text.value(i));
            lines.push_str("}\n");
        } else {
            lines.push_str("{}\n");
        }
    }
    let used = decoder.decode(lines.as_bytes())?;
    if used != lines.len() {
        return Err(ArrowError::JsonError("a value is not one JSON value".into()));
    }
    Ok(decoder.flush()?.map_or_else(|| new_null_array(mirror, 0), |b| b.column(0).clone()))
}

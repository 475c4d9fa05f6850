//! Values of nested columns: the one rule of `crate::io::values` applied field by field
//! (writes), nested fields matched by id (reads), field ids attached for the writer,
//! and nested values read from JSON text (NDJSON appends).
//!
//! Invariants: a struct's fields are matched by name on input and by field id in data
//! files, never by position; every leaf value goes through `crate::io::values::to_type`, so
//! a nested value is stored exactly or refused, as a flat one is.

use std::sync::Arc;

use arrow::array::{
    make_array, new_null_array, Array, ArrayData, ArrayRef, AsArray, FixedSizeListArray, ListArray, MapArray, MutableArrayData,
    StringArray, StructArray,
};
use arrow::buffer::{NullBuffer, OffsetBuffer};
use arrow::compute::{cast_with_options, CastOptions};
use arrow::datatypes::{DataType, Field as ArrowField, FieldRef};
use arrow::error::ArrowError;

mod json;

use crate::format::schema::types::nested::arrow_field_id;
use crate::format::schema::ColumnType;
use crate::io::values::{sql_type_name, to_type, CastFailure, Source};

/// Whether `t` is the Arrow type of a nested column.
pub(crate) fn is_nested(t: &DataType) -> bool {
    matches!(t, DataType::List(_) | DataType::FixedSizeList(..) | DataType::Struct(_) | DataType::Map(..))
}

/// Whether input of type `from` may go into a nested column of type `to` (each nested
/// field then checked): lists from lists (any offsets) and from vectors, vectors from
/// vectors and lists, structs from structs, maps from maps; text from JSON with `Any`.
pub(crate) fn accepts(from: &DataType, to: &DataType, source: Source) -> bool {
    let list = |t: &DataType| {
        matches!(
            t,
            DataType::List(_) | DataType::LargeList(_) | DataType::ListView(_) | DataType::LargeListView(_) | DataType::FixedSizeList(..)
        )
    };
    match (from, to) {
        (DataType::Null, _) => true,
        (DataType::Utf8, _) => source == Source::Any,
        (from, DataType::List(_) | DataType::FixedSizeList(..)) => list(from),
        (DataType::Struct(_), DataType::Struct(_)) | (DataType::Map(..), DataType::Map(..)) => true,
        _ => false,
    }
}

/// How a leaf's values become values of a leaf type.
type Leaf<'a> = &'a dyn Fn(&ArrayRef, &DataType) -> Result<ArrayRef, CastFailure>;

/// `input` as values of the nested Arrow type `target`, exactly (see the module docs).
pub(crate) fn to_nested(input: &ArrayRef, target: &DataType, source: Source) -> Result<ArrayRef, CastFailure> {
    if let (DataType::Utf8, Source::Any) = (input.data_type(), source) {
        return json::from_json_text(input.as_string::<i32>(), target);
    }
    convert(input, target, &|a, t| to_type(a, t, source))
}

/// `input` rebuilt as `target`, field by field; leaves converted by `leaf`.
pub(crate) fn convert(input: &ArrayRef, target: &DataType, leaf: Leaf<'_>) -> Result<ArrayRef, CastFailure> {
    if !is_nested(target) {
        return leaf(input, target);
    }
    let found = || CastFailure::Type { found: sql_type_name(input.data_type()) };
    if input.data_type() == &DataType::Null {
        return Ok(new_null_array(target, input.len()));
    }
    let bad = |e: ArrowError| CastFailure::Type { found: format!("{} ({e})", sql_type_name(input.data_type())) };
    match target {
        DataType::List(to) => {
            let (offsets, values) = list_parts(input).ok_or_else(found)?;
            let values = child(&values, to, &|r| offsets.partition_point(|&o| o as usize <= r).saturating_sub(1), leaf, None)?;
            let offsets = OffsetBuffer::new(offsets.into());
            Ok(Arc::new(ListArray::try_new(to.clone(), offsets, values, input.nulls().cloned()).map_err(bad)?))
        }
        DataType::FixedSizeList(to, n) => {
            let size = *n as usize;
            let (values, nulls) = fixed_values(input, size, false).ok_or_else(found)??;
            // A NULL row's slots are NULL whatever the element allows.
            let slots = nulls.as_ref().map(|n| NullBuffer::from_iter((0..n.len()).flat_map(|r| std::iter::repeat_n(n.is_valid(r), size))));
            let values = child(&values, to, &|r| r / size.max(1), leaf, slots.as_ref())?;
            Ok(Arc::new(FixedSizeListArray::try_new(to.clone(), *n, values, nulls).map_err(bad)?))
        }
        DataType::Struct(fields) => {
            let DataType::Struct(from_fields) = input.data_type() else { return Err(found()) };
            let s = input.as_struct();
            if let Some(extra) = from_fields.iter().find(|f| fields.find(f.name()).is_none()) {
                return Err(CastFailure::Type { found: format!("a struct with a field '{}' the column does not have", extra.name()) });
            }
            let mut children = Vec::with_capacity(fields.len());
            for to in fields {
                let column = match from_fields.find(to.name()) {
                    Some((i, _)) => s.column(i).clone(),
                    None => new_null_array(to.data_type(), input.len()),
                };
                children.push(child_of_struct(&column, to, input.nulls(), leaf)?);
            }
            Ok(Arc::new(StructArray::try_new(fields.clone(), children, input.nulls().cloned()).map_err(bad)?))
        }
        DataType::Map(entries, sorted) => {
            let DataType::Map(..) = input.data_type() else { return Err(found()) };
            let m = input.as_map();
            let offsets: Vec<i32> = m.offsets().to_vec();
            let row_of = |r: usize| offsets.partition_point(|&o| o as usize <= r).saturating_sub(1);
            let DataType::Struct(kv) = entries.data_type() else { return Err(found()) };
            let keys = child(m.keys(), &kv[0], &row_of, leaf, None)?;
            let values = child(m.values(), &kv[1], &row_of, leaf, None)?;
            let entries_array = StructArray::try_new(kv.clone(), vec![keys, values], None).map_err(bad)?;
            Ok(Arc::new(
                MapArray::try_new(entries.clone(), m.offsets().clone(), entries_array, input.nulls().cloned(), *sorted).map_err(bad)?,
            ))
        }
        _ => Err(found()),
    }
}

/// A list-like array's offsets (as i32: a list column holds fewer than 2^31 values per
/// file) and values.
fn list_parts(input: &ArrayRef) -> Option<(Vec<i32>, ArrayRef)> {
    Some(match input.data_type() {
        DataType::List(_) => {
            let l = input.as_list::<i32>();
            (l.offsets().to_vec(), l.values().clone())
        }
        DataType::LargeList(_) => {
            let l = input.as_list::<i64>();
            (l.offsets().iter().map(|&o| i32::try_from(o).ok()).collect::<Option<Vec<_>>>()?, l.values().clone())
        }
        DataType::FixedSizeList(_, n) => {
            let l = input.as_fixed_size_list();
            ((0..=input.len() as i32).map(|i| i * n).collect(), l.values().slice(0, input.len() * *n as usize))
        }
        // List views (values in any order) as the lists they spell.
        DataType::ListView(f) | DataType::LargeListView(f) => {
            return list_parts(&arrow::compute::cast(input, &DataType::LargeList(f.clone())).ok()?);
        }
        _ => return None,
    })
}

/// A list-like array's values as a vector column's, and its rows' validity: `size`
/// values for each row (a NULL row takes `size` NULL slots). `None`: not a list; `Err`:
/// a row of another length. With `empty_is_null` (data files), an empty row is NULL: a
/// vector under a NULL struct or list reads from Parquet as an empty list.
type FixedParts = (ArrayRef, Option<NullBuffer>);
fn fixed_values(input: &ArrayRef, size: usize, empty_is_null: bool) -> Option<Result<FixedParts, CastFailure>> {
    let (offsets, values) = list_parts(input)?;
    if matches!(input.data_type(), DataType::FixedSizeList(..)) {
        return Some(Ok((values, input.nulls().cloned())));
    }
    // Every row valid and `size` long, back to back (a vector read from Parquet): the
    // values as they are.
    let first = offsets[0] as usize;
    if input.null_count() == 0 && offsets.iter().enumerate().all(|(i, &o)| o as usize == first + i * size) {
        return Some(Ok((values.slice(first, input.len() * size), None)));
    }
    // Else copied run by run, `size` NULL slots for a NULL row.
    let data = values.to_data();
    let mut out = MutableArrayData::new(vec![&data], true, input.len() * size);
    let mut valid = Vec::with_capacity(input.len());
    for row in 0..input.len() {
        let (start, end) = (offsets[row] as usize, offsets[row + 1] as usize);
        let null = input.is_null(row) || (empty_is_null && start == end && size > 0);
        valid.push(!null);
        let grown = if null {
            out.try_extend_nulls(size)
        } else if end - start != size {
            return Some(Err(CastFailure::Value { row, value: format!("a list of {} values (the column holds {size})", end - start) }));
        } else {
            out.try_extend(0, start, end)
        };
        if let Err(e) = grown {
            return Some(Err(CastFailure::Type { found: e.to_string() }));
        }
    }
    let nulls = NullBuffer::from(valid);
    Some(Ok((make_array(out.freeze()), (nulls.null_count() > 0).then_some(nulls))))
}

/// The values of a list's or map's field, converted; `row_of` maps a value's index to
/// its row for messages. A field that is not nullable takes no NULL.
fn child(
    values: &ArrayRef,
    to: &FieldRef,
    row_of: &dyn Fn(usize) -> usize,
    leaf: Leaf<'_>,
    slots: Option<&NullBuffer>,
) -> Result<ArrayRef, CastFailure> {
    let out = convert(values, to.data_type(), leaf).map_err(|e| match e {
        CastFailure::Value { row, value } => CastFailure::Value { row: row_of(row), value },
        other => other,
    })?;
    if !to.is_nullable() && out.logical_null_count() > 0 {
        if let Some(i) = (0..out.len()).find(|&i| out.is_null(i) && slots.is_none_or(|s| s.is_valid(i))) {
            return Err(CastFailure::Value { row: row_of(i), value: format!("NULL in {} (not null)", to.name()) });
        }
    }
    Ok(out)
}

/// A struct's field, converted; NULL is refused in a field that is not nullable, where
/// the struct itself is not NULL.
fn child_of_struct(column: &ArrayRef, to: &FieldRef, parent: Option<&NullBuffer>, leaf: Leaf<'_>) -> Result<ArrayRef, CastFailure> {
    let out = convert(column, to.data_type(), leaf)?;
    if !to.is_nullable() && out.logical_null_count() > 0 {
        if let Some(row) = (0..out.len()).find(|&i| out.is_null(i) && parent.is_none_or(|p| p.is_valid(i))) {
            return Err(CastFailure::Value { row, value: format!("NULL in {} (not null)", to.name()) });
        }
    }
    Ok(out)
}

/// A data file's nested column as the table's type `column` (Arrow type `out`): nested
/// fields matched by field id, fields the file lacks read as NULL, widened leaves cast.
pub(crate) fn by_id(input: &ArrayRef, column: &ColumnType, out: &DataType) -> Result<ArrayRef, ArrowError> {
    if input.data_type() == out {
        return Ok(input.clone());
    }
    let rows = input.len();
    match (column, out) {
        (ColumnType::Struct(fields), DataType::Struct(out_fields)) => {
            let DataType::Struct(file_fields) = input.data_type() else { return Err(mismatch(input, out)) };
            let s = input.as_struct();
            let children = fields
                .iter()
                .zip(out_fields)
                .map(|(f, of)| match file_fields.iter().position(|ff| arrow_field_id(ff) == Some(f.id)) {
                    Some(i) => by_id(s.column(i), &f.column_type, of.data_type()),
                    None => Ok(new_null_array(of.data_type(), rows)),
                })
                .collect::<Result<Vec<_>, _>>()?;
            Ok(Arc::new(StructArray::try_new(out_fields.clone(), children, s.nulls().cloned())?))
        }
        (ColumnType::List(element), DataType::List(of)) => {
            let l = input.as_list_opt::<i32>().ok_or_else(|| mismatch(input, out))?;
            let values = by_id(l.values(), &element.column_type, of.data_type())?;
            Ok(Arc::new(ListArray::try_new(of.clone(), l.offsets().clone(), values, l.nulls().cloned())?))
        }
        // Parquet has no fixed-size lists: a vector is read as a list of its size.
        (ColumnType::Vector(element, _), DataType::FixedSizeList(of, n)) => {
            let Some(Ok((values, nulls))) = fixed_values(input, *n as usize, true) else { return Err(mismatch(input, out)) };
            let values = by_id(&values, &element.column_type, of.data_type())?;
            Ok(Arc::new(FixedSizeListArray::try_new(of.clone(), *n, values, nulls)?))
        }
        (ColumnType::Map(key, value), DataType::Map(entries, sorted)) => {
            let m = input.as_map_opt().ok_or_else(|| mismatch(input, out))?;
            let DataType::Struct(kv) = entries.data_type() else { return Err(mismatch(input, out)) };
            let keys = by_id(m.keys(), &key.column_type, kv[0].data_type())?;
            let values = by_id(m.values(), &value.column_type, kv[1].data_type())?;
            let entries_array = StructArray::try_new(kv.clone(), vec![keys, values], None)?;
            Ok(Arc::new(MapArray::try_new(entries.clone(), m.offsets().clone(), entries_array, m.nulls().cloned(), *sorted)?))
        }
        // A leaf: widened (an old file holds the narrower type), or uuid bytes.
        _ => cast_with_options(input, out, &CastOptions { safe: false, ..Default::default() }),
    }
}

fn mismatch(input: &ArrayRef, out: &DataType) -> ArrowError {
    ArrowError::SchemaError(format!("a data file's column of type {} does not match the table's {out}", input.data_type()))
}

/// `array` relabelled as `to`, a type of the same layout whose nested fields differ only
/// in names and metadata (the writer attaches field ids this way, copying no values).
pub(crate) fn relabel(array: &ArrayRef, to: &DataType) -> Result<ArrayRef, ArrowError> {
    if array.data_type() == to {
        return Ok(array.clone());
    }
    Ok(make_array(relabel_data(array.to_data(), to)?))
}

fn relabel_data(data: ArrayData, to: &DataType) -> Result<ArrayData, ArrowError> {
    let fields: Vec<&ArrowField> = match to {
        DataType::List(f) | DataType::LargeList(f) | DataType::FixedSizeList(f, _) | DataType::Map(f, _) => vec![f.as_ref()],
        DataType::Struct(fs) => fs.iter().map(|f| f.as_ref()).collect(),
        _ => return Ok(data),
    };
    let children =
        data.child_data().iter().zip(fields).map(|(c, f)| relabel_data(c.clone(), f.data_type())).collect::<Result<Vec<_>, _>>()?;
    data.into_builder().data_type(to.clone()).child_data(children).build()
}

/// Text for a leaf of a nested value read from JSON: bytes are written as hex (as the
/// JSON output prints them; a UUID may keep its hyphens).
pub(crate) fn hex_leaf(text: &StringArray, target: &DataType) -> Result<Option<ArrayRef>, CastFailure> {
    if !matches!(target, DataType::Binary | DataType::FixedSizeBinary(_)) {
        return Ok(None);
    }
    let plain: StringArray = text.iter().map(|v| v.map(|v| v.replace('-', ""))).collect();
    let bytes = crate::io::values::unhex(&plain)
        .map_err(|row| CastFailure::Value { row, value: format!("{} (bytes are written in hex)", text.value(row)) })?;
    Ok(Some(Arc::new(bytes)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::schema::Schema;
    use arrow::array::{Int32Array, Int64Array};

    #[test]
    fn structs_match_fields_by_name_and_refuse_what_does_not_fit() {
        let s = Schema::parse("p struct<a bigint not null, b list<int>>").unwrap();
        let target = s.fields[0].column_type.arrow_type();
        let a: ArrayRef = Arc::new(Int32Array::from(vec![1, 2]));
        let b: ArrayRef = Arc::new(ListArray::from_iter_primitive::<arrow::datatypes::Int64Type, _, _>(vec![Some(vec![Some(1)]), None]));
        let input: ArrayRef = Arc::new(StructArray::from(vec![
            (Arc::new(ArrowField::new("b", b.data_type().clone(), true)), b.clone()),
            (Arc::new(ArrowField::new("a", DataType::Int32, true)), a),
        ]));
        let out = to_nested(&input, &target, Source::Typed).unwrap();
        assert_eq!(out.data_type(), &target);
        assert_eq!(out.as_struct().column(0).as_primitive::<arrow::datatypes::Int64Type>(), &Int64Array::from(vec![1, 2]));
        let big: ArrayRef = Arc::new(ListArray::from_iter_primitive::<arrow::datatypes::Int64Type, _, _>(vec![Some(vec![Some(1 << 40)])]));
        let one: ArrayRef = Arc::new(Int32Array::from(vec![7]));
        let too_big: ArrayRef = Arc::new(StructArray::from(vec![
            (Arc::new(ArrowField::new("a", DataType::Int32, true)), one),
            (Arc::new(ArrowField::new("b", big.data_type().clone(), true)), big),
        ]));
        assert!(matches!(to_nested(&too_big, &target, Source::Typed), Err(CastFailure::Value { row: 0, .. })));
        let text: ArrayRef = Arc::new(StringArray::from(vec![Some(r#"{"a": 1, "b": [1, null, 3]}"#), None, Some(r#"{"a": null}"#)]));
        assert!(matches!(to_nested(&text, &target, Source::Any), Err(CastFailure::Value { row: 2, .. })));
        let text: ArrayRef = Arc::new(StringArray::from(vec![Some(r#"{"a": 1, "b": [1, null, 3]}"#), None, Some(r#"{"a": 5}"#)]));
        let out = to_nested(&text, &target, Source::Any).unwrap();
        assert_eq!((out.len(), out.null_count()), (3, 1));
    }
}

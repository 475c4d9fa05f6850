//! One transaction's changes as the feed gives them: the rows it removed, then the rows
//! it added, each row with its kind (a row id on both sides is an update). Pure:
//! batches in, batches out; no row is copied (a kind column is added to each batch).

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use arrow::array::{ArrayRef, AsArray, BooleanArray, Int64Array, RecordBatch, StringArray, TimestampNanosecondArray};
use arrow::buffer::OffsetBuffer;
use arrow::datatypes::{DataType, Field as ArrowField, Int64Type, Schema as ArrowSchema, SchemaRef};
use arrow::error::ArrowError;

use super::{DELETE, INSERT, POSTIMAGE, PREIMAGE};

/// The rows `removed`, then the rows `added` (each batch's last column its row id),
/// each batch with a last `_change_type` column: a removed row whose id is among the
/// added is an update's preimage (else a delete), an added row whose id is among the
/// removed its postimage (else an insert). In a restore, a row removed and added again
/// with the same values is no change (both rows are left out).
pub(super) fn classify(
    schema: &SchemaRef,
    removed: Vec<RecordBatch>,
    added: Vec<RecordBatch>,
    restore: bool,
) -> Result<Vec<RecordBatch>, ArrowError> {
    let id_column = schema.fields().len() - 1;
    let ids = |batches: &[RecordBatch]| -> Vec<i64> {
        batches.iter().flat_map(|b| b.column(id_column).as_primitive::<Int64Type>().values().iter().copied()).collect()
    };
    let (removed_ids, added_ids) = (ids(&removed), ids(&added));
    let (removed_paired, added_paired) = paired(&removed_ids, &added_ids);
    let mut fields: Vec<arrow::datatypes::FieldRef> = schema.fields().iter().cloned().collect();
    fields.push(Arc::new(ArrowField::new("_change_type", DataType::Utf8, false)));
    let output: SchemaRef = Arc::new(ArrowSchema::new(fields));
    let mut out = Vec::with_capacity(removed.len() + added.len());
    for (batches, paired, kinds) in [(removed, removed_paired, (PREIMAGE, DELETE)), (added, added_paired, (POSTIMAGE, INSERT))] {
        let mut at = 0;
        for batch in batches {
            let rows = batch.num_rows();
            let kind = StringArray::from_iter_values(paired[at..at + rows].iter().map(|&p| if p { kinds.0 } else { kinds.1 }));
            at += rows;
            let mut columns = batch.columns().to_vec();
            columns.push(Arc::new(kind));
            out.push(RecordBatch::try_new(output.clone(), columns)?);
        }
    }
    if restore {
        out = without_unchanged_pairs(out, id_column)?;
    }
    Ok(out.into_iter().filter(|b| b.num_rows() > 0).collect())
}

/// For each of `left` and `right`, whether each id is also on the other side. Each side
/// is usually in id order: then one merge walk, else hashing.
fn paired(left: &[i64], right: &[i64]) -> (Vec<bool>, Vec<bool>) {
    let sorted = |side: &[i64]| side.windows(2).all(|w| w[0] < w[1]);
    if !(sorted(left) && sorted(right)) {
        let (l, r): (HashSet<i64>, HashSet<i64>) = (left.iter().copied().collect(), right.iter().copied().collect());
        return (left.iter().map(|id| r.contains(id)).collect(), right.iter().map(|id| l.contains(id)).collect());
    }
    let (mut in_left, mut in_right) = (vec![false; left.len()], vec![false; right.len()]);
    let (mut i, mut j) = (0, 0);
    while i < left.len() && j < right.len() {
        match left[i].cmp(&right[j]) {
            std::cmp::Ordering::Less => i += 1,
            std::cmp::Ordering::Greater => j += 1,
            std::cmp::Ordering::Equal => {
                (in_left[i], in_right[j]) = (true, true);
                (i, j) = (i + 1, j + 1);
            }
        }
    }
    (in_left, in_right)
}

/// `batches` (classified) without the pairs whose table columns (those before
/// `id_column`) are equal on both sides.
fn without_unchanged_pairs(batches: Vec<RecordBatch>, id_column: usize) -> Result<Vec<RecordBatch>, ArrowError> {
    let Some(first) = batches.first() else { return Ok(batches) };
    let converter = arrow::row::RowConverter::new(
        first.schema().fields()[..id_column].iter().map(|f| arrow::row::SortField::new(f.data_type().clone())).collect(),
    )?;
    let rows: Vec<arrow::row::Rows> =
        batches.iter().map(|b| converter.convert_columns(&b.columns()[..id_column])).collect::<Result<_, _>>()?;
    // Each preimage's row, by id.
    let mut before: HashMap<i64, (usize, usize)> = HashMap::new();
    for (b, batch) in batches.iter().enumerate() {
        let (ids, kinds) = (batch.column(id_column).as_primitive::<Int64Type>(), batch.column(id_column + 1).as_string::<i32>());
        for r in (0..batch.num_rows()).filter(|&r| kinds.value(r) == PREIMAGE) {
            before.insert(ids.value(r), (b, r));
        }
    }
    let mut unchanged: HashSet<i64> = HashSet::new();
    for (b, batch) in batches.iter().enumerate() {
        let (ids, kinds) = (batch.column(id_column).as_primitive::<Int64Type>(), batch.column(id_column + 1).as_string::<i32>());
        for r in (0..batch.num_rows()).filter(|&r| kinds.value(r) == POSTIMAGE) {
            if before.get(&ids.value(r)).is_some_and(|&(pb, pr)| rows[pb].row(pr) == rows[b].row(r)) {
                unchanged.insert(ids.value(r));
            }
        }
    }
    batches
        .iter()
        .map(|batch| {
            let ids = batch.column(id_column).as_primitive::<Int64Type>();
            let keep: BooleanArray = ids.values().iter().map(|id| Some(!unchanged.contains(id))).collect();
            arrow::compute::filter_record_batch(batch, &keep)
        })
        .collect()
}

/// What each row of a transaction's changes carries besides its columns.
pub(super) struct Stamp<'a> {
    pub version: u64,
    pub txn: &'a str,
    /// The version's time, nanoseconds since the epoch (UTC).
    pub nanos: i64,
}

/// `changes` (table columns, row id, kind) as the feed gives them (`output`): the table
/// columns `given`, then the feed's own.
pub(super) fn stamped(output: &SchemaRef, given: &[usize], changes: &RecordBatch, stamp: &Stamp<'_>) -> Result<RecordBatch, ArrowError> {
    let rows = changes.num_rows();
    let n = changes.num_columns() - 2;
    let mut columns: Vec<ArrayRef> = given.iter().map(|&i| changes.column(i).clone()).collect();
    columns.push(changes.column(n + 1).clone());
    columns.push(changes.column(n).clone());
    columns.push(Arc::new(Int64Array::from_value(stamp.version as i64, rows)));
    columns.push(repeated(stamp.txn, rows));
    columns.push(Arc::new(TimestampNanosecondArray::from_value(stamp.nanos, rows).with_timezone("UTC")));
    RecordBatch::try_new(output.clone(), columns)
}

/// A column of `rows` copies of `value`, built in one buffer.
fn repeated(value: &str, rows: usize) -> ArrayRef {
    let bytes = value.as_bytes().repeat(rows);
    let offsets = OffsetBuffer::from_lengths(std::iter::repeat_n(value.len(), rows));
    Arc::new(StringArray::new(offsets, bytes.into(), None))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn batch(schema: &SchemaRef, values: &[i64], ids: &[i64]) -> RecordBatch {
        RecordBatch::try_new(schema.clone(), vec![Arc::new(Int64Array::from(values.to_vec())), Arc::new(Int64Array::from(ids.to_vec()))])
            .unwrap()
    }

    /// Removed and added rows pair up by id whatever order each side comes in: a pair is
    /// an update, the rest deletes and inserts; the removed rows come first.
    #[test]
    fn rows_pair_by_id_into_updates_deletes_and_inserts() {
        let schema: SchemaRef = Arc::new(ArrowSchema::new(vec![
            ArrowField::new("v", DataType::Int64, false),
            ArrowField::new("_row_id", DataType::Int64, false),
        ]));
        for (removed, added) in [
            ((vec![10, 20, 30], vec![1, 2, 3]), (vec![21, 40], vec![2, 4])),
            ((vec![30, 10, 20], vec![3, 1, 2]), (vec![40, 21], vec![4, 2])),
        ] {
            let out =
                classify(&schema, vec![batch(&schema, &removed.0, &removed.1)], vec![batch(&schema, &added.0, &added.1)], false).unwrap();
            let kinds: Vec<(i64, &str)> = out
                .iter()
                .flat_map(|b| {
                    b.column(1).as_primitive::<Int64Type>().values().iter().copied().zip(b.column(2).as_string::<i32>().iter().flatten())
                })
                .collect();
            let mut sorted = kinds.clone();
            sorted.sort();
            assert_eq!(sorted, [(1, DELETE), (2, POSTIMAGE), (2, PREIMAGE), (3, DELETE), (4, INSERT)]);
            assert!(kinds.iter().position(|k| k.1 == POSTIMAGE) > kinds.iter().position(|k| k.1 == PREIMAGE), "removed rows first");
        }
        let restore = classify(&schema, vec![batch(&schema, &[5, 6], &[9, 8])], vec![batch(&schema, &[5, 7], &[9, 8])], true).unwrap();
        let ids: Vec<i64> = restore.iter().flat_map(|b| b.column(1).as_primitive::<Int64Type>().values().to_vec()).collect();
        assert_eq!(ids, [8, 8], "a restore that gives a row back unchanged changes nothing; a changed one is an update");
    }

    #[test]
    fn a_repeated_value_column_holds_the_value_in_every_row() {
        let column = repeated("abc", 3);
        assert_eq!(column.as_string::<i32>().iter().flatten().collect::<Vec<_>>(), ["abc", "abc", "abc"]);
        assert_eq!(repeated("x", 0).len(), 0);
    }
}

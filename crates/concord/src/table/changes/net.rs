//! Net changes: each row's changes over the range collapsed into one, from its state
//! before the range to its state at the end: a row that existed before and after is an
//! update (its first preimage, its last postimage), one that only existed before a
//! delete (its first preimage), one that only exists after an insert (its last
//! postimage); a row inserted and deleted within the range gives nothing. Each row
//! keeps the version, transaction and time of the change it is taken from.

use std::collections::BTreeMap;
use std::sync::Arc;

use arrow::array::{ArrayRef, AsArray, RecordBatch, StringArray, UInt32Array};
use arrow::datatypes::Int64Type;
use futures::stream::{self, BoxStream, StreamExt, TryStreamExt};

use super::{Reading, DELETE, INSERT, POSTIMAGE, PREIMAGE};
use crate::error::{ChangesError, CorruptObject};

/// `feed` (every change, in order) collapsed, sorted by row id.
pub(super) fn collapse(
    feed: BoxStream<'static, Result<RecordBatch, ChangesError>>,
    read: Arc<Reading>,
) -> BoxStream<'static, Result<RecordBatch, ChangesError>> {
    stream::once(async move {
        let batches: Vec<RecordBatch> = feed.try_collect().await?;
        let all = arrow::compute::concat_batches(&read.output, &batches).map_err(failed)?;
        Ok::<_, ChangesError>(stream::iter(collapsed(&all).map_err(failed)?.into_iter().map(Ok)))
    })
    .try_flatten()
    .boxed()
}

fn failed(e: arrow::error::ArrowError) -> ChangesError {
    CorruptObject { path: "change feed".into(), reason: e.to_string() }.into()
}

/// A row's first and last change in the range.
struct Row {
    /// Its first change's row, if that removed it (it existed before the range).
    before: Option<u32>,
    /// Its last change's row, if that added it (it exists after the range).
    after: Option<u32>,
    first: bool,
}

/// The net changes of `all` (the feed's rows, in order).
fn collapsed(all: &RecordBatch) -> Result<Option<RecordBatch>, arrow::error::ArrowError> {
    if all.num_rows() == 0 {
        return Ok(None);
    }
    let kind_column = all.num_columns() - 5;
    let kinds = all.column(kind_column).as_string::<i32>();
    let ids = all.column(kind_column + 1).as_primitive::<Int64Type>();
    let mut rows: BTreeMap<i64, Row> = BTreeMap::new();
    for i in 0..all.num_rows() {
        let kind = kinds.value(i);
        let row = rows.entry(ids.value(i)).or_insert(Row { before: None, after: None, first: true });
        if row.first && matches!(kind, DELETE | PREIMAGE) {
            row.before = Some(i as u32);
        }
        row.first = false;
        row.after = matches!(kind, INSERT | POSTIMAGE).then_some(i as u32);
    }
    let (mut take, mut net_kinds) = (Vec::new(), Vec::new());
    for row in rows.values() {
        match (row.before, row.after) {
            (Some(b), Some(a)) => {
                take.extend([b, a]);
                net_kinds.extend([PREIMAGE, POSTIMAGE]);
            }
            (Some(b), None) => {
                take.push(b);
                net_kinds.push(DELETE);
            }
            (None, Some(a)) => {
                take.push(a);
                net_kinds.push(INSERT);
            }
            (None, None) => {}
        }
    }
    if take.is_empty() {
        return Ok(None);
    }
    let indices = UInt32Array::from(take);
    let mut columns: Vec<ArrayRef> = all.columns().iter().map(|c| arrow::compute::take(c, &indices, None)).collect::<Result<_, _>>()?;
    columns[kind_column] = Arc::new(StringArray::from(net_kinds));
    Ok(Some(RecordBatch::try_new(all.schema(), columns)?))
}

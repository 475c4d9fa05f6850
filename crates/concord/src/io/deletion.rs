//! Deletion vectors: the row offsets deleted from a fragment, as a roaring bitmap in
//! its portable serialization, stored in `_deletions/<uuid>.bin` (created once).

use std::ops::Range;
use std::sync::Arc;

use bytes::Bytes;
use parquet::arrow::arrow_reader::{RowSelection, RowSelector};
use roaring::RoaringBitmap;

use crate::env::Env;
use crate::error::{OpenError, StorageError};
use crate::format::manifest::DeletionRef;
use crate::format::naming;
use crate::storage::TableStore;

pub(crate) async fn read(store: &TableStore, relative: &str) -> Result<Arc<RoaringBitmap>, OpenError> {
    if let Some(hit) = store.cached_deletion(relative) {
        return Ok(hit);
    }
    let shown = store.display(relative);
    let bytes = store.get_metadata_object(relative).await?.ok_or_else(|| {
        StorageError::new(
            "reading",
            shown.clone(),
            object_store::Error::NotFound { path: shown.clone(), source: "no such deletion vector".into() },
        )
    })?;
    let rows = crate::decode::deletion_vector(&shown, &bytes)?;
    let rows = Arc::new(rows);
    store.cache_deletion(relative, rows.clone());
    Ok(rows)
}

/// Writes `rows` under a fresh name; returns the relative name.
pub(crate) async fn write(store: &TableStore, env: &Env, rows: RoaringBitmap) -> Result<String, StorageError> {
    let mut bytes = Vec::with_capacity(rows.serialized_size());
    rows.serialize_into(&mut bytes).expect("writing to a Vec cannot fail");
    let name = naming::deletion_file_name(env.new_uuid());
    store.put_new(&name, Bytes::from(bytes)).await?;
    store.cache_deletion(&name, Arc::new(rows));
    Ok(name)
}

/// The deletion vector of a fragment (empty if it has none).
pub(crate) async fn of_fragment(store: &TableStore, deletion: Option<&DeletionRef>) -> Result<Arc<RoaringBitmap>, OpenError> {
    match deletion {
        Some(d) => read(store, &d.path).await,
        None => Ok(Arc::new(RoaringBitmap::new())),
    }
}

/// A Parquet row selection over the concatenation of `row_groups` (each a range of
/// row offsets in the file) that skips the rows in `deleted`.
pub(crate) fn selection(row_groups: &[Range<u64>], deleted: &RoaringBitmap) -> RowSelection {
    let mut selectors: Vec<RowSelector> = Vec::new();
    let mut push = |selector: RowSelector| match selectors.last_mut() {
        Some(last) if last.skip == selector.skip => last.row_count += selector.row_count,
        _ => selectors.push(selector),
    };
    for range in row_groups {
        let mut position = range.start;
        let (start, end) = (range.start.min(u32::MAX as u64) as u32, range.end.min(u32::MAX as u64) as u32);
        for row in deleted.range(start..end).map(u64::from) {
            if row > position {
                push(RowSelector::select((row - position) as usize));
            }
            push(RowSelector::skip(1));
            position = row + 1;
        }
        if range.end > position {
            push(RowSelector::select((range.end - position) as usize));
        }
    }
    RowSelection::from(selectors)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn selection_skips_deleted_rows_of_chosen_row_groups() {
        let deleted: RoaringBitmap = [1u32, 2, 7, 12].into_iter().collect();
        // Row groups 0..5 and 10..15 chosen (5..10 pruned).
        let s = selection(&[0..5, 10..15], &deleted);
        let kept: Vec<usize> = s
            .iter()
            .scan(0usize, |pos, sel| {
                let start = *pos;
                *pos += sel.row_count;
                Some((sel.skip, start..*pos))
            })
            .filter(|(skip, _)| !skip)
            .flat_map(|(_, r)| r)
            .collect();
        // Positions in the concatenation: 0..5 are rows 0..5, 5..10 are rows 10..15.
        assert_eq!(kept, vec![0, 3, 4, 5, 6, 8, 9]);
    }
}

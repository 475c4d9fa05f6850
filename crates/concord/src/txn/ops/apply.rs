//! Shared mechanics for building a version's state: adding fragments as a new
//! segment (level by size class) and merging trailing segments (see format::segments).

use crate::env::Env;
use crate::error::CommitError;
use crate::format::manifest::{Fragment, NewFragment, NextIds, Segment, SegmentRef};
use crate::format::segments;
use crate::storage::TableStore;

/// Appends `new` (ids assigned from `next`) to `segments`, then merges.
pub(crate) async fn add_fragments(
    store: &TableStore,
    env: &Env,
    mut segments: Vec<SegmentRef>,
    mut next: NextIds,
    new: &[NewFragment],
) -> Result<(Vec<SegmentRef>, NextIds), CommitError> {
    if new.is_empty() {
        return Ok((segments, next));
    }
    let mut fragments = Vec::with_capacity(new.len());
    for f in new {
        let (id, first_row_id) = match f.first_row_id {
            // Merged from a branch: its rows keep the ids its branch gave them (another
            // chain's block: this chain's counter does not move).
            Some(kept) => (next.take_fragment_id(), kept),
            None => next.assign(f.rows).ok_or(CommitError::RowIdsExhausted { next_row_id: next.row, rows: f.rows })?,
        };
        fragments.push(Fragment { id, files: f.files.clone(), physical_rows: f.rows, deletion: None, first_row_id: Some(first_row_id) });
    }
    let level = segments::level_for(new.len());
    segments.push(store.write_segment(env, level, Segment { fragments }).await?);
    merge_trailing(store, env, &mut segments).await?;
    Ok((segments, next))
}

async fn merge_trailing(store: &TableStore, env: &Env, segments: &mut Vec<SegmentRef>) -> Result<(), CommitError> {
    while let Some(range) = segments::next_merge(segments) {
        let mut fragments = Vec::new();
        for reference in &segments[range.clone()] {
            fragments.extend(store.read_segment(reference).await?.fragments.iter().cloned());
        }
        let level = segments::merged_level(segments[range.start].level, fragments.len());
        let merged = store.write_segment(env, level, Segment { fragments }).await?;
        segments.truncate(range.start);
        segments.push(merged);
    }
    Ok(())
}

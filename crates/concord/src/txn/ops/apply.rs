//! Shared mechanics for building a version's state: adding fragments as a new
//! segment (level by size class) and merging trailing segments (see format::segments).

use crate::env::Env;
use crate::error::CommitError;
use crate::format::manifest::{Fragment, NewFragment, Segment, SegmentRef};
use crate::format::segments;
use crate::storage::TableStore;

/// Appends `new` (ids assigned from `next_fragment_id`) to `segments`, then merges.
pub(crate) async fn add_fragments(
    store: &TableStore,
    env: &Env,
    mut segments: Vec<SegmentRef>,
    mut next_fragment_id: u64,
    new: &[NewFragment],
) -> Result<(Vec<SegmentRef>, u64), CommitError> {
    if new.is_empty() {
        return Ok((segments, next_fragment_id));
    }
    let fragments = new
        .iter()
        .map(|f| {
            let id = next_fragment_id;
            next_fragment_id += 1;
            Fragment { id, files: f.files.clone(), physical_rows: f.rows, deletion: None }
        })
        .collect();
    let level = segments::level_for(new.len());
    segments.push(store.write_segment(env, level, Segment { fragments }).await?);
    merge_trailing(store, env, &mut segments).await?;
    Ok((segments, next_fragment_id))
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

//! Overwrite: the new fragments replace every row of the base version (rebases over
//! everything). Overwrite `--where` (`replace_where`): the rows matching a predicate
//! are deleted as a delete would (re-running over winners the same way) and the new
//! rows added.

use super::apply::add_fragments;
use super::{Cx, NextState};
use crate::error::CommitError;
use crate::format::manifest::{field_id_block_end, Manifest, NewFragment};
use crate::format::schema::Schema;

/// `base` with every row replaced by `fragments`, and its schema by `schema` if given
/// (a merge replaying a branch's restore). (An overwrite `--where` applies as a delete
/// and an append: `delete::DeletionState`.)
pub(super) async fn apply(
    cx: &Cx<'_>,
    base: &Manifest,
    fragments: &[NewFragment],
    schema: Option<&Schema>,
) -> Result<NextState, CommitError> {
    let (segments, next) = add_fragments(cx.store, cx.env, Vec::new(), base.next_ids(), fragments).await?;
    let mut state = NextState { rows_deleted: base.live_rows(), ..NextState::with_segments(base, segments, next) };
    if let Some(restored) = schema {
        // Ids are never reused: the chain's counter goes on from where it is (the
        // restored schema's counts in the branch's block, or, for a branch without
        // one, in this chain's: the larger then).
        let mut restored = restored.clone();
        restored.next_field_id = match field_id_block_end(restored.next_field_id) == field_id_block_end(base.schema.next_field_id) {
            true => restored.next_field_id.max(base.schema.next_field_id),
            false => base.schema.next_field_id,
        };
        state.schema = restored;
    }
    Ok(state)
}

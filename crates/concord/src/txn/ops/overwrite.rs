//! Overwrite: the new fragments replace every row of the base version (rebases over
//! everything). Overwrite `--where` (`replace_where`): the rows matching a predicate
//! are deleted as a delete would (re-running over winners the same way) and the new
//! rows added.

use super::apply::add_fragments;
use super::{Cx, NextState};
use crate::error::CommitError;
use crate::format::manifest::{Manifest, NewFragment};

/// `base` with every row replaced by `fragments`. (An overwrite `--where` applies as a
/// delete and an append: `delete::DeletionState`.)
pub(super) async fn apply(cx: &Cx<'_>, base: &Manifest, fragments: &[NewFragment]) -> Result<NextState, CommitError> {
    let (segments, next) = add_fragments(cx.store, cx.env, Vec::new(), base.next_ids(), fragments).await?;
    Ok(NextState { rows_deleted: base.live_rows(), ..NextState::with_segments(base, segments, next) })
}

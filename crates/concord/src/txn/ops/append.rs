//! Append: adds fragments on top of whatever the base version holds. Rebases over
//! every winner (a schema change is judged by the conflict rules first).

use super::apply::add_fragments;
use super::{Cx, NextState};
use crate::error::CommitError;
use crate::format::manifest::{Manifest, NewFragment};

/// `base` with `fragments` added.
pub(super) async fn apply(cx: &Cx<'_>, base: &Manifest, fragments: &[NewFragment]) -> Result<NextState, CommitError> {
    let (segments, next) = add_fragments(cx.store, cx.env, base.segments.clone(), base.next_ids(), fragments).await?;
    Ok(NextState::with_segments(base, segments, next))
}

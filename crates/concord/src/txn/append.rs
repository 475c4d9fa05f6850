//! Append: adds fragments on top of whatever the base version holds. Rebases over
//! every winner (a schema change is judged by the conflict rules first).

use async_trait::async_trait;

use super::action::{Action, Cx, NextState};
use super::apply::add_fragments;
use crate::error::CommitError;
use crate::format::manifest::{Manifest, NewFragment, Operation};

/// An `append` at commit.
pub(crate) struct AppendAction {
    pub(crate) fragments: Vec<NewFragment>,
}

#[async_trait]
impl Action for AppendAction {
    fn operation(&self) -> Operation {
        Operation::Append { fragments: self.fragments.clone() }
    }

    async fn apply(&mut self, cx: &Cx<'_>, base: &Manifest) -> Result<NextState, CommitError> {
        let (segments, next_fragment_id) =
            add_fragments(cx.store, cx.env, base.segments.clone(), base.next_fragment_id, &self.fragments).await?;
        Ok(NextState::with_segments(base, segments, next_fragment_id))
    }
}

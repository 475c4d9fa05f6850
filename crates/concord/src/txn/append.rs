//! Append: adds fragments on top of whatever the base version holds. Rebases over
//! every winner (a schema change is judged by the conflict rules first).

use async_trait::async_trait;

use super::action::{Action, Cx, NextState};
use super::apply::add_fragments;
use crate::error::CommitError;
use crate::format::manifest::{Manifest, Operation};

/// An `append` at commit.
pub(crate) struct AppendAction(pub Operation);

#[async_trait]
impl Action for AppendAction {
    fn operation(&self) -> &Operation {
        &self.0
    }

    async fn apply(&mut self, cx: &Cx<'_>, base: &Manifest) -> Result<NextState, CommitError> {
        let Operation::Append { fragments } = &self.0 else { unreachable!("an append action holds an append") };
        let (segments, next_fragment_id) = add_fragments(cx.store, cx.env, base.segments.clone(), base.next_fragment_id, fragments).await?;
        Ok(NextState::with_segments(base, segments, next_fragment_id))
    }
}

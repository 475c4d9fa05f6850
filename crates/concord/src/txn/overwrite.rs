//! Overwrite: the new fragments replace every row of the base version (rebases over
//! everything). Overwrite `--where` (`replace_where`): the rows matching a predicate
//! are deleted as a delete would (re-running over winners the same way) and the new
//! rows added.

use async_trait::async_trait;

use super::action::{Action, Cx, NextState};
use super::apply::add_fragments;
use super::conflict::RerunScope;
use super::delete::DeletionState;
use crate::error::CommitError;
use crate::format::manifest::{Manifest, Operation};

/// An `overwrite` of the whole table at commit.
pub(crate) struct OverwriteAction(pub Operation);

#[async_trait]
impl Action for OverwriteAction {
    fn operation(&self) -> &Operation {
        &self.0
    }

    async fn apply(&mut self, cx: &Cx<'_>, base: &Manifest) -> Result<NextState, CommitError> {
        let Operation::Overwrite { fragments } = &self.0 else { unreachable!("an overwrite action holds an overwrite") };
        let (segments, next_fragment_id) = add_fragments(cx.store, cx.env, Vec::new(), base.next_fragment_id, fragments).await?;
        Ok(NextState { rows_deleted: base.live_rows(), ..NextState::with_segments(base, segments, next_fragment_id) })
    }
}

/// An overwrite of the rows matching a predicate at commit.
pub(crate) struct ReplaceWhereAction {
    op: Operation,
    state: DeletionState,
}

impl ReplaceWhereAction {
    pub(super) fn new(op: Operation) -> Self {
        ReplaceWhereAction { op, state: DeletionState::default() }
    }
}

#[async_trait]
impl Action for ReplaceWhereAction {
    fn operation(&self) -> &Operation {
        &self.op
    }

    async fn apply(&mut self, cx: &Cx<'_>, base: &Manifest) -> Result<NextState, CommitError> {
        let Operation::ReplaceWhere { deletions, fragments, .. } = &self.op else { unreachable!("holds a replace_where") };
        self.state.apply(cx, base, deletions, fragments).await
    }

    async fn rerun(&mut self, cx: &Cx<'_>, base: &Manifest, scope: &RerunScope) -> Result<(), CommitError> {
        let Operation::ReplaceWhere { predicate, deletions, .. } = &mut self.op else { unreachable!("holds a replace_where") };
        self.state.rerun_predicate(cx, base, predicate, deletions, scope).await
    }
}

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
use crate::format::manifest::{FragmentDeletion, Manifest, NewFragment, Operation};

/// An `overwrite` of the whole table at commit.
pub(crate) struct OverwriteAction {
    pub(crate) fragments: Vec<NewFragment>,
}

#[async_trait]
impl Action for OverwriteAction {
    fn operation(&self) -> Operation {
        Operation::Overwrite { fragments: self.fragments.clone() }
    }

    async fn apply(&mut self, cx: &Cx<'_>, base: &Manifest) -> Result<NextState, CommitError> {
        let (segments, next_fragment_id) = add_fragments(cx.store, cx.env, Vec::new(), base.next_fragment_id, &self.fragments).await?;
        Ok(NextState { rows_deleted: base.live_rows(), ..NextState::with_segments(base, segments, next_fragment_id) })
    }
}

/// An overwrite of the rows matching a predicate at commit.
pub(crate) struct ReplaceWhereAction {
    pub(crate) predicate: String,
    pub(crate) columns: Vec<u32>,
    pub(crate) deletions: Vec<FragmentDeletion>,
    pub(crate) fragments: Vec<NewFragment>,
    pub(crate) state: DeletionState,
}

#[async_trait]
impl Action for ReplaceWhereAction {
    fn operation(&self) -> Operation {
        Operation::ReplaceWhere {
            predicate: self.predicate.clone(),
            columns: self.columns.clone(),
            deletions: self.deletions.clone(),
            fragments: self.fragments.clone(),
        }
    }

    async fn apply(&mut self, cx: &Cx<'_>, base: &Manifest) -> Result<NextState, CommitError> {
        self.state.apply(cx, base, &self.deletions, &self.fragments).await
    }

    async fn rerun(&mut self, cx: &Cx<'_>, base: &Manifest, scope: &RerunScope) -> Result<(), CommitError> {
        self.state.rerun_predicate(cx, base, &self.predicate, &mut self.deletions, scope).await
    }
}

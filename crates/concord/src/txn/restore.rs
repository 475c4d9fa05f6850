//! Restore: the schema and rows of an old version become the newest state. Reuses the
//! old version's segments as they are (O(1) bytes written). Rebases over every winner.

use async_trait::async_trait;

use super::action::{Action, Cx, NextState};
use crate::error::CommitError;
use crate::format::manifest::{Manifest, Operation};

/// A `restore` at commit.
pub(crate) struct RestoreAction {
    pub(crate) version: u64,
}

#[async_trait]
impl Action for RestoreAction {
    fn operation(&self) -> Operation {
        Operation::Restore { version: self.version }
    }

    async fn apply(&mut self, cx: &Cx<'_>, base: &Manifest) -> Result<NextState, CommitError> {
        let version = self.version;
        let target = cx.store.read_manifest(version).await?.ok_or(CommitError::HistoryRemoved { version })?;
        let mut schema = target.schema.clone();
        schema.next_field_id = schema.next_field_id.max(base.schema.next_field_id);
        Ok(NextState {
            schema,
            segments: target.segments.clone(),
            next_fragment_id: base.next_fragment_id.max(target.next_fragment_id),
            properties: base.properties.clone(),
            rows_deleted: 0,
        })
    }
}

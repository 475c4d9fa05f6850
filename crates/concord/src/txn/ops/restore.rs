//! Restore: the schema and rows of an old version become the newest state. Reuses the
//! old version's segments as they are (O(1) bytes written). Rebases over every winner.

use super::{Cx, NextState};
use crate::error::CommitError;
use crate::format::manifest::Manifest;

/// `base` with the schema and rows of `version`.
pub(super) async fn apply(cx: &Cx<'_>, base: &Manifest, version: u64) -> Result<NextState, CommitError> {
    let target = cx.store.read_manifest(version).await?.ok_or(CommitError::HistoryRemoved { version })?;
    let mut schema = target.schema.clone();
    schema.next_field_id = schema.next_field_id.max(base.schema.next_field_id);
    Ok(NextState {
        schema,
        segments: target.segments.clone(),
        next: base.next_ids().max(target.next_ids()),
        properties: base.properties.clone(),
        rows_deleted: 0,
    })
}

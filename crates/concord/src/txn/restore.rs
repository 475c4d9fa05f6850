//! Restore: the schema and rows of an old version become the newest state. Reuses the
//! old version's segments as they are (O(1) bytes written).

use super::apply::NextState;
use crate::error::CommitError;
use crate::format::manifest::Manifest;
use crate::storage::TableStore;

pub(crate) async fn apply(store: &TableStore, base: &Manifest, version: u64) -> Result<NextState, CommitError> {
    let target = store.read_manifest(version).await?.ok_or(CommitError::HistoryRemoved { version })?;
    let mut schema = target.schema.clone();
    schema.next_field_id = schema.next_field_id.max(base.schema.next_field_id);
    Ok(NextState {
        schema,
        segments: target.segments.clone(),
        next_fragment_id: base.next_fragment_id.max(target.next_fragment_id),
    })
}

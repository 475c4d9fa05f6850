//! Append: adds fragments on top of whatever the base version holds.

use super::apply::{add_fragments, NextState};
use crate::env::Env;
use crate::error::CommitError;
use crate::format::manifest::{Manifest, NewFragment};
use crate::storage::TableStore;

pub(crate) async fn apply(store: &TableStore, env: &Env, base: &Manifest, new: &[NewFragment]) -> Result<NextState, CommitError> {
    let (segments, next_fragment_id) = add_fragments(store, env, base.segments.clone(), base.next_fragment_id, new).await?;
    Ok(NextState { schema: base.schema.clone(), segments, next_fragment_id })
}

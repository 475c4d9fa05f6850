//! Tags and branches as Iceberg refs (FORMAT.md §16, "Refs"): one metadata file with
//! the main chain's version and, for every tag and branch, the snapshot it names, so
//! an Iceberg reader reads a tag or a branch by name (`snapshot_by_name`).
//!
//! Invariants: each version's own metadata file stays a pure function of its chain's
//! versions up to it (refs come and go without a version, so they are never in it);
//! the refs file is a pure function of that version's metadata and the refs' targets
//! (named by a hash of its content, created if absent, written after everything it
//! names), so two publishers write the same file and none is ever rewritten.

use serde_json::{json, Value};
use sha2::{Digest, Sha256};

use super::{metadata_name, publish, put, read_published, snapshot_id, uri, PublishError, DIR};
use crate::error::OpenError;
use crate::storage::TableStore;

/// A tag or a branch head: the version it names on its chain's store.
pub(crate) struct RefTarget<'a> {
    pub(crate) name: String,
    /// A branch (`false`: a tag).
    pub(crate) branch: bool,
    pub(crate) chain: &'a TableStore,
    pub(crate) version: u64,
}

/// Publishes version `version` of the main chain (`main`) and every ref's target, then
/// the metadata file listing them all as refs; returns its URI.
pub(crate) async fn publish_with_refs(main: &TableStore, version: u64, refs: &[RefTarget<'_>]) -> Result<String, PublishError> {
    publish(main, version).await?;
    let mut metadata = read_published(main, version).await?.ok_or(OpenError::Removed { version })?.metadata;
    for r in refs {
        publish(r.chain, r.version).await?;
        let theirs = read_published(r.chain, r.version).await?.ok_or(OpenError::Removed { version: r.version })?.metadata;
        let id = snapshot_id(r.chain, r.version);
        add_snapshot(&mut metadata, &theirs, id);
        let kind = if r.branch { "branch" } else { "tag" };
        metadata["refs"][r.name.as_str()] = json!({"snapshot-id": id, "type": kind});
    }
    let bytes = serde_json::to_vec(&metadata).expect("JSON values serialize");
    let hash: String = Sha256::digest(&bytes)[..8].iter().map(|b| format!("{b:02x}")).collect();
    let name = format!("{}-refs-{hash}.metadata.json", metadata_name(version).trim_end_matches(".metadata.json"));
    debug_assert!(name.starts_with(DIR));
    put(main, &name, bytes).await?;
    Ok(uri(main, &name))
}

/// Lists snapshot `id` of `theirs` (another version's metadata, maybe another chain's)
/// in `metadata`, with its schema (under a schema id of `metadata`'s: an equal schema's,
/// else a new one), and moves the table-wide counters past it.
fn add_snapshot(metadata: &mut Value, theirs: &Value, id: i64) {
    let listed = |m: &Value| m["snapshots"].as_array().and_then(|s| s.iter().find(|s| s["snapshot-id"] == id).cloned());
    let Some(mut snapshot) = listed(theirs) else { return };
    if listed(metadata).is_some() {
        return;
    }
    let their_schema = theirs["schemas"].as_array().and_then(|s| s.iter().find(|s| s["schema-id"] == snapshot["schema-id"]));
    if let Some(schema) = their_schema {
        let schemas = metadata["schemas"].as_array_mut().expect("schemas");
        let schema_id = match schemas.iter().find(|s| s["fields"] == schema["fields"]) {
            Some(ours) => ours["schema-id"].as_i64().unwrap_or(0),
            None => {
                let next = schemas.iter().filter_map(|s| s["schema-id"].as_i64()).max().map_or(0, |m| m + 1);
                let mut schema = schema.clone();
                schema["schema-id"] = json!(next);
                schemas.push(schema);
                next
            }
        };
        snapshot["schema-id"] = json!(schema_id);
    }
    let sequence = snapshot["sequence-number"].as_i64().unwrap_or(0);
    let next_row_id = snapshot["first-row-id"].as_i64().unwrap_or(0) + snapshot["added-rows"].as_i64().unwrap_or(0);
    let last_column_id = theirs["last-column-id"].as_i64().unwrap_or(0);
    for (key, value) in [("last-sequence-number", sequence), ("next-row-id", next_row_id), ("last-column-id", last_column_id)] {
        let now = metadata[key].as_i64().unwrap_or(0);
        metadata[key] = json!(now.max(value));
    }
    metadata["snapshots"].as_array_mut().expect("snapshots").push(snapshot);
}

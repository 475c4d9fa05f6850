//! Each committed version published as an Apache Iceberg (v2) table over the same
//! Parquet files, so that any Iceberg reader (DuckDB, pyiceberg, polars, Spark) reads
//! every version natively (FORMAT.md, "Iceberg metadata").
//!
//! Invariants: the metadata of version N is a pure function of versions <= N (every
//! object's bytes, so two publishers write the same ones, each created if absent);
//! `_iceberg/v<N>.metadata.json` is written last, after every object it names, so a
//! half-published version is never referenced. Publishing never decides a commit:
//! Concord's chain stays the only arbiter.

mod avro;
mod deletes;
mod schema;

use std::collections::BTreeSet;

use serde_json::{json, Value};

use crate::error::{ErrorKind, OpenError, StorageError};
use crate::format::manifest::{Fragment, Manifest, OperationKind};
use crate::storage::TableStore;
use crate::table::Table;

/// The folder of a table's Iceberg metadata.
pub(crate) const DIR: &str = "_iceberg";

/// Publishing Iceberg metadata failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PublishError {
    /// A version could not be read.
    #[error(transparent)]
    Open(#[from] OpenError),
    /// A request failed.
    #[error(transparent)]
    Storage(#[from] StorageError),
    /// The version holds something Iceberg v2 cannot say exactly; nothing of it is
    /// published (a reader would see other values than Concord's).
    #[error("version {version} cannot be published as Iceberg: column '{column}' ({column_type}): {reason}")]
    Unsupported {
        /// The version.
        version: u64,
        /// The column (a dotted path for a nested field).
        column: String,
        /// Its type, or what it has.
        column_type: String,
        /// Why.
        reason: &'static str,
    },
    /// Encoding an Iceberg file failed (a bug: the inputs are Concord's own).
    #[error("encoding {what}: {reason}")]
    Encode {
        /// The file.
        what: String,
        /// The encoder's message.
        reason: String,
    },
}

impl PublishError {
    /// What it means (see [`ErrorKind`]).
    pub fn kind(&self) -> ErrorKind {
        match self {
            PublishError::Open(e) => e.kind(),
            PublishError::Storage(_) => ErrorKind::Storage,
            PublishError::Unsupported { .. } => ErrorKind::InvalidInput,
            PublishError::Encode { .. } => ErrorKind::Corrupt,
        }
    }
}

fn encode_error(what: &str) -> impl Fn(apache_avro::Error) -> PublishError + '_ {
    move |e| PublishError::Encode { what: what.to_string(), reason: e.to_string() }
}

/// The metadata file of version `version`, relative to the table root.
pub(crate) fn metadata_name(version: u64) -> String {
    format!("{DIR}/v{version}.metadata.json")
}

impl Table {
    /// Publishes the Iceberg metadata of this version, and first of every retained
    /// earlier version not yet published (idempotent: a published version costs one
    /// listing); returns the URI of this version's metadata file, for an Iceberg reader.
    pub async fn publish_iceberg(&self) -> Result<String, PublishError> {
        let store = self.store();
        let name = metadata_name(self.version());
        let published: BTreeSet<u64> = store
            .list_dir(DIR)
            .await?
            .into_iter()
            .filter_map(|(n, _)| n.strip_prefix(DIR)?.strip_prefix("/v")?.strip_suffix(".metadata.json")?.parse().ok())
            .collect();
        if !published.contains(&self.version()) {
            let versions: Vec<u64> = store.list_versions().await?.into_iter().filter(|v| *v <= self.version()).collect();
            // From the newest published version before this one (or the oldest retained).
            let start = versions.iter().rposition(|v| published.contains(v));
            let mut previous = match start {
                Some(i) => Some(read_metadata(store, versions[i]).await?),
                None => None,
            };
            for &v in &versions[start.map_or(0, |i| i + 1)..] {
                previous = Some(publish_version(store, v, previous).await?);
            }
        }
        Ok(uri(store, &name))
    }
}

/// The absolute URI of `relative`, as Iceberg metadata names files.
fn uri(store: &TableStore, relative: &str) -> String {
    let shown = store.display(relative);
    if store.local_folder().is_some() {
        format!("file://{shown}")
    } else {
        shown
    }
}

async fn read_metadata(store: &TableStore, version: u64) -> Result<Value, PublishError> {
    let name = metadata_name(version);
    let bytes = store.get_metadata_object(&name).await?.unwrap_or_default();
    serde_json::from_slice(&bytes).map_err(|e| PublishError::Encode { what: store.display(&name), reason: e.to_string() })
}

/// Writes `relative` unless it exists (its bytes are a pure function of the versions,
/// so an existing one is the same); returns its size.
async fn put(store: &TableStore, relative: &str, bytes: Vec<u8>) -> Result<i64, PublishError> {
    let size = bytes.len() as i64;
    store.put_new(relative, bytes::Bytes::from(bytes)).await?;
    Ok(size)
}

/// The Iceberg snapshot operation of a version's transactions.
fn operation(manifest: &Manifest) -> &'static str {
    let kinds: Vec<OperationKind> = manifest.transactions.iter().map(|t| t.operation.kind()).collect();
    if kinds.iter().all(|k| *k == OperationKind::Append) {
        "append"
    } else if kinds.iter().all(|k| *k == OperationKind::Delete) {
        "delete"
    } else {
        "overwrite"
    }
}

/// Publishes version `version` after `previous` (the metadata of the version before it,
/// if published); returns its metadata.
async fn publish_version(store: &TableStore, version: u64, previous: Option<Value>) -> Result<Value, PublishError> {
    let manifest = store.read_manifest(version).await?.ok_or(OpenError::Removed { version })?;
    if let Some((column, column_type, reason)) = schema::first_unsupported(&manifest.schema) {
        return Err(PublishError::Unsupported { version, column, column_type, reason });
    }
    if let Some(f) = manifest.schema.fields.iter().find(|f| f.default.is_some()) {
        let reason = "a column added with a default needs Iceberg v3's initial-default, not yet written (v2 readers would read NULL)";
        return Err(PublishError::Unsupported { version, column: f.name.clone(), column_type: f.column_type.sql_name(), reason });
    }
    let snapshot_id = version as i64;
    let mut previous = previous.unwrap_or_else(|| fresh_metadata(store, &manifest));
    // The schema: an earlier one if equal, else a new id.
    let fields = schema::schema_json(&manifest.schema, 0)["fields"].clone();
    let schemas = previous["schemas"].as_array().cloned().unwrap_or_default();
    let schema_id = match schemas.iter().find(|s| s["fields"] == fields) {
        Some(s) => s["schema-id"].as_i64().unwrap_or(0),
        None => schemas.iter().filter_map(|s| s["schema-id"].as_i64()).max().map_or(0, |m| m + 1),
    };
    let schema = schema::schema_json(&manifest.schema, schema_id as i32);
    let schema_text = schema.to_string();

    let mut manifests = Vec::new();
    let mut total_rows = 0u64;
    for (i, segment) in manifest.segments.iter().enumerate() {
        let fragments: Vec<Fragment> = store.read_segment(segment).await?.fragments.clone();
        // A segment file's manifests are shared by every version that holds it; an
        // inline segment's are the version's own.
        let key = match segment.path.rsplit('/').next().and_then(|n| n.strip_suffix(".json")) {
            Some(stem) if !segment.path.is_empty() => stem.to_string(),
            _ => format!("v{version}-{i}"),
        };
        let mut data = Vec::new();
        let mut deletes = Vec::new();
        for f in &fragments {
            total_rows += f.live_rows();
            let file = &f.files[0];
            let path = uri(store, &file.path);
            let null_value_counts: Vec<(i32, i64)> = file.stats.iter().map(|s| (s.field as i32, s.nulls as i64)).collect();
            data.push(avro::Entry {
                content: 0,
                file_path: path.clone(),
                record_count: f.physical_rows as i64,
                file_size_in_bytes: file.size_bytes as i64,
                value_counts: file.stats.iter().map(|s| (s.field as i32, f.physical_rows as i64)).collect(),
                null_value_counts,
                lower_bounds: Vec::new(),
                upper_bounds: Vec::new(),
                referenced_data_file: None,
            });
            if let Some(deletion) = &f.deletion {
                deletes.push(deletes::publish(store, &deletion.path, &path).await?);
            }
        }
        let name = format!("{DIR}/m-{key}.avro");
        let bytes = avro::manifest(&data, "data", &schema_text).map_err(encode_error(&name))?;
        let length = put(store, &name, bytes).await?;
        let rows = fragments.iter().map(|f| f.physical_rows as i64).sum();
        manifests.push(avro::ManifestFile {
            manifest_path: uri(store, &name),
            manifest_length: length,
            content: 0,
            added_snapshot_id: snapshot_id,
            files: data.len() as i32,
            rows,
        });
        if !deletes.is_empty() {
            let name = format!("{DIR}/d-{key}-v{version}.avro");
            let bytes = avro::manifest(&deletes, "deletes", &schema_text).map_err(encode_error(&name))?;
            let length = put(store, &name, bytes).await?;
            manifests.push(avro::ManifestFile {
                manifest_path: uri(store, &name),
                manifest_length: length,
                content: 1,
                added_snapshot_id: snapshot_id,
                files: deletes.len() as i32,
                rows: deletes.iter().map(|d| d.record_count).sum(),
            });
        }
    }
    let parent = previous["current-snapshot-id"].as_i64().filter(|id| *id >= 0);
    let list = format!("{DIR}/snap-{version}.avro");
    let bytes = avro::manifest_list(&manifests, snapshot_id, parent, version as i64).map_err(encode_error(&list))?;
    put(store, &list, bytes).await?;

    let timestamp_ms = manifest.timestamp.timestamp_millis();
    let mut snapshot = json!({
        "snapshot-id": snapshot_id,
        "sequence-number": version,
        "timestamp-ms": timestamp_ms,
        "manifest-list": uri(store, &list),
        "schema-id": schema_id,
        "summary": {
            "operation": operation(&manifest),
            "total-records": total_rows.to_string(),
            "concord-version": version.to_string(),
        },
    });
    if let Some(parent) = parent {
        snapshot["parent-snapshot-id"] = json!(parent);
    }
    let m = &mut previous;
    if !schemas.iter().any(|s| s["schema-id"].as_i64() == Some(schema_id)) {
        m["schemas"].as_array_mut().expect("schemas").push(schema);
    }
    m["current-schema-id"] = json!(schema_id);
    let last_column_id = m["last-column-id"].as_u64().unwrap_or(0).max(u64::from(schema::last_column_id(&manifest.schema)));
    m["last-column-id"] = json!(last_column_id);
    m["last-sequence-number"] = json!(version);
    m["last-updated-ms"] = json!(timestamp_ms);
    m["properties"] = json!(manifest.properties);
    m["current-snapshot-id"] = json!(snapshot_id);
    m["snapshots"].as_array_mut().expect("snapshots").push(snapshot);
    m["snapshot-log"].as_array_mut().expect("snapshot-log").push(json!({"snapshot-id": snapshot_id, "timestamp-ms": timestamp_ms}));
    m["refs"] = json!({"main": {"snapshot-id": snapshot_id, "type": "branch"}});
    let name = metadata_name(version);
    put(store, &name, serde_json::to_vec_pretty(&previous).expect("JSON values serialize")).await?;
    Ok(previous)
}

/// Metadata before any snapshot: the table's first retained version's identity.
fn fresh_metadata(store: &TableStore, manifest: &Manifest) -> Value {
    let table_uuid = manifest.transactions[0].id;
    json!({
        "format-version": 2,
        "table-uuid": table_uuid.to_string(),
        "location": uri(store, "").trim_end_matches('/'),
        "last-sequence-number": 0,
        "last-updated-ms": manifest.timestamp.timestamp_millis(),
        "last-column-id": 0,
        "schemas": [],
        "current-schema-id": 0,
        "partition-specs": [{"spec-id": 0, "fields": []}],
        "default-spec-id": 0,
        "last-partition-id": 999,
        "sort-orders": [{"order-id": 0, "fields": []}],
        "default-sort-order-id": 0,
        "properties": {},
        "current-snapshot-id": -1,
        "snapshots": [],
        "snapshot-log": [],
        "metadata-log": [],
        "refs": {},
    })
}

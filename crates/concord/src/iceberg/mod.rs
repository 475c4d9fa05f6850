//! Each committed version published as an Apache Iceberg v3 table over the same Parquet
//! files, with Concord's row ids as its row lineage ([`lineage`]), so that any Iceberg
//! reader (DuckDB, pyiceberg, polars, Spark) reads every version natively (FORMAT.md
//! §16).
//!
//! Invariants: the metadata of version N is a pure function of versions <= N (every
//! object's content and size, so two publishers write the same ones, each created if
//! absent; Avro's sync markers and header order may differ);
//! `_iceberg/v<N>.metadata.json` is written last, after every object it names, so a
//! half-published version is never referenced. Publishing never decides a commit:
//! Concord's chain stays the only arbiter.

mod avro;
mod bounds;
mod deletes;
mod lineage;
mod schema;

use std::collections::{BTreeMap, BTreeSet, HashMap};

use serde_json::{json, Value};
use sha2::{Digest, Sha256};

use crate::error::{ErrorKind, OpenError, StorageError};
use crate::format::manifest::{Fragment, Manifest, Operation, OperationKind, SegmentRef, PROPERTY_ICEBERG_PUBLISH};
use crate::format::schema::Field;
use crate::storage::TableStore;

/// Snapshots a metadata file lists: the version's and the ones before it, so its size
/// (written once per version) does not grow with the history; an older version is read
/// from its own metadata file.
const SNAPSHOTS_LISTED: usize = 100;

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
    /// The version holds something Iceberg cannot say exactly; nothing of it is
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

/// Publishes the Iceberg metadata of `version`, and first of every retained earlier
/// version not yet published (idempotent: a published version costs one listing);
/// returns the URI of its metadata file, for an Iceberg reader.
pub(crate) async fn publish(store: &TableStore, version: u64) -> Result<String, PublishError> {
    let published = published_versions(store).await?;
    if !published.contains(&version) {
        publish_from_listing(store, version, &published).await?;
    }
    Ok(uri(store, &metadata_name(version)))
}

/// After a writer created `version`: publishes it (and first any unpublished one before
/// it) when the version's properties ask for it ([`PROPERTY_ICEBERG_PUBLISH`]). Never
/// fails the commit, and costs no request when publishing is off (the created manifest
/// is in the handle's cache). A failure leaves the version to the next writer or to
/// `concord iceberg publish`.
pub(crate) async fn publish_if_asked(store: &TableStore, version: u64) {
    let Some(manifest) = store.cached_manifest(version) else { return };
    if manifest.properties.get(PROPERTY_ICEBERG_PUBLISH).is_none_or(|v| v != "true") {
        return;
    }
    let _ = publish_after(store, version).await;
}

/// Versions whose metadata file exists (one listing).
async fn published_versions(store: &TableStore) -> Result<BTreeSet<u64>, PublishError> {
    Ok(store
        .list_dir(DIR)
        .await?
        .into_iter()
        .filter_map(|(n, _)| n.strip_prefix(DIR)?.strip_prefix("/v")?.strip_suffix(".metadata.json")?.parse().ok())
        .collect())
}

/// Publishes `version` after a commit: from the version before it when that one is
/// published (two reads: its metadata and manifest list), else from the listing.
async fn publish_after(store: &TableStore, version: u64) -> Result<(), PublishError> {
    if let Some(previous) = match version.checked_sub(1) {
        Some(v) => read_published(store, v).await?,
        None => None,
    } {
        publish_version(store, version, Some(previous)).await?;
        return Ok(());
    }
    let published = published_versions(store).await?;
    if !published.contains(&version) {
        publish_from_listing(store, version, &published).await?;
    }
    Ok(())
}

/// Publishes every retained version up to `version` after the newest published one
/// before it (`published`), or from the oldest retained.
async fn publish_from_listing(store: &TableStore, version: u64, published: &BTreeSet<u64>) -> Result<(), PublishError> {
    let versions: Vec<u64> = store.list_versions().await?.into_iter().filter(|v| *v <= version).collect();
    let start = versions.iter().rposition(|v| published.contains(v));
    let mut previous = match start {
        Some(i) => read_published(store, versions[i]).await?,
        None => None,
    };
    for &v in &versions[start.map_or(0, |i| i + 1)..] {
        previous = Some(publish_version(store, v, previous).await?);
    }
    Ok(())
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

/// A published version: its metadata, and its manifest list's rows (the next version
/// reuses the manifests it shares).
struct Published {
    metadata: Value,
    manifests: Vec<avro::ManifestFile>,
}

fn list_name(version: u64) -> String {
    format!("{DIR}/snap-{version}.avro")
}

/// Version `version`'s published metadata, if its metadata file exists.
async fn read_published(store: &TableStore, version: u64) -> Result<Option<Published>, PublishError> {
    let name = metadata_name(version);
    let Some(bytes) = store.get_metadata_object(&name).await? else { return Ok(None) };
    let metadata =
        serde_json::from_slice(&bytes).map_err(|e| PublishError::Encode { what: store.display(&name), reason: e.to_string() })?;
    // Without its manifest list (removed by hand) the next version rebuilds every manifest.
    let manifests = match store.get_metadata_object(&list_name(version)).await? {
        Some(bytes) => avro::read_manifest_list(&bytes).unwrap_or_default(),
        None => Vec::new(),
    };
    Ok(Some(Published { metadata, manifests }))
}

/// Writes `relative` unless it exists (its content is a pure function of the versions,
/// so an existing one holds the same entries, in an object of the same size); returns
/// its size.
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

/// The names of a segment's data and delete manifests: by the segment file's name, or
/// for an inline segment by a digest of the files each lists, so a segment unchanged
/// from the version before keeps its manifests (and its name says what it holds). The
/// data manifest's name also carries the widened columns' types (`widened`, from
/// [`bounds::widened`]): its bounds are written in them.
fn manifest_names(segment: &SegmentRef, widened: &str) -> (String, String) {
    let hex = |h: Sha256| h.finalize()[..16].iter().map(|b| format!("{b:02x}")).collect::<String>();
    let types = if widened.is_empty() {
        String::new()
    } else {
        let mut h = Sha256::new();
        h.update(widened);
        format!("-w{}", &hex(h)[..8])
    };
    let key = match &segment.inline {
        None => segment.path.rsplit('/').next().and_then(|n| n.strip_suffix(".json")).unwrap_or(&segment.path).to_string(),
        Some(fragments) => {
            let mut data = Sha256::new();
            let mut deletes = Sha256::new();
            for f in fragments {
                for file in &f.files {
                    data.update(format!("{} {} {}\n", f.id, f.physical_rows, file.path));
                }
                if let Some(d) = &f.deletion {
                    deletes.update(format!("{} {}\n", f.id, d.path));
                }
            }
            return (format!("{DIR}/ml-i{}{types}.avro", hex(data)), format!("{DIR}/dl-i{}.avro", hex(deletes)));
        }
    };
    (format!("{DIR}/ml-{key}{types}.avro"), format!("{DIR}/dl-{key}.avro"))
}

/// The objects of `_iceberg/` that version `manifest` may reference but its deletion
/// vectors' position delete files ([`delete_file_name`]): vacuum keeps them.
pub(crate) fn referenced_names(manifest: &Manifest) -> Vec<String> {
    let mut names = vec![metadata_name(manifest.version), list_name(manifest.version)];
    let widened = bounds::widened(&bounds::leaf_types(&manifest.schema));
    for segment in &manifest.segments {
        let (data, deletes) = manifest_names(segment, &widened);
        names.extend([data, deletes]);
    }
    names
}

pub(crate) use deletes::file_name as delete_file_name;

/// Appends the manifests of `segment` to `manifests`: the previous version's when it
/// lists them (no request), else built and written.
async fn segment_manifests(
    store: &TableStore,
    segment: &SegmentRef,
    version: &mut VersionSchema<'_>,
    reuse: &HashMap<&str, &avro::ManifestFile>,
    snapshot_id: i64,
    manifests: &mut Vec<avro::ManifestFile>,
) -> Result<(), PublishError> {
    let (data_name, delete_name) = manifest_names(segment, &version.widened);
    let (data_uri, delete_uri) = (uri(store, &data_name), uri(store, &delete_name));
    let reused = |uri: &str| reuse.get(uri).map(|m| (*m).clone());
    let (mut data_row, mut delete_row) = (reused(&data_uri), reused(&delete_uri));
    if segment.inline.is_none() && data_row.is_some() {
        // A segment file's two manifests were written together: its delete manifest is
        // listed exactly when it has one.
        manifests.extend(data_row.into_iter().chain(delete_row));
        return Ok(());
    }
    let fragments: Vec<Fragment> = match &segment.inline {
        Some(fragments) => fragments.clone(),
        None => store.read_segment(segment).await?.fragments.clone(),
    };
    let with_deletes = fragments.iter().any(|f| f.deletion.is_some());
    if data_row.is_some() && (!with_deletes || delete_row.is_some()) {
        manifests.extend(data_row.into_iter().chain(delete_row.filter(|_| with_deletes)));
        return Ok(());
    }
    let seqs = version.lineage.seqs(store, &fragments, &data_name).await?;
    if data_row.is_none() {
        let data: Vec<avro::Entry> = fragments.iter().zip(&seqs).map(|(f, s)| data_entry(store, f, *s, &version.leaves)).collect();
        let bytes = avro::manifest(&data, "data", &version.text).map_err(encode_error(&data_name))?;
        let length = put(store, &data_name, bytes).await?;
        data_row = Some(avro::ManifestFile::new(data_uri, length, 0, snapshot_id, &data));
    }
    if !with_deletes {
        delete_row = None;
    } else if delete_row.is_none() {
        let mut deletes = Vec::new();
        for (f, s) in fragments.iter().zip(&seqs) {
            if let Some(deletion) = &f.deletion {
                // Its data file's data sequence number (a position delete applies to data
                // files whose data sequence number is at most its own); when it was added
                // is not known (0).
                let seqs = avro::Seqs { data: s.data, file: 0 };
                deletes.push(deletes::publish(store, &deletion.path, &uri(store, &f.files[0].path), seqs).await?);
            }
        }
        let bytes = avro::manifest(&deletes, "deletes", &version.text).map_err(encode_error(&delete_name))?;
        let length = put(store, &delete_name, bytes).await?;
        delete_row = Some(avro::ManifestFile::new(delete_uri, length, 1, snapshot_id, &deletes));
    }
    manifests.extend(data_row.into_iter().chain(delete_row));
    Ok(())
}

/// What a version's manifests are written in: its schema's Iceberg JSON, flat fields
/// and widened ones, and its files' lineage.
struct VersionSchema<'a> {
    text: String,
    leaves: BTreeMap<u32, &'a Field>,
    widened: String,
    lineage: lineage::Lineage,
}

/// A data file's manifest entry.
fn data_entry(store: &TableStore, f: &Fragment, seqs: avro::Seqs, leaves: &BTreeMap<u32, &Field>) -> avro::Entry {
    let file = &f.files[0];
    let (lower_bounds, upper_bounds) = bounds::of(file, leaves);
    avro::Entry {
        content: 0,
        file_path: uri(store, &file.path),
        record_count: f.physical_rows as i64,
        file_size_in_bytes: file.size_bytes as i64,
        value_counts: file.stats.iter().map(|s| (s.field as i32, f.physical_rows as i64)).collect(),
        null_value_counts: file.stats.iter().map(|s| (s.field as i32, s.nulls as i64)).collect(),
        lower_bounds,
        upper_bounds,
        referenced_data_file: None,
        seqs,
        first_row_id: Some(lineage::first_row_id(f)),
    }
}

/// Publishes version `version` after `previous` (the version before it, if published);
/// returns what it published.
async fn publish_version(store: &TableStore, version: u64, previous: Option<Published>) -> Result<Published, PublishError> {
    let manifest = store.read_manifest(version).await?.ok_or(OpenError::Removed { version })?;
    let manifest = counted(store, manifest).await?;
    check_supported(&manifest)?;
    let snapshot_id = version as i64;
    let (mut metadata, previous_manifests) = match previous {
        Some(p) => (p.metadata, p.manifests),
        None => (fresh_metadata(store, &manifest), Vec::new()),
    };
    // The schema: an earlier one if equal, else a new id.
    let fields = schema::schema_json(&manifest.schema, 0)["fields"].clone();
    let schemas = metadata["schemas"].as_array().cloned().unwrap_or_default();
    let schema_id = match schemas.iter().find(|s| s["fields"] == fields) {
        Some(s) => s["schema-id"].as_i64().unwrap_or(0),
        None => schemas.iter().filter_map(|s| s["schema-id"].as_i64()).max().map_or(0, |m| m + 1),
    };
    let schema = schema::schema_json(&manifest.schema, schema_id as i32);
    let leaves = bounds::leaf_types(&manifest.schema);
    let widened = bounds::widened(&leaves);
    let lineage = lineage_of(store, &manifest, &previous_manifests, &widened).await?;
    let mut written_in = VersionSchema { text: schema.to_string(), widened, leaves, lineage };

    // A restore's segments are the restored version's: its manifests are reused too.
    let restored = restored_manifests(store, &manifest).await?;
    let reuse: HashMap<&str, &avro::ManifestFile> =
        previous_manifests.iter().chain(&restored).map(|m| (m.manifest_path.as_str(), m)).collect();
    let mut manifests = Vec::new();
    for segment in &manifest.segments {
        segment_manifests(store, segment, &mut written_in, &reuse, snapshot_id, &mut manifests).await?;
    }
    let total_rows: u64 = manifest.segments.iter().map(|s| s.live_rows).sum();
    let parent = metadata["current-snapshot-id"].as_i64().filter(|id| *id >= 0);
    let list = list_name(version);
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
    set_row_lineage(&mut metadata, &mut snapshot, &manifest);
    let m = &mut metadata;
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
    for (key, entry) in [("snapshots", snapshot), ("snapshot-log", json!({"snapshot-id": snapshot_id, "timestamp-ms": timestamp_ms}))] {
        let list = m[key].as_array_mut().expect("a list");
        list.push(entry);
        let excess = list.len().saturating_sub(SNAPSHOTS_LISTED);
        list.drain(..excess);
    }
    m["refs"] = json!({"main": {"snapshot-id": snapshot_id, "type": "branch"}});
    let name = metadata_name(version);
    put(store, &name, serde_json::to_vec(&metadata).expect("JSON values serialize")).await?;
    Ok(Published { metadata, manifests })
}

/// Refuses a version holding a column Iceberg cannot say exactly (its type or default).
fn check_supported(manifest: &Manifest) -> Result<(), PublishError> {
    let version = manifest.version;
    if let Some((column, column_type, reason)) = schema::first_unsupported(&manifest.schema) {
        return Err(PublishError::Unsupported { version, column, column_type, reason });
    }
    for f in &manifest.schema.fields {
        if let Err(reason) = schema::initial_default(f) {
            return Err(PublishError::Unsupported { version, column: f.name.clone(), column_type: f.column_type.sql_name(), reason });
        }
    }
    Ok(())
}

/// The lineage of `manifest`'s files: the fragments of its rebuilt segments that it did
/// not write were listed by the previous version's data manifests it does not list.
async fn lineage_of(
    store: &TableStore,
    manifest: &Manifest,
    previous: &[avro::ManifestFile],
    widened: &str,
) -> Result<lineage::Lineage, PublishError> {
    let kept: BTreeSet<String> = manifest.segments.iter().map(|s| uri(store, &manifest_names(s, widened).0)).collect();
    let replaced: Vec<&str> =
        previous.iter().filter(|m| m.content == 0 && !kept.contains(&m.manifest_path)).map(|m| m.manifest_path.as_str()).collect();
    lineage::Lineage::new(store, manifest, &replaced).await
}

/// Iceberg v3's row lineage fields of `manifest`'s snapshot and metadata: every data
/// file has its fragment's first row id, so the ids the version's rows took from its
/// chain's counter lie below its `next_row_id`, the table's `next-row-id`.
fn set_row_lineage(metadata: &mut Value, snapshot: &mut Value, manifest: &Manifest) {
    metadata["format-version"] = json!(3);
    let first_row_id = metadata["next-row-id"].as_i64().unwrap_or(0);
    let next_row_id = (manifest.next_row_id as i64).max(first_row_id);
    metadata["next-row-id"] = json!(next_row_id);
    snapshot["first-row-id"] = json!(first_row_id);
    snapshot["added-rows"] = json!(next_row_id - first_row_id);
}

/// `manifest` as Iceberg readers are to read it: a multi-table transaction's part that
/// was aborted has the state of the version before it (FORMAT.md §18); one not decided
/// yet is not published.
async fn counted(store: &TableStore, manifest: std::sync::Arc<Manifest>) -> Result<std::sync::Arc<Manifest>, PublishError> {
    let Some(multi) = manifest.multi() else { return Ok(manifest) };
    match crate::txn::multi::outcome(store, multi).await? {
        Some(crate::format::multi::Outcome::Committed) => Ok(manifest),
        None => Err(OpenError::NotCommitted { version: manifest.version }.into()),
        Some(crate::format::multi::Outcome::Aborted) => {
            let before = manifest.version - 1;
            let parent = store.read_manifest(before).await?.ok_or(OpenError::Removed { version: before })?;
            let mut state = (*manifest).clone();
            (state.segments, state.schema, state.properties) = (parent.segments.clone(), parent.schema.clone(), parent.properties.clone());
            Ok(std::sync::Arc::new(state))
        }
    }
}

/// The manifests of the version a restore in `manifest` restores, when it is published.
async fn restored_manifests(store: &TableStore, manifest: &Manifest) -> Result<Vec<avro::ManifestFile>, PublishError> {
    let mut manifests = Vec::new();
    for t in &manifest.transactions {
        if let Operation::Restore { version } = t.operation {
            if let Some(p) = read_published(store, version).await? {
                manifests.extend(p.manifests);
            }
        }
    }
    Ok(manifests)
}

/// Metadata before any snapshot: the table's first retained version's identity.
fn fresh_metadata(store: &TableStore, manifest: &Manifest) -> Value {
    let table_uuid = manifest.transactions[0].id;
    json!({
        "format-version": 3,
        "table-uuid": table_uuid.to_string(),
        "location": uri(store, "").trim_end_matches('/'),
        "last-sequence-number": 0,
        "next-row-id": 0,
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

//! The root manifest of one version, and the records it references.
//!
//! A root is small: it names fragment-list *segments* (immutable, shared with other
//! versions) instead of listing every fragment, so committing a small change costs
//! O(changed fragments) bytes whatever the table size. See FORMAT.md.

mod ids;
mod operation;

pub(crate) use ids::{field_id_block_end, field_id_block_start, field_ids_left_for, row_id_block_start};
pub use ids::{NextIds, FIELD_ID_BLOCK, MAIN_FIELD_IDS, MAIN_ROW_IDS, ROW_ID_BLOCK, ROW_ID_BLOCKS};
pub use operation::{Operation, OperationKind};

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::schema::Schema;

/// Newest on-disk format this library reads and writes. Format 2 (FORMAT.md §4, §5,
/// §12): small segments inline in the root, and a list of transactions per version;
/// format 1 roots (one `transaction`, every segment an object) are read as well.
/// Format 3 (§7) adds column types beyond format 2's nine; a version is written in
/// format 3 only if its schema has one (`format_for`).
pub const FORMAT_VERSION: u32 = 3;

/// The format a version with `schema` is written in: the oldest that holds its types,
/// so a table of format 2's types stays readable by format 2 readers.
pub(crate) fn format_for(schema: &Schema) -> u32 {
    if schema.fields.iter().all(|f| f.column_type.in_format_2()) {
        2
    } else {
        FORMAT_VERSION
    }
}

/// Table property naming the default isolation level.
pub const PROPERTY_ISOLATION: &str = "isolation";

/// Table property turning cooperative commits (FORMAT.md §8) on (`true`, the default)
/// or off (`false`).
pub const PROPERTY_COOPERATIVE: &str = "cooperative_commits";

/// Table property: `true` makes the writer that commits a version publish it as Iceberg
/// metadata afterwards (FORMAT.md §16); `false`, the default, leaves it to
/// `concord iceberg publish`.
pub const PROPERTY_ICEBERG_PUBLISH: &str = "iceberg.publish";

/// Table property: a number N; once a version holds more than N fragments smaller than
/// the compaction target, the writer that committed it compacts a bounded group of them
/// after its commit (FORMAT.md §9). Absent (the default): no automatic compaction.
pub const PROPERTY_AUTO_COMPACT: &str = "auto_compact.small_fragments";

/// How a write that reads rows (delete, update, merge) treats rows committed concurrently.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum IsolationLevel {
    /// Every version N equals its transaction applied to version N-1.
    #[default]
    Serializable,
    /// Predicates see only the rows of the transaction's read version.
    Snapshot,
}

impl std::fmt::Display for IsolationLevel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl IsolationLevel {
    /// The name, as in the `isolation` property.
    pub fn as_str(self) -> &'static str {
        match self {
            IsolationLevel::Serializable => "serializable",
            IsolationLevel::Snapshot => "snapshot",
        }
    }
    /// By name (case-insensitive).
    pub fn parse(s: &str) -> Option<Self> {
        match s.trim().to_ascii_lowercase().as_str() {
            "serializable" => Some(IsolationLevel::Serializable),
            "snapshot" => Some(IsolationLevel::Snapshot),
            _ => None,
        }
    }
}

/// One Parquet file holding some columns of a fragment.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct DataFile {
    /// Relative to the table root, e.g. `data/<uuid>.parquet`.
    pub path: String,
    /// Field id of each column of the file, in column order.
    pub fields: Vec<u32>,
    /// The file's size (its footer is read from the end).
    pub size_bytes: u64,
    /// Statistics of its columns over all its rows, deleted ones included (so they bound
    /// the live rows of any version): readers skip a fragment whose statistics prove a
    /// filter false. Empty when unknown (files written before statistics existed).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stats: Vec<ColumnStats>,
}

/// Statistics of one column of a data file (FORMAT.md §6). Values are text of the
/// column's type, as a default is; a bound that is absent is unknown.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ColumnStats {
    /// The column's field id.
    pub field: u32,
    /// Its NULL values.
    pub nulls: u64,
    /// Its smallest non-NULL value (absent if every value is NULL, or not recorded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min: Option<String>,
    /// Its largest non-NULL value (absent likewise).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max: Option<String>,
}

/// Rows written by a transaction before commit: no fragment id yet.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct NewFragment {
    /// Its data files (one in format 1).
    pub files: Vec<DataFile>,
    /// Rows in it.
    pub rows: u64,
    /// Set in a branch merge: the first row id the fragment had on its branch, which it
    /// keeps (its rows keep their ids). Absent otherwise: assigned at commit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_row_id: Option<u64>,
}

/// A fragment of a committed version. Its id is assigned at commit time.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Fragment {
    /// Unique in the table, assigned at commit in commit order.
    pub id: u64,
    /// Its data files (one in format 1).
    pub files: Vec<DataFile>,
    /// Rows in the data files, deleted ones included.
    pub physical_rows: u64,
    /// Deletion vector: relative path of a file listing deleted row offsets.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deletion: Option<DeletionRef>,
    /// The id of its first row (see [`Fragment::row_id`]), assigned at commit from the
    /// version's [`Manifest::next_row_id`]; absent in fragments committed before row
    /// ids were counted, whose first row's id is `id << 32`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_row_id: Option<u64>,
}

/// A fragment's deletion vector.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct DeletionRef {
    /// Relative to the table root.
    pub path: String,
    /// Rows it marks deleted.
    pub deleted_rows: u64,
}

impl SegmentRef {
    /// What identifies the segment's contents across versions: its file's path, or for
    /// an inline segment its fragments themselves (two inline segments with equal
    /// fragments are the same segment).
    pub fn identity(&self) -> std::borrow::Cow<'_, str> {
        match &self.inline {
            None => std::borrow::Cow::Borrowed(&self.path),
            Some(fragments) => std::borrow::Cow::Owned(serde_json::to_string(fragments).expect("fragments always serialize")),
        }
    }
}

impl Fragment {
    /// Rows not deleted.
    pub fn live_rows(&self) -> u64 {
        self.physical_rows - self.deletion.as_ref().map_or(0, |d| d.deleted_rows)
    }

    /// The id of its first row: its rows' ids, where the data file carries none, follow
    /// from it by offset.
    pub fn first_row_id(&self) -> u64 {
        self.first_row_id.unwrap_or(self.id << 32)
    }

    /// The row id its row at `offset` takes when its data file carries none for it (see
    /// [`ROW_ID_FIELD`]): [`Fragment::first_row_id`] plus `offset`.
    pub fn row_id(&self, offset: u64) -> i64 {
        (self.first_row_id() + offset) as i64
    }
}

/// The reserved field id of a data file's row-id column (Iceberg's `_row_id`). Every
/// row of a table has a row id, unique in the table and its branches, that stays with
/// it through updates, merges, compaction, rebases and branch merges (FORMAT.md §6,
/// "Row ids"): a row's id is its data file's `_row_id` value where the file has the
/// column and the value is not NULL (a row rewritten from an earlier one keeps that
/// row's id), else its fragment's first row id plus its offset ([`Fragment::row_id`]:
/// a row inserted by the fragment's transaction).
pub const ROW_ID_FIELD: u32 = 2_147_483_540;

/// The name of the row-id column in data files and in change feeds.
pub const ROW_ID_COLUMN: &str = "_row_id";

/// Reference from a root to an immutable segment listing fragments: a file of its own,
/// or (format 2, at most [`INLINE_SEGMENT_FRAGMENTS`] fragments) held in the root.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct SegmentRef {
    /// Relative to the table root, e.g. `_segments/<uuid>.json`; empty when inline.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub path: String,
    /// Merge tier; see FORMAT.md ("Segments").
    pub level: u8,
    /// Fragments in the segment.
    pub fragments: u64,
    /// Their live rows.
    pub live_rows: u64,
    /// The smallest fragment id in it.
    pub min_fragment_id: u64,
    /// The largest fragment id in it.
    pub max_fragment_id: u64,
    /// An inline segment's fragments (then `path` is empty).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inline: Option<Vec<Fragment>>,
}

/// Segments of at most this many fragments are held in the root manifest instead of
/// a file of their own, so a small commit writes no segment object (format 2).
pub const INLINE_SEGMENT_FRAGMENTS: usize = 8;

/// Contents of a segment file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Segment {
    pub fragments: Vec<Fragment>,
}

/// Rows a delete removes from one fragment: a deletion-vector file holding only the
/// rows this transaction deletes (a delta), to be unioned with the fragment's vector.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct FragmentDeletion {
    /// The fragment.
    pub fragment_id: u64,
    /// Relative to the table root, e.g. `_deletions/<uuid>.bin`.
    pub path: String,
    /// Rows it deletes.
    pub rows: u64,
}

/// One `SET column = expression` of an update.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Assignment {
    /// The column set.
    pub column: String,
    /// SQL expression over the row's current values.
    pub expr: String,
}

/// A column added by a schema change. Its field id is assigned at commit time (the
/// base version's `next_field_id`), so concurrent adds never share an id; a merge's
/// replay of a branch's add keeps the branch's.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct NewColumn {
    /// Its name.
    pub name: String,
    /// Its type.
    #[serde(rename = "type")]
    pub column_type: super::schema::ColumnType,
    /// Whether it may be NULL.
    pub nullable: bool,
    /// The default's value as text castable to the type (evaluated at prepare time).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<String>,
    /// The field id of the struct it is added to; `None`: a column of the table.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<u32>,
    /// The id a branch gave it, kept when a merge replays the add (the branch's files
    /// name it; from the branch's block, no other chain gives it). `None`: assigned at
    /// commit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub field_id: Option<u32>,
}

/// What a merge whose source lacks some columns records to re-run (see
/// [`Operation::Merge`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct PartialMerge {
    /// Field ids of the table columns the source has (the keys among them).
    pub present: Vec<u32>,
    /// The first `updated` fragments hold updated rows; the rest inserted ones.
    pub updated: usize,
}

/// One fragment a compaction rewrites, as it read it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct CompactInput {
    /// The fragment.
    pub fragment_id: u64,
    /// The fragment's deletion vector when read (`None`: no deleted rows).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deletion: Option<String>,
    /// Its live rows when read.
    pub live_rows: u64,
}

/// Small or deletion-riddled fragments rewritten as `outputs` (their live rows, in order).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct CompactGroup {
    /// The fragments rewritten, as read.
    pub inputs: Vec<CompactInput>,
    /// Their live rows, written anew.
    pub outputs: Vec<NewFragment>,
}

/// One transaction of a version.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct TransactionRecord {
    /// The transaction's id.
    pub id: Uuid,
    /// The version it was prepared against (`None` for version 0).
    pub read_version: Option<u64>,
    /// What it did (as re-runs extended it).
    pub operation: Operation,
    /// Commit attempts it took (1 = no contention).
    pub attempts: u32,
    /// Versions committed by others between `read_version` and this one.
    pub rebased_over: Vec<u64>,
    /// Whether part of the operation was re-executed against a winner's changes.
    pub rerun: bool,
    /// Rows this version removed (deleted, or replaced by an overwrite).
    #[serde(default)]
    pub rows_deleted: u64,
    /// The caller's idempotency key, if any.
    pub idempotency_key: Option<String>,
    /// The idempotency key of the job commit it was part of (every member of the job
    /// carries it), if the job was given one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job_idempotency_key: Option<String>,
    /// Set when another writer's commit carried this announced transaction (cooperative
    /// commits): the id of that writer's own (first) transaction in the version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub carried_by: Option<Uuid>,
    /// Set in a branch merge's version: the transaction of the branch this one replays.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub merged_from: Option<MergedFrom>,
    /// Set when the transaction is part of a multi-table transaction (FORMAT.md §18):
    /// it counts only once that transaction's decision says committed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub multi: Option<MultiRef>,
}

impl TransactionRecord {
    /// The record of a transaction the writer makes itself (a create, a branch's first
    /// version, a withdrawal): one attempt, no rebase, no key, nothing deleted.
    pub(crate) fn own(id: Uuid, read_version: Option<u64>, operation: Operation) -> TransactionRecord {
        TransactionRecord {
            id,
            read_version,
            operation,
            attempts: 1,
            rebased_over: Vec::new(),
            rerun: false,
            rows_deleted: 0,
            idempotency_key: None,
            job_idempotency_key: None,
            carried_by: None,
            merged_from: None,
            multi: None,
        }
    }
}

/// The multi-table transaction a table's transaction is part of (FORMAT.md §18). Paths
/// are of the one store every table of it is in, from that store's root.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct MultiRef {
    /// Its id: its decision is the chain of records `_multi/<id>` of the primary table.
    pub id: Uuid,
    /// The primary table's root (the first of its tables by root).
    pub primary: String,
    /// Every table's root, in order.
    pub tables: Vec<String>,
    /// When its first attempt started (UTC).
    pub started: DateTime<Utc>,
    /// Past this (UTC), any writer may abort it.
    pub deadline: DateTime<Utc>,
}

impl Manifest {
    /// The multi-table transaction the version's transactions are part of, if any (a
    /// version holding one holds only its transactions).
    pub fn multi(&self) -> Option<&MultiRef> {
        self.transactions.iter().find_map(|t| t.multi.as_ref())
    }
}

/// The branch transaction a merged transaction replays (FORMAT.md §17).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct MergedFrom {
    /// The branch's name.
    pub branch: String,
    /// The branch's chain (its name may be given to another branch later).
    pub chain: Uuid,
    /// The branch's version that committed it.
    pub version: u64,
    /// Its id on the branch.
    pub transaction: Uuid,
}

/// The root manifest of one version: `_versions/<inverted version>.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "ManifestOnDisk")]
#[non_exhaustive]
pub struct Manifest {
    /// [`FORMAT_VERSION`] of the writer.
    pub format_version: u32,
    /// This version.
    pub version: u64,
    /// The version it follows (`None` for version 0).
    pub parent_version: Option<u64>,
    /// Commit time, UTC; strictly greater than the parent's.
    pub timestamp: DateTime<Utc>,
    /// The transactions that made it, never empty, in the order they apply: a version
    /// is its parent with each applied in turn. One, except in a shared version (group
    /// or job commit). Format 1 stored the one as `transaction`.
    pub transactions: Vec<TransactionRecord>,
    /// The table's schema at this version.
    pub schema: Schema,
    /// The fragment-list segments.
    pub segments: Vec<SegmentRef>,
    /// The id the next added fragment gets.
    pub next_fragment_id: u64,
    /// The id the next added fragment's first row gets. Absent in versions written
    /// before row ids were counted: `next_fragment_id << 32` (above every id derived
    /// then).
    pub next_row_id: u64,
    /// Table properties (e.g. `isolation`).
    pub properties: BTreeMap<String, String>,
}

/// A root as stored, format 1 (`transaction`) or 2 (`transactions`).
#[derive(Deserialize)]
struct ManifestOnDisk {
    format_version: u32,
    version: u64,
    parent_version: Option<u64>,
    timestamp: DateTime<Utc>,
    #[serde(default)]
    transaction: Option<TransactionRecord>,
    #[serde(default)]
    transactions: Option<Vec<TransactionRecord>>,
    schema: Schema,
    segments: Vec<SegmentRef>,
    next_fragment_id: u64,
    #[serde(default)]
    next_row_id: Option<u64>,
    properties: BTreeMap<String, String>,
}

impl TryFrom<ManifestOnDisk> for Manifest {
    type Error = &'static str;
    fn try_from(m: ManifestOnDisk) -> Result<Self, Self::Error> {
        let transactions = match (m.transaction, m.transactions) {
            (None, Some(_)) if m.format_version < 2 => return Err("a format 1 root with a list of transactions (format 2)"),
            (Some(one), None) => vec![one],
            (None, Some(list)) if !list.is_empty() => list,
            (None, Some(_)) => return Err("a version with no transaction"),
            (None, None) => return Err("missing field `transactions`"),
            (Some(_), Some(_)) => return Err("both `transaction` and `transactions`"),
        };
        Ok(Manifest {
            format_version: m.format_version,
            version: m.version,
            parent_version: m.parent_version,
            timestamp: m.timestamp,
            transactions,
            schema: m.schema,
            segments: m.segments,
            next_fragment_id: m.next_fragment_id,
            next_row_id: match m.next_row_id {
                Some(row) => row,
                None if m.next_fragment_id < MAIN_ROW_IDS >> 32 => m.next_fragment_id << 32,
                None => return Err("`next_fragment_id` too large for row ids derived from fragment ids"),
            },
            properties: m.properties,
        })
    }
}

#[cfg(test)]
impl Manifest {
    /// Version 5 on version 4, made at `timestamp`, of `transactions` (each read at
    /// version 4, one attempt), with no data: for tests of rules over versions.
    pub(crate) fn test_version(timestamp: DateTime<Utc>, schema: Schema, transactions: Vec<(Operation, Option<Uuid>)>) -> Manifest {
        let record = |(operation, carried_by)| TransactionRecord {
            id: Uuid::new_v4(),
            read_version: Some(4),
            operation,
            attempts: 1,
            rebased_over: vec![],
            rerun: false,
            rows_deleted: 0,
            idempotency_key: None,
            job_idempotency_key: None,
            carried_by,
            merged_from: None,
            multi: None,
        };
        Manifest {
            format_version: 1,
            version: 5,
            parent_version: Some(4),
            timestamp,
            transactions: transactions.into_iter().map(record).collect(),
            schema,
            segments: vec![],
            next_fragment_id: 12,
            next_row_id: 12 << 32,
            properties: Default::default(),
        }
    }
}

impl Manifest {
    /// The version's first transaction (its only one, unless the version is shared).
    pub fn transaction(&self) -> &TransactionRecord {
        self.transactions.first().expect("a manifest always has a transaction")
    }

    /// Whether the version carried other writers' announced transactions (cooperative
    /// commits): its writer waited in line, or led it.
    pub(crate) fn carried_others(&self) -> bool {
        self.transactions.iter().any(|t| t.carried_by.is_some())
    }

    /// Rows not deleted.
    pub fn live_rows(&self) -> u64 {
        self.segments.iter().map(|s| s.live_rows).sum()
    }

    /// The ids the version's next fragment gets.
    pub fn next_ids(&self) -> NextIds {
        NextIds { fragment: self.next_fragment_id, row: self.next_row_id }
    }

    /// Fragments in the version.
    pub fn fragment_count(&self) -> u64 {
        self.segments.iter().map(|s| s.fragments).sum()
    }

    /// The table's default isolation level.
    pub fn isolation(&self) -> IsolationLevel {
        self.properties.get(PROPERTY_ISOLATION).and_then(|s| IsolationLevel::parse(s)).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Row ids come from the chain's range: the main chain's below `MAIN_ROW_IDS`, a
    /// branch's inside its block; the last id of each is never assigned, so a counter
    /// at the end of its range still names it.
    #[test]
    fn row_ids_are_assigned_inside_the_chain_range_and_never_past_it() {
        let mut main = NextIds { fragment: 7, row: 100 };
        assert_eq!(main.assign(10), Some((7, 100)));
        assert_eq!(main, NextIds { fragment: 8, row: 110 });
        let mut full = NextIds { fragment: 0, row: MAIN_ROW_IDS - 3 };
        assert_eq!(full.assign(3), None, "the main chain's last id is never assigned");
        assert_eq!(full.assign(2), Some((0, MAIN_ROW_IDS - 3)));
        assert_eq!(full.assign(0), Some((1, MAIN_ROW_IDS - 1)), "a fragment of no rows takes no id");
        let start = row_id_block_start(5);
        let mut branch = NextIds { fragment: 3, row: start };
        assert_eq!(branch.assign(ROW_ID_BLOCK), None, "a block's last id is never assigned");
        assert_eq!(branch.assign(ROW_ID_BLOCK - 1), Some((3, start)));
        assert_eq!(branch.assign(1), None, "the block is used up: the next block is another branch's");
        assert!(row_id_block_start(ROW_ID_BLOCKS - 1) + ROW_ID_BLOCK - 1 <= i64::MAX as u64, "every id fits a signed 64-bit integer");
        let last = field_id_block_start(ROW_ID_BLOCKS - 1);
        assert!(last.checked_add(FIELD_ID_BLOCK).is_some_and(|end| end - 1 <= i32::MAX as u32), "every field id fits Iceberg's i32");
        let end = last + FIELD_ID_BLOCK - 1;
        assert_eq!((field_id_block_end(3), field_id_block_end(last), field_id_block_end(end)), (MAIN_FIELD_IDS - 1, end, end));
        assert_ne!(field_id_block_end(end), field_id_block_end(end + 1), "a used-up block's counter is still its own");
    }

    /// A version written before row ids were counted has no `next_row_id`: it is read as
    /// `next_fragment_id << 32`, above every id derived from a fragment id then.
    #[test]
    fn a_version_without_a_row_counter_counts_from_its_fragment_ids() {
        let mut manifest =
            serde_json::to_value(Manifest::test_version(Utc::now(), Schema::parse("id bigint").unwrap(), vec![(Operation::Create, None)]))
                .unwrap();
        manifest.as_object_mut().unwrap().remove("next_row_id");
        manifest["format_version"] = serde_json::json!(2);
        let read: Manifest = serde_json::from_value(manifest.clone()).unwrap();
        assert_eq!(read.next_row_id, 12 << 32);
        manifest["next_fragment_id"] = serde_json::json!(MAIN_ROW_IDS >> 32);
        assert!(serde_json::from_value::<Manifest>(manifest).is_err(), "ids derived from such fragment ids would leave the main range");
        let legacy = Fragment { id: 3, files: vec![], physical_rows: 2, deletion: None, first_row_id: None };
        assert_eq!((legacy.row_id(0), legacy.row_id(1)), (3 << 32, (3 << 32) + 1));
    }
}

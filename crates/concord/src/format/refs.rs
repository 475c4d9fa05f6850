//! References (FORMAT.md §17): tags, branches and branches' row-id blocks, each kept as
//! a chain of records (see `storage::Records`). Pure data: their on-disk form and
//! names.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// Folder of the tags' record chains: `_refs/tags/<name>`.
pub(crate) const TAGS_DIR: &str = "_refs/tags";
/// Folder of the branches' record chains: `_refs/branches/<name>`.
pub(crate) const BRANCHES_DIR: &str = "_refs/branches";
/// The chain of row-id block claims: record `k` claims block `k` for one branch.
pub(crate) const BLOCKS: &str = "_refs/blocks";
/// Folder of the branches' version chains: `_branches/<chain id>`.
pub(crate) const CHAINS_DIR: &str = "_branches";
/// The name of the main branch (the table's own chain, at the table root).
pub const MAIN_BRANCH: &str = "main";
/// Longest tag or branch name.
pub(crate) const MAX_NAME_BYTES: usize = 128;

/// Whether `name` is usable as a tag, branch or consumer name: letters, digits, `-`,
/// `_` and `.`, not starting with `.` and not all digits (a version number), at most
/// [`MAX_NAME_BYTES`].
pub(crate) fn usable_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_NAME_BYTES
        && !name.starts_with('.')
        && !name.bytes().all(|b| b.is_ascii_digit())
        && name.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

/// The folder of chain `chain`'s versions (a branch's).
pub(crate) fn chain_dir(chain: Uuid) -> String {
    format!("{CHAINS_DIR}/{chain}")
}

/// Which chain of versions: the main one (the table root) or a branch's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind", content = "id")]
pub(crate) enum ChainId {
    /// The table's own chain.
    Main,
    /// A branch's, under `_branches/<id>`.
    Branch(Uuid),
}

impl ChainId {
    /// Its folder relative to the table root (`""` for the main chain).
    pub(crate) fn prefix(self) -> String {
        match self {
            ChainId::Main => String::new(),
            ChainId::Branch(id) => format!("{}/", chain_dir(id)),
        }
    }
}

/// A tag's record: the version it names, or its deletion.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct TagRecord {
    /// The version tagged.
    pub version: u64,
    /// The branch it was tagged on, and that branch's chain (a branch deleted and made
    /// again under the same name is another chain).
    pub branch: String,
    pub chain: ChainId,
    /// When the record was written (UTC).
    pub at: DateTime<Utc>,
    /// Set in the record that deletes the tag.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub deleted: bool,
    /// Unique to the writer: an unclear create is ours only if this is.
    pub writer: Uuid,
}

/// A branch's record: its chain and where it starts, or its deletion.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct BranchRecord {
    /// Its chain of versions, under `_branches/<chain>`.
    pub chain: Uuid,
    /// The branch it was made from, that branch's chain, and the version it starts at
    /// (its first version is a copy of that one).
    pub from: String,
    pub from_chain: ChainId,
    pub from_version: u64,
    /// Its row-id block (FORMAT.md §6): its fragments' ids and rows' ids count from
    /// `2^62 + block * 2^40`.
    pub block: u64,
    /// When the record was written (UTC).
    pub at: DateTime<Utc>,
    /// Set in the record that deletes the branch.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub deleted: bool,
    /// Unique to the writer.
    pub writer: Uuid,
}

/// A claim of a row-id block (record `k` of [`BLOCKS`] claims block `k`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct BlockClaim {
    /// The chain the block is for.
    pub chain: Uuid,
    /// When it was claimed (UTC).
    pub at: DateTime<Utc>,
}

//! References (FORMAT.md §17): tags name versions; branches are chains of versions of
//! their own that share the table's data files and merge back.

mod branches;
mod merge;
mod tags;

pub use branches::BranchInfo;
pub use merge::MergeInfo;
pub use tags::{TagInfo, VersionRef};

use super::Table;
use crate::format::refs::MAIN_BRANCH;
use crate::iceberg::{self, PublishError, RefTarget};

impl Table {
    /// Publishes the Iceberg view of the main branch's latest version with every tag and
    /// branch as an Iceberg ref (FORMAT.md §16, "Refs"), each branch's versions first
    /// published on its own chain; returns the URI of that metadata file, in which an
    /// Iceberg reader reads a tag or branch by name. Refs come and go between versions,
    /// so each call may name another file; every version's own file stays as it was.
    pub async fn publish_iceberg_refs(&self) -> Result<String, PublishError> {
        let main = self.branch(MAIN_BRANCH).await?;
        let mut heads: Vec<(String, Table)> = Vec::new();
        for b in self.branches().await?.into_iter().filter(|b| b.name != MAIN_BRANCH) {
            let head = self.branch(&b.name).await?;
            heads.push((b.name, head));
        }
        let mut tagged: Vec<(String, u64, String)> = Vec::new();
        for tag in self.tags().await? {
            tagged.push((tag.name, tag.version, tag.branch));
        }
        let chain_of = |branch: &str| match branch {
            MAIN_BRANCH => Some(&main),
            name => heads.iter().find(|(n, _)| n == name).map(|(_, t)| t),
        };
        let mut refs: Vec<RefTarget<'_>> =
            heads.iter().map(|(name, t)| RefTarget { name: name.clone(), branch: true, chain: &t.store, version: t.version() }).collect();
        // A tag of a deleted branch names a version no Iceberg reader can reach by a ref.
        for (name, version, branch) in &tagged {
            if let Some(t) = chain_of(branch) {
                refs.push(RefTarget { name: name.clone(), branch: false, chain: &t.store, version: *version });
            }
        }
        iceberg::publish_with_refs(&main.store, main.version(), &refs).await
    }
}

//! Vacuum across the table's chains of versions (FORMAT.md §14, §17): data files,
//! segments and deletion vectors are shared by every branch, so what any other chain's
//! versions name is kept, whichever branch vacuums. A chain no branch names any more (a
//! deleted branch's, or one whose making lost the race for its name) keeps its versions
//! until they are older than the retention, its tagged ones for good.

use std::collections::{HashMap, HashSet};

use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::{referenced_by, tag_error, VacuumReport};
use crate::error::WriteError;
use crate::format::refs::{ChainId, CHAINS_DIR, MAIN_BRANCH};
use crate::table::Table;

impl Table {
    /// The objects the table's other chains name; the versions of the chains no branch
    /// names, older than `cutoff` and untagged, removed first.
    pub(super) async fn referenced_elsewhere(
        &self,
        cutoff: DateTime<Utc>,
        report: &mut VacuumReport,
    ) -> Result<HashSet<String>, WriteError> {
        let live: HashMap<Uuid, String> =
            self.live_branches().await.map_err(branch_error)?.into_iter().map(|(name, named)| (named.record.chain, name)).collect();
        let tagged: Vec<(ChainId, u64)> =
            self.all_tags().await.map_err(tag_error)?.into_iter().map(|(_, t)| (t.record.chain, t.record.version)).collect();
        let mut chains: Vec<(ChainId, Option<&str>)> = Vec::new();
        if self.store.chain() != ChainId::Main {
            chains.push((ChainId::Main, Some(MAIN_BRANCH)));
        }
        for folder in self.store.list_dir_names(CHAINS_DIR).await? {
            let Some(id) = folder.strip_suffix('/').and_then(|f| f.rsplit('/').next()).and_then(|id| id.parse::<Uuid>().ok()) else {
                continue;
            };
            if ChainId::Branch(id) != self.store.chain() {
                chains.push((ChainId::Branch(id), live.get(&id).map(String::as_str)));
            }
        }
        let mut referenced = HashSet::new();
        for (chain, name) in chains {
            let store = self.store.for_chain(chain, name.unwrap_or_default())?;
            let mut versions = store.list_versions().await?;
            if name.is_none() {
                let mut kept = Vec::new();
                for v in versions {
                    let old = store.read_manifest(v).await?.is_none_or(|m| m.timestamp < cutoff);
                    if old && !tagged.contains(&(chain, v)) {
                        store.remove_version(v).await?;
                        report.versions_removed += 1;
                    } else {
                        kept.push(v);
                    }
                }
                versions = kept;
            }
            referenced.extend(referenced_by(&store, versions.into_iter()).await?);
        }
        Ok(referenced)
    }
}

pub(super) fn branch_error(e: crate::error::BranchError) -> WriteError {
    match e {
        crate::error::BranchError::Storage(s) => s.into(),
        crate::error::BranchError::Open(o) => o.into(),
        crate::error::BranchError::Corrupt(c) => c.into(),
        other => crate::error::CorruptObject { path: crate::format::refs::BRANCHES_DIR.to_string(), reason: other.to_string() }.into(),
    }
}

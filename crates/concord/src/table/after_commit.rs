//! What a writer does after its commit (FORMAT.md §9, "Automatic compaction"; §16):
//! publishes the version as Iceberg metadata when the table asks for it, and compacts a
//! bounded share of the small fragments when the table property
//! `auto_compact.small_fragments` (N) is set and the version holds more than N of them.
//! Also the one publishing a caller asks for ([`Table::publish_iceberg`]).
//!
//! Invariants: neither ever fails or changes the write it follows (errors leave the work
//! to the next writer); the compaction is a transaction of its own, committed like any
//! other (it gives way to concurrent writers as compaction does); it rewrites at most
//! [`AUTO_COMPACT_MAX_FRAGMENTS`] fragments and at most the compaction target's rows, so
//! a short-lived CLI process waits for one bounded rewrite.

use super::{Table, DEFAULT_COMPACT_TARGET_ROWS};
use crate::error::CommitError;
use crate::format::manifest::{Fragment, Operation, OperationKind, PROPERTY_AUTO_COMPACT};
use crate::iceberg::{self, PublishError};
use crate::txn::ops::compact;
use crate::txn::{CommitInfo, CommitOptions};

/// Fragments one automatic compaction rewrites at most.
pub const AUTO_COMPACT_MAX_FRAGMENTS: usize = 64;

impl Table {
    /// Publishes the Iceberg metadata of this version, and first of every retained
    /// earlier version not yet published (idempotent: a published version costs one
    /// listing); returns the URI of this version's metadata file, for an Iceberg reader.
    pub async fn publish_iceberg(&self) -> Result<String, PublishError> {
        iceberg::publish(&self.store, self.version()).await
    }

    /// Publishes `version` if the table asks for it (see `iceberg::publish_if_asked`).
    pub(crate) async fn publish_if_asked(&self, version: u64) {
        iceberg::publish_if_asked(&self.store, version).await
    }

    /// After this handle committed `info` (once per version per handle: transactions
    /// sharing a version follow it up once).
    pub(crate) async fn after_commit(&self, info: &CommitInfo) {
        if info.idempotent_replay || info.abandoned.is_some() || !self.store.claim_followup(info.version) {
            return;
        }
        self.publish_if_asked(info.version).await;
        if info.operation != OperationKind::Compact {
            if let Some(compacted) = self.auto_compact(info.version).await {
                if compacted.abandoned.is_none() && self.store.claim_followup(compacted.version) {
                    self.publish_if_asked(compacted.version).await;
                }
            }
        }
    }

    /// Compacts up to [`AUTO_COMPACT_MAX_FRAGMENTS`] small fragments of `version` when
    /// its properties ask and it holds more small fragments than they allow.
    async fn auto_compact(&self, version: u64) -> Option<CommitInfo> {
        let manifest = self.store.cached_manifest(version)?;
        let allowed: u64 = manifest.properties.get(PROPERTY_AUTO_COMPACT)?.parse().ok()?;
        if manifest.fragment_count() <= allowed {
            return None;
        }
        let base = self.with_manifest(manifest);
        let fragments = base.fragments().await.ok()?;
        let target = DEFAULT_COMPACT_TARGET_ROWS;
        if fragments.iter().filter(|f| f.live_rows() < target).count() as u64 <= allowed {
            return None;
        }
        let mut groups = Vec::new();
        for group in bounded(compact::plan(&fragments, target), AUTO_COMPACT_MAX_FRAGMENTS) {
            groups.push(compact::rewrite(&base.store, &base.env, base.schema(), &group).await.ok()?);
        }
        if groups.is_empty() {
            return None;
        }
        let txn = base.transaction(Operation::Compact { target_rows: target, groups }, base.env.clock.now());
        let result = self.commit_queued(&txn, &CommitOptions::default()).await;
        match result {
            Ok(info) => Some(info),
            Err(CommitError::CommitStateUnknown { .. }) => None,
            Err(_) => {
                self.store.delete_best_effort(txn.operation.written_files()).await;
                None
            }
        }
    }
}

/// The first of `groups` (in fragment order) up to `max` fragments in all, the last one
/// cut if needed (a cut group keeps two or more fragments).
fn bounded(groups: Vec<Vec<Fragment>>, max: usize) -> Vec<Vec<Fragment>> {
    let mut out = Vec::new();
    let mut left = max;
    for mut group in groups {
        if group.len() > left {
            if left < 2 {
                break;
            }
            group.truncate(left);
        }
        left -= group.len();
        out.push(group);
    }
    out
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::sync::Arc;

    use arrow::array::{Int64Array, RecordBatch};

    use super::*;
    use crate::{Env, Schema, StoreResolver};

    #[test]
    fn a_bounded_plan_cuts_the_last_group_and_never_leaves_one_fragment() {
        let f = |id| Fragment { id, files: Vec::new(), physical_rows: 1, deletion: None, first_row_id: None };
        let groups = vec![vec![f(0), f(1), f(2)], vec![f(3), f(4), f(5)], vec![f(6), f(7)]];
        let sizes = |g: Vec<Vec<Fragment>>| g.iter().map(Vec::len).collect::<Vec<_>>();
        assert_eq!(sizes(bounded(groups.clone(), 5)), [3, 2]);
        assert_eq!(sizes(bounded(groups.clone(), 4)), [3], "a group cut to one fragment is no group");
        assert_eq!(sizes(bounded(groups, 64)), [3, 3, 2]);
    }

    #[tokio::test]
    async fn a_writer_compacts_past_the_property_and_the_rows_stay() {
        let location = StoreResolver::default().resolve("memory://auto-compact/t").unwrap();
        let properties = BTreeMap::from([(PROPERTY_AUTO_COMPACT.to_string(), "4".to_string())]);
        let table = Table::create_with_properties(location, Env::system(), Schema::parse("id bigint").unwrap(), &properties).await.unwrap();
        let options = CommitOptions::default();
        for id in 0..20 {
            let batch = RecordBatch::try_new(table.schema().arrow_schema(), vec![Arc::new(Int64Array::from(vec![id]))]).unwrap();
            table.append(batch, &options).await.unwrap();
            let latest = table.latest().await.unwrap();
            assert!(latest.manifest().fragment_count() <= 5, "after append {id}: {} fragments", latest.manifest().fragment_count());
        }
        let latest = table.latest().await.unwrap();
        assert_eq!(latest.count(None).await.unwrap(), 20);
        let compactions = latest.history().await.unwrap().iter().filter(|v| v.operation == "compact").count();
        assert_eq!(compactions, 4, "one each time a fifth small fragment arrived");
    }
}

//! Branch merges (FORMAT.md §17): a branch's transactions replayed onto the branch it
//! was made from, in their order, as one version holding them all. Each is judged
//! against the target's winners since the branch started, as a rebase judges (re-runs
//! on what the target added; a conflict where both changed the same rows); fragments
//! keep their row ids, and the branch's transactions merged before are skipped (a
//! merge can be repeated as the branch goes on).

use std::collections::HashMap;

use futures::{StreamExt, TryStreamExt};
use serde::Serialize;

use crate::error::{BranchError, CommitError, IncompatibleReason, MergeError};
use crate::format::manifest::{
    field_id_block_end, Fragment, Manifest, MergedFrom, NewColumn, NewFragment, Operation, MAIN_ROW_IDS, ROW_ID_BLOCK,
};
use crate::format::refs::{ChainId, MAIN_BRANCH};
use crate::table::Table;
use crate::txn::commit::commit_merge;
use crate::txn::member::{read_existing, Merged};
use crate::txn::ops::compact;
use crate::txn::{CommitOptions, PreparedTransaction};

/// What a merge did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct MergeInfo {
    /// The branch merged.
    pub branch: String,
    /// The branch it was merged into.
    pub into: String,
    /// The target's version holding the merged transactions (`None`: nothing to merge).
    pub version: Option<u64>,
    /// The branch's versions merged (`None`: none).
    pub branch_versions: Option<(u64, u64)>,
    /// Transactions merged.
    pub transactions: usize,
}

/// The branch's versions a merge reads at once.
const READ_AHEAD: usize = 32;

/// A branch to merge and where it stands against its target.
struct Plan {
    source: Table,
    target: Table,
    /// The target's version the branch started from.
    fork: u64,
    /// The branch's last version merged before (its first, if none).
    merged_up_to: u64,
    /// Whether the target has versions of its own since the branch started or was last
    /// merged.
    target_moved: bool,
}

impl Table {
    /// Merges branch `name` into `into` (`main` without), the branch it was made from:
    /// its transactions not merged yet, replayed in order as one version of the target,
    /// all or none. With `fast_forward_only`, refused if the target has versions of its
    /// own since the branch started or was last merged.
    pub async fn merge_branch(&self, name: &str, into: Option<&str>, fast_forward_only: bool) -> Result<MergeInfo, MergeError> {
        let into = into.unwrap_or(MAIN_BRANCH);
        if name == into {
            return Err(MergeError::IntoItself { branch: name.to_string() });
        }
        if name == MAIN_BRANCH {
            return Err(BranchError::Main { action: "merged into another branch" }.into());
        }
        let plan = self.merge_plan(name, into).await?;
        let latest = plan.source.version();
        let mut info =
            MergeInfo { branch: name.to_string(), into: into.to_string(), version: None, branch_versions: None, transactions: 0 };
        if latest == plan.merged_up_to {
            return Ok(info);
        }
        if fast_forward_only && plan.target_moved {
            return Err(MergeError::TargetMoved { into: into.to_string(), base: plan.fork, latest: plan.target.version() });
        }
        let batch = plan.members(name).await?;
        if batch.is_empty() {
            return Ok(info);
        }
        let infos = commit_merge(plan.target.writer(), &batch).await.map_err(MergeError::Commit)?;
        info.version = infos.first().map(|i| i.version);
        info.branch_versions = Some((plan.merged_up_to + 1, latest));
        info.transactions = infos.len();
        Ok(info)
    }

    /// Where branch `name` stands against `into`.
    async fn merge_plan(&self, name: &str, into: &str) -> Result<Plan, MergeError> {
        let named = self.live_branch(name).await?;
        let target = self.branch(into).await?;
        if named.record.from_chain != target.store.chain() {
            return Err(MergeError::NotFromTarget { branch: name.to_string(), from: named.record.from.clone(), into: into.to_string() });
        }
        let source = self.on_chain(ChainId::Branch(named.record.chain), name, None).await?;
        let fork = named.record.from_version;
        // The newest version of the target holding this branch's transactions says how
        // far it was merged; versions of the target's own after it, whether it moved.
        let (mut merged_up_to, mut target_moved) = (fork, false);
        for v in (fork + 1..=target.version()).rev() {
            let m = read_existing(&target.store, v).await.map_err(MergeError::Commit)?;
            let merged = m.transactions.iter().filter_map(|t| t.merged_from.as_ref().filter(|f| f.chain == named.record.chain));
            match merged.map(|f| f.version).max() {
                Some(up_to) => {
                    merged_up_to = up_to;
                    break;
                }
                None => target_moved = true,
            }
        }
        Ok(Plan { source, target, fork, merged_up_to, target_moved })
    }
}

impl Plan {
    /// The branch's transactions after `merged_up_to`, as the merge's members.
    async fn members(&self, name: &str) -> Result<Vec<(PreparedTransaction, CommitOptions, Merged)>, MergeError> {
        let store = &self.source.store;
        let chain = match store.chain() {
            ChainId::Branch(id) => id,
            ChainId::Main => return Err(BranchError::Main { action: "merged into another branch" }.into()),
        };
        let fork = read_existing(&self.target.store, self.fork).await.map_err(MergeError::Commit)?;
        let start = read_existing(store, self.merged_up_to).await.map_err(MergeError::Commit)?;
        let merged_before = self.merged_before(&start).await?;
        // A branch made before branches had field ids of their own (FORMAT.md §17) adds
        // columns with ids from the target's counter: merged, they could take ids the
        // target gave since, so it changes the schema only over an unchanged one.
        let shared_ids = field_id_block_end(start.schema.next_field_id) == field_id_block_end(self.target.manifest().schema.next_field_id);
        let schema_moved = shared_ids && self.target.manifest().schema.fields != start.schema.fields;
        let mut batch = Vec::new();
        let mut previous = start;
        // The branch's versions, read many at once (a long branch is many small reads).
        let versions: Vec<_> = futures::stream::iter(self.merged_up_to + 1..=self.source.version())
            .map(|v| read_existing(store, v))
            .buffered(READ_AHEAD)
            .try_collect()
            .await
            .map_err(MergeError::Commit)?;
        for version in versions {
            let v = version.version;
            let born = born_in(&self.source, &previous, &version).await?;
            for t in &version.transactions {
                let operation = match &t.operation {
                    Operation::Withdraw { .. } | Operation::Branch { .. } | Operation::DeleteBranch => continue,
                    // A version up to the fork is the target's too: restored the same.
                    Operation::Restore { version } if *version <= self.fork => &t.operation,
                    Operation::Restore { version } => &self.restored(v, *version).await?,
                    Operation::AddColumn { .. }
                    | Operation::DropColumn { .. }
                    | Operation::RenameColumn { .. }
                    | Operation::WidenColumn { .. }
                        if schema_moved =>
                    {
                        return Err(conflict(v, &t.operation, IncompatibleReason::SchemaChangedOnBoth));
                    }
                    // Its ids are the branch's (its files name them).
                    Operation::AddColumn { column } => {
                        &Operation::AddColumn { column: NewColumn { field_id: Some(previous.schema.next_field_id), ..column.clone() } }
                    }
                    other => other,
                };
                let (operation, born_ids) = with_row_ids(operation, &born);
                let txn = PreparedTransaction {
                    id: self.source.env.new_uuid(),
                    read_version: self.fork,
                    read_schema: previous.schema.clone(),
                    read_next_fragment_id: fork.next_fragment_id,
                    operation: Merged::translated(&operation, &merged_before),
                    now: Some(version.timestamp),
                    staged: Default::default(),
                };
                let origin = MergedFrom { branch: name.to_string(), chain, version: v, transaction: t.id };
                batch.push((txn, CommitOptions::default(), Merged { origin, born: born_ids }));
            }
            previous = version;
        }
        Ok(batch)
    }

    /// The target's ids of the branch's fragments merged before (those of the branch's
    /// block at `start` that the target holds, found by first row id), by the branch's.
    async fn merged_before(&self, start: &Manifest) -> Result<HashMap<u64, u64>, MergeError> {
        let block = chain_block(start);
        let own = |f: &Fragment| block.as_ref().is_some_and(|b| b.contains(&f.id));
        let by_row: HashMap<u64, u64> =
            fragments(&self.source, start).await?.into_iter().filter(own).map(|f| (f.first_row_id(), f.id)).collect();
        if by_row.is_empty() {
            return Ok(HashMap::new());
        }
        let target = self.target.manifest();
        let mut given = HashMap::new();
        for f in fragments(&self.target, target).await? {
            if let Some(branch_id) = by_row.get(&f.first_row_id()) {
                given.insert(*branch_id, f.id);
            }
        }
        Ok(given)
    }

    /// Restore of branch version `version` (after the fork; of branch version `v`) as
    /// the target replays it: that version's schema, and every live row of it written
    /// anew with its row id, replacing the target's, as a restore replaces them whatever
    /// committed since (O(rows) written).
    async fn restored(&self, v: u64, version: u64) -> Result<Operation, MergeError> {
        let old = read_existing(&self.source.store, version).await.map_err(MergeError::Commit)?;
        let fragments = fragments(&self.source, &old).await?;
        let rows = compact::rewrite(&self.source.store, &self.source.env, &old.schema, &fragments)
            .await
            .map_err(|e| MergeError::Commit(CommitError::rerun(v, e)))?;
        Ok(Operation::Overwrite { fragments: rows.outputs, schema: Some(old.schema.clone()) })
    }
}

/// The fragments of `version` of `table`'s chain.
async fn fragments(table: &Table, version: &Manifest) -> Result<Vec<Fragment>, MergeError> {
    let mut out = Vec::new();
    for reference in &version.segments {
        out.extend(table.store.read_segment(reference).await?.fragments.iter().cloned());
    }
    Ok(out)
}

/// The fragments `version` added to its chain after `previous`, by data file: their
/// ids and first row ids.
async fn born_in(table: &Table, previous: &Manifest, version: &Manifest) -> Result<HashMap<String, (u64, u64)>, MergeError> {
    let mut born = HashMap::new();
    for reference in version.segments.iter().filter(|s| s.max_fragment_id >= previous.next_fragment_id) {
        for f in table.store.read_segment(reference).await?.fragments.iter().filter(|f| f.id >= previous.next_fragment_id) {
            born.insert(f.files[0].path.clone(), (f.id, f.first_row_id()));
        }
    }
    Ok(born)
}

/// `operation` with each fragment it adds keeping the row ids the branch gave it, and
/// the branch's ids of those fragments, in order.
fn with_row_ids(operation: &Operation, born: &HashMap<String, (u64, u64)>) -> (Operation, Vec<(u64, u64)>) {
    let mut op = operation.clone();
    let mut ids = Vec::new();
    let mut keep = |fragments: &mut Vec<NewFragment>| {
        for f in fragments {
            if let Some((id, first_row_id)) = f.files.first().and_then(|d| born.get(&d.path)) {
                f.first_row_id = Some(*first_row_id);
                ids.push((*id, *first_row_id));
            }
        }
    };
    match &mut op {
        Operation::Append { fragments }
        | Operation::Overwrite { fragments, .. }
        | Operation::ReplaceWhere { fragments, .. }
        | Operation::Update { fragments, .. }
        | Operation::Merge { fragments, .. } => keep(fragments),
        Operation::Compact { groups, .. } => groups.iter_mut().for_each(|g| keep(&mut g.outputs)),
        _ => {}
    }
    (op, ids)
}

/// The ids of a branch chain's own block (of fragments), from a version of it.
fn chain_block(version: &Manifest) -> Option<std::ops::Range<u64>> {
    let next = version.next_fragment_id;
    (next >= MAIN_ROW_IDS).then(|| {
        let start = MAIN_ROW_IDS + (next - MAIN_ROW_IDS) / ROW_ID_BLOCK * ROW_ID_BLOCK;
        start..start + ROW_ID_BLOCK
    })
}

fn conflict(version: u64, operation: &Operation, reason: IncompatibleReason) -> MergeError {
    MergeError::Refused { branch_version: version, operation: operation.name().to_string(), reason }
}

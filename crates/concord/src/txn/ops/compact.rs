//! Compaction: groups of small (or deletion-riddled) fragments are rewritten as fewer
//! fragments holding only their live rows.
//!
//! Compaction yields to data writers. Each group records the fragments it read and
//! their deletion vectors at the time; at commit, a group whose inputs a winner changed
//! is redone from the new state (deletions changed) or dropped (an input is gone:
//! overwritten, restored away, fully deleted or compacted by someone else). When no
//! group is left, the compaction is abandoned: it commits nothing. A data write racing
//! a compaction re-runs on the compaction's output fragments (see `conflict`).

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use super::apply::add_fragments;
use super::delete::fragments_in_scope;
use super::NextState;
use crate::env::Env;
use crate::error::{CommitError, WriteError};
use crate::format::manifest::{CompactGroup, CompactInput, Fragment, Manifest, Segment};
use crate::format::schema::Schema;
use crate::io::scan::{self, ScanPlan};
use crate::io::write;
use crate::storage::TableStore;
use crate::txn::conflict::RerunScope;

/// Why a compaction would change nothing: no group left (`rerun_done`: winners
/// changed or removed every fragment it was rewriting).
pub(super) fn no_change(groups: &[CompactGroup], rerun_done: bool) -> Option<&'static str> {
    groups.is_empty().then_some(if rerun_done {
        "newer versions changed or removed every fragment it was rewriting"
    } else {
        "no fragment is smaller than the target or has deleted rows"
    })
}

/// Groups worth rewriting, in fragment order: runs of consecutive fragments that are
/// smaller than `target_rows` or have deleted rows, each run cut so that its live rows
/// stay within `target_rows`. A group is two or more fragments, or one with deleted rows.
pub(crate) fn plan(fragments: &[Fragment], target_rows: u64) -> Vec<Vec<Fragment>> {
    let mut groups = Vec::new();
    let mut run: Vec<Fragment> = Vec::new();
    let mut run_rows = 0u64;
    let close = |run: &mut Vec<Fragment>, groups: &mut Vec<Vec<Fragment>>| {
        let taken = std::mem::take(run);
        if taken.len() > 1 || taken.first().is_some_and(|f| f.deletion.is_some()) {
            groups.push(taken);
        }
    };
    for fragment in fragments {
        let candidate = fragment.live_rows() < target_rows || fragment.deletion.is_some();
        if !candidate || run_rows + fragment.live_rows() > target_rows {
            close(&mut run, &mut groups);
            run_rows = 0;
        }
        if candidate {
            run_rows += fragment.live_rows();
            run.push(fragment.clone());
        }
    }
    close(&mut run, &mut groups);
    groups
}

/// Reads the live rows of `fragments` (as `schema` sees them) and writes them anew,
/// each with its row id.
pub(crate) async fn rewrite(store: &TableStore, env: &Env, schema: &Schema, fragments: &[Fragment]) -> Result<CompactGroup, WriteError> {
    // Every row keeps its id.
    let plan = Arc::new(ScanPlan::all(schema).with_row_ids());
    let mut batches = Vec::new();
    for fragment in fragments {
        batches.extend(scan::read_fragment(store, fragment, plan.clone()).await?);
    }
    let outputs = write::write_fragments_keeping_ids(store, env, schema, &batches).await?;
    let inputs = fragments
        .iter()
        .map(|f| CompactInput { fragment_id: f.id, deletion: f.deletion.as_ref().map(|d| d.path.clone()), live_rows: f.live_rows() })
        .collect();
    Ok(CompactGroup { inputs, outputs })
}

/// What became of a group's inputs in a newer version.
#[derive(Debug, PartialEq, Eq)]
enum GroupState {
    Unchanged,
    /// Every input is still there, but some have new deleted rows.
    DeletionsChanged,
    /// Some input left the table.
    InputGone,
}

fn group_state(group: &CompactGroup, current: &HashMap<u64, Fragment>) -> GroupState {
    let mut state = GroupState::Unchanged;
    for input in &group.inputs {
        match current.get(&input.fragment_id) {
            None => return GroupState::InputGone,
            Some(f) if f.deletion.as_ref().map(|d| &d.path) != input.deletion.as_ref() => state = GroupState::DeletionsChanged,
            Some(_) => {}
        }
    }
    state
}

/// Brings `groups` up to date with `base`: keeps unchanged groups, redoes those whose
/// inputs gained deleted rows, drops those with an input gone. Returns the data files
/// of replaced outputs (no longer referenced; removable).
pub(super) async fn revalidate(
    store: &TableStore,
    env: &Env,
    base: &Manifest,
    groups: &mut Vec<CompactGroup>,
) -> Result<Vec<String>, CommitError> {
    let ids: Vec<std::ops::Range<u64>> = groups.iter().flat_map(|g| g.inputs.iter().map(|i| i.fragment_id..i.fragment_id + 1)).collect();
    let current: HashMap<u64, Fragment> =
        fragments_in_scope(store, base, &RerunScope::Fragments(ids)).await?.into_iter().map(|f| (f.id, f)).collect();
    let mut kept = Vec::with_capacity(groups.len());
    let mut replaced = Vec::new();
    for group in groups.drain(..) {
        match group_state(&group, &current) {
            GroupState::Unchanged => kept.push(group),
            GroupState::InputGone => replaced.extend(output_files(&group)),
            GroupState::DeletionsChanged => {
                replaced.extend(output_files(&group));
                let inputs: Vec<Fragment> = group.inputs.iter().map(|i| current[&i.fragment_id].clone()).collect();
                let redone = rewrite(store, env, &base.schema, &inputs).await.map_err(|e| CommitError::rerun(base.version, e))?;
                kept.push(redone);
            }
        }
    }
    *groups = kept;
    Ok(replaced)
}

fn output_files(group: &CompactGroup) -> Vec<String> {
    group.outputs.iter().flat_map(|f| f.files.iter().map(|d| d.path.clone())).collect()
}

/// The base with every group's inputs replaced by its outputs (groups already
/// revalidated against this base). Outputs get ids in group order from `next_fragment_id`.
pub(super) async fn apply(store: &TableStore, env: &Env, base: &Manifest, groups: &[CompactGroup]) -> Result<NextState, CommitError> {
    let consumed: HashSet<u64> = groups.iter().flat_map(|g| g.inputs.iter().map(|i| i.fragment_id)).collect();
    let mut segments = Vec::with_capacity(base.segments.len());
    for reference in &base.segments {
        if !consumed.iter().any(|id| (reference.min_fragment_id..=reference.max_fragment_id).contains(id)) {
            segments.push(reference.clone());
            continue;
        }
        let segment = store.read_segment(reference).await?;
        let fragments: Vec<Fragment> = segment.fragments.iter().filter(|f| !consumed.contains(&f.id)).cloned().collect();
        if fragments.len() == segment.fragments.len() {
            segments.push(reference.clone());
        } else if !fragments.is_empty() {
            segments.push(store.write_segment(env, reference.level, Segment { fragments }).await?);
        }
    }
    let outputs: Vec<_> = groups.iter().flat_map(|g| g.outputs.iter().cloned()).collect();
    let (segments, next) = add_fragments(store, env, segments, base.next_ids(), &outputs).await?;
    Ok(NextState::with_segments(base, segments, next))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::manifest::DeletionRef;

    fn fragment(id: u64, rows: u64, deleted: u64) -> Fragment {
        let deletion = (deleted > 0).then(|| DeletionRef { path: format!("_deletions/{id}.bin"), deleted_rows: deleted });
        Fragment { id, files: vec![], physical_rows: rows, deletion, first_row_id: None }
    }

    fn ids(groups: &[Vec<Fragment>]) -> Vec<Vec<u64>> {
        groups.iter().map(|g| g.iter().map(|f| f.id).collect()).collect()
    }

    #[test]
    fn plans_runs_of_small_fragments_within_the_target() {
        let cases: Vec<(&str, Vec<Fragment>, u64, Vec<Vec<u64>>)> = vec![
            ("nothing small", vec![fragment(0, 100, 0), fragment(1, 100, 0)], 100, vec![]),
            ("one small alone is left", vec![fragment(0, 10, 0), fragment(1, 100, 0)], 100, vec![]),
            ("small ones group", vec![fragment(0, 10, 0), fragment(1, 10, 0), fragment(2, 10, 0)], 100, vec![vec![0, 1, 2]]),
            ("cut at the target", vec![fragment(0, 60, 0), fragment(1, 60, 0), fragment(2, 30, 0)], 100, vec![vec![1, 2]]),
            (
                "a large fragment breaks a run",
                vec![fragment(0, 1, 0), fragment(1, 500, 0), fragment(2, 1, 0), fragment(3, 1, 0)],
                100,
                vec![vec![2, 3]],
            ),
            ("deleted rows alone are worth it", vec![fragment(0, 500, 100)], 100, vec![vec![0]]),
        ];
        for (name, fragments, target, expected) in cases {
            assert_eq!(ids(&plan(&fragments, target)), expected, "{name}");
        }
    }

    #[test]
    fn group_states() {
        let group = CompactGroup {
            inputs: vec![
                CompactInput { fragment_id: 1, deletion: None, live_rows: 5 },
                CompactInput { fragment_id: 2, deletion: Some("_deletions/2.bin".into()), live_rows: 3 },
            ],
            outputs: vec![],
        };
        let current = |frags: Vec<Fragment>| frags.into_iter().map(|f| (f.id, f)).collect::<HashMap<_, _>>();
        assert_eq!(group_state(&group, &current(vec![fragment(1, 5, 0), fragment(2, 5, 2)])), GroupState::Unchanged);
        let mut changed = fragment(1, 5, 1);
        changed.deletion.as_mut().unwrap().path = "_deletions/new.bin".into();
        assert_eq!(group_state(&group, &current(vec![changed, fragment(2, 5, 2)])), GroupState::DeletionsChanged);
        assert_eq!(group_state(&group, &current(vec![fragment(2, 5, 2)])), GroupState::InputGone);
    }
}

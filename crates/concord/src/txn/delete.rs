//! Delete: deletion vectors unioned into the base version's fragments.
//!
//! Prepare finds the matching live rows of every fragment and writes them as delta
//! deletion vectors. Apply unions each delta with the fragment's vector in the base
//! version (so concurrent deletes merge); deltas of fragments the base no longer has
//! are dropped (their rows are gone). Only segments holding touched fragments are
//! rewritten. A re-run evaluates the predicate on the fragments a winner added.

use std::collections::BTreeMap;
use std::ops::Range;

use super::apply::NextState;
use crate::env::Env;
use crate::error::{CommitError, CorruptObject, ScanError};
use crate::format::manifest::{DeletionRef, Fragment, FragmentDeletion, Manifest, Segment};
use crate::io::predicate::{self, Predicate};
use crate::io::{deletion, scan};
use crate::storage::TableStore;

/// Which fragments of the base a re-run reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RerunScope {
    /// Fragments whose ids fall in these ranges (those a winner added).
    Fragments(Vec<Range<u64>>),
    /// Every fragment: the winner replaced the table.
    Everything,
}

/// Matching live rows of `fragments`, written as delta deletion vectors.
pub(crate) async fn find(
    store: &TableStore,
    env: &Env,
    fragments: &[Fragment],
    predicate: &Predicate,
) -> Result<Vec<FragmentDeletion>, ScanError> {
    let mut found = Vec::new();
    for fragment in fragments {
        let rows = scan::fragment_matches(store, fragment, predicate).await?;
        if !rows.is_empty() {
            let path = deletion::write(store, env, &rows).await?;
            found.push(FragmentDeletion { fragment_id: fragment.id, path, rows: rows.len() });
        }
    }
    Ok(found)
}

/// Re-evaluates `sql` on the base fragments in `scope`; returns the deletions to add
/// (`Fragments`) or the complete new set (`Everything`).
pub(crate) async fn rerun(
    store: &TableStore,
    env: &Env,
    base: &Manifest,
    sql: &str,
    scope: &RerunScope,
) -> Result<Vec<FragmentDeletion>, CommitError> {
    let predicate = predicate::compile(sql, &base.schema).map_err(|e| CorruptObject {
        path: store.location.coordinator.describe_version(base.version),
        reason: format!("the delete's predicate no longer applies: {e}"),
    })?;
    let mut fragments = Vec::new();
    for segment in &base.segments {
        let wanted = match scope {
            RerunScope::Everything => true,
            RerunScope::Fragments(ranges) => {
                ranges.iter().any(|r| r.start <= segment.max_fragment_id && segment.min_fragment_id < r.end)
            }
        };
        if wanted {
            let read = store.read_segment(segment).await?;
            fragments.extend(read.fragments.iter().filter(|f| match scope {
                RerunScope::Everything => true,
                RerunScope::Fragments(ranges) => ranges.iter().any(|r| r.contains(&f.id)),
            }).cloned());
        }
    }
    find(store, env, &fragments, &predicate).await.map_err(scan_to_commit)
}

/// The base with `deletions` applied, and how many rows that newly deleted.
pub(crate) async fn apply(
    store: &TableStore,
    env: &Env,
    base: &Manifest,
    deletions: &[FragmentDeletion],
) -> Result<(NextState, u64), CommitError> {
    let mut by_fragment: BTreeMap<u64, Vec<&FragmentDeletion>> = BTreeMap::new();
    for d in deletions {
        by_fragment.entry(d.fragment_id).or_default().push(d);
    }
    let mut segments = Vec::with_capacity(base.segments.len());
    let mut newly_deleted = 0u64;
    for reference in &base.segments {
        if by_fragment.range(reference.min_fragment_id..=reference.max_fragment_id).next().is_none() {
            segments.push(reference.clone());
            continue;
        }
        let segment = store.read_segment(reference).await?;
        let mut fragments = Vec::with_capacity(segment.fragments.len());
        let mut changed = false;
        for fragment in segment.fragments.iter() {
            let Some(deltas) = by_fragment.get(&fragment.id) else {
                fragments.push(fragment.clone());
                continue;
            };
            let before = deletion::of_fragment(store, fragment.deletion.as_ref()).await?;
            let mut merged = before.clone();
            for delta in deltas {
                merged |= deletion::read(store, &delta.path).await?;
            }
            let added = merged.len() - before.len();
            if added == 0 {
                fragments.push(fragment.clone());
                continue;
            }
            changed = true;
            newly_deleted += added;
            if merged.len() >= fragment.physical_rows {
                continue; // every row deleted: the fragment leaves the version
            }
            let path = match (fragment.deletion.is_none(), deltas.as_slice()) {
                (true, [only]) => only.path.clone(),
                _ => deletion::write(store, env, &merged).await?,
            };
            fragments.push(Fragment { deletion: Some(DeletionRef { path, deleted_rows: merged.len() }), ..fragment.clone() });
        }
        match (changed, fragments.is_empty()) {
            (false, _) => segments.push(reference.clone()),
            (true, true) => {}
            (true, false) => segments.push(store.write_segment(env, reference.level, Segment { fragments }).await?),
        }
    }
    let next = NextState { schema: base.schema.clone(), segments, next_fragment_id: base.next_fragment_id };
    Ok((next, newly_deleted))
}

pub(crate) fn scan_to_commit(e: ScanError) -> CommitError {
    match e {
        ScanError::Storage(s) => CommitError::Storage(s),
        ScanError::Corrupt(c) => CommitError::Corrupt(c),
        other => CommitError::Corrupt(CorruptObject { path: "a data file".into(), reason: other.to_string() }),
    }
}

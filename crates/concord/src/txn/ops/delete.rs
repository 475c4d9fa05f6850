//! Delete: deletion vectors unioned into the base version's fragments.
//!
//! Prepare finds the matching live rows of every fragment and writes them as delta
//! deletion vectors. Apply unions each delta with the fragment's vector in the base
//! version (so concurrent deletes merge); deltas of fragments the base no longer has
//! are dropped (their rows are gone). Only segments holding touched fragments are
//! rewritten. A re-run evaluates the predicate on the fragments a winner added.
//! [`DeletionState`] is shared by every action that deletes rows (delete, overwrite
//! --where, update, merge).

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};

use super::apply::add_fragments;
use super::{Cx, NextState};
use crate::env::Env;
use crate::error::{CommitError, ScanError};
use crate::format::manifest::{DeletionRef, Fragment, FragmentDeletion, Manifest, NewFragment, Segment, SegmentRef};
use crate::format::schema::Schema;
use crate::io::deletion;
use crate::io::predicate::{self, Predicate, RowTest};
use crate::io::scan;
use crate::storage::TableStore;
use crate::txn::conflict::RerunScope;

/// What the operations that delete rows keep between commit attempts: the rewrites of
/// segments already made ([`ApplyMemo`]) and their predicate compiled per schema.
#[derive(Default)]
pub(crate) struct DeletionState {
    memo: ApplyMemo,
    compiled: Option<(Schema, Predicate)>,
}

impl DeletionState {
    /// `base` with `deletions` applied, then `fragments` added.
    pub(crate) async fn apply(
        &mut self,
        cx: &Cx<'_>,
        base: &Manifest,
        deletions: &[FragmentDeletion],
        fragments: &[NewFragment],
    ) -> Result<NextState, CommitError> {
        let (deleted, rows_deleted) = apply(cx.store, cx.env, base, deletions, &mut self.memo).await?;
        let (segments, next) = add_fragments(cx.store, cx.env, deleted, base.next_ids(), fragments).await?;
        Ok(NextState { rows_deleted, ..NextState::with_segments(base, segments, next) })
    }

    /// The deletions were replaced wholesale (a re-run over everything): memoized
    /// rewrites no longer apply.
    pub(crate) fn forget(&mut self) {
        self.memo.clear();
    }

    /// Re-evaluates `sql` on the fragments of `base` in `scope`, adding what it finds
    /// to `deletions` (`Fragments`) or replacing them (`Everything`).
    pub(crate) async fn rerun_predicate(
        &mut self,
        cx: &Cx<'_>,
        base: &Manifest,
        sql: &str,
        deletions: &mut Vec<FragmentDeletion>,
        scope: &RerunScope,
    ) -> Result<(), CommitError> {
        let predicate = compile_for(base, sql, cx.now, &mut self.compiled)?;
        let found = rerun(cx.store, cx.env, base, predicate, scope).await?;
        match scope {
            RerunScope::Everything => {
                *deletions = found;
                self.forget();
            }
            RerunScope::Fragments(_) => deletions.extend(found),
        }
        Ok(())
    }
}

/// Live rows of `fragments` that pass `test`, written as delta deletion vectors.
pub(crate) async fn find(
    store: &TableStore,
    env: &Env,
    fragments: &[Fragment],
    test: &dyn RowTest,
) -> Result<Vec<FragmentDeletion>, ScanError> {
    let mut found = Vec::new();
    for fragment in fragments {
        let rows = scan::fragment_matches(store, fragment, test).await?;
        if !rows.is_empty() {
            let count = rows.len();
            let path = deletion::write(store, env, rows).await?;
            found.push(FragmentDeletion { fragment_id: fragment.id, path, rows: count });
        }
    }
    Ok(found)
}

/// `sql` compiled for `base`'s schema (with `now()` at `now`), reusing `cached` when
/// the schema is the same (compiling costs far more than re-running on a few new
/// fragments). A predicate the winners made unusable fails the re-run.
fn compile_for<'a>(
    base: &Manifest,
    sql: &str,
    now: DateTime<Utc>,
    cached: &'a mut Option<(Schema, Predicate)>,
) -> Result<&'a Predicate, CommitError> {
    if cached.as_ref().is_none_or(|(schema, _)| *schema != base.schema) {
        let predicate = predicate::compile(sql, &base.schema, now).map_err(|e| CommitError::rerun(base.version, e))?;
        *cached = Some((base.schema.clone(), predicate));
    }
    Ok(&cached.as_ref().expect("just set").1)
}

/// Re-evaluates `predicate` on the base fragments in `scope`; returns the deletions to
/// add (`Fragments`) or the complete new set (`Everything`).
async fn rerun(
    store: &TableStore,
    env: &Env,
    base: &Manifest,
    predicate: &Predicate,
    scope: &RerunScope,
) -> Result<Vec<FragmentDeletion>, CommitError> {
    let fragments = fragments_in_scope(store, base, scope).await?;
    find(store, env, &fragments, predicate).await.map_err(scan_to_commit(base.version))
}

/// The fragments of `base` that a re-run over `scope` reads (only the segments that
/// can hold them are read).
pub(crate) async fn fragments_in_scope(store: &TableStore, base: &Manifest, scope: &RerunScope) -> Result<Vec<Fragment>, CommitError> {
    let mut fragments = Vec::new();
    for segment in &base.segments {
        let wanted = match scope {
            RerunScope::Everything => true,
            RerunScope::Fragments(ranges) => ranges.iter().any(|r| r.start <= segment.max_fragment_id && segment.min_fragment_id < r.end),
        };
        if wanted {
            let read = store.read_segment(segment).await?;
            fragments.extend(
                read.fragments
                    .iter()
                    .filter(|f| match scope {
                        RerunScope::Everything => true,
                        RerunScope::Fragments(ranges) => ranges.iter().any(|r| r.contains(&f.id)),
                    })
                    .cloned(),
            );
        }
    }
    Ok(fragments)
}

/// Segments already rewritten by an earlier attempt of the same delete: base segment
/// identity -> (its rewrite, or `None` if every fragment left; rows newly deleted in it).
///
/// Valid across attempts because segments are immutable and a fragment's deltas are
/// all known in the attempt that first sees its segment (re-runs happen before apply);
/// cleared when a re-run replaces the deletions (scope `Everything`). It makes an
/// attempt cost O(segments new since the last attempt), so a delete keeps up with a
/// stream of appends instead of redoing all its work each time.
type ApplyMemo = std::collections::HashMap<String, (Option<SegmentRef>, u64)>;

/// The base's segments with `deletions` applied, and how many rows that newly deleted.
async fn apply(
    store: &TableStore,
    env: &Env,
    base: &Manifest,
    deletions: &[FragmentDeletion],
    memo: &mut ApplyMemo,
) -> Result<(Vec<SegmentRef>, u64), CommitError> {
    let mut by_fragment: BTreeMap<u64, Vec<&FragmentDeletion>> = BTreeMap::new();
    for d in deletions {
        by_fragment.entry(d.fragment_id).or_default().push(d);
    }
    let mut segments = Vec::with_capacity(base.segments.len());
    let mut newly_deleted = 0u64;
    for reference in &base.segments {
        if let Some((rewritten, deleted)) = memo.get(reference.identity().as_ref()) {
            segments.extend(rewritten.iter().cloned());
            newly_deleted += deleted;
            continue;
        }
        if by_fragment.range(reference.min_fragment_id..=reference.max_fragment_id).next().is_none() {
            segments.push(reference.clone());
            continue;
        }
        let deleted_before = newly_deleted;
        let segment = store.read_segment(reference).await?;
        let mut fragments = Vec::with_capacity(segment.fragments.len());
        let mut changed = false;
        for fragment in segment.fragments.iter() {
            let Some(deltas) = by_fragment.get(&fragment.id) else {
                fragments.push(fragment.clone());
                continue;
            };
            let before = deletion::of_fragment(store, fragment.deletion.as_ref()).await?;
            let mut merged = before.as_ref().clone();
            for delta in deltas {
                merged |= deletion::read(store, &delta.path).await?.as_ref();
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
            let deleted_rows = merged.len();
            let path = match (fragment.deletion.is_none(), deltas.as_slice()) {
                (true, [only]) => only.path.clone(),
                _ => deletion::write(store, env, merged).await?,
            };
            fragments.push(Fragment { deletion: Some(DeletionRef { path, deleted_rows }), ..fragment.clone() });
        }
        let rewritten = match (changed, fragments.is_empty()) {
            (false, _) => Some(reference.clone()),
            (true, true) => None,
            (true, false) => Some(store.write_segment(env, reference.level, Segment { fragments }).await?),
        };
        memo.insert(reference.identity().into_owned(), (rewritten.clone(), newly_deleted - deleted_before));
        segments.extend(rewritten);
    }
    Ok((segments, newly_deleted))
}

/// A scan inside a commit's re-run: storage and corruption stay what they are; the
/// predicate failing on the new rows fails the re-run (nothing is corrupt).
pub(crate) fn scan_to_commit(version: u64) -> impl Fn(ScanError) -> CommitError {
    move |e| CommitError::rerun(version, e)
}

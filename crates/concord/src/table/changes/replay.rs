//! Which rows each transaction of a range removed and added, found by replaying the
//! transactions' records on the fragments of the version before the range (FORMAT.md
//! §11, "Changes"): the records say which fragments a transaction added (their ids are
//! assigned in commit order) and which rows it deleted (its deletion vectors), so no
//! data is read to find them; only the fragments a transaction touched are looked up.
//!
//! Invariant: after each version, the fragments the replay touched agree with that
//! version's manifest (present or gone, the same rows deleted); where they do not, the
//! feed fails rather than guess.

use std::collections::BTreeMap;
use std::sync::Arc;

use roaring::RoaringBitmap;

use crate::error::{ChangesError, CorruptObject};
use crate::format::manifest::{Fragment, FragmentDeletion, Manifest, NewFragment, NextIds, Operation};
use crate::io::deletion;
use crate::storage::TableStore;

/// A fragment and the rows deleted from it.
#[derive(Debug, Clone)]
pub(super) struct Live {
    pub(super) fragment: Fragment,
    pub(super) deleted: Arc<RoaringBitmap>,
}

impl Live {
    fn rows(&self) -> RoaringBitmap {
        let mut all = RoaringBitmap::new();
        all.insert_range(0..self.fragment.physical_rows as u32);
        all - self.deleted.as_ref()
    }
}

/// Rows of one fragment, by offset.
pub(super) type At = (Fragment, RoaringBitmap);

/// What one transaction changed.
#[derive(Debug, Default)]
pub(super) struct TxnRows {
    /// Rows it removed (deleted, replaced, or rewritten as new rows).
    pub(super) removed: Vec<At>,
    /// Rows it added.
    pub(super) added: Vec<At>,
    /// A restore: a row it removed and added again unchanged is no change.
    pub(super) restore: bool,
}

/// The fragments of a version as the replay goes: the base version's (read one
/// segment at a time, as needed), with what the transactions so far changed.
pub(super) struct Replay {
    pub(super) store: Arc<TableStore>,
    base: Arc<Manifest>,
    /// Fragments changed so far: their state now (`None`: gone).
    changed: BTreeMap<u64, Option<Live>>,
    /// Whether `changed` holds every fragment (after an overwrite or a restore).
    complete: bool,
    /// The ids the next fragment added takes.
    next: NextIds,
    /// Fragments the current version touched.
    touched: Vec<u64>,
}

impl Replay {
    /// The fragments of `base`.
    pub(super) fn new(store: Arc<TableStore>, base: Arc<Manifest>) -> Self {
        let next = base.next_ids();
        Replay { store, base, changed: BTreeMap::new(), complete: false, next, touched: Vec::new() }
    }

    /// Ids taken up to `next` (a start that does not count read as the version before
    /// it: its ids stay taken).
    pub(super) fn ids_taken(mut self, next: NextIds) -> Self {
        self.next = self.next.max(next);
        self
    }

    /// The rows `transaction` (`operation`) of the current version removed and added.
    pub(super) async fn apply(&mut self, operation: &Operation) -> Result<TxnRows, ChangesError> {
        let mut rows = TxnRows::default();
        match operation {
            Operation::Append { fragments } => self.add(fragments, &mut rows)?,
            Operation::Overwrite { fragments, .. } => {
                for live in self.all().await? {
                    rows.removed.push((live.fragment.clone(), live.rows()));
                }
                self.changed = BTreeMap::new();
                self.complete = true;
                self.add(fragments, &mut rows)?;
            }
            Operation::Delete { deletions, .. } => self.delete(deletions, &mut rows).await?,
            Operation::ReplaceWhere { deletions, fragments, .. }
            | Operation::Update { deletions, fragments, .. }
            | Operation::Merge { deletions, fragments, .. } => {
                self.delete(deletions, &mut rows).await?;
                self.add(fragments, &mut rows)?;
            }
            // Rows move, keeping their ids: no change.
            Operation::Compact { groups, .. } => {
                for group in groups {
                    for input in &group.inputs {
                        self.set(input.fragment_id, None);
                    }
                    self.add(&group.outputs, &mut TxnRows::default())?;
                }
            }
            Operation::Restore { version } => self.restore(*version, &mut rows).await?,
            Operation::Create
            | Operation::AddColumn { .. }
            | Operation::DropColumn { .. }
            | Operation::RenameColumn { .. }
            | Operation::WidenColumn { .. }
            | Operation::SetProperties { .. }
            | Operation::Withdraw { .. }
            | Operation::DeleteBranch
            // Only ever a chain's first version: never in a range's replay.
            | Operation::Branch { .. } => {}
        }
        Ok(rows)
    }

    /// Passes over `version`, whose transactions do not count (an aborted or undecided
    /// multi-table transaction's part): no fragment changes; its ids stay taken.
    pub(super) fn passed_over(&mut self, version: &Manifest) {
        self.next = self.next.max(version.next_ids());
        self.touched.clear();
    }

    /// Checks the fragments the version just replayed touched against its manifest.
    pub(super) async fn verify(&mut self, version: &Manifest) -> Result<(), ChangesError> {
        let touched = std::mem::take(&mut self.touched);
        let next_ok = version.next_ids() == self.next;
        for id in touched {
            let ours = self.changed.get(&id).cloned().flatten();
            let theirs = find(&self.store, version, id).await?;
            let agree = match (&ours, &theirs) {
                (None, None) => true,
                (Some(o), Some(t)) => {
                    o.fragment.files == t.files
                        && o.fragment.first_row_id() == t.first_row_id()
                        && o.deleted.len() == t.deletion.as_ref().map_or(0, |d| d.deleted_rows)
                }
                _ => false,
            };
            if !agree || !next_ok {
                let reason = format!(
                    "replaying its transactions gives fragment {id} {}, its manifest {}",
                    describe(ours.as_ref().map(|o| o.deleted.len())),
                    describe(theirs.as_ref().map(|t| t.deletion.as_ref().map_or(0, |d| d.deleted_rows)))
                );
                return Err(CorruptObject { path: format!("version {}", version.version), reason }.into());
            }
        }
        Ok(())
    }

    /// Adds `fragments` as a commit does: ids assigned in order.
    fn add(&mut self, fragments: &[NewFragment], rows: &mut TxnRows) -> Result<(), ChangesError> {
        for new in fragments {
            let assigned = match new.first_row_id {
                Some(kept) => Some((self.next.take_fragment_id(), kept)),
                None => self.next.assign(new.rows),
            };
            let Some((id, first_row_id)) = assigned else {
                let reason = format!("its fragments' row ids pass the end of the range at {}", self.next.row);
                return Err(CorruptObject { path: "a version of the range".into(), reason }.into());
            };
            let fragment =
                Fragment { id, files: new.files.clone(), physical_rows: new.rows, deletion: None, first_row_id: Some(first_row_id) };
            let live = Live { fragment, deleted: Arc::new(RoaringBitmap::new()) };
            rows.added.push((live.fragment.clone(), live.rows()));
            self.set(live.fragment.id, Some(live));
        }
        Ok(())
    }

    /// Applies `deletions` as a commit does: each fragment's rows deleted are its
    /// vector's and its deltas' union; a fragment left with no row is gone; deltas of
    /// fragments gone already are ignored. The rows removed are those newly deleted.
    async fn delete(&mut self, deletions: &[FragmentDeletion], rows: &mut TxnRows) -> Result<(), ChangesError> {
        for d in deletions {
            let Some(live) = self.get(d.fragment_id).await? else { continue };
            let delta = deletion::read(&self.store, &d.path).await?;
            let mut newly = delta.as_ref() - live.deleted.as_ref();
            newly.remove_range(live.fragment.physical_rows as u32..);
            if newly.is_empty() {
                continue;
            }
            let deleted = live.deleted.as_ref() | &newly;
            rows.removed.push((live.fragment.clone(), newly));
            let gone = deleted.len() >= live.fragment.physical_rows;
            self.set(d.fragment_id, (!gone).then(|| Live { fragment: live.fragment, deleted: Arc::new(deleted) }));
        }
        Ok(())
    }

    /// A restore of `version`: its fragments become the state; the rows live before and
    /// not after are removed, those live after and not before added.
    async fn restore(&mut self, version: u64, rows: &mut TxnRows) -> Result<(), ChangesError> {
        let target = self.store.read_manifest(version).await?.ok_or(crate::error::OpenError::Removed { version })?;
        let before: BTreeMap<u64, Live> = self.all().await?.into_iter().map(|l| (l.fragment.id, l)).collect();
        let after = fragments_of(&self.store, &target).await?;
        for (id, live) in &before {
            let kept = after.get(id).map(Live::rows).unwrap_or_default();
            let gone = live.rows() - kept;
            if !gone.is_empty() {
                rows.removed.push((live.fragment.clone(), gone));
            }
        }
        for (id, live) in &after {
            let had = before.get(id).map(Live::rows).unwrap_or_default();
            let new = live.rows() - had;
            if !new.is_empty() {
                rows.added.push((live.fragment.clone(), new));
            }
        }
        rows.restore = true;
        self.touched.extend(before.keys().chain(after.keys()));
        self.changed = after.into_iter().map(|(id, live)| (id, Some(live))).collect();
        self.complete = true;
        self.next = self.next.max(target.next_ids());
        Ok(())
    }

    fn set(&mut self, id: u64, live: Option<Live>) {
        self.changed.insert(id, live);
        self.touched.push(id);
    }

    async fn get(&mut self, id: u64) -> Result<Option<Live>, ChangesError> {
        if let Some(known) = self.changed.get(&id) {
            return Ok(known.clone());
        }
        if self.complete {
            return Ok(None);
        }
        match find(&self.store, &self.base, id).await? {
            Some(fragment) => Ok(Some(live(&self.store, fragment).await?)),
            None => Ok(None),
        }
    }

    /// Every fragment now.
    async fn all(&mut self) -> Result<Vec<Live>, ChangesError> {
        if self.complete {
            return Ok(self.changed.values().flatten().cloned().collect());
        }
        let mut all: BTreeMap<u64, Live> = fragments_of(&self.store, &self.base).await?;
        for (id, state) in &self.changed {
            match state {
                Some(live) => all.insert(*id, live.clone()),
                None => all.remove(id),
            };
        }
        Ok(all.into_values().collect())
    }
}

fn describe(deleted: Option<u64>) -> String {
    match deleted {
        Some(n) => format!("present with {n} rows deleted"),
        None => "gone".to_string(),
    }
}

/// Fragment `id` of `version`, if it holds it (one segment read, cached).
async fn find(store: &TableStore, version: &Manifest, id: u64) -> Result<Option<Fragment>, ChangesError> {
    for segment in version.segments.iter().filter(|s| s.min_fragment_id <= id && id <= s.max_fragment_id) {
        if let Some(f) = store.read_segment(segment).await?.fragments.iter().find(|f| f.id == id) {
            return Ok(Some(f.clone()));
        }
    }
    Ok(None)
}

async fn live(store: &TableStore, fragment: Fragment) -> Result<Live, ChangesError> {
    let deleted = deletion::of_fragment(store, fragment.deletion.as_ref()).await?;
    Ok(Live { fragment, deleted })
}

/// Every fragment of `version`, with its deleted rows.
async fn fragments_of(store: &TableStore, version: &Manifest) -> Result<BTreeMap<u64, Live>, ChangesError> {
    let mut all = BTreeMap::new();
    for segment in &version.segments {
        for f in &store.read_segment(segment).await?.fragments {
            all.insert(f.id, live(store, f.clone()).await?);
        }
    }
    Ok(all)
}

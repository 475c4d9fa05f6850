//! Row lineage of a published version (FORMAT.md §16): each data file's `first_row_id`
//! is its fragment's, so Iceberg's inherited row ids are Concord's derived ones
//! (and the file's `_row_id` column, field 2147483540, carries the others); its data
//! sequence number, which Iceberg readers give every row as
//! `_last_updated_sequence_number`, is the version that last wrote every row of the
//! file, or 0 where no one version did or it is not known.
//!
//! Invariant: a fragment's sequence numbers are facts of its history (the version that
//! committed it, and for a compaction's output those of its inputs), never of the
//! version publishing it, so a manifest stays a function of its segment.

use std::collections::{HashMap, HashSet};

use super::avro::{self, Seqs};
use super::{PublishError, DIR};
use crate::format::manifest::{Fragment, Manifest, Operation};
use crate::storage::TableStore;

/// What wrote a data file of the version being published.
enum Written {
    /// An append, overwrite, update or merge: every row was written by this version.
    Now,
    /// A compaction: its rows were moved unchanged from the fragments of these first
    /// row ids (`None`: an input no longer known).
    Moved(Vec<Option<u64>>),
}

/// The sequence numbers of the fragments of one version, as its manifests need them.
pub(super) struct Lineage {
    version: i64,
    /// The data files this version's transactions wrote, by path.
    written: HashMap<String, Written>,
    /// Earlier fragments' sequence numbers, by first row id (unique to a fragment), from
    /// manifests already read.
    known: HashMap<u64, Seqs>,
    /// The previous version's data manifests (names relative to the table), read on a miss.
    unread: Vec<String>,
    /// Manifests read (or found absent).
    read: HashSet<String>,
}

/// The `first_row_id` of a fragment's data file.
pub(super) fn first_row_id(fragment: &Fragment) -> i64 {
    fragment.first_row_id() as i64
}

/// The first row ids of fragments `ids` of `version` (those found: a removed version
/// gives none).
async fn first_row_ids(store: &TableStore, version: u64, ids: &HashSet<u64>) -> Result<HashMap<u64, u64>, PublishError> {
    let mut found = HashMap::new();
    let Some(manifest) = store.read_manifest(version).await? else { return Ok(found) };
    for reference in &manifest.segments {
        if !ids.iter().any(|id| (reference.min_fragment_id..=reference.max_fragment_id).contains(id)) {
            continue;
        }
        for f in &store.read_segment(reference).await?.fragments {
            if ids.contains(&f.id) {
                found.insert(f.id, f.first_row_id());
            }
        }
    }
    Ok(found)
}

/// The name, relative to the table, of a manifest listed by its URI.
fn relative(uri: &str) -> Option<String> {
    let name = uri.rsplit_once(&format!("/{DIR}/"))?.1;
    Some(format!("{DIR}/{name}"))
}

impl Lineage {
    /// The lineage of `manifest`'s version; `previous` are the URIs of the data manifests
    /// the previous published version listed and this one does not (where its rebuilt
    /// segments' earlier fragments are).
    pub(super) async fn new(store: &TableStore, manifest: &Manifest, previous: &[&str]) -> Result<Self, PublishError> {
        let inputs: HashSet<u64> = manifest
            .transactions
            .iter()
            .flat_map(|t| match &t.operation {
                Operation::Compact { groups, .. } => groups.iter().flat_map(|g| g.inputs.iter().map(|i| i.fragment_id)).collect(),
                _ => Vec::new(),
            })
            .collect();
        // A compaction commits alone: its inputs are its parent's fragments.
        let input_rows = match (inputs.is_empty(), manifest.parent_version) {
            (false, Some(parent)) => first_row_ids(store, parent, &inputs).await?,
            _ => HashMap::new(),
        };
        let mut written = HashMap::new();
        for t in &manifest.transactions {
            let new = match &t.operation {
                Operation::Append { fragments }
                | Operation::Overwrite { fragments, .. }
                | Operation::ReplaceWhere { fragments, .. }
                | Operation::Update { fragments, .. }
                | Operation::Merge { fragments, .. } => fragments.iter().collect(),
                Operation::Compact { groups, .. } => {
                    for g in groups {
                        let inputs: Vec<Option<u64>> = g.inputs.iter().map(|i| input_rows.get(&i.fragment_id).copied()).collect();
                        for file in g.outputs.iter().flat_map(|f| &f.files) {
                            written.insert(file.path.clone(), Written::Moved(inputs.clone()));
                        }
                    }
                    Vec::new()
                }
                _ => Vec::new(),
            };
            for file in new.into_iter().flat_map(|f| &f.files) {
                written.insert(file.path.clone(), Written::Now);
            }
        }
        let unread = previous.iter().filter_map(|uri| relative(uri)).collect();
        Ok(Lineage { version: manifest.version as i64, written, known: HashMap::new(), unread, read: HashSet::new() })
    }

    /// The sequence numbers of `fragments`' data files, in order: those of a segment whose
    /// data manifest is `own` (relative to the table). On a miss `own` is read first when
    /// the previous version listed it, else last (it may exist unlisted, e.g. after its
    /// list was removed: its entries are then the ones a rebuild must repeat).
    pub(super) async fn seqs(&mut self, store: &TableStore, fragments: &[Fragment], own: &str) -> Result<Vec<Seqs>, PublishError> {
        let needed: Vec<u64> = fragments
            .iter()
            .flat_map(|f| match self.written.get(&f.files[0].path) {
                Some(Written::Now) => Vec::new(),
                Some(Written::Moved(inputs)) => inputs.iter().flatten().copied().collect(),
                None => vec![f.first_row_id()],
            })
            .collect();
        match self.unread.iter().position(|n| n == own) {
            Some(i) => {
                let name = self.unread.remove(i);
                self.unread.insert(0, name);
            }
            None => self.unread.push(own.to_string()),
        }
        while needed.iter().any(|id| !self.known.contains_key(id)) && !self.unread.is_empty() {
            let name = self.unread.remove(0);
            if !self.read.insert(name.clone()) {
                continue;
            }
            // A manifest removed by hand, or written before row lineage: its files' are not known.
            let Some(bytes) = store.get_metadata_object(&name).await? else { continue };
            for (first_row_id, seqs) in avro::read_data_entries(&bytes).unwrap_or_default() {
                self.known.insert(first_row_id as u64, seqs);
            }
        }
        Ok(fragments.iter().map(|f| self.of(f)).collect())
    }

    /// A fragment's sequence numbers from what is known (0: not known).
    fn of(&self, f: &Fragment) -> Seqs {
        let now = self.version;
        match self.written.get(&f.files[0].path) {
            Some(Written::Now) => Seqs { data: now, file: now },
            Some(Written::Moved(inputs)) => {
                // Exact only when every input's rows were last written by one version.
                let mut data = inputs.iter().map(|id| id.and_then(|id| self.known.get(&id)).map_or(0, |s| s.data));
                let first = data.next().unwrap_or(0);
                Seqs { data: if data.all(|d| d == first) { first } else { 0 }, file: now }
            }
            None => self.known.get(&f.first_row_id()).copied().unwrap_or_default(),
        }
    }
}

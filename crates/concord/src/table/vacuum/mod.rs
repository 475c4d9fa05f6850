//! Vacuum: removes versions older than the retention, and objects no retained version
//! (nor a staged transaction still within the retention) references.
//!
//! Safety rules:
//! - the latest version is always kept; versions are removed oldest first, so the
//!   retained ones stay one chain;
//! - an object is removed only if no retained version and no retained staged
//!   transaction references it AND it was last modified before the cutoff: files of an
//!   in-flight transaction younger than the retention are never touched;
//! - a writer whose winners were removed gets `CommitError::HistoryRemoved`, never a
//!   corrupt table.

mod chains;

use std::collections::HashSet;
use std::time::Duration;

use chrono::{DateTime, Utc};

use super::Table;
use crate::error::WriteError;
use crate::format::naming;
use crate::iceberg;
use crate::storage::TableStore;
use crate::txn::PreparedTransaction;

/// Vacuum refuses retentions shorter than this unless told otherwise: a write's
/// prepare-to-commit time must stay below the retention.
pub const MIN_VACUUM_RETENTION: Duration = Duration::from_secs(3600);

/// What a vacuum removed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct VacuumReport {
    /// Versions removed.
    pub versions_removed: u64,
    /// The oldest version kept.
    pub oldest_retained: u64,
    /// Objects removed.
    pub objects_removed: u64,
    /// Their bytes.
    pub bytes_removed: u64,
    /// Objects kept (referenced, or younger than the retention).
    pub objects_kept: u64,
    /// Consumers of the change feed that held versions back (kept from their position
    /// on, however old): name and position.
    pub held_by_consumers: Vec<(String, u64)>,
    /// Branches made from this one that held versions back (kept from the version they
    /// started at, which their merges are judged from): name and version.
    pub held_by_branches: Vec<(String, u64)>,
    /// Tags that kept versions older than the retention (each its version alone): name
    /// and version.
    pub held_by_tags: Vec<(String, u64)>,
}

/// The oldest version a vacuum keeps, and who held older ones back.
struct Retained {
    oldest: u64,
    consumers: Vec<(String, u64)>,
    branches: Vec<(String, u64)>,
}

impl Table {
    /// Removes versions committed before `now - older_than` (never the latest) and the
    /// objects only they referenced; see the module docs. `allow_short` permits a
    /// retention under [`MIN_VACUUM_RETENTION`] (only safe with no concurrent writers
    /// slower than it).
    pub async fn vacuum(&self, older_than: Duration, allow_short: bool) -> Result<VacuumReport, WriteError> {
        if older_than < MIN_VACUUM_RETENTION && !allow_short {
            return Err(crate::error::AlterError::ShortRetention {
                given_s: older_than.as_secs(),
                minimum_s: MIN_VACUUM_RETENTION.as_secs(),
            }
            .into());
        }
        let now = self.env.clock.now();
        // A retention longer than the calendar goes back keeps everything.
        let cutoff: DateTime<Utc> =
            chrono::TimeDelta::from_std(older_than).ok().and_then(|d| now.checked_sub_signed(d)).unwrap_or(DateTime::<Utc>::MIN_UTC);
        let versions = self.store.list_versions().await?;
        let Retained { oldest: oldest_retained, consumers, branches } = self.oldest_retained(&versions, cutoff).await?;
        let tagged = self.tagged_here().await?;
        let kept = |v: &u64| *v >= oldest_retained || tagged.iter().any(|(_, t)| t == v);
        let mut referenced = self.referenced(versions.iter().copied().filter(kept)).await?;
        let held_by_tags = tagged.iter().filter(|(_, v)| *v < oldest_retained && versions.contains(v)).cloned().collect();
        let mut report =
            VacuumReport { oldest_retained, held_by_consumers: consumers, held_by_branches: branches, held_by_tags, ..Default::default() };
        // Versions first (oldest first): nobody can start reading them while their
        // files go.
        // Through the coordinator: it knows what else a version is (a DynamoDB row).
        for v in versions.iter().filter(|v| !kept(v)) {
            self.store.remove_version(*v).await?;
            report.versions_removed += 1;
        }
        referenced.extend(self.referenced_in_flight(cutoff).await?);
        referenced.extend(self.referenced_elsewhere(cutoff, &mut report).await?);
        self.trim_consumers(cutoff, &mut report).await?;
        // What doctor runs that were killed left (never referenced by anything).
        for (relative, meta) in self.store.list_dir(crate::storage::PROBE_DIR).await? {
            if self.store.is_stale_probe(&meta, now) {
                self.store.delete(&relative).await?;
                report.objects_removed += 1;
                report.bytes_removed += meta.size;
            }
        }
        // Iceberg metadata (FORMAT.md §16) goes with the versions it describes.
        for dir in [
            naming::DATA_DIR,
            naming::SEGMENTS_DIR,
            naming::DELETIONS_DIR,
            naming::TRANSACTIONS_DIR,
            naming::ANNOUNCED_DIR,
            "_staging",
            iceberg::DIR,
        ] {
            for (relative, meta) in self.store.list_dir(dir).await? {
                if referenced.contains(&relative) || meta.last_modified >= cutoff {
                    report.objects_kept += 1;
                    continue;
                }
                self.store.delete(&relative).await?;
                report.objects_removed += 1;
                report.bytes_removed += meta.size;
            }
        }
        Ok(report)
    }

    /// The oldest version vacuum keeps: the oldest of those committed at or after
    /// `cutoff` (the latest always), or older, from the oldest consumer's position on
    /// (it may still read their changes); and the consumers that held versions back.
    async fn oldest_retained(&self, versions: &[u64], cutoff: DateTime<Utc>) -> Result<Retained, WriteError> {
        let mut oldest = self.latest().await?.version();
        for v in versions.iter().rev() {
            match self.store.read_manifest(*v).await? {
                Some(m) if m.timestamp >= cutoff => oldest = *v,
                _ => break,
            }
        }
        let consumers = self.consumers().await.map_err(consumer_error)?;
        let held: Vec<(String, u64)> = consumers.iter().filter(|c| c.version < oldest).map(|c| (c.name.clone(), c.version)).collect();
        // A branch made from this chain merges back against its versions since the
        // branch started: they are kept while it lives.
        let children = self.live_branches().await.map_err(chains::branch_error)?;
        let forks = children.iter().filter(|(_, n)| n.record.from_chain == self.store.chain() && n.record.from_version < oldest);
        let branches: Vec<(String, u64)> = forks.map(|(name, n)| (name.clone(), n.record.from_version)).collect();
        if let Some(min) = held.iter().chain(&branches).map(|(_, v)| *v).min() {
            oldest = versions.iter().copied().find(|v| *v >= min).unwrap_or(oldest).min(oldest);
        }
        Ok(Retained { oldest, consumers: held, branches })
    }

    /// The tags of versions of this handle's chain: name and version.
    async fn tagged_here(&self) -> Result<Vec<(String, u64)>, WriteError> {
        let tags = self.all_tags().await.map_err(tag_error)?;
        Ok(tags.into_iter().filter(|(_, t)| t.record.chain == self.store.chain()).map(|(name, t)| (name, t.record.version)).collect())
    }

    /// The objects versions `versions` name: segments, data files, deletion vectors and
    /// their Iceberg forms.
    async fn referenced(&self, versions: impl Iterator<Item = u64>) -> Result<HashSet<String>, WriteError> {
        referenced_by(&self.store, versions).await
    }

    /// The files of staged and announced transactions within the retention (they may
    /// still commit).
    async fn referenced_in_flight(&self, cutoff: DateTime<Utc>) -> Result<Vec<String>, WriteError> {
        let mut referenced = Vec::new();
        for (relative, meta) in self.store.list_dir(naming::TRANSACTIONS_DIR).await? {
            if meta.last_modified >= cutoff {
                if let Ok(Some(txn)) = self.read_staged(&relative).await {
                    referenced.extend(txn.operation.written_files().into_iter().map(str::to_string));
                }
            }
        }
        for (relative, meta) in self.store.list_dir(naming::ANNOUNCED_DIR).await? {
            if meta.last_modified >= cutoff && relative.ends_with(".json") {
                if let Ok(Some(announced)) = self.store.read_announcement(&relative).await {
                    referenced.extend(announced.transaction.operation.written_files().into_iter().map(str::to_string));
                }
            }
        }
        Ok(referenced)
    }

    /// Removes the records of each consumer older than the cutoff but its newest (a
    /// consumer is its newest record; older ones only make its chain longer). A dropped
    /// consumer's newest record goes too, once older than the cutoff.
    async fn trim_consumers(&self, cutoff: DateTime<Utc>, report: &mut VacuumReport) -> Result<(), WriteError> {
        for folder in self.store.list_dir_names(naming::CONSUMERS_DIR).await? {
            let Some(name) = folder.strip_suffix('/').and_then(|f| f.rsplit('/').next()) else { continue };
            let records = self.store.chain_records(&super::changes::consumer_records(name))?;
            let mut dated: Vec<(u64, object_store::ObjectMeta)> = Vec::new();
            for (relative, meta) in self.store.list_dir(&format!("{}{}", folder, naming::VERSIONS_DIR)).await? {
                if let Some(number) = relative.rsplit('/').next().and_then(naming::parse_version_file_name) {
                    dated.push((number, meta));
                }
            }
            dated.sort_by_key(|(number, _)| *number);
            let newest = dated.pop();
            let dropped_and_old = match &newest {
                Some((number, meta)) => meta.last_modified < cutoff && self.is_drop_record(&records, *number).await,
                None => false,
            };
            for (number, meta) in dated.into_iter().chain(newest.filter(|_| dropped_and_old)) {
                if meta.last_modified < cutoff {
                    records.remove(number).await?;
                    report.objects_removed += 1;
                    report.bytes_removed += meta.size;
                }
            }
        }
        Ok(())
    }

    /// The staged transaction at `relative` (`None`: gone meanwhile).
    async fn read_staged(&self, relative: &str) -> Result<Option<PreparedTransaction>, WriteError> {
        let Some(bytes) = self.store.get_metadata_object(relative).await? else { return Ok(None) };
        Ok(Some(crate::decode::transaction(&self.store.display(relative), &bytes)?))
    }
}

/// A consumer error met by vacuum: a storage error stays one; anything else is the
/// consumer's record being unreadable.
fn consumer_error(e: crate::error::ConsumerError) -> WriteError {
    match e {
        crate::error::ConsumerError::Storage(s) => s.into(),
        crate::error::ConsumerError::Open(o) => o.into(),
        crate::error::ConsumerError::Corrupt(c) => c.into(),
        other => crate::error::CorruptObject { path: naming::CONSUMERS_DIR.to_string(), reason: other.to_string() }.into(),
    }
}

fn tag_error(e: crate::error::TagError) -> WriteError {
    match e {
        crate::error::TagError::Storage(s) => s.into(),
        crate::error::TagError::Open(o) => o.into(),
        crate::error::TagError::Corrupt(c) => c.into(),
        other => crate::error::CorruptObject { path: crate::format::refs::TAGS_DIR.to_string(), reason: other.to_string() }.into(),
    }
}

/// The objects versions `versions` of `store`'s chain name: segments, data files,
/// deletion vectors and their Iceberg forms.
async fn referenced_by(store: &TableStore, versions: impl Iterator<Item = u64>) -> Result<HashSet<String>, WriteError> {
    let mut referenced = HashSet::new();
    for v in versions {
        let Some(m) = store.read_manifest(v).await? else { continue };
        referenced.extend(iceberg::referenced_names(&m));
        for segment in &m.segments {
            if segment.inline.is_none() {
                referenced.insert(segment.path.clone());
            }
            for f in &store.read_segment(segment).await?.fragments {
                referenced.extend(f.files.iter().map(|d| d.path.clone()));
                referenced.extend(f.deletion.iter().flat_map(|d| [d.path.clone(), iceberg::delete_file_name(&d.path)]));
            }
        }
    }
    Ok(referenced)
}

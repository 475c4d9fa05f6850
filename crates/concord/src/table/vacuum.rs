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

use std::collections::HashSet;
use std::time::Duration;

use chrono::{DateTime, Utc};

use super::Table;
use crate::error::WriteError;
use crate::format::naming;
use crate::iceberg;
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
        let latest = self.latest().await?;
        let versions = self.store.list_versions().await?;
        // Keep every version committed at or after the cutoff, and always the latest.
        let mut oldest_retained = latest.version();
        for v in versions.iter().rev() {
            match self.store.read_manifest(*v).await? {
                Some(m) if m.timestamp >= cutoff => oldest_retained = *v,
                _ => break,
            }
        }
        let mut referenced: HashSet<String> = HashSet::new();
        for v in versions.iter().filter(|v| **v >= oldest_retained) {
            let Some(m) = self.store.read_manifest(*v).await? else { continue };
            referenced.extend(iceberg::referenced_names(&m));
            for segment in &m.segments {
                if segment.inline.is_none() {
                    referenced.insert(segment.path.clone());
                }
                for f in &self.store.read_segment(segment).await?.fragments {
                    referenced.extend(f.files.iter().map(|d| d.path.clone()));
                    referenced.extend(f.deletion.iter().flat_map(|d| [d.path.clone(), iceberg::delete_file_name(&d.path)]));
                }
            }
        }
        let mut report = VacuumReport { oldest_retained, ..Default::default() };
        // Versions first (oldest first): nobody can start reading them while their
        // files go.
        // Through the coordinator: it knows what else a version is (a DynamoDB row).
        for v in versions.iter().filter(|v| **v < oldest_retained) {
            self.store.remove_version(*v).await?;
            report.versions_removed += 1;
        }
        // Staged and announced transactions within the retention keep their files.
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

    /// The staged transaction at `relative` (`None`: gone meanwhile).
    async fn read_staged(&self, relative: &str) -> Result<Option<PreparedTransaction>, WriteError> {
        let Some(bytes) = self.store.get_metadata_object(relative).await? else { return Ok(None) };
        Ok(Some(crate::decode::transaction(&self.store.display(relative), &bytes)?))
    }
}

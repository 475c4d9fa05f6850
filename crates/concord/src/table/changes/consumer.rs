//! Consumers: named cursors of the change feed, stored in the table (FORMAT.md §11,
//! "Consumers"). A consumer is the chain of records `_consumers/<name>` (FORMAT.md
//! §17), each created once: its position is its newest record's version. Moving it
//! creates the next record, so of two processes moving it at once one wins and the
//! other gets [`ConsumerError::Moved`] (compare-and-swap); dropping it is a record too.
//! Vacuum keeps every version from the oldest live consumer's on.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::{ChangeFeed, ChangeOptions};
use crate::error::{ChangesError, ConsumerError, CorruptObject, OpenError};
use crate::format::naming::CONSUMERS_DIR;
use crate::table::Table;

/// A consumer's position.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct ConsumerInfo {
    /// Its name.
    pub name: String,
    /// The version it has read up to: its next changes are those after it.
    pub version: u64,
    /// When it was last moved (UTC).
    pub updated_at: DateTime<Utc>,
}

/// One record of a consumer's chain (its on-disk form).
#[derive(Debug, Serialize, Deserialize)]
struct Record {
    version: u64,
    at: DateTime<Utc>,
    /// Set in the record that drops it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    dropped: bool,
    /// Unique to the writer: an unclear create is ours only if this is.
    writer: uuid::Uuid,
}

/// The newest record of a consumer, and its sequence number.
struct Newest {
    sequence: u64,
    record: Record,
}

/// Longest consumer name.
const MAX_NAME_BYTES: usize = 128;

fn check_name(name: &str) -> Result<(), ConsumerError> {
    let ok = !name.is_empty()
        && name.len() <= MAX_NAME_BYTES
        && !name.starts_with('.')
        && name.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    if ok {
        Ok(())
    } else {
        Err(ConsumerError::BadName { name: name.to_string() })
    }
}

/// The folder of consumer `name`'s records.
pub(crate) fn records_name(name: &str) -> String {
    format!("{CONSUMERS_DIR}/{name}")
}

impl Table {
    /// Creates consumer `name` at `version` (the latest without): its first changes
    /// will be those after it. A name in use is [`ConsumerError::Exists`].
    pub async fn create_consumer(&self, name: &str, version: Option<u64>) -> Result<ConsumerInfo, ConsumerError> {
        check_name(name)?;
        let newest = self.newest_record(name).await?;
        if let Some(n) = newest.as_ref().filter(|n| !n.record.dropped) {
            return Err(ConsumerError::Exists { name: name.to_string(), version: n.record.version });
        }
        let version = self.checked_position(name, version).await?;
        let sequence = newest.map_or(0, |n| n.sequence + 1);
        self.write_record(name, sequence, version, false, None).await
    }

    /// Consumer `name`'s position.
    pub async fn consumer(&self, name: &str) -> Result<ConsumerInfo, ConsumerError> {
        check_name(name)?;
        match self.newest_record(name).await? {
            Some(n) if !n.record.dropped => Ok(ConsumerInfo { name: name.to_string(), version: n.record.version, updated_at: n.record.at }),
            _ => Err(ConsumerError::NotFound { name: name.to_string() }),
        }
    }

    /// Moves consumer `name` to `version` (the latest without), if nobody moved it
    /// since `expected` (its position as this caller read it; without, as read now):
    /// else [`ConsumerError::Moved`], and nothing changes.
    pub async fn advance_consumer(&self, name: &str, version: Option<u64>, expected: Option<u64>) -> Result<ConsumerInfo, ConsumerError> {
        check_name(name)?;
        let newest = match self.newest_record(name).await? {
            Some(n) if !n.record.dropped => n,
            _ => return Err(ConsumerError::NotFound { name: name.to_string() }),
        };
        if let Some(expected) = expected.filter(|e| *e != newest.record.version) {
            return Err(ConsumerError::Moved { name: name.to_string(), expected, found: newest.record.version });
        }
        let version = self.checked_position(name, version).await?;
        self.write_record(name, newest.sequence + 1, version, false, Some(newest.record.version)).await
    }

    /// Every live consumer, by name.
    pub async fn consumers(&self) -> Result<Vec<ConsumerInfo>, ConsumerError> {
        let mut out = Vec::new();
        for entry in self.store.list_dir_names(CONSUMERS_DIR).await? {
            let Some(name) = entry.strip_suffix('/').and_then(|e| e.rsplit('/').next()) else { continue };
            if check_name(name).is_err() {
                continue;
            }
            match self.consumer(name).await {
                Ok(info) => out.push(info),
                Err(ConsumerError::NotFound { .. }) => {}
                Err(e) => return Err(e),
            }
        }
        out.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(out)
    }

    /// Drops consumer `name`: vacuum no longer keeps versions for it.
    pub async fn drop_consumer(&self, name: &str) -> Result<ConsumerInfo, ConsumerError> {
        check_name(name)?;
        let newest = match self.newest_record(name).await? {
            Some(n) if !n.record.dropped => n,
            _ => return Err(ConsumerError::NotFound { name: name.to_string() }),
        };
        self.write_record(name, newest.sequence + 1, newest.record.version, true, Some(newest.record.version)).await
    }

    /// The changes after consumer `name`'s position, up to `to` (the latest without),
    /// and its position. Reading moves nothing: [`Table::advance_consumer`] does.
    pub async fn consumer_changes(
        &self,
        name: &str,
        to: Option<u64>,
        options: &ChangeOptions,
    ) -> Result<(ConsumerInfo, ChangeFeed), ChangesError> {
        let info = self.consumer(name).await?;
        let feed = self.changes(info.version, to, options).await?;
        Ok((info, feed))
    }

    /// `version` (the latest without), which must be retained.
    async fn checked_position(&self, name: &str, version: Option<u64>) -> Result<u64, ConsumerError> {
        let latest = self.latest().await?.version();
        let Some(version) = version else { return Ok(latest) };
        if version <= latest && self.store.read_manifest(version).await?.is_some() {
            return Ok(version);
        }
        let oldest = self.store.list_versions().await.map_err(OpenError::from)?.first().copied().unwrap_or(0);
        Err(ConsumerError::NoSuchVersion { name: name.to_string(), version, oldest, latest })
    }

    /// Creates record `sequence` of consumer `name`; another writer's record there is
    /// [`ConsumerError::Moved`] (or, creating, `Exists`).
    async fn write_record(
        &self,
        name: &str,
        sequence: u64,
        version: u64,
        dropped: bool,
        expected: Option<u64>,
    ) -> Result<ConsumerInfo, ConsumerError> {
        let record = Record { version, at: self.env.clock.now(), dropped, writer: self.env.new_uuid() };
        let bytes = serde_json::to_vec(&record).expect("a record serializes");
        if self.store.chain_records(&records_name(name))?.create(sequence, bytes.into()).await? {
            return Ok(ConsumerInfo { name: name.to_string(), version, updated_at: record.at });
        }
        let found = self.newest_record(name).await?;
        let found_version = found.as_ref().map_or(0, |n| n.record.version);
        Err(match expected {
            Some(expected) => ConsumerError::Moved { name: name.to_string(), expected, found: found_version },
            None => ConsumerError::Exists { name: name.to_string(), version: found_version },
        })
    }

    /// Whether record `number` of the consumer whose records are `records` drops it (an
    /// unreadable one is not taken for a drop).
    pub(crate) async fn is_drop_record(&self, records: &crate::storage::Records, number: u64) -> bool {
        let Ok(Some(bytes)) = records.read(number).await else { return false };
        serde_json::from_slice::<Record>(&bytes).is_ok_and(|r| r.dropped)
    }

    /// The newest record of consumer `name`, if it has any.
    async fn newest_record(&self, name: &str) -> Result<Option<Newest>, ConsumerError> {
        let records = self.store.chain_records(&records_name(name))?;
        let Some((sequence, bytes)) = records.newest().await? else { return Ok(None) };
        let record: Record =
            serde_json::from_slice(&bytes).map_err(|e| CorruptObject { path: records.describe(sequence), reason: e.to_string() })?;
        Ok(Some(Newest { sequence, record }))
    }
}

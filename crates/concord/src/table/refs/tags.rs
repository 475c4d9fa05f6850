//! Tags: names of versions (FORMAT.md §17). A tag is the chain of records
//! `_refs/tags/<name>`; its newest record names a version of one branch's chain, or
//! deletes it. Creating a tag creates the chain's next record, so of two processes
//! creating one name one wins and the other gets [`TagError::Exists`]. Vacuum never
//! removes a tagged version (nor what it references).

use chrono::{DateTime, Utc};
use serde::Serialize;

use crate::error::{CorruptObject, OpenError, RefKind, TagError};
use crate::format::refs::{usable_name, TagRecord, TAGS_DIR};
use crate::storage::Records;
use crate::table::Table;

/// A tag.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct TagInfo {
    /// Its name.
    pub name: String,
    /// The version it names.
    pub version: u64,
    /// The branch of that version.
    pub branch: String,
    /// When it was made (UTC).
    pub created_at: DateTime<Utc>,
}

/// A tag as its newest record has it.
pub(crate) struct Tagged {
    pub number: u64,
    pub record: TagRecord,
}

fn checked(name: &str) -> Result<(), TagError> {
    if usable_name(name) {
        Ok(())
    } else {
        Err(TagError::BadName { name: name.to_string() })
    }
}

fn info(name: &str, record: &TagRecord) -> TagInfo {
    TagInfo { name: name.to_string(), version: record.version, branch: record.branch.clone(), created_at: record.at }
}

impl Table {
    /// Tags version `version` of this handle's branch (its latest without) as `name`. A
    /// name in use is [`TagError::Exists`].
    pub async fn create_tag(&self, name: &str, version: Option<u64>) -> Result<TagInfo, TagError> {
        checked(name)?;
        let records = self.tag_records(name)?;
        let newest = self.newest_tag(&records).await?;
        if let Some(t) = newest.as_ref().filter(|t| !t.record.deleted) {
            return Err(TagError::Exists { name: name.to_string(), version: t.record.version, branch: t.record.branch.clone() });
        }
        let latest = self.latest().await?.version();
        let version = version.unwrap_or(latest);
        if version > latest || self.store.read_manifest_now(version).await?.is_none() {
            return Err(TagError::NoSuchVersion { version, branch: self.branch_name().to_string(), latest });
        }
        let record = TagRecord {
            version,
            branch: self.branch_name().to_string(),
            chain: self.store.chain(),
            at: self.env.clock.now(),
            deleted: false,
            writer: self.env.new_uuid(),
        };
        let number = newest.map_or(0, |t| t.number + 1);
        self.write_tag(&records, number, &record, name).await?;
        Ok(info(name, &record))
    }

    /// Tag `name`.
    pub async fn tag(&self, name: &str) -> Result<TagInfo, TagError> {
        Ok(info(name, &self.live_tag(name).await?.record))
    }

    /// Every tag, by name.
    pub async fn tags(&self) -> Result<Vec<TagInfo>, TagError> {
        let mut out = Vec::new();
        for (name, tagged) in self.all_tags().await? {
            out.push(info(&name, &tagged.record));
        }
        Ok(out)
    }

    /// Deletes tag `name`: vacuum no longer keeps its version for it.
    pub async fn delete_tag(&self, name: &str) -> Result<TagInfo, TagError> {
        let tagged = self.live_tag(name).await?;
        let record = TagRecord { deleted: true, at: self.env.clock.now(), writer: self.env.new_uuid(), ..tagged.record.clone() };
        self.write_tag(&self.tag_records(name)?, tagged.number + 1, &record, name).await?;
        Ok(info(name, &tagged.record))
    }

    /// The version tag `name` names, on its branch: a handle there.
    pub async fn checkout_tag(&self, name: &str) -> Result<Table, OpenError> {
        let record = self.resolve_tag(name).await?;
        self.on_chain(record.chain, &record.branch, Some(record.version)).await
    }

    /// Tag `name`'s record, for reads (errors as reads give them).
    async fn resolve_tag(&self, name: &str) -> Result<TagRecord, OpenError> {
        let unknown = || OpenError::UnknownRef { kind: RefKind::Tag, name: name.to_string() };
        if !usable_name(name) {
            return Err(unknown());
        }
        let records = self.store.records(&format!("{TAGS_DIR}/{name}"))?;
        let Some((number, bytes)) = records.newest().await? else { return Err(unknown()) };
        let record: TagRecord =
            serde_json::from_slice(&bytes).map_err(|e| CorruptObject { path: records.describe(number), reason: e.to_string() })?;
        if record.deleted {
            return Err(unknown());
        }
        Ok(record)
    }

    /// Every live tag, with its newest record, by name.
    pub(crate) async fn all_tags(&self) -> Result<Vec<(String, Tagged)>, TagError> {
        let mut out = Vec::new();
        for folder in self.store.list_dir_names(TAGS_DIR).await? {
            let Some(name) = folder.strip_suffix('/').and_then(|f| f.rsplit('/').next()) else { continue };
            if !usable_name(name) {
                continue;
            }
            if let Some(tagged) = self.newest_tag(&self.tag_records(name)?).await?.filter(|t| !t.record.deleted) {
                out.push((name.to_string(), tagged));
            }
        }
        out.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(out)
    }

    fn tag_records(&self, name: &str) -> Result<Records, TagError> {
        Ok(self.store.records(&format!("{TAGS_DIR}/{name}"))?)
    }

    async fn live_tag(&self, name: &str) -> Result<Tagged, TagError> {
        checked(name)?;
        match self.newest_tag(&self.tag_records(name)?).await? {
            Some(t) if !t.record.deleted => Ok(t),
            _ => Err(TagError::NotFound { name: name.to_string() }),
        }
    }

    async fn newest_tag(&self, records: &Records) -> Result<Option<Tagged>, TagError> {
        let Some((number, bytes)) = records.newest().await? else { return Ok(None) };
        let record = serde_json::from_slice(&bytes).map_err(|e| CorruptObject { path: records.describe(number), reason: e.to_string() })?;
        Ok(Some(Tagged { number, record }))
    }

    async fn write_tag(&self, records: &Records, number: u64, record: &TagRecord, name: &str) -> Result<(), TagError> {
        let bytes = serde_json::to_vec(record).expect("a tag record serializes");
        if records.create(number, bytes.into()).await? {
            return Ok(());
        }
        Err(match self.newest_tag(records).await? {
            Some(t) if !t.record.deleted && !record.deleted => {
                TagError::Exists { name: name.to_string(), version: t.record.version, branch: t.record.branch }
            }
            found => TagError::Moved {
                name: name.to_string(),
                expected: record.version,
                found: found.map_or(record.version, |t| t.record.version),
            },
        })
    }
}

/// A version given by number or by tag name (the CLI's `--version`, Python's
/// `version=`): digits are a number, anything else a tag's name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum VersionRef {
    /// A version number of the handle's branch.
    Number(u64),
    /// A tag's name.
    Tag(String),
}

impl VersionRef {
    /// `text` as a version: all digits are a number, else a tag name.
    pub fn parse(text: &str) -> VersionRef {
        match text.parse::<u64>() {
            Ok(n) if text.bytes().all(|b| b.is_ascii_digit()) => VersionRef::Number(n),
            _ => VersionRef::Tag(text.to_string()),
        }
    }
}

impl std::fmt::Display for VersionRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            VersionRef::Number(n) => write!(f, "{n}"),
            VersionRef::Tag(t) => f.write_str(t),
        }
    }
}

impl Table {
    /// The version `at` names: a version of this handle's branch, or a tag's (on its
    /// own branch).
    pub async fn checkout_ref(&self, at: &VersionRef) -> Result<Table, OpenError> {
        match at {
            VersionRef::Number(v) => self.checkout(*v).await,
            VersionRef::Tag(name) => self.checkout_tag(name).await,
        }
    }

    /// The version number `at` names on this handle's branch (a tag of another branch
    /// is refused: its number means another chain's version).
    pub async fn version_of(&self, at: &VersionRef) -> Result<u64, OpenError> {
        match at {
            VersionRef::Number(v) => Ok(*v),
            VersionRef::Tag(name) => {
                let tag = self.resolve_tag(name).await?;
                if tag.chain != self.store.chain() {
                    return Err(OpenError::TagOfAnotherBranch {
                        tag: name.to_string(),
                        version: tag.version,
                        branch: tag.branch,
                        asked: self.branch_name().to_string(),
                    });
                }
                Ok(tag.version)
            }
        }
    }
}

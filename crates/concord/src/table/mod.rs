//! The table API: one handle per (table, version).

mod after_commit;
mod changes;
mod input;
mod maintain;
mod prepare;
mod read;
mod refs;
mod staged;
mod together;
mod vacuum;
mod write;

use std::collections::BTreeMap;
use std::sync::Arc;

use chrono::{DateTime, Utc};

use crate::env::Env;
use crate::error::{CreateError, OpenError};
use crate::format::manifest::{format_for, IsolationLevel, Manifest, Operation, TransactionRecord, PROPERTY_ISOLATION};
use crate::format::refs::ChainId;
use crate::format::schema::Schema;
pub(crate) use crate::io::write::Progress;
pub use crate::io::write::{ProgressFn, WriteProgress};
use crate::storage::{TableLocation, TableStore};
use crate::txn::group::CommitQueue;
use crate::txn::handle::{HandleMemory, Writer};

pub use after_commit::AUTO_COMPACT_MAX_FRAGMENTS;
pub use changes::{ApplyError, ChangeFeed, ChangeOptions, ConsumerInfo, RowsById, CHANGE_COLUMNS};
pub use input::Input;
pub use maintain::DEFAULT_COMPACT_TARGET_ROWS;
pub use read::{ScanOptions, TableScan, TransactionInfo, VersionInfo};
pub use refs::{BranchInfo, MergeInfo, TagInfo, VersionRef};
pub use together::commit_together;
pub use vacuum::{VacuumReport, MIN_VACUUM_RETENTION};
pub use write::Write;

/// A table at one version. Cheap to clone. Writes commit on top of the latest version
/// (rebasing as the concurrency contract says), not necessarily this handle's version.
#[derive(Debug, Clone)]
pub struct Table {
    store: Arc<TableStore>,
    env: Env,
    manifest: Arc<Manifest>,
    /// Shared by clones: what the handle's commits learned of the table.
    memory: Arc<HandleMemory>,
    /// Shared by clones: transactions committed through them at the same moment share
    /// a version (group commit).
    queue: Arc<CommitQueue>,
    /// Whether this handle's commits may share a version (see [`Table::with_group_commit`]).
    group_commit: bool,
    /// Told how a write's data is going (see [`Table::with_progress`]).
    progress: Progress,
}

impl Table {
    /// Creates an empty table (version 0) with `schema`.
    pub async fn create(location: TableLocation, env: Env, schema: Schema) -> Result<Table, CreateError> {
        Table::create_with_properties(location, env, schema, &BTreeMap::new()).await
    }

    /// Creates an empty table (version 0) with `schema` and table `properties` (as
    /// `set_properties` takes them; the rest have their defaults).
    pub async fn create_with_properties(
        location: TableLocation,
        env: Env,
        schema: Schema,
        properties: &BTreeMap<String, String>,
    ) -> Result<Table, CreateError> {
        let mut all = BTreeMap::from([(PROPERTY_ISOLATION.to_string(), IsolationLevel::Serializable.as_str().to_string())]);
        all.extend(maintain::checked_properties(properties, &[])?);
        let store = Arc::new(TableStore::new(location));
        if store.latest_version(None).await?.is_some() {
            return Err(CreateError::AlreadyExists { uri: store.uri().to_string() });
        }
        if let Some(found) = store.first_object().await? {
            return Err(CreateError::NotEmpty { uri: store.uri().to_string(), found });
        }
        let manifest = Manifest {
            format_version: format_for(&schema),
            version: 0,
            parent_version: None,
            timestamp: env.clock.now(),
            transactions: vec![TransactionRecord::own(env.new_uuid(), None, Operation::Create)],
            schema,
            segments: Vec::new(),
            next_fragment_id: 0,
            next_row_id: 0,
            properties: all,
        };
        if crate::txn::settle::create_table(&store, &manifest).await? {
            let manifest = store.remember(manifest);
            let memory = Arc::new(HandleMemory::default());
            memory.saw_newest(&manifest, env.clock.monotonic());
            let table = Table::handle(store, memory, env, manifest);
            table.publish_if_asked(0).await;
            Ok(table)
        } else {
            Err(CreateError::AlreadyExists { uri: store.uri().to_string() })
        }
    }

    /// Opens the latest version.
    pub async fn open(location: TableLocation, env: Env) -> Result<Table, OpenError> {
        let store = Arc::new(TableStore::new(location));
        let memory = Arc::new(HandleMemory::default());
        let manifest = latest_manifest(&store, &env, &memory, None).await?;
        Ok(Table::handle(store, memory, env, manifest))
    }

    /// Opens version `version` without reading the latest one (which may be unreadable).
    pub async fn open_version(location: TableLocation, env: Env, version: u64) -> Result<Table, OpenError> {
        let store = Arc::new(TableStore::new(location));
        let manifest = version_now(&store, version).await?;
        Ok(Table::handle(store, Arc::default(), env, manifest))
    }

    /// The latest version of this table, as of now (looked up: one LIST or probe).
    pub async fn latest(&self) -> Result<Table, OpenError> {
        let known = self.memory.newest_known().map_or(self.manifest.version, |m| m.version.max(self.manifest.version));
        let manifest = latest_manifest(&self.store, &self.env, &self.memory, Some(known)).await?;
        Ok(self.with_manifest(manifest))
    }

    /// The newest version this handle (or a clone of it) has seen: opened, looked up,
    /// lost a commit race to, or committed. No I/O; after a write through this handle,
    /// the version it committed (or a newer one).
    pub fn newest_known(&self) -> Table {
        match self.memory.newest_known() {
            Some(m) if m.version > self.manifest.version => self.with_manifest(m),
            _ => self.clone(),
        }
    }

    /// The version a write prepares against: the newest this handle knows if it
    /// learned of it within the last second (no request), else the latest, looked up.
    /// Either is correct: winners the handle did not know of are judged at commit.
    pub(crate) async fn write_base(&self) -> Result<Table, OpenError> {
        match self.memory.fresh_newest(self.env.clock.monotonic()) {
            Some(m) => Ok(self.with_manifest(m)),
            None => self.latest().await,
        }
    }

    /// Version `version` of this table.
    pub async fn checkout(&self, version: u64) -> Result<Table, OpenError> {
        Ok(self.with_manifest(version_now(&self.store, version).await?))
    }

    /// The newest version committed at or before `at`. Version timestamps strictly
    /// increase along the chain, so this bisects: O(log versions) reads.
    pub async fn checkout_as_of(&self, at: DateTime<Utc>) -> Result<Table, OpenError> {
        let latest = latest_manifest(&self.store, &self.env, &self.memory, Some(self.manifest.version)).await?;
        if latest.timestamp <= at {
            return Ok(self.with_manifest(latest));
        }
        let oldest_version = match self.store.read_manifest(0).await? {
            Some(_) => 0,
            None => self.store.list_versions().await?.first().copied().unwrap_or(0),
        };
        match self.bisect_as_of(oldest_version, &latest, at).await {
            // Versions kept below removed ones (tagged, FORMAT.md §14): bisect the
            // unbroken run up to the latest; a time before it is in a removed version.
            Err(OpenError::Removed { .. }) => {
                let versions = self.store.list_versions().await?;
                let unbroken = versions.iter().rev().zip((0..=latest.version).rev()).take_while(|(v, want)| *v == want).last();
                self.bisect_as_of(unbroken.map_or(latest.version, |(v, _)| *v), &latest, at).await
            }
            other => other,
        }
    }

    /// The newest version committed at or before `at`, between `oldest` and `latest`
    /// (every version between them retained).
    async fn bisect_as_of(&self, oldest: u64, latest: &Arc<Manifest>, at: DateTime<Utc>) -> Result<Table, OpenError> {
        let oldest = self.read_required(oldest).await?;
        if oldest.timestamp > at {
            return Err(OpenError::NoVersionAt { at: at.to_rfc3339(), oldest: oldest.timestamp.to_rfc3339() });
        }
        let (mut lo, mut hi) = (oldest, latest.version); // lo.timestamp <= at < timestamp(hi)
        while hi - lo.version > 1 {
            let mid = self.read_required(lo.version + (hi - lo.version) / 2).await?;
            if mid.timestamp <= at {
                lo = mid
            } else {
                hi = mid.version
            }
        }
        // A version that does not count reads as the one before it.
        Ok(self.with_manifest(crate::txn::multi::visible(&self.store, lo).await?))
    }

    /// This handle, with group commit on or off (on by default). On, the data writes
    /// (append, delete, update, merge, overwrite with a filter) that tasks commit through
    /// clones of one handle at the same moment share a version: one conditional create
    /// for all, each judged against the winners on its own, each with its own outcome.
    /// A lone writer never waits for company. Off, every transaction gets a version of
    /// its own. Transactions with an expected version, schema and property changes,
    /// restores, overwrites and compactions always commit alone.
    pub fn with_group_commit(mut self, on: bool) -> Table {
        self.group_commit = on;
        self
    }

    /// This handle, telling `progress` how each write's data is going (rows taken from
    /// the input, bytes written) as appends and overwrites write it: the CLI shows it.
    pub fn with_progress(mut self, progress: ProgressFn) -> Table {
        self.progress = Progress(Some(progress));
        self
    }

    /// A new handle (its own commit queue) at `manifest`.
    fn handle(store: Arc<TableStore>, memory: Arc<HandleMemory>, env: Env, manifest: Arc<Manifest>) -> Table {
        Table { store, env, manifest, memory, queue: Arc::default(), group_commit: true, progress: Progress::default() }
    }

    /// What a commit through this handle works with.
    pub(crate) fn writer(&self) -> Writer<'_> {
        Writer { store: &self.store, env: &self.env, memory: &self.memory }
    }

    /// Commits `txn` through the handle's queue (group commit, if on).
    pub(crate) async fn commit_queued(
        &self,
        txn: &crate::txn::PreparedTransaction,
        options: &crate::txn::CommitOptions,
    ) -> Result<crate::txn::CommitInfo, crate::error::CommitError> {
        self.queue.commit(&self.store, &self.env, &self.memory, txn, options, self.group_commit).await
    }

    /// The version this handle reads.
    pub fn version(&self) -> u64 {
        self.manifest.version
    }

    /// The schema of that version.
    pub fn schema(&self) -> &Schema {
        &self.manifest.schema
    }

    /// That version's root manifest.
    pub fn manifest(&self) -> &Manifest {
        &self.manifest
    }

    /// The table's URI, as given.
    pub fn uri(&self) -> &str {
        self.store.uri()
    }

    /// The branch this handle reads and writes (`main`: the table's own chain).
    pub fn branch_name(&self) -> &str {
        self.store.branch()
    }

    /// A handle on chain `chain` (branch `branch`) of the same table, at `version` (its
    /// latest without). The same handle if it is this one's chain.
    pub(crate) async fn on_chain(&self, chain: ChainId, branch: &str, version: Option<u64>) -> Result<Table, OpenError> {
        let (store, memory) = if chain == self.store.chain() {
            (self.store.clone(), self.memory.clone())
        } else {
            (Arc::new(self.store.for_chain(chain, branch)?), Arc::default())
        };
        let manifest = match version {
            Some(v) => version_now(&store, v).await?,
            None => latest_manifest(&store, &self.env, &memory, None).await?,
        };
        Ok(Table::handle(store, memory, self.env.clone(), manifest))
    }

    /// Live rows of this version, from the manifest alone (no data read).
    pub fn row_count(&self) -> u64 {
        self.manifest.live_rows()
    }

    /// The table's store (for the SQL provider, which reads this version's fragments).
    pub(crate) fn store(&self) -> &Arc<TableStore> {
        &self.store
    }

    fn with_manifest(&self, manifest: Arc<Manifest>) -> Table {
        Table { manifest, ..self.clone() }
    }

    async fn read_required(&self, version: u64) -> Result<Arc<Manifest>, OpenError> {
        // Versions around it exist: cleanup removed it during this read. Not from the
        // cache, so that time travel never finds a removed version.
        self.store.read_manifest_now(version).await?.ok_or(OpenError::Removed { version })
    }
}

/// The latest version, looked up (and remembered as the newest the handle has seen).
async fn latest_manifest(store: &TableStore, env: &Env, memory: &HandleMemory, known: Option<u64>) -> Result<Arc<Manifest>, OpenError> {
    let not_found = || not_a_table(store).unwrap_or_else(|| OpenError::NotFound { uri: store.uri().to_string() });
    let latest = match store.latest_version(known).await {
        Ok(latest) => latest.ok_or_else(not_found)?,
        Err(e) => return Err(not_a_table(store).unwrap_or(OpenError::Storage(e))),
    };
    // A version seen in a listing or probe can only disappear through cleanup.
    let manifest = store.read_manifest(latest).await?.ok_or_else(not_found)?;
    // A multi-table transaction's version counts once it is decided committed.
    let manifest = crate::txn::multi::visible(store, manifest).await?;
    memory.saw_newest(&manifest, env.clock.monotonic());
    Ok(manifest)
}

/// Version `version` as the store holds it now (not from the cache: a version vacuum
/// removed must not be found); if it is not there, which versions are.
async fn version_now(store: &TableStore, version: u64) -> Result<Arc<Manifest>, OpenError> {
    if let Some(manifest) = store.read_manifest_now(version).await? {
        if !crate::txn::multi::counts(store, &manifest).await? {
            return Err(OpenError::NotCommitted { version });
        }
        return Ok(manifest);
    }
    let versions = store.list_versions().await?;
    if versions.contains(&version) {
        // Committed between the read and the listing.
        if let Some(manifest) = store.read_manifest_now(version).await? {
            return Ok(manifest);
        }
    }
    match (versions.first(), versions.last()) {
        (Some(&oldest), Some(&latest)) => Err(OpenError::VersionNotFound { version, oldest, latest }),
        _ => Err(OpenError::NotFound { uri: store.uri().to_string() }),
    }
}

/// A local path that is a file: no table can be there (a table is a folder).
fn not_a_table(store: &TableStore) -> Option<OpenError> {
    let folder = store.local_folder()?;
    folder.is_file().then(|| OpenError::NotATable { uri: store.uri().to_string() })
}

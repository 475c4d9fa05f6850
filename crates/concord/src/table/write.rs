//! Writing: prepare (write data or deletion files, build the transaction), then
//! commit, or stage the prepared transaction to commit later (two-phase).

use std::path::PathBuf;

use arrow::array::RecordBatch;
use bytes::Bytes;
use uuid::Uuid;

use super::Table;
use crate::error::{InputError, OpenError, StorageError, WriteError};
use crate::format::manifest::{Assignment, NewFragment, Operation};
use crate::format::naming;
use crate::io::keys::KeySet;
use crate::io::{ingest, predicate, writer};
use crate::txn::{commit, delete, update, CommitInfo, CommitOptions, PreparedTransaction};

// Every prepare starts from the latest version at the time of the call: a long-lived
// handle then has no backlog of winners to judge at commit.
impl Table {
    /// Appends rows given as Arrow batches (matched to the schema by column name).
    pub async fn append(&self, batches: &[RecordBatch], options: &CommitOptions) -> Result<CommitInfo, WriteError> {
        self.run(options, self.prepare_append(batches)).await
    }

    /// Appends the rows of local files (.csv with header, .json/.jsonl/.ndjson, .parquet).
    /// Every file is read and checked before anything is written.
    pub async fn append_files(&self, files: &[PathBuf], options: &CommitOptions) -> Result<CommitInfo, WriteError> {
        self.run(options, self.prepare_append_files(files)).await
    }

    /// Replaces every row with `batches`.
    pub async fn overwrite(&self, batches: &[RecordBatch], options: &CommitOptions) -> Result<CommitInfo, WriteError> {
        self.run(options, self.prepare_overwrite(batches)).await
    }

    /// Replaces every row with the rows of local files.
    pub async fn overwrite_files(&self, files: &[PathBuf], options: &CommitOptions) -> Result<CommitInfo, WriteError> {
        self.run(options, self.prepare_overwrite_files(files)).await
    }

    /// Makes version `version` (schema and rows) the newest state, as a new version.
    pub async fn restore(&self, version: u64, options: &CommitOptions) -> Result<CommitInfo, WriteError> {
        self.run(options, self.prepare_restore(version)).await
    }

    /// Replaces the rows matching the SQL predicate `sql` with the rows of local files.
    pub async fn overwrite_files_where(&self, files: &[PathBuf], sql: &str, options: &CommitOptions) -> Result<CommitInfo, WriteError> {
        self.run(options, self.prepare_overwrite_files_where(files, sql)).await
    }

    /// Replaces the rows matching the SQL predicate `sql` with `batches`.
    pub async fn overwrite_where(&self, batches: &[RecordBatch], sql: &str, options: &CommitOptions) -> Result<CommitInfo, WriteError> {
        self.run(options, self.prepare_overwrite_where(batches, sql)).await
    }

    /// Sets columns to SQL expressions of the row's values, on the rows matching the SQL
    /// predicate `sql` (every row without one).
    pub async fn update(&self, set: &[Assignment], sql: Option<&str>, options: &CommitOptions) -> Result<CommitInfo, WriteError> {
        self.run(options, self.prepare_update(set, sql)).await
    }

    /// Upsert from local files on key columns: rows whose key matches a source row are
    /// replaced by it, the other source rows are inserted. Keys must be unique in the source.
    pub async fn merge_files(&self, files: &[PathBuf], keys: &[String], options: &CommitOptions) -> Result<CommitInfo, WriteError> {
        self.run(options, self.prepare_merge_files(files, keys)).await
    }

    /// Upsert from Arrow batches on key columns (see [`Table::merge_files`]).
    pub async fn merge(&self, batches: &[RecordBatch], keys: &[String], options: &CommitOptions) -> Result<CommitInfo, WriteError> {
        self.run(options, self.prepare_merge(batches, keys)).await
    }

    /// Deletes the rows matching the SQL predicate `sql`.
    pub async fn delete(&self, sql: &str, options: &CommitOptions) -> Result<CommitInfo, WriteError> {
        self.run(options, self.prepare_delete(sql)).await
    }

    pub async fn prepare_append(&self, batches: &[RecordBatch]) -> Result<PreparedTransaction, WriteError> {
        let base = self.latest().await?;
        let batches = base.conform(batches)?;
        base.prepare_rows(&batches, |fragments| Operation::Append { fragments }).await
    }

    pub async fn prepare_append_files(&self, files: &[PathBuf]) -> Result<PreparedTransaction, WriteError> {
        let base = self.latest().await?;
        let batches = base.read_files(files)?;
        base.prepare_rows(&batches, |fragments| Operation::Append { fragments }).await
    }

    pub async fn prepare_overwrite(&self, batches: &[RecordBatch]) -> Result<PreparedTransaction, WriteError> {
        let base = self.latest().await?;
        let batches = base.conform(batches)?;
        base.prepare_rows(&batches, |fragments| Operation::Overwrite { fragments }).await
    }

    pub async fn prepare_overwrite_files(&self, files: &[PathBuf]) -> Result<PreparedTransaction, WriteError> {
        let base = self.latest().await?;
        let batches = base.read_files(files)?;
        base.prepare_rows(&batches, |fragments| Operation::Overwrite { fragments }).await
    }

    pub async fn prepare_restore(&self, version: u64) -> Result<PreparedTransaction, WriteError> {
        if let Err(e) = self.checkout(version).await {
            return Err(match e {
                OpenError::VersionNotFound { version, oldest, latest } => WriteError::NoSuchVersion { version, oldest, latest },
                other => other.into(),
            });
        }
        Ok(self.latest().await?.transaction(Operation::Restore { version }))
    }

    /// Finds the live rows matching `sql` and writes them as deletion vectors.
    pub async fn prepare_delete(&self, sql: &str) -> Result<PreparedTransaction, WriteError> {
        let base = self.latest().await?;
        let (columns, deletions) = base.find_deletions(sql).await?;
        Ok(base.transaction(Operation::Delete { predicate: sql.to_string(), columns, deletions }))
    }

    pub async fn prepare_merge_files(&self, files: &[PathBuf], keys: &[String]) -> Result<PreparedTransaction, WriteError> {
        let base = self.latest().await?;
        let batches = base.read_files(files)?;
        let source = files.iter().map(|f| f.display().to_string()).collect::<Vec<_>>().join(", ");
        base.prepare_merge_of(&batches, keys, &source).await
    }

    pub async fn prepare_merge(&self, batches: &[RecordBatch], keys: &[String]) -> Result<PreparedTransaction, WriteError> {
        let base = self.latest().await?;
        let batches = base.conform(batches)?;
        base.prepare_merge_of(&batches, keys, "the merge source").await
    }

    /// Merge of `batches` (already conforming to this version's schema) into this
    /// version; `source` names the rows in errors.
    async fn prepare_merge_of(&self, batches: &[RecordBatch], keys: &[String], source: &str) -> Result<PreparedTransaction, WriteError> {
        let schema = self.schema();
        let fields = KeySet::fields_for(schema, keys).map_err(|column| InputError::UnknownColumn {
            file: source.to_string(),
            column,
            known: schema.names().join(", "),
        })?;
        let columns = fields.iter().map(|f| f.id).collect();
        let key_set = KeySet::from_rows(schema, fields, batches)
            .map_err(|d| InputError::DuplicateKey { file: source.to_string(), key: d.0 })?;
        let deletions = delete::find(&self.store, &self.env, &self.fragments().await?, &key_set).await?;
        let fragments = writer::write_fragments(&self.store, &self.env, schema, batches).await?;
        Ok(self.transaction(Operation::Merge { keys: keys.to_vec(), columns, deletions, fragments }))
    }

    pub async fn prepare_update(&self, set: &[Assignment], sql: Option<&str>) -> Result<PreparedTransaction, WriteError> {
        let base = self.latest().await?;
        let update = update::compile(base.schema(), sql, set)?;
        let fragments = base.fragments().await?;
        let (deletions, written) = update::run(&base.store, &base.env, &update, &fragments).await?;
        let operation = Operation::Update {
            predicate: sql.map(str::to_string),
            set: set.to_vec(),
            columns: update.columns.clone(),
            deletions,
            fragments: written,
        };
        Ok(base.transaction(operation))
    }

    pub async fn prepare_overwrite_where(&self, batches: &[RecordBatch], sql: &str) -> Result<PreparedTransaction, WriteError> {
        let base = self.latest().await?;
        let batches = base.conform(batches)?;
        base.prepare_replace_where(&batches, sql).await
    }

    pub async fn prepare_overwrite_files_where(&self, files: &[PathBuf], sql: &str) -> Result<PreparedTransaction, WriteError> {
        let base = self.latest().await?;
        let batches = base.read_files(files)?;
        base.prepare_replace_where(&batches, sql).await
    }

    async fn prepare_replace_where(&self, batches: &[RecordBatch], sql: &str) -> Result<PreparedTransaction, WriteError> {
        let (columns, deletions) = self.find_deletions(sql).await?;
        let fragments = writer::write_fragments(&self.store, &self.env, self.schema(), batches).await?;
        Ok(self.transaction(Operation::ReplaceWhere { predicate: sql.to_string(), columns, deletions, fragments }))
    }

    /// The field ids `sql` reads, and its matching live rows as delta deletion vectors.
    async fn find_deletions(&self, sql: &str) -> Result<(Vec<u32>, Vec<crate::format::manifest::FragmentDeletion>), WriteError> {
        let predicate = predicate::compile(sql, self.schema())?;
        let fragments = self.fragments().await?;
        let deletions = delete::find(&self.store, &self.env, &fragments, &predicate).await?;
        Ok((predicate.fields.iter().map(|f| f.id).collect(), deletions))
    }

    /// Commits a prepared (or staged) transaction on top of the latest version,
    /// rebasing or re-running as the concurrency contract says. On failure its files
    /// stay, so a staged transaction can be committed again later.
    pub async fn commit(&self, txn: &PreparedTransaction, options: &CommitOptions) -> Result<CommitInfo, WriteError> {
        if let Some(done) = self.already_committed(options).await? {
            return Ok(done);
        }
        Ok(commit::commit(&self.store, &self.env, txn, options).await?)
    }

    /// Records a prepared transaction in the table (`_transactions/<id>.json`) without
    /// committing it; [`Table::load_staged`] and [`Table::commit`] finish it later.
    pub async fn stage(&self, txn: &PreparedTransaction) -> Result<Uuid, WriteError> {
        let bytes = serde_json::to_vec(txn).expect("transactions always serialize");
        self.store.put_new(&naming::staged_transaction_name(txn.id), Bytes::from(bytes)).await?;
        Ok(txn.id)
    }

    pub async fn load_staged(&self, id: &str) -> Result<PreparedTransaction, WriteError> {
        let not_found = || WriteError::StagedNotFound { id: id.to_string() };
        let id: Uuid = id.parse().map_err(|_| not_found())?;
        let path = self.store.path(&naming::staged_transaction_name(id));
        let shown = self.store.location.display(&path);
        let bytes = match crate::storage::get_metadata(self.store.location.store.as_ref(), &path).await {
            Err(object_store::Error::NotFound { .. }) => return Err(not_found()),
            other => other,
        }
        .map_err(|source| StorageError { action: "reading", path: shown.clone(), source })?;
        Ok(crate::decode::transaction(&shown, &bytes)?)
    }

    /// Prepare and commit in one call. The idempotency check comes first, so a replay
    /// writes nothing; files of a transaction known not to have committed are removed
    /// (never when the outcome is unknown: they may be part of a committed version).
    pub(super) async fn run(
        &self,
        options: &CommitOptions,
        prepare: impl std::future::Future<Output = Result<PreparedTransaction, WriteError>>,
    ) -> Result<CommitInfo, WriteError> {
        if let Some(done) = self.already_committed(options).await? {
            return Ok(done);
        }
        let txn = prepare.await?;
        let result = commit::commit(&self.store, &self.env, &txn, options).await;
        if let Err(e) = &result {
            if !matches!(e, crate::error::CommitError::CommitStateUnknown { .. }) {
                self.store.delete_best_effort(txn.operation.written_files()).await;
            }
        }
        Ok(result?)
    }

    pub(super) fn transaction(&self, operation: Operation) -> PreparedTransaction {
        PreparedTransaction {
            id: self.env.new_uuid(),
            read_version: self.version(),
            read_schema: self.schema().clone(),
            read_next_fragment_id: self.manifest.next_fragment_id,
            operation,
        }
    }

    async fn prepare_rows(
        &self,
        batches: &[RecordBatch],
        operation: impl FnOnce(Vec<NewFragment>) -> Operation,
    ) -> Result<PreparedTransaction, WriteError> {
        let fragments = writer::write_fragments(&self.store, &self.env, self.schema(), batches).await?;
        Ok(self.transaction(operation(fragments)))
    }

    fn conform(&self, batches: &[RecordBatch]) -> Result<Vec<RecordBatch>, InputError> {
        let schema = self.schema();
        batches.iter().enumerate().map(|(i, b)| ingest::conform_batch(b, schema, &format!("batch {i}"))).collect()
    }

    fn read_files(&self, files: &[PathBuf]) -> Result<Vec<RecordBatch>, InputError> {
        let mut batches = Vec::new();
        for file in files {
            batches.extend(ingest::read_file(file, self.schema())?);
        }
        Ok(batches)
    }

    /// With an idempotency key: the retained version that already carries it, if any.
    /// Each version is read once per table handle (see `TableStore::version_with_key`).
    async fn already_committed(&self, options: &CommitOptions) -> Result<Option<CommitInfo>, WriteError> {
        let Some(key) = &options.idempotency_key else { return Ok(None) };
        let latest = self.latest().await?;
        let Some(version) = self.store.version_with_key(key, latest.version()).await? else { return Ok(None) };
        let Some(m) = self.store.read_manifest(version).await? else { return Ok(None) };
        Ok(Some(CommitInfo { idempotent_replay: true, ..commit::commit_info(&m) }))
    }
}

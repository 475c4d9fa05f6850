//! Writing: prepare (write data or deletion files, build the transaction), then
//! commit, or stage the prepared transaction to commit later (two-phase).

use std::path::PathBuf;

use arrow::array::RecordBatch;
use bytes::Bytes;
use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::Table;
use crate::error::{CommitError, InputError, OpenError, StorageError, WriteError};
use crate::format::manifest::{Assignment, NewFragment, Operation};
use crate::format::naming;
use crate::io::ingest::{self, Input, Required};
use crate::io::{predicate, writer};
use crate::txn::{commit, delete, merge, update, CommitInfo, CommitOptions, PreparedTransaction, StagedOptions};

// Every prepare starts from the latest version at the time of the call: a long-lived
// handle then has no backlog of winners to judge at commit.
impl Table {
    /// Appends rows given as Arrow batches (matched to the schema by column name).
    pub async fn append(&self, batches: &[RecordBatch], options: &CommitOptions) -> Result<CommitInfo, WriteError> {
        self.run(options, "append", self.prepare_append(batches)).await
    }

    /// Appends the rows of local files (.csv with header, .json/.jsonl/.ndjson, .parquet).
    /// Every file is read and checked before anything is written.
    pub async fn append_files(&self, files: &[PathBuf], options: &CommitOptions) -> Result<CommitInfo, WriteError> {
        self.run(options, "append", self.prepare_append_files(files)).await
    }

    /// Replaces every row with `batches`.
    pub async fn overwrite(&self, batches: &[RecordBatch], options: &CommitOptions) -> Result<CommitInfo, WriteError> {
        self.run(options, "overwrite", self.prepare_overwrite(batches)).await
    }

    /// Replaces every row with the rows of local files.
    pub async fn overwrite_files(&self, files: &[PathBuf], options: &CommitOptions) -> Result<CommitInfo, WriteError> {
        self.run(options, "overwrite", self.prepare_overwrite_files(files)).await
    }

    /// Makes version `version` (schema and rows) the newest state, as a new version.
    pub async fn restore(&self, version: u64, options: &CommitOptions) -> Result<CommitInfo, WriteError> {
        self.run(options, "restore", self.prepare_restore(version)).await
    }

    /// Replaces the rows matching the SQL predicate `sql` with the rows of local files,
    /// every one of which must match `sql`.
    pub async fn overwrite_files_where(&self, files: &[PathBuf], sql: &str, options: &CommitOptions) -> Result<CommitInfo, WriteError> {
        self.run(options, "overwrite", self.prepare_overwrite_files_where(files, sql)).await
    }

    /// Replaces the rows matching the SQL predicate `sql` with `batches`, every row of
    /// which must match `sql`.
    pub async fn overwrite_where(&self, batches: &[RecordBatch], sql: &str, options: &CommitOptions) -> Result<CommitInfo, WriteError> {
        self.run(options, "overwrite", self.prepare_overwrite_where(batches, sql)).await
    }

    /// Sets columns to SQL expressions of the row's values, on the rows matching the SQL
    /// predicate `sql` (every row without one).
    pub async fn update(&self, set: &[Assignment], sql: Option<&str>, options: &CommitOptions) -> Result<CommitInfo, WriteError> {
        self.run(options, "update", self.prepare_update(set, sql)).await
    }

    /// Upsert from local files on key columns: rows whose key matches a source row take
    /// its values (of the columns the source has; the others keep theirs), the other
    /// source rows are inserted. Keys must be unique in the source.
    pub async fn merge_files(&self, files: &[PathBuf], keys: &[String], options: &CommitOptions) -> Result<CommitInfo, WriteError> {
        self.run(options, "merge", self.prepare_merge_files(files, keys)).await
    }

    /// Upsert from Arrow batches on key columns (see [`Table::merge_files`]).
    pub async fn merge(&self, batches: &[RecordBatch], keys: &[String], options: &CommitOptions) -> Result<CommitInfo, WriteError> {
        self.run(options, "merge", self.prepare_merge(batches, keys)).await
    }

    /// Deletes the rows matching the SQL predicate `sql`.
    pub async fn delete(&self, sql: &str, options: &CommitOptions) -> Result<CommitInfo, WriteError> {
        self.run(options, "delete", self.prepare_delete(sql)).await
    }

    pub async fn prepare_append(&self, batches: &[RecordBatch]) -> Result<PreparedTransaction, WriteError> {
        let base = self.latest().await?;
        let input = base.conform(batches, Required::Always)?;
        base.prepare_rows(&input.batches, |fragments| Operation::Append { fragments }).await
    }

    pub async fn prepare_append_files(&self, files: &[PathBuf]) -> Result<PreparedTransaction, WriteError> {
        let base = self.latest().await?;
        let batches = base.read_files(files)?.into_iter().flat_map(|(_, input)| input.batches).collect::<Vec<_>>();
        base.prepare_rows(&batches, |fragments| Operation::Append { fragments }).await
    }

    pub async fn prepare_overwrite(&self, batches: &[RecordBatch]) -> Result<PreparedTransaction, WriteError> {
        let base = self.latest().await?;
        let input = base.conform(batches, Required::Always)?;
        base.prepare_rows(&input.batches, |fragments| Operation::Overwrite { fragments }).await
    }

    pub async fn prepare_overwrite_files(&self, files: &[PathBuf]) -> Result<PreparedTransaction, WriteError> {
        let base = self.latest().await?;
        let batches = base.read_files(files)?.into_iter().flat_map(|(_, input)| input.batches).collect::<Vec<_>>();
        base.prepare_rows(&batches, |fragments| Operation::Overwrite { fragments }).await
    }

    pub async fn prepare_restore(&self, version: u64) -> Result<PreparedTransaction, WriteError> {
        if let Err(e) = self.checkout(version).await {
            return Err(match e {
                OpenError::VersionNotFound { version, oldest, latest } => WriteError::NoSuchVersion { version, oldest, latest },
                other => other.into(),
            });
        }
        let base = self.latest().await?;
        Ok(base.transaction(Operation::Restore { version }, base.env.clock.now()))
    }

    /// Finds the live rows matching `sql` and writes them as deletion vectors.
    pub async fn prepare_delete(&self, sql: &str) -> Result<PreparedTransaction, WriteError> {
        let base = self.latest().await?;
        let now = base.env.clock.now();
        let (columns, deletions) = base.find_deletions(sql, now).await?;
        Ok(base.transaction(Operation::Delete { predicate: sql.to_string(), columns, deletions }, now))
    }

    pub async fn prepare_merge_files(&self, files: &[PathBuf], keys: &[String]) -> Result<PreparedTransaction, WriteError> {
        let base = self.latest().await?;
        let mut inputs = Vec::with_capacity(files.len());
        for file in files {
            inputs.push((file.display().to_string(), ingest::read_file(file, base.schema(), Required::WhenInserted)?));
        }
        let input = same_columns(base.schema(), inputs)?;
        let source = files.iter().map(|f| f.display().to_string()).collect::<Vec<_>>().join(", ");
        base.prepare_merge_of(input, keys, &source).await
    }

    pub async fn prepare_merge(&self, batches: &[RecordBatch], keys: &[String]) -> Result<PreparedTransaction, WriteError> {
        let base = self.latest().await?;
        let input = base.conform(batches, Required::WhenInserted)?;
        base.prepare_merge_of(input, keys, "the merge source").await
    }

    /// Merge of `input` (conforming to this version's schema) into this version;
    /// `source` names the rows in errors.
    async fn prepare_merge_of(&self, input: Input, keys: &[String], source: &str) -> Result<PreparedTransaction, WriteError> {
        let now = self.env.clock.now();
        let fragments = self.fragments().await?;
        let operation = merge::prepare(&self.store, &self.env, self.schema(), &fragments, input, keys, source).await?;
        Ok(self.transaction(operation, now))
    }

    pub async fn prepare_update(&self, set: &[Assignment], sql: Option<&str>) -> Result<PreparedTransaction, WriteError> {
        let base = self.latest().await?;
        let now = base.env.clock.now();
        let update = update::compile(base.schema(), sql, set, now)?;
        let fragments = base.fragments().await?;
        let (deletions, written) = update::run(&base.store, &base.env, &update, &fragments).await?;
        let operation = Operation::Update {
            predicate: sql.map(str::to_string),
            set: set.to_vec(),
            columns: update.columns.clone(),
            deletions,
            fragments: written,
        };
        Ok(base.transaction(operation, now))
    }

    pub async fn prepare_overwrite_where(&self, batches: &[RecordBatch], sql: &str) -> Result<PreparedTransaction, WriteError> {
        let base = self.latest().await?;
        let input = base.conform(batches, Required::Always)?;
        base.prepare_replace_where(vec![("the new rows".to_string(), input)], sql).await
    }

    pub async fn prepare_overwrite_files_where(&self, files: &[PathBuf], sql: &str) -> Result<PreparedTransaction, WriteError> {
        let base = self.latest().await?;
        let inputs = base.read_files(files)?;
        base.prepare_replace_where(inputs, sql).await
    }

    /// Replaces the rows matching `sql` with `inputs`, each of whose rows must match
    /// `sql` too (as Delta's replaceWhere): otherwise a later run of the same
    /// replacement would not replace them, and they would be duplicated.
    async fn prepare_replace_where(&self, inputs: Vec<(String, Input)>, sql: &str) -> Result<PreparedTransaction, WriteError> {
        let now = self.env.clock.now();
        let predicate = predicate::compile(sql, self.schema(), now)?;
        for (source, input) in &inputs {
            if let Some((row, values)) = predicate::first_row_outside(&predicate, self.schema(), &input.batches)? {
                return Err(InputError::OutsidePredicate { file: source.clone(), row, values, predicate: sql.to_string() }.into());
            }
        }
        let batches: Vec<RecordBatch> = inputs.into_iter().flat_map(|(_, input)| input.batches).collect();
        let columns = predicate.fields.iter().map(|f| f.id).collect();
        let deletions = delete::find(&self.store, &self.env, &self.fragments().await?, &predicate).await?;
        let fragments = writer::write_fragments(&self.store, &self.env, self.schema(), &batches).await?;
        Ok(self.transaction(Operation::ReplaceWhere { predicate: sql.to_string(), columns, deletions, fragments }, now))
    }

    /// The field ids `sql` reads, and its matching live rows as delta deletion vectors.
    async fn find_deletions(&self, sql: &str, now: DateTime<Utc>) -> Result<(Vec<u32>, Vec<crate::format::manifest::FragmentDeletion>), WriteError> {
        let predicate = predicate::compile(sql, self.schema(), now)?;
        let fragments = self.fragments().await?;
        let deletions = delete::find(&self.store, &self.env, &fragments, &predicate).await?;
        Ok((predicate.fields.iter().map(|f| f.id).collect(), deletions))
    }

    /// Commits a prepared (or staged) transaction on top of the latest version,
    /// rebasing or re-running as the concurrency contract says. The options it was
    /// staged with hold; `options` may repeat them but not contradict them. On failure
    /// its files stay, so a staged transaction can be committed again later.
    pub async fn commit(&self, txn: &PreparedTransaction, options: &CommitOptions) -> Result<CommitInfo, WriteError> {
        let options = txn.staged.apply_to(options)?;
        if let Some(done) = self.already_committed(&options, txn.operation.name()).await? {
            return Ok(done);
        }
        Ok(commit::commit(&self.store, &self.env, txn, &options).await?)
    }

    /// Records a prepared transaction in the table (`_transactions/<id>.json`) without
    /// committing it; [`Table::load_staged`] and [`Table::commit`] finish it later.
    /// `options`' isolation level, expected version and idempotency key are part of
    /// the staged transaction (its retry policy is the commit's). A transaction
    /// expecting a version the table has already moved past could never commit: it
    /// is refused here.
    pub async fn stage(&self, txn: &PreparedTransaction, options: &CommitOptions) -> Result<Uuid, WriteError> {
        if let Some(expected) = options.expect_version {
            let latest = self.latest().await?.version();
            if latest > expected {
                return Err(CommitError::VersionMoved { expected, latest }.into());
            }
        }
        let staged = PreparedTransaction { staged: StagedOptions::of(options), ..txn.clone() };
        let bytes = serde_json::to_vec(&staged).expect("transactions always serialize");
        self.store.put_new(&naming::staged_transaction_name(txn.id), Bytes::from(bytes)).await?;
        Ok(txn.id)
    }

    pub async fn load_staged(&self, id: &str) -> Result<PreparedTransaction, WriteError> {
        let not_found = || WriteError::StagedNotFound { id: id.to_string() };
        let id: Uuid = id.parse().map_err(|_| not_found())?;
        let path = self.store.path(&naming::staged_transaction_name(id));
        let shown = self.store.location.display(&path);
        let bytes = match crate::storage::get_metadata(self.store.location.store.as_ref(), &path).await {
            Err(crate::error::StorageCause::ObjectStore(object_store::Error::NotFound { .. })) => return Err(not_found()),
            other => other,
        }
        .map_err(|source| StorageError::new("reading", shown.clone(), source))?;
        Ok(crate::decode::transaction(&shown, &bytes)?)
    }

    /// Prepare and commit in one call. The idempotency check comes first, so a replay
    /// writes nothing; files of a transaction known not to have committed are removed
    /// (never when the outcome is unknown: they may be part of a committed version).
    pub(super) async fn run(
        &self,
        options: &CommitOptions,
        operation: &str,
        prepare: impl std::future::Future<Output = Result<PreparedTransaction, WriteError>>,
    ) -> Result<CommitInfo, WriteError> {
        if let Some(done) = self.already_committed(options, operation).await? {
            return Ok(done);
        }
        let txn = prepare.await?;
        let result = commit::commit(&self.store, &self.env, &txn, options).await;
        if let Err(e) = &result {
            if !matches!(e, CommitError::CommitStateUnknown { .. }) {
                self.store.delete_best_effort(txn.operation.written_files()).await;
            }
        }
        Ok(result?)
    }

    /// A transaction of `operation` on this version, with `now()` fixed at `now`.
    pub(super) fn transaction(&self, operation: Operation, now: DateTime<Utc>) -> PreparedTransaction {
        PreparedTransaction {
            id: self.env.new_uuid(),
            read_version: self.version(),
            read_schema: self.schema().clone(),
            read_next_fragment_id: self.manifest.next_fragment_id,
            operation,
            now: Some(now),
            staged: StagedOptions::default(),
        }
    }

    async fn prepare_rows(
        &self,
        batches: &[RecordBatch],
        operation: impl FnOnce(Vec<NewFragment>) -> Operation,
    ) -> Result<PreparedTransaction, WriteError> {
        let now = self.env.clock.now();
        let fragments = writer::write_fragments(&self.store, &self.env, self.schema(), batches).await?;
        Ok(self.transaction(operation(fragments), now))
    }

    /// Caller batches in this version's schema; all must have the same columns.
    fn conform(&self, batches: &[RecordBatch], required: Required) -> Result<Input, InputError> {
        let schema = self.schema();
        let inputs = batches
            .iter()
            .enumerate()
            .map(|(i, b)| Ok((format!("batch {i}"), ingest::conform_batch(b, schema, &format!("batch {i}"), required)?)))
            .collect::<Result<Vec<_>, InputError>>()?;
        same_columns(schema, inputs)
    }

    /// Each local file's rows, checked against this version's schema.
    fn read_files(&self, files: &[PathBuf]) -> Result<Vec<(String, Input)>, InputError> {
        files.iter().map(|file| Ok((file.display().to_string(), ingest::read_file(file, self.schema(), Required::Always)?))).collect()
    }

    /// With an idempotency key: the retained version that already carries it, if any.
    /// A key a different operation used is refused: this cannot be its retry. Each
    /// version is read once per table handle (see `TableStore::version_with_key`).
    async fn already_committed(&self, options: &CommitOptions, operation: &str) -> Result<Option<CommitInfo>, WriteError> {
        let Some(key) = &options.idempotency_key else { return Ok(None) };
        let latest = self.latest().await?;
        let Some(version) = self.store.version_with_key(key, latest.version()).await? else { return Ok(None) };
        let Some(m) = self.store.read_manifest(version).await? else { return Ok(None) };
        CommitInfo::replay_of(&m, key, operation).map(Some).map_err(WriteError::from)
    }
}

/// The rows of several sources as one input: every source must have the same columns.
fn same_columns(schema: &crate::format::schema::Schema, inputs: Vec<(String, Input)>) -> Result<Input, InputError> {
    let mut iter = inputs.into_iter();
    let Some((_, mut first)) = iter.next() else { return Ok(Input { batches: Vec::new(), present: schema.fields.iter().map(|f| f.id).collect() }) };
    for (i, (source, input)) in iter.enumerate() {
        if input.present != first.present {
            let names = |ids: &[u32]| ids.iter().filter_map(|id| schema.field_by_id(*id)).map(|f| f.name.as_str()).collect::<Vec<_>>().join(", ");
            return Err(InputError::ColumnsDiffer { file: source, batch: i + 1, expected: names(&first.present), found: names(&input.present) });
        }
        first.batches.extend(input.batches);
    }
    Ok(first)
}

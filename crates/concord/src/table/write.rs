//! Writing: prepare (write data files, build the transaction), then commit.

use std::path::PathBuf;

use arrow::array::RecordBatch;

use super::Table;
use crate::error::{InputError, OpenError, WriteError};
use crate::format::manifest::{NewFragment, Operation};
use crate::io::{ingest, writer};
use crate::txn::{commit, CommitInfo, CommitOptions, PreparedTransaction};

// Appends and overwrites do not read the table's rows, so they are prepared against the
// latest version at the time of the call (its schema), not this handle's version: a
// long-lived handle then costs nothing extra to commit through.
impl Table {
    /// Appends rows given as Arrow batches (matched to the schema by column name).
    pub async fn append(&self, batches: &[RecordBatch], options: &CommitOptions) -> Result<CommitInfo, WriteError> {
        let base = self.latest().await?;
        let batches = base.conform(batches)?;
        base.write_and_commit(&batches, options, |fragments| Operation::Append { fragments }).await
    }

    /// Appends the rows of local files (.csv with header, .json/.jsonl/.ndjson, .parquet).
    /// Every file is read and checked before anything is written.
    pub async fn append_files(&self, files: &[PathBuf], options: &CommitOptions) -> Result<CommitInfo, WriteError> {
        let base = self.latest().await?;
        let batches = base.read_files(files)?;
        base.write_and_commit(&batches, options, |fragments| Operation::Append { fragments }).await
    }

    /// Replaces every row with `batches`.
    pub async fn overwrite(&self, batches: &[RecordBatch], options: &CommitOptions) -> Result<CommitInfo, WriteError> {
        let base = self.latest().await?;
        let batches = base.conform(batches)?;
        base.write_and_commit(&batches, options, |fragments| Operation::Overwrite { fragments }).await
    }

    /// Replaces every row with the rows of local files.
    pub async fn overwrite_files(&self, files: &[PathBuf], options: &CommitOptions) -> Result<CommitInfo, WriteError> {
        let base = self.latest().await?;
        let batches = base.read_files(files)?;
        base.write_and_commit(&batches, options, |fragments| Operation::Overwrite { fragments }).await
    }

    /// Makes version `version` (schema and rows) the newest state, as a new version.
    pub async fn restore(&self, version: u64, options: &CommitOptions) -> Result<CommitInfo, WriteError> {
        if let Err(e) = self.checkout(version).await {
            return Err(match e {
                OpenError::VersionNotFound { version, oldest, latest } => WriteError::NoSuchVersion { version, oldest, latest },
                other => other.into(),
            });
        }
        self.latest().await?.commit_operation(Operation::Restore { version }, options).await
    }

    fn conform(&self, batches: &[RecordBatch]) -> Result<Vec<RecordBatch>, InputError> {
        let schema = self.schema();
        batches
            .iter()
            .enumerate()
            .map(|(i, b)| ingest::conform_batch(b, schema, &format!("batch {i}")))
            .collect()
    }

    fn read_files(&self, files: &[PathBuf]) -> Result<Vec<RecordBatch>, InputError> {
        let mut batches = Vec::new();
        for file in files {
            batches.extend(ingest::read_file(file, self.schema())?);
        }
        Ok(batches)
    }

    async fn write_and_commit(
        &self,
        batches: &[RecordBatch],
        options: &CommitOptions,
        operation: impl FnOnce(Vec<NewFragment>) -> Operation,
    ) -> Result<CommitInfo, WriteError> {
        if let Some(done) = self.already_committed(options).await? {
            return Ok(done);
        }
        let fragments = writer::write_fragments(&self.store, &self.env, self.schema(), batches).await?;
        let written: Vec<String> = fragments.iter().flat_map(|f| f.files.iter().map(|d| d.path.clone())).collect();
        let result = self.commit_operation(operation(fragments), options).await;
        if let Err(WriteError::Commit(e)) = &result {
            // Files of a transaction known not to have committed are unreferenced; remove them
            // now rather than leave them for cleanup. Never when the outcome is unknown.
            if !matches!(e, crate::error::CommitError::CommitStateUnknown { .. }) {
                self.store.delete_best_effort(written.iter().map(String::as_str)).await;
            }
        }
        result
    }

    async fn commit_operation(&self, operation: Operation, options: &CommitOptions) -> Result<CommitInfo, WriteError> {
        let txn = PreparedTransaction {
            id: self.env.new_uuid(),
            read_version: self.version(),
            read_schema: self.schema().clone(),
            operation,
        };
        Ok(commit::commit(&self.store, &self.env, &txn, options).await?)
    }

    /// With an idempotency key: the retained version that already carries it, if any.
    /// Walks the history newest first (one read per version).
    async fn already_committed(&self, options: &CommitOptions) -> Result<Option<CommitInfo>, WriteError> {
        let Some(key) = &options.idempotency_key else { return Ok(None) };
        let latest = self.latest().await?;
        let mut version = Some(latest.version());
        while let Some(v) = version {
            let Some(m) = self.store.read_manifest(v).await? else { break };
            if m.transaction.idempotency_key.as_deref() == Some(key.as_str()) {
                return Ok(Some(CommitInfo { idempotent_replay: true, ..commit::commit_info(&m) }));
            }
            version = v.checked_sub(1);
        }
        Ok(None)
    }
}

//! Preparing each kind of write against the latest version: its data files, deletion
//! vectors and new values written (fresh names, created once), its transaction built.
//! [`Table::prepare`] (`write.rs`) is the one dispatch over the kinds of write; every
//! prepare starts from the latest version at the time of the call, so a long-lived
//! handle has no backlog of winners to judge at commit.

use chrono::{DateTime, Utc};
use futures::StreamExt;

use super::input::{self, Input};
use super::Table;
use crate::error::{InputError, OpenError, WriteError};
use crate::format::manifest::{Assignment, NewFragment, Operation};
use crate::io::input::{Required, Rows};
use crate::io::predicate;
use crate::io::write::FragmentWriter;
use crate::txn::ops::{delete, merge, update};
use crate::txn::{PreparedTransaction, StagedOptions};

impl Table {
    /// Prepares an append: writes its data files.
    pub(super) async fn prepare_append(&self, input: Input) -> Result<PreparedTransaction, WriteError> {
        let base = self.write_base().await?;
        let now = base.env.clock.now();
        let fragments = base.write_input(input, None).await?;
        Ok(base.transaction(Operation::Append { fragments }, now))
    }

    /// Prepares an overwrite: writes its data files and, with a filter, the deletion
    /// vectors of the rows it replaces.
    pub(super) async fn prepare_overwrite(&self, input: Input, filter: Option<&str>) -> Result<PreparedTransaction, WriteError> {
        let base = self.write_base().await?;
        let now = base.env.clock.now();
        let Some(sql) = filter else {
            let fragments = base.write_input(input, None).await?;
            return Ok(base.transaction(Operation::Overwrite { fragments, schema: None }, now));
        };
        let predicate = predicate::compile(sql, base.schema(), now)?;
        let fragments = base.write_input(input, Some(&predicate)).await?;
        let columns = predicate.fields.iter().map(|f| f.id).collect();
        let deletions = match base.fragments().await {
            Ok(all) => delete::find(&base.store, &base.env, &all, &predicate).await.map_err(WriteError::from),
            Err(e) => Err(e.into()),
        };
        let deletions = match deletions {
            Ok(d) => d,
            Err(e) => {
                base.store.delete_best_effort(data_files(&fragments)).await;
                return Err(e);
            }
        };
        Ok(base.transaction(Operation::ReplaceWhere { predicate: sql.to_string(), columns, deletions, fragments }, now))
    }

    /// Prepares a restore of `version`.
    pub(super) async fn prepare_restore(&self, version: u64) -> Result<PreparedTransaction, WriteError> {
        if let Err(e) = self.checkout(version).await {
            return Err(match e {
                OpenError::VersionNotFound { version, oldest, latest } => WriteError::NoSuchVersion { version, oldest, latest },
                other => other.into(),
            });
        }
        let base = self.write_base().await?;
        Ok(base.transaction(Operation::Restore { version }, base.env.clock.now()))
    }

    /// Prepares a delete: finds the live rows matching `sql` and writes them as
    /// deletion vectors.
    pub(super) async fn prepare_delete(&self, sql: &str) -> Result<PreparedTransaction, WriteError> {
        let base = self.write_base().await?;
        let now = base.env.clock.now();
        let (columns, deletions) = base.find_deletions(sql, now).await?;
        Ok(base.transaction(Operation::Delete { predicate: sql.to_string(), columns, deletions }, now))
    }

    /// Prepares a merge: the source's keys are read whole (they must be unique), then
    /// its rows written.
    pub(super) async fn prepare_merge(&self, input: Input, keys: &[String]) -> Result<PreparedTransaction, WriteError> {
        let base = self.write_base().await?;
        let now = base.env.clock.now();
        let mut chunks = input::chunks(input, base.schema(), Required::WhenInserted);
        let (mut batches, mut present, mut sources) = (Vec::new(), None, Vec::<String>::new());
        while let Some(chunk) = chunks.next().await {
            let chunk = chunk?;
            if sources.last().map(String::as_str) != Some(&chunk.source) {
                sources.push(chunk.source.to_string());
            }
            present.get_or_insert_with(|| chunk.present.to_vec());
            batches.push(chunk.batch);
        }
        let present = present.unwrap_or_else(|| base.schema().fields.iter().map(|f| f.id).collect());
        let source = if sources.is_empty() { "the merge source".to_string() } else { sources.join(", ") };
        let fragments = base.fragments().await?;
        let operation = merge::prepare(&base.store, &base.env, base.schema(), &fragments, Rows { batches, present }, keys, &source).await?;
        Ok(base.transaction(operation, now))
    }

    /// Prepares an update: writes the deletion vectors and new values of the matching rows.
    pub(super) async fn prepare_update(&self, set: &[Assignment], sql: Option<&str>) -> Result<PreparedTransaction, WriteError> {
        let base = self.write_base().await?;
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

    /// The field ids `sql` reads, and its matching live rows as delta deletion vectors.
    async fn find_deletions(
        &self,
        sql: &str,
        now: DateTime<Utc>,
    ) -> Result<(Vec<u32>, Vec<crate::format::manifest::FragmentDeletion>), WriteError> {
        let predicate = predicate::compile(sql, self.schema(), now)?;
        let fragments = self.fragments().await?;
        let deletions = delete::find(&self.store, &self.env, &fragments, &predicate).await?;
        Ok((predicate.fields.iter().map(|f| f.id).collect(), deletions))
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

    /// Writes `input`'s rows as data files as they arrive; with `check`, every row
    /// must satisfy it (an overwrite with a filter). On an error, the files written so
    /// far are removed and nothing is left to commit.
    async fn write_input(&self, input: Input, check: Option<&predicate::Predicate>) -> Result<Vec<NewFragment>, WriteError> {
        let schema = self.schema();
        // Rows a filter must check are decoded, never spliced.
        let mut chunks = match check {
            None => input::new_rows(input, schema),
            Some(_) => input::chunks(input, schema, Required::Always),
        };
        let mut writer = FragmentWriter::new(&self.store, &self.env, schema).with_progress(self.progress.0.clone());
        let result = async {
            while let Some(chunk) = chunks.next().await {
                let chunk = chunk?;
                if let Some(predicate) = check {
                    if let Some((row, values)) = predicate::first_row_outside(predicate, schema, std::slice::from_ref(&chunk.batch))? {
                        let file = chunk.source.to_string();
                        return Err(InputError::OutsidePredicate {
                            file,
                            row: chunk.first_row + row,
                            values,
                            predicate: predicate.sql.clone(),
                        }
                        .into());
                    }
                }
                match chunk.spliced {
                    Some(spliced) => writer.push_encoded(spliced).await?,
                    None => writer.push(&chunk.batch).await?,
                }
            }
            Ok(())
        }
        .await;
        if let Err(e) = result {
            let written = data_files(writer.written());
            self.store.delete_best_effort(written).await;
            return Err(e);
        }
        writer.finish().await
    }
}

/// The data files of `fragments` (table-relative).
fn data_files(fragments: &[NewFragment]) -> Vec<&str> {
    fragments.iter().flat_map(|f| &f.files).map(|d| d.path.as_str()).collect()
}

//! Writing: prepare (write data or deletion files, build the transaction), then
//! commit, or stage the prepared transaction to commit later (two-phase).

use chrono::{DateTime, Utc};
use uuid::Uuid;

use futures::StreamExt;

use super::input::{self, Input};
use super::Table;
use crate::error::{CommitError, InputError, OpenError, StagedCommitError, WriteError};
use crate::format::manifest::{Assignment, NewFragment, Operation};
use crate::format::naming;
use crate::io::input::{Required, Rows};
use crate::io::predicate;
use crate::io::write::FragmentWriter;
use crate::txn::ops::{delete, merge, update};
use crate::txn::{commit, CommitInfo, CommitOptions, PreparedTransaction, StagedOptions};

// Every prepare starts from the latest version at the time of the call: a long-lived
// handle then has no backlog of winners to judge at commit. `Table::prepare`
// (`writes.rs`) is the one dispatch over the kinds of write.
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
            return Ok(base.transaction(Operation::Overwrite { fragments }, now));
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

    /// Commits a prepared (or staged) transaction on top of the latest version,
    /// rebasing or re-running as the concurrency contract says. The options it was
    /// staged with hold; `options` may repeat them but not contradict them. On failure
    /// its files stay, so a staged transaction can be committed again later.
    pub async fn commit(&self, txn: &PreparedTransaction, options: &CommitOptions) -> Result<CommitInfo, WriteError> {
        let options = txn.staged.apply_to(options)?;
        let info = self.commit_queued(txn, &options).await?;
        self.after_commit(&info).await;
        Ok(info)
    }

    /// Commits staged (or prepared) transactions, in the order given: one after
    /// another, or with `together`, as one version, all or none (a job commit: the
    /// output of a distributed job appears at once). In a job, each member is judged
    /// against what landed since its own read version, and applied as if committed
    /// right after the members before it (re-run on what they changed where its rule
    /// needs it); if one cannot commit, nothing does and the error
    /// (`CommitError::JobMember`) names it. The options each was staged with hold,
    /// except that an expected version, and an idempotency key given here, are the
    /// whole job's: a retry of the job under that key (with the same staged ids or
    /// others) commits nothing and reports the job's outcomes. Returns one outcome per
    /// transaction committed (for a replayed job, the job's).
    pub async fn commit_staged(
        &self,
        txns: &[PreparedTransaction],
        together: bool,
        options: &CommitOptions,
    ) -> Result<Vec<CommitInfo>, WriteError> {
        check_staged_commit(txns, together, options)?;
        if !together || txns.len() == 1 {
            let mut infos = Vec::with_capacity(txns.len());
            for txn in txns {
                infos.push(self.commit(txn, options).await?);
            }
            return Ok(infos);
        }
        let job_key = options.idempotency_key.as_deref();
        let member_options = CommitOptions { idempotency_key: None, ..options.clone() };
        let options: Vec<CommitOptions> = txns.iter().map(|t| t.staged.apply_to(&member_options)).collect::<Result<_, _>>()?;
        let entries: Vec<(&PreparedTransaction, &CommitOptions)> = txns.iter().zip(&options).collect();
        let infos = commit::commit_job(self.writer(), &entries, job_key).await?;
        if let Some(info) = infos.last() {
            self.after_commit(info).await;
        }
        Ok(infos)
    }

    /// Records a prepared transaction in the table (`_transactions/<id>.json`) without
    /// committing it; [`Table::load_staged`] and [`Table::commit`] finish it later.
    /// `options`' isolation level, expected version and idempotency key are part of
    /// the staged transaction (its retry policy is the commit's). A transaction
    /// expecting a version the table has already moved past could never commit: it
    /// is refused here.
    ///
    /// A two-phase delete: prepared and staged by one process, committed by another
    /// after an append landed, re-run on the appended rows (serializable):
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use concord::arrow::array::{Int64Array, RecordBatch};
    /// use concord::{CommitOptions, Env, Schema, StoreResolver, Table, Write};
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// let resolver = StoreResolver::new();
    /// let table = Table::create(resolver.resolve("memory://staged/t")?, Env::system(), Schema::parse("id bigint")?).await?;
    /// let ids = |ids: Vec<i64>| RecordBatch::try_new(table.schema().arrow_schema(), vec![Arc::new(Int64Array::from(ids))]);
    /// table.append(ids(vec![1, 2, 3])?, &CommitOptions::default()).await?;
    ///
    /// let delete = table.prepare(Write::Delete { filter: "id >= 2".into() }).await?;
    /// let id = table.stage(&delete, &CommitOptions::default()).await?;
    /// table.append(ids(vec![4])?, &CommitOptions::default()).await?;
    ///
    /// let staged = table.load_staged(&id.to_string()).await?;
    /// let info = table.commit(&staged, &CommitOptions::default()).await?;
    /// assert!(info.rerun, "re-ran on the appended row");
    /// assert_eq!(table.latest().await?.count(None).await?, 1);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// # }).unwrap();
    /// ```
    pub async fn stage(&self, txn: &PreparedTransaction, options: &CommitOptions) -> Result<Uuid, WriteError> {
        if let Some(expected) = options.expect_version {
            let latest = self.latest().await?.version();
            if latest > expected {
                return Err(CommitError::VersionMoved { expected, latest }.into());
            }
        }
        let staged = PreparedTransaction { staged: StagedOptions::of(options), ..txn.clone() };
        self.store.put_new(&naming::staged_transaction_name(txn.id), crate::encode::transaction(&staged)).await?;
        Ok(txn.id)
    }

    /// The staged transaction `id` (see [`Table::stage`]).
    pub async fn load_staged(&self, id: &str) -> Result<PreparedTransaction, WriteError> {
        let not_found = || WriteError::StagedNotFound { id: id.to_string() };
        let id: Uuid = id.parse().map_err(|_| not_found())?;
        let name = naming::staged_transaction_name(id);
        let bytes = self.store.get_metadata_object(&name).await?.ok_or_else(not_found)?;
        Ok(crate::decode::transaction(&self.store.display(&name), &bytes)?)
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

/// The rules of a staged commit that need no I/O: some transactions, each once; an
/// expected version or idempotency key for several only if they share one version; no
/// key twice in one job.
fn check_staged_commit(txns: &[PreparedTransaction], together: bool, options: &CommitOptions) -> Result<(), StagedCommitError> {
    if txns.is_empty() {
        return Err(StagedCommitError::NoTransactions);
    }
    if let Some(twice) = txns.iter().enumerate().find_map(|(i, t)| txns[..i].iter().any(|o| o.id == t.id).then_some(t.id)) {
        return Err(StagedCommitError::GivenTwice { id: twice });
    }
    if txns.len() > 1 && !together {
        if options.idempotency_key.is_some() {
            return Err(StagedCommitError::OneCommitOnly { option: "idempotency key" });
        }
        if options.expect_version.is_some() {
            return Err(StagedCommitError::OneCommitOnly { option: "expected version" });
        }
    }
    if txns.len() > 1 {
        let mut seen: Vec<(&str, Option<uuid::Uuid>)> = options.idempotency_key.iter().map(|k| (k.as_str(), None)).collect();
        for t in txns {
            if let Some(key) = &t.staged.idempotency_key {
                if let Some((_, first)) = seen.iter().find(|(k, _)| k == key) {
                    return Err(StagedCommitError::KeyTwice { key: key.clone(), first: *first, second: t.id });
                }
                seen.push((key, Some(t.id)));
            }
        }
    }
    Ok(())
}

/// The data files of `fragments` (table-relative).
fn data_files(fragments: &[NewFragment]) -> Vec<&str> {
    fragments.iter().flat_map(|f| &f.files).map(|d| d.path.as_str()).collect()
}

//! Committing prepared transactions: at once, or staged to commit later (two-phase),
//! one after another or as one job.

use uuid::Uuid;

use super::Table;
use crate::error::{CommitError, StagedCommitError, WriteError};
use crate::format::naming;
use crate::txn::{commit, CommitInfo, CommitOptions, PreparedTransaction, StagedOptions};

impl Table {
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

//! Group commit: the transactions that tasks sharing one table handle commit at the
//! same moment share one version (one conditional create for all of them).
//!
//! A caller queues its transaction and then takes the handle's commit lock. Whoever
//! holds it takes everything queued (its own transaction among it, unless an earlier
//! holder already committed that) and commits it as one batch (`commit::commit_group`); a transaction that cannot follow the others in one version
//! without a re-run is queued again for the next. A lone writer (the lock free, the
//! queue empty) commits at once in its own task: nobody waits for company. A batch runs
//! in a task of its own, so a caller that gives up waiting cancels nothing.
//!
//! Transactions that commit alone: those with an expected version (compare-and-swap
//! is about one transaction), and schema, property, restore, overwrite and compaction
//! changes (a shared version's transactions all have its schema).

use std::sync::{Arc, Mutex};

use tokio::sync::oneshot;

use super::commit::{self, GroupOutcome};
use super::handle::{HandleMemory, Writer};
use super::{CommitInfo, CommitOptions, PreparedTransaction};
use crate::env::Env;
use crate::error::CommitError;
use crate::format::manifest::Operation;
use crate::storage::TableStore;

/// The commit queue of one table handle (shared by its clones).
#[derive(Debug, Default)]
pub(crate) struct CommitQueue {
    pending: Mutex<Vec<Pending>>,
    committer: tokio::sync::Mutex<()>,
}

#[derive(Debug)]
struct Pending {
    txn: PreparedTransaction,
    opts: CommitOptions,
    reply: oneshot::Sender<Result<CommitInfo, CommitError>>,
}

/// Whether `txn` may share a version with others.
fn groupable(txn: &PreparedTransaction, opts: &CommitOptions) -> bool {
    opts.expect_version.is_none()
        && matches!(
            txn.operation,
            Operation::Append { .. }
                | Operation::Delete { .. }
                | Operation::Update { .. }
                | Operation::Merge { .. }
                | Operation::ReplaceWhere { .. }
        )
}

impl CommitQueue {
    /// Commits `txn`, in a version shared with whatever else this handle commits at the
    /// same moment (see the module docs); with `group` off, in a version of its own.
    pub(crate) async fn commit(
        &self,
        store: &Arc<TableStore>,
        env: &Env,
        memory: &Arc<HandleMemory>,
        txn: &PreparedTransaction,
        opts: &CommitOptions,
        group: bool,
    ) -> Result<CommitInfo, CommitError> {
        let w = Writer { store, env, memory };
        if !group || !groupable(txn, opts) {
            return commit::commit(w, txn, opts).await;
        }
        // A lone writer (nobody committing, nothing queued) commits at once, in its own
        // task: no spawned task, no channel. Whoever arrives meanwhile queues and takes
        // the lock after it.
        if let Ok(_turn) = self.committer.try_lock() {
            if self.lock_pending().is_empty() {
                return commit::commit(w, txn, opts).await;
            }
        }
        let (reply, mut answer) = oneshot::channel();
        self.lock_pending().push(Pending { txn: txn.clone(), opts: opts.clone(), reply });
        loop {
            let _turn = self.committer.lock().await;
            match answer.try_recv() {
                Ok(result) => return result,
                Err(oneshot::error::TryRecvError::Empty) => {}
                Err(oneshot::error::TryRecvError::Closed) => panic!("the task committing this transaction panicked"),
            }
            let batch = std::mem::take(&mut *self.lock_pending());
            let (store, env, memory) = (store.clone(), env.clone(), memory.clone());
            let batch = async move { run_batch(Writer { store: &store, env: &env, memory: &memory }, batch).await };
            let requeue = match tokio::spawn(batch).await {
                Ok(requeue) => requeue,
                // A panic is a bug: it reaches the caller as one, never as a guess.
                Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
                Err(e) => panic!("the task committing a group was cancelled: {e}"),
            };
            // The deferred are older than anything queued since: they go first.
            self.lock_pending().splice(0..0, requeue);
            match answer.try_recv() {
                Ok(result) => return result,
                Err(oneshot::error::TryRecvError::Empty) => {}
                Err(oneshot::error::TryRecvError::Closed) => panic!("the task committing this transaction panicked"),
            }
        }
    }

    fn lock_pending(&self) -> std::sync::MutexGuard<'_, Vec<Pending>> {
        self.pending.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Commits `batch` as one version; answers every member that settled and returns the
/// ones to queue again.
async fn run_batch(w: Writer<'_>, batch: Vec<Pending>) -> Vec<Pending> {
    let entries: Vec<(&PreparedTransaction, &CommitOptions)> = batch.iter().map(|p| (&p.txn, &p.opts)).collect();
    let outcomes = commit::commit_group(w, &entries).await;
    let mut requeue = Vec::new();
    match outcomes {
        Ok(outcomes) => {
            for (pending, outcome) in batch.into_iter().zip(outcomes) {
                match outcome {
                    GroupOutcome::Committed(info) => drop(pending.reply.send(Ok(info))),
                    GroupOutcome::Failed(e) => drop(pending.reply.send(Err(e))),
                    GroupOutcome::Deferred => requeue.push(pending),
                }
            }
        }
        // An error of the whole batch goes to its first member; the others are
        // committed again (each finds itself in the history if the batch landed).
        Err(e) => {
            let mut members = batch.into_iter();
            if let Some(first) = members.next() {
                drop(first.reply.send(Err(e)));
            }
            requeue.extend(members);
        }
    }
    requeue
}

//! What a transaction does at commit, one implementation per action file (as
//! iceberg-rust's `TransactionAction`): its next state from a base version, the re-run
//! of the part a winner changed, and whether it would change anything at all. The
//! commit loop (`commit.rs`) knows none of the operations; [`for_operation`] is the one
//! place that maps an [`Operation`] to its action.

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use super::conflict::RerunScope;
use super::{alter, append, compact, delete, merge, overwrite, restore, update};
use crate::env::Env;
use crate::error::CommitError;
use crate::format::manifest::{Manifest, Operation, SegmentRef};
use crate::format::schema::Schema;
use crate::storage::TableStore;

/// What an action needs besides the base version.
pub(crate) struct Cx<'a> {
    pub store: &'a TableStore,
    pub env: &'a Env,
    /// The value of `now()` in the transaction's SQL.
    pub now: DateTime<Utc>,
}

/// The parts of a manifest an action decides.
#[derive(Debug, Clone)]
pub(crate) struct NextState {
    pub schema: Schema,
    pub segments: Vec<SegmentRef>,
    pub next_fragment_id: u64,
    pub properties: std::collections::BTreeMap<String, String>,
    /// Rows this version removes (deleted, or replaced by an overwrite).
    pub rows_deleted: u64,
}

impl NextState {
    /// `base`'s state, unchanged (a transaction that changes no data: a withdrawal).
    pub(crate) fn unchanged(base: &Manifest) -> Self {
        NextState::with_segments(base, base.segments.clone(), base.next_fragment_id)
    }

    /// `base`'s state with new `segments` and `next_fragment_id`, removing no row.
    pub(crate) fn with_segments(base: &Manifest, segments: Vec<SegmentRef>, next_fragment_id: u64) -> Self {
        NextState { schema: base.schema.clone(), segments, next_fragment_id, properties: base.properties.clone(), rows_deleted: 0 }
    }
}

/// An operation at commit. It owns the operation (re-runs extend it) and whatever it
/// keeps between attempts, so that an attempt redoes only what new winners changed.
#[async_trait]
pub(crate) trait Action: Send + Sync {
    /// The operation as it stands (as prepared, plus what re-runs found): what the
    /// conflict rules judge and the version records.
    fn operation(&self) -> Operation;

    /// `base` with this operation applied. Writes any segments and deletion vectors it
    /// needs (fresh names: a lost attempt leaves them for cleanup).
    async fn apply(&mut self, cx: &Cx<'_>, base: &Manifest) -> Result<NextState, CommitError>;

    /// Re-executes the part of the operation in `scope` against `base` (the latest
    /// version); for `Everything`, the whole of it. Actions that never re-run keep this.
    async fn rerun(&mut self, _cx: &Cx<'_>, _base: &Manifest, _scope: &RerunScope) -> Result<(), CommitError> {
        Ok(())
    }

    /// Why committing now would make a version that changes nothing (then none is
    /// made). `rerun_done`: some re-run already happened.
    fn no_change(&self, _rerun_done: bool) -> Option<&'static str> {
        self.operation().no_change()
    }

    /// Files this attempt wrote that no version will name (e.g. a compaction's outputs
    /// for groups a winner made stale). Removed best effort by the loop.
    fn take_replaced_files(&mut self) -> Vec<String> {
        Vec::new()
    }
}

/// The action of `operation`: each holds its own operation's data.
pub(crate) fn for_operation(operation: Operation) -> Box<dyn Action> {
    match operation {
        Operation::Append { fragments } => Box::new(append::AppendAction { fragments }),
        Operation::Overwrite { fragments } => Box::new(overwrite::OverwriteAction { fragments }),
        Operation::ReplaceWhere { predicate, columns, deletions, fragments } => {
            Box::new(overwrite::ReplaceWhereAction { predicate, columns, deletions, fragments, state: Default::default() })
        }
        Operation::Restore { version } => Box::new(restore::RestoreAction { version }),
        Operation::Delete { predicate, columns, deletions } => {
            Box::new(delete::DeleteAction { predicate, columns, deletions, state: Default::default() })
        }
        Operation::Update { predicate, set, columns, deletions, fragments } => {
            Box::new(update::UpdateAction { predicate, set, columns, deletions, fragments, state: Default::default() })
        }
        Operation::Merge { keys, columns, deletions, fragments, partial } => {
            Box::new(merge::MergeAction::new(keys, columns, deletions, fragments, partial))
        }
        Operation::Compact { target_rows, groups } => Box::new(compact::CompactAction { target_rows, groups, replaced: Vec::new() }),
        op @ (Operation::AddColumn { .. }
        | Operation::DropColumn { .. }
        | Operation::RenameColumn { .. }
        | Operation::WidenColumn { .. }
        | Operation::SetProperties { .. }) => Box::new(alter::AlterAction(op)),
        op @ Operation::Withdraw { .. } => Box::new(alter::AlterAction(op)),
        // Version 0 is created by `create_table`, never through the commit loop.
        op @ Operation::Create => Box::new(alter::AlterAction(op)),
    }
}

//! What each operation does at commit, one file per operation (`append`, `overwrite`,
//! `restore`, `delete`, `update`, `merge`, `alter`, `compact`): its next state from a
//! base version, the re-run of the part a winner changed, and whether it would change
//! anything at all. An operation has one form, its [`Operation`] (the record a version
//! keeps); [`Action`] holds it at commit with what it keeps between attempts, and is
//! the one place that maps an operation to its file. The commit loop knows none of
//! the operations.

mod alter;
mod append;
mod apply;
pub(crate) mod compact;
pub(crate) mod delete;
pub(crate) mod merge;
mod overwrite;
mod restore;
pub(crate) mod update;

use chrono::{DateTime, Utc};

use self::delete::DeletionState;
use super::conflict::RerunScope;
use crate::env::Env;
use crate::error::CommitError;
use crate::format::manifest::{Manifest, NextIds, Operation, SegmentRef};
use crate::format::schema::Schema;
use crate::storage::TableStore;

/// What an operation needs besides the base version.
pub(crate) struct Cx<'a> {
    pub store: &'a TableStore,
    pub env: &'a Env,
    /// The value of `now()` in the transaction's SQL.
    pub now: DateTime<Utc>,
}

/// The parts of a manifest an operation decides.
#[derive(Debug, Clone)]
pub(crate) struct NextState {
    pub schema: Schema,
    pub segments: Vec<SegmentRef>,
    pub next: NextIds,
    pub properties: std::collections::BTreeMap<String, String>,
    /// Rows this version removes (deleted, or replaced by an overwrite).
    pub rows_deleted: u64,
}

impl NextState {
    /// `base`'s state, unchanged (a transaction that changes no data: a withdrawal).
    pub(crate) fn unchanged(base: &Manifest) -> Self {
        NextState::with_segments(base, base.segments.clone(), base.next_ids())
    }

    /// `base`'s state with new `segments` and ids to assign next, removing no row.
    pub(crate) fn with_segments(base: &Manifest, segments: Vec<SegmentRef>, next: NextIds) -> Self {
        NextState { schema: base.schema.clone(), segments, next, properties: base.properties.clone(), rows_deleted: 0 }
    }
}

/// An operation at commit: the operation as it stands (as prepared, plus what re-runs
/// found: what the conflict rules judge and the version records), and what it keeps
/// between attempts, so that an attempt redoes only what new winners changed.
pub(crate) struct Action {
    op: Operation,
    kept: Kept,
}

/// What an operation keeps between attempts (each operation uses its own part).
#[derive(Default)]
struct Kept {
    /// The segment rewrites and the predicate of an operation that deletes rows.
    deletion: DeletionState,
    /// A merge's source, read back from its own data files (it only changes with the schema).
    merge_source: Option<(Schema, merge::Source)>,
    /// Files an attempt wrote that no version will name (a compaction's outputs for
    /// groups a winner made stale).
    replaced: Vec<String>,
}

impl Action {
    pub(crate) fn new(op: Operation) -> Self {
        Action { op, kept: Kept::default() }
    }

    /// The operation as it stands.
    pub(crate) fn operation(&self) -> Operation {
        self.op.clone()
    }

    /// `base` with the operation applied. Writes any segments and deletion vectors it
    /// needs (fresh names: a lost attempt leaves them for cleanup).
    pub(crate) async fn apply(&mut self, cx: &Cx<'_>, base: &Manifest) -> Result<NextState, CommitError> {
        let Action { op, kept } = self;
        match op {
            Operation::Append { fragments } => append::apply(cx, base, fragments).await,
            Operation::Overwrite { fragments, schema } => overwrite::apply(cx, base, fragments, schema.as_ref()).await,
            Operation::Delete { deletions, .. } => kept.deletion.apply(cx, base, deletions, &[]).await,
            Operation::ReplaceWhere { deletions, fragments, .. }
            | Operation::Update { deletions, fragments, .. }
            | Operation::Merge { deletions, fragments, .. } => kept.deletion.apply(cx, base, deletions, fragments).await,
            Operation::Restore { version } => restore::apply(cx, base, *version).await,
            Operation::Compact { groups, .. } => compact::apply(cx.store, cx.env, base, groups).await,
            Operation::AddColumn { .. }
            | Operation::DropColumn { .. }
            | Operation::RenameColumn { .. }
            | Operation::WidenColumn { .. }
            | Operation::SetProperties { .. }
            | Operation::Withdraw { .. }
            | Operation::DeleteBranch
            // Version 0 is created by `create_table`, a branch's first version by
            // `create_branch`, never through the commit loop.
            | Operation::Create
            | Operation::Branch { .. } => Ok(alter::apply(base, op)),
        }
    }

    /// Re-executes the part of the operation in `scope` against `base` (the latest
    /// version); for `Everything`, the whole of it. Operations that never re-run do
    /// nothing.
    pub(crate) async fn rerun(&mut self, cx: &Cx<'_>, base: &Manifest, scope: &RerunScope) -> Result<(), CommitError> {
        let Action { op, kept } = self;
        match op {
            Operation::Delete { predicate, deletions, .. } | Operation::ReplaceWhere { predicate, deletions, .. } => {
                kept.deletion.rerun_predicate(cx, base, predicate, deletions, scope).await
            }
            Operation::Update { predicate, set, deletions, fragments, .. } => {
                update::rerun(cx, base, scope, (predicate.as_deref(), set), (deletions, fragments), &mut kept.deletion).await
            }
            Operation::Merge { keys, deletions, fragments, partial, .. } => {
                let parts = merge::MergeParts { deletions, fragments, partial };
                merge::rerun(cx.store, cx.env, base, keys, parts, scope, &mut kept.merge_source).await?;
                if matches!(scope, RerunScope::Everything) {
                    kept.deletion.forget();
                }
                Ok(())
            }
            Operation::Compact { groups, .. } => {
                kept.replaced.extend(compact::revalidate(cx.store, cx.env, base, groups).await?);
                Ok(())
            }
            _ => Ok(()),
        }
    }

    /// Why committing now would make a version that changes nothing (then none is
    /// made). `rerun_done`: some re-run already happened.
    pub(crate) fn no_change(&self, rerun_done: bool) -> Option<&'static str> {
        match &self.op {
            Operation::Compact { groups, .. } => compact::no_change(groups, rerun_done),
            op => op.no_change(),
        }
    }

    /// Files this attempt wrote that no version will name. Removed best effort by the
    /// loop.
    pub(crate) fn take_replaced_files(&mut self) -> Vec<String> {
        std::mem::take(&mut self.kept.replaced)
    }
}

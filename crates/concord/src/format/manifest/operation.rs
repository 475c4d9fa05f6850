//! What a transaction does: its operation as recorded in the root (FORMAT.md §4), and
//! the operation kinds the history, outcomes and idempotency checks name.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::{Assignment, CompactGroup, FragmentDeletion, NewColumn, NewFragment, PartialMerge};
use crate::format::schema::Schema;

/// What a transaction does; enough to replay it on the previous version.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
#[non_exhaustive]
pub enum Operation {
    /// Version 0: an empty table with the manifest's schema.
    Create,
    /// Adds fragments.
    Append {
        /// The rows written, one fragment per data file.
        fragments: Vec<NewFragment>,
    },
    /// Replaces every row with the given fragments.
    Overwrite {
        /// The new rows.
        fragments: Vec<NewFragment>,
        /// Set only by a branch merge replaying a restore of one of the branch's own
        /// versions: that version's schema, which the overwrite restores too. `None`:
        /// the schema is unchanged.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        schema: Option<Schema>,
    },
    /// Makes the state of `version` (schema and rows) the newest state.
    Restore {
        /// The version restored.
        version: u64,
    },
    /// Deletes the rows matching `predicate`.
    Delete {
        /// The SQL predicate.
        predicate: String,
        /// Field ids the predicate reads.
        columns: Vec<u32>,
        /// The rows it found (at prepare time, plus any re-run over winners'
        /// fragments), as delta deletion vectors.
        deletions: Vec<FragmentDeletion>,
    },
    /// Replaces the rows matching `predicate` with `fragments` (`overwrite --where`): a
    /// delete and an append in one transaction.
    ReplaceWhere {
        /// The SQL predicate; every new row satisfies it.
        predicate: String,
        /// Field ids the predicate reads.
        columns: Vec<u32>,
        /// The rows replaced.
        deletions: Vec<FragmentDeletion>,
        /// The new rows.
        fragments: Vec<NewFragment>,
    },
    /// Upsert: the live rows whose `keys` match a source row are deleted (`deletions`)
    /// and `fragments` added. When the source has every column, `fragments` are the
    /// source rows and `columns` the key field ids. When it lacks some (`partial`),
    /// matched rows keep their values of those: `fragments` are first each matched
    /// row with the source's columns set, then the source rows inserted (their keys
    /// matched no row), and `columns` are the key and source field ids.
    Merge {
        /// Key column names.
        keys: Vec<String>,
        /// Field ids it owns (see above).
        columns: Vec<u32>,
        /// The matched rows.
        deletions: Vec<FragmentDeletion>,
        /// The rows added.
        fragments: Vec<NewFragment>,
        /// Set when the source lacked some columns.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        partial: Option<PartialMerge>,
    },
    /// Rewrites the rows matching `predicate` (all rows without one): the old rows are
    /// deleted (`deletions`) and their new values written as `fragments`.
    Update {
        /// The SQL predicate, if any.
        predicate: Option<String>,
        /// The SET clauses.
        set: Vec<Assignment>,
        /// Field ids it reads or sets.
        columns: Vec<u32>,
        /// The old rows.
        deletions: Vec<FragmentDeletion>,
        /// Their new values.
        fragments: Vec<NewFragment>,
    },
    /// Adds a column; files written before read it as its default (or NULL).
    AddColumn {
        /// The column (its field id is assigned at commit).
        column: NewColumn,
    },
    /// Removes a column; its data stays in old files, unread. A no-op if the column is
    /// already gone.
    DropColumn {
        /// The column's field id.
        field_id: u32,
        /// Its name when prepared.
        name: String,
    },
    /// Renames a column; data files are untouched.
    RenameColumn {
        /// The column's field id.
        field_id: u32,
        /// Its name when prepared.
        from: String,
        /// Its new name.
        to: String,
    },
    /// Widens a column's type (`int` to `bigint`, ...: [`ColumnType::widens_to`](crate::ColumnType::widens_to)); data
    /// files are untouched, their values read as the wider type.
    WidenColumn {
        /// The column's field id.
        field_id: u32,
        /// Its name when prepared.
        name: String,
        /// Its type when prepared.
        from: crate::format::schema::ColumnType,
        /// Its new type.
        to: crate::format::schema::ColumnType,
    },
    /// Sets and removes table properties (e.g. `isolation`).
    SetProperties {
        /// Properties set.
        set: BTreeMap<String, String>,
        /// Properties removed.
        unset: Vec<String>,
    },
    /// An announced transaction's owner gave up on it: no later version may carry it
    /// (cooperative commits). Changes nothing else.
    Withdraw {
        /// The transaction withdrawn.
        transaction_id: Uuid,
    },
    /// Rewrites groups of fragments (live rows only) as fewer, larger ones.
    Compact {
        /// Rows per rewritten fragment.
        target_rows: u64,
        /// The groups rewritten.
        groups: Vec<CompactGroup>,
    },
    /// The first version of a branch's chain: the state of version `version` of branch
    /// `from` (FORMAT.md §17). Only ever a chain's first version.
    Branch {
        /// The branch it was made from.
        from: String,
        /// The version of that branch it starts from (this version's number).
        version: u64,
    },
    /// The last version of a deleted branch's chain: no transaction commits after it.
    /// Changes nothing else.
    DeleteBranch,
}

/// What kind of operation a transaction is: its name in the history, in outcomes and
/// in idempotency checks (a key belongs to one kind).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum OperationKind {
    /// Version 0.
    Create,
    /// Adds rows.
    Append,
    /// Replaces every row, or the rows matching a predicate.
    Overwrite,
    /// Makes an old version the newest state.
    Restore,
    /// Deletes rows.
    Delete,
    /// Sets columns of rows.
    Update,
    /// Upserts on keys.
    Merge,
    /// Adds a column.
    AddColumn,
    /// Removes a column.
    DropColumn,
    /// Renames a column.
    RenameColumn,
    /// Widens a column's type.
    WidenColumn,
    /// Sets or removes table properties.
    SetProperties,
    /// Rewrites fragments.
    Compact,
    /// Withdraws an announced transaction.
    Withdraw,
    /// Starts a branch.
    Branch,
    /// Ends a deleted branch's chain.
    DeleteBranch,
}

impl OperationKind {
    /// Every kind.
    pub const ALL: [OperationKind; 16] = [
        OperationKind::Create,
        OperationKind::Append,
        OperationKind::Overwrite,
        OperationKind::Restore,
        OperationKind::Delete,
        OperationKind::Update,
        OperationKind::Merge,
        OperationKind::AddColumn,
        OperationKind::DropColumn,
        OperationKind::RenameColumn,
        OperationKind::WidenColumn,
        OperationKind::SetProperties,
        OperationKind::Compact,
        OperationKind::Withdraw,
        OperationKind::Branch,
        OperationKind::DeleteBranch,
    ];

    /// Its name, as in the history (`append`, `add_column`, ...).
    pub fn name(self) -> &'static str {
        match self {
            OperationKind::Create => "create",
            OperationKind::Append => "append",
            OperationKind::Overwrite => "overwrite",
            OperationKind::Restore => "restore",
            OperationKind::Delete => "delete",
            OperationKind::Update => "update",
            OperationKind::Merge => "merge",
            OperationKind::AddColumn => "add_column",
            OperationKind::DropColumn => "drop_column",
            OperationKind::RenameColumn => "rename_column",
            OperationKind::WidenColumn => "widen_column",
            OperationKind::SetProperties => "set_properties",
            OperationKind::Compact => "compact",
            OperationKind::Withdraw => "withdraw",
            OperationKind::Branch => "branch",
            OperationKind::DeleteBranch => "delete_branch",
        }
    }

    /// The kind of this name.
    pub fn parse(name: &str) -> Option<OperationKind> {
        OperationKind::ALL.into_iter().find(|k| k.name() == name)
    }
}

impl std::fmt::Display for OperationKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl Operation {
    /// The operation's kind (an overwrite of the rows matching a predicate is an
    /// overwrite).
    pub fn kind(&self) -> OperationKind {
        match self {
            Operation::Create => OperationKind::Create,
            Operation::Append { .. } => OperationKind::Append,
            Operation::Overwrite { .. } | Operation::ReplaceWhere { .. } => OperationKind::Overwrite,
            Operation::Restore { .. } => OperationKind::Restore,
            Operation::Delete { .. } => OperationKind::Delete,
            Operation::Update { .. } => OperationKind::Update,
            Operation::Merge { .. } => OperationKind::Merge,
            Operation::AddColumn { .. } => OperationKind::AddColumn,
            Operation::DropColumn { .. } => OperationKind::DropColumn,
            Operation::RenameColumn { .. } => OperationKind::RenameColumn,
            Operation::WidenColumn { .. } => OperationKind::WidenColumn,
            Operation::SetProperties { .. } => OperationKind::SetProperties,
            Operation::Compact { .. } => OperationKind::Compact,
            Operation::Withdraw { .. } => OperationKind::Withdraw,
            Operation::Branch { .. } => OperationKind::Branch,
            Operation::DeleteBranch => OperationKind::DeleteBranch,
        }
    }

    /// The operation's name, as in the history.
    pub fn name(&self) -> &'static str {
        self.kind().name()
    }

    /// Rows this operation adds, as written before commit.
    pub fn rows_written(&self) -> u64 {
        match self {
            Operation::Append { fragments }
            | Operation::Overwrite { fragments, .. }
            | Operation::ReplaceWhere { fragments, .. }
            | Operation::Update { fragments, .. }
            | Operation::Merge { fragments, .. } => fragments.iter().map(|f| f.rows).sum(),
            // A compaction moves rows; it adds none.
            Operation::Create
            | Operation::Restore { .. }
            | Operation::Delete { .. }
            | Operation::AddColumn { .. }
            | Operation::DropColumn { .. }
            | Operation::RenameColumn { .. }
            | Operation::WidenColumn { .. }
            | Operation::SetProperties { .. }
            | Operation::Withdraw { .. }
            | Operation::Branch { .. }
            | Operation::DeleteBranch
            | Operation::Compact { .. } => 0,
        }
    }
}

impl Operation {
    /// The existing fragments it names: those it deletes rows of, or compacts.
    pub(crate) fn named_fragments(&self) -> Vec<u64> {
        match self {
            Operation::Delete { deletions, .. }
            | Operation::ReplaceWhere { deletions, .. }
            | Operation::Update { deletions, .. }
            | Operation::Merge { deletions, .. } => deletions.iter().map(|d| d.fragment_id).collect(),
            Operation::Compact { groups, .. } => groups.iter().flat_map(|g| g.inputs.iter().map(|i| i.fragment_id)).collect(),
            _ => Vec::new(),
        }
    }

    /// The fragments it adds, in the order they take ids at commit.
    pub(crate) fn added_fragments(&self) -> Vec<&NewFragment> {
        match self {
            Operation::Append { fragments }
            | Operation::Overwrite { fragments, .. }
            | Operation::ReplaceWhere { fragments, .. }
            | Operation::Update { fragments, .. }
            | Operation::Merge { fragments, .. } => fragments.iter().collect(),
            Operation::Compact { groups, .. } => groups.iter().flat_map(|g| &g.outputs).collect(),
            _ => Vec::new(),
        }
    }
}

impl Operation {
    /// Why committing this operation would change nothing, if it would not: a version
    /// then holds no change, so none is made.
    pub fn no_change(&self) -> Option<&'static str> {
        match self {
            Operation::Append { fragments } if fragments.is_empty() => Some("the input has no rows"),
            Operation::Delete { deletions, .. } if deletions.is_empty() => Some("no row matches the predicate"),
            Operation::Update { deletions, fragments, .. } if deletions.is_empty() && fragments.is_empty() => {
                Some("no row matches the predicate")
            }
            Operation::Merge { fragments, deletions, .. } if fragments.is_empty() && deletions.is_empty() => Some("the source has no rows"),
            Operation::ReplaceWhere { deletions, fragments, .. } if deletions.is_empty() && fragments.is_empty() => {
                Some("the input has no rows and no row matches the predicate")
            }
            _ => None,
        }
    }

    /// The data and deletion files (table-relative) this operation wrote.
    pub fn written_files(&self) -> Vec<&str> {
        match self {
            Operation::Append { fragments } | Operation::Overwrite { fragments, .. } => {
                fragments.iter().flat_map(|f| f.files.iter().map(|d| d.path.as_str())).collect()
            }
            Operation::Delete { deletions, .. } => deletions.iter().map(|d| d.path.as_str()).collect(),
            Operation::ReplaceWhere { deletions, fragments, .. }
            | Operation::Update { deletions, fragments, .. }
            | Operation::Merge { deletions, fragments, .. } => deletions
                .iter()
                .map(|d| d.path.as_str())
                .chain(fragments.iter().flat_map(|f| f.files.iter().map(|d| d.path.as_str())))
                .collect(),
            Operation::Compact { groups, .. } => {
                groups.iter().flat_map(|g| g.outputs.iter().flat_map(|f| f.files.iter().map(|d| d.path.as_str()))).collect()
            }
            Operation::Create
            | Operation::Restore { .. }
            | Operation::AddColumn { .. }
            | Operation::DropColumn { .. }
            | Operation::RenameColumn { .. }
            | Operation::WidenColumn { .. }
            | Operation::SetProperties { .. }
            | Operation::Withdraw { .. }
            | Operation::Branch { .. }
            | Operation::DeleteBranch => Vec::new(),
        }
    }
}

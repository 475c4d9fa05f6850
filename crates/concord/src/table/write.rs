//! A write is a value: [`Write`] describes one (what the CLI and the Python package
//! build from their arguments), [`Table::prepare`] turns it into a transaction (its
//! files written), [`Table::write`] prepares and commits it. The per-operation methods
//! (`append`, `delete`, ...) are one-line conveniences over `write`.

use std::collections::BTreeMap;
use std::future::Future;

use super::input::Input;
use super::Table;
use crate::error::{CommitError, WriteError};
use crate::format::manifest::{Assignment, OperationKind};
use crate::txn::{keys, CommitInfo, CommitOptions, PreparedTransaction};

/// One write to a table, as data. Adding an operation means adding its variant here
/// (and its preparation, `prepare.rs`), its record (`Operation` and its kind, in the
/// format), what it does at commit (a file of `txn/ops`) and its conflict rules
/// (`txn/conflict.rs`); the CLI and the Python package build it.
#[derive(Debug)]
#[non_exhaustive]
pub enum Write {
    /// Adds the input's rows (matched to the table by column name).
    Append {
        /// The rows.
        input: Input,
    },
    /// Replaces every row with the input's rows; with `filter`, only the rows matching
    /// that SQL predicate, every new row having to match it too (as Delta's replaceWhere).
    Overwrite {
        /// The new rows.
        input: Input,
        /// The rows replaced, if not all.
        filter: Option<String>,
    },
    /// Deletes the rows matching a SQL predicate.
    Delete {
        /// The predicate.
        filter: String,
    },
    /// Sets columns to SQL expressions of the row's values, on the rows matching
    /// `filter` (every row without one).
    Update {
        /// `column = expression` clauses.
        set: Vec<Assignment>,
        /// The rows changed, if not all.
        filter: Option<String>,
    },
    /// Upsert on key columns: rows whose key matches a source row take its values (of
    /// the columns the source has), the other source rows are inserted. Keys must be
    /// unique in the source.
    Merge {
        /// The source rows.
        input: Input,
        /// The key columns.
        on: Vec<String>,
    },
    /// Makes an old version (schema and rows) the newest state, as a new version.
    Restore {
        /// The version restored.
        version: u64,
    },
    /// Adds a column (`name type [not null] [default <SQL expression>]`); existing rows
    /// read it as the default (NULL without one); no data file is rewritten.
    AddColumn {
        /// The column's definition.
        definition: String,
    },
    /// Removes a column; its values stay in old data files, unread.
    DropColumn {
        /// The column.
        name: String,
    },
    /// Renames a column (by field id: no data file is rewritten).
    RenameColumn {
        /// The column.
        from: String,
        /// Its new name (in double quotes if it is not a plain identifier).
        to: String,
    },
    /// Widens a column's type (`int` to `bigint`, `float` to `double`, a decimal's
    /// precision: [`crate::ColumnType::widens_to`]); no data file is rewritten, old values
    /// read as the wider type.
    WidenColumn {
        /// The column.
        name: String,
        /// Its new type (a SQL type name, e.g. `bigint`, `decimal(20, 2)`).
        to: String,
    },
    /// Sets and removes table properties (e.g. `isolation=snapshot`).
    SetProperties {
        /// Properties set.
        set: BTreeMap<String, String>,
        /// Properties removed.
        unset: Vec<String>,
    },
    /// Rewrites small fragments (fewer live rows than `target_rows`) and fragments with
    /// deleted rows into fragments of up to `target_rows` rows. Gives way to concurrent
    /// writers; if nothing is left to do, commits nothing (`CommitInfo::abandoned`).
    Compact {
        /// Rows per rewritten fragment.
        target_rows: u64,
    },
}

impl Write {
    /// The kind of operation it is (what its idempotency key belongs to).
    pub fn kind(&self) -> OperationKind {
        match self {
            Write::Append { .. } => OperationKind::Append,
            Write::Overwrite { .. } => OperationKind::Overwrite,
            Write::Delete { .. } => OperationKind::Delete,
            Write::Update { .. } => OperationKind::Update,
            Write::Merge { .. } => OperationKind::Merge,
            Write::Restore { .. } => OperationKind::Restore,
            Write::AddColumn { .. } => OperationKind::AddColumn,
            Write::DropColumn { .. } => OperationKind::DropColumn,
            Write::RenameColumn { .. } => OperationKind::RenameColumn,
            Write::WidenColumn { .. } => OperationKind::WidenColumn,
            Write::SetProperties { .. } => OperationKind::SetProperties,
            Write::Compact { .. } => OperationKind::Compact,
        }
    }
}

impl Table {
    /// Prepares `write` against the latest version: writes its data files, deletion
    /// vectors and new values, and returns the transaction, committing nothing
    /// ([`Table::commit`] or [`Table::stage`] it).
    pub async fn prepare(&self, write: Write) -> Result<PreparedTransaction, WriteError> {
        match write {
            Write::Append { input } => self.prepare_append(input).await,
            Write::Overwrite { input, filter } => self.prepare_overwrite(input, filter.as_deref()).await,
            Write::Delete { filter } => self.prepare_delete(&filter).await,
            Write::Update { set, filter } => self.prepare_update(&set, filter.as_deref()).await,
            Write::Merge { input, on } => self.prepare_merge(input, &on).await,
            Write::Restore { version } => self.prepare_restore(version).await,
            Write::AddColumn { definition } => self.prepare_add_column(&definition).await,
            Write::DropColumn { name } => self.prepare_drop_column(&name).await,
            Write::RenameColumn { from, to } => self.prepare_rename_column(&from, &to).await,
            Write::WidenColumn { name, to } => self.prepare_widen_column(&name, &to).await,
            Write::SetProperties { set, unset } => self.prepare_set_properties(&set, &unset).await,
            Write::Compact { target_rows } => self.prepare_compact(target_rows).await,
        }
    }

    /// Prepares and commits `write` on top of the latest version, rebasing or re-running
    /// as the concurrency contract says. With an idempotency key already in the retained
    /// history, nothing is prepared or written and that earlier outcome is returned (the
    /// commit loop makes the same check). Files of a transaction known not to have
    /// committed are removed (never when the outcome is unknown: they may be part of a
    /// committed version).
    pub async fn write<'a>(&'a self, write: Write, options: &'a CommitOptions) -> Result<CommitInfo, WriteError> {
        if let Some(key) = &options.idempotency_key {
            let base = self.write_base().await?;
            let retry = keys::Retry::Transaction(write.kind());
            if let Some(keys::Found::Transaction(done)) = keys::in_history(&self.store, key, retry, base.version()).await? {
                return Ok(done);
            }
        }
        let txn = self.prepare(write).await?;
        let result = self.commit_queued(&txn, options).await;
        match &result {
            Ok(info) => self.after_commit(info).await,
            Err(CommitError::CommitStateUnknown { .. }) => {}
            Err(_) => self.store.delete_best_effort(txn.operation.written_files()).await,
        }
        Ok(result?)
    }

    /// Appends rows (batches, files or a stream: see [`Input`]); see [`Write::Append`].
    /// Rows are checked and written as they arrive; if any row does not fit, nothing is
    /// committed (and the files written so far are removed).
    pub fn append<'a>(
        &'a self,
        input: impl Into<Input>,
        options: &'a CommitOptions,
    ) -> impl Future<Output = Result<CommitInfo, WriteError>> + Send + 'a {
        self.write(Write::Append { input: input.into() }, options)
    }

    /// See [`Write::Overwrite`].
    pub fn overwrite<'a>(
        &'a self,
        input: impl Into<Input>,
        filter: Option<&str>,
        options: &'a CommitOptions,
    ) -> impl Future<Output = Result<CommitInfo, WriteError>> + Send + 'a {
        self.write(Write::Overwrite { input: input.into(), filter: filter.map(str::to_string) }, options)
    }

    /// See [`Write::Delete`].
    pub async fn delete(&self, filter: &str, options: &CommitOptions) -> Result<CommitInfo, WriteError> {
        self.write(Write::Delete { filter: filter.to_string() }, options).await
    }

    /// See [`Write::Update`].
    pub async fn update(&self, set: &[Assignment], filter: Option<&str>, options: &CommitOptions) -> Result<CommitInfo, WriteError> {
        self.write(Write::Update { set: set.to_vec(), filter: filter.map(str::to_string) }, options).await
    }

    /// See [`Write::Merge`].
    pub fn merge<'a>(
        &'a self,
        input: impl Into<Input>,
        on: &[String],
        options: &'a CommitOptions,
    ) -> impl Future<Output = Result<CommitInfo, WriteError>> + Send + 'a {
        self.write(Write::Merge { input: input.into(), on: on.to_vec() }, options)
    }

    /// See [`Write::Restore`].
    pub async fn restore(&self, version: u64, options: &CommitOptions) -> Result<CommitInfo, WriteError> {
        self.write(Write::Restore { version }, options).await
    }

    /// See [`Write::AddColumn`].
    pub async fn add_column(&self, definition: &str, options: &CommitOptions) -> Result<CommitInfo, WriteError> {
        self.write(Write::AddColumn { definition: definition.to_string() }, options).await
    }

    /// See [`Write::DropColumn`].
    pub async fn drop_column(&self, name: &str, options: &CommitOptions) -> Result<CommitInfo, WriteError> {
        self.write(Write::DropColumn { name: name.to_string() }, options).await
    }

    /// See [`Write::RenameColumn`].
    pub async fn rename_column(&self, from: &str, to: &str, options: &CommitOptions) -> Result<CommitInfo, WriteError> {
        self.write(Write::RenameColumn { from: from.to_string(), to: to.to_string() }, options).await
    }

    /// See [`Write::WidenColumn`].
    pub async fn widen_column(&self, name: &str, to: &str, options: &CommitOptions) -> Result<CommitInfo, WriteError> {
        self.write(Write::WidenColumn { name: name.to_string(), to: to.to_string() }, options).await
    }

    /// See [`Write::SetProperties`].
    pub async fn set_properties(
        &self,
        set: &BTreeMap<String, String>,
        unset: &[String],
        options: &CommitOptions,
    ) -> Result<CommitInfo, WriteError> {
        self.write(Write::SetProperties { set: set.clone(), unset: unset.to_vec() }, options).await
    }

    /// See [`Write::Compact`]. Progress goes to the handle's progress function
    /// ([`Table::with_progress`]).
    pub async fn compact(&self, target_rows: u64, options: &CommitOptions) -> Result<CommitInfo, WriteError> {
        self.write(Write::Compact { target_rows }, options).await
    }
}

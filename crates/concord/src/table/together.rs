//! Multi-table transactions (FORMAT.md §18): staged transactions of several tables of
//! one store committed as one, all tables or none, with no server.

use super::Table;
use crate::error::{TogetherError, WriteError};
use crate::txn::multi::together::{self, Part};
use crate::txn::{CommitInfo, CommitOptions, PreparedTransaction};

/// Commits the staged (or prepared) transactions of several tables of one store as one
/// transaction: every table moves, each by one version holding its transactions in
/// the order given, or none does; no reader ever sees one table's part without the
/// others'. `options` apply to every transaction (as each was staged with, they hold);
/// a retry under the same `idempotency_key` commits nothing again and reports what was
/// committed. Each table's outcomes, in `parts`' order.
pub async fn commit_together(
    parts: &[(&Table, &[PreparedTransaction])],
    options: &CommitOptions,
    idempotency_key: Option<&str>,
) -> Result<Vec<Vec<CommitInfo>>, TogetherError> {
    let member_options = CommitOptions { idempotency_key: None, expect_version: None, ..options.clone() };
    let mut per_table: Vec<Vec<CommitOptions>> = Vec::with_capacity(parts.len());
    for (_, txns) in parts {
        let opts = txns.iter().map(|t| t.staged.apply_to(&member_options)).collect::<Result<Vec<_>, WriteError>>();
        per_table.push(opts.map_err(|e| match e {
            WriteError::Commit(c) => TogetherError::Commit(c),
            other => TogetherError::Invalid { reason: other.to_string() },
        })?);
    }
    let built: Vec<Part<'_>> = parts
        .iter()
        .zip(&per_table)
        .map(|((table, txns), opts)| Part { writer: table.writer(), txns: txns.iter().zip(opts).collect() })
        .collect();
    let infos = together::commit_together(&built, idempotency_key, options.retry.timeout).await?;
    for ((table, _), outcomes) in parts.iter().zip(&infos) {
        if let Some(info) = outcomes.last() {
            table.after_commit(info).await;
        }
    }
    Ok(infos)
}

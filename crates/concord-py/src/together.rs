//! Multi-table transactions (FORMAT.md §18) from Python: `concord.commit_together`, the
//! staged transactions of several tables of one store committed all or none by the
//! library's `concord::commit_together`; the Python API is python/concord/_together.py.

use concord::{CommitOptions, PreparedTransaction, Table};
use pyo3::prelude::*;
use pyo3::types::PyList;

use crate::errors::Error;
use crate::runtime::{guard, run};
use crate::table::{commit_info, NativeTable};

/// Commits each table's staged transactions (`parts`: handle and staged ids, each table
/// once, every table in one store) as one multi-table transaction: every table moves by
/// one version holding its transactions in the order given, or none moves. A retry under
/// the same `idempotency_key` commits nothing again and reports what was committed.
/// Returns each table's outcomes (dicts, as `commit_staged` gives them), in `parts`' order;
/// each handle then reads the version it committed.
#[pyfunction]
#[pyo3(signature = (parts, idempotency_key=None))]
pub(crate) fn commit_together(
    py: Python<'_>,
    parts: Vec<(Bound<'_, NativeTable>, Vec<String>)>,
    idempotency_key: Option<String>,
) -> PyResult<Py<PyList>> {
    guard(|| {
        let mut tables = Vec::with_capacity(parts.len());
        for (handle, ids) in &parts {
            if ids.is_empty() {
                let uri = handle.get().origin.uri.clone();
                return Err(Error::Usage(format!("no staged ids given for table '{uri}'; give each table at least one")).into());
            }
            tables.push((handle.get().current(py)?, ids.clone()));
        }
        let (infos, newest) = run(py, async move {
            let mut loaded: Vec<(Table, Vec<PreparedTransaction>)> = Vec::with_capacity(tables.len());
            for (table, ids) in tables {
                let mut txns = Vec::with_capacity(ids.len());
                for id in &ids {
                    txns.push(table.load_staged(id).await?);
                }
                loaded.push((table, txns));
            }
            let borrowed: Vec<(&Table, &[PreparedTransaction])> = loaded.iter().map(|(t, txns)| (t, &txns[..])).collect();
            let infos = concord::commit_together(&borrowed, &CommitOptions::default(), idempotency_key.as_deref()).await?;
            Ok((infos, loaded.iter().map(|(t, _)| t.newest_known()).collect::<Vec<_>>()))
        })?;
        for ((handle, _), table) in parts.iter().zip(newest) {
            handle.get().advance(table);
        }
        let out = PyList::empty(py);
        for outcomes in &infos {
            let list = PyList::empty(py);
            for info in outcomes {
                list.append(commit_info(py, info)?)?;
            }
            out.append(list)?;
        }
        Ok(out.unbind())
    })
}

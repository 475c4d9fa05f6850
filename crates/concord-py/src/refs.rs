//! Tags and branches (FORMAT.md §17) from Python: module functions that take a handle
//! (`NativeTable`) and run the library's operation on it, as the CLI's `tag` and
//! `branch` commands do; the Python API around them is python/concord/_refs.py.

use concord::{BranchInfo, TagInfo, MAIN_BRANCH};
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::errors::Error;
use crate::options::version_ref;
use crate::runtime::{guard, run};
use crate::table::NativeTable;

/// A tag as Python receives it: (name, version, branch, created_at RFC 3339).
type TagTuple = (String, u64, String, String);

/// A branch as Python receives it: (name, the branch it was made from, that branch's
/// version it started at, created_at RFC 3339); `main` has none of the last three.
type BranchTuple = (String, Option<String>, Option<u64>, Option<String>);

fn rfc3339(at: chrono::DateTime<chrono::Utc>) -> String {
    at.to_rfc3339_opts(chrono::SecondsFormat::Micros, true)
}

fn tag_tuple(t: TagInfo) -> TagTuple {
    (t.name, t.version, t.branch, rfc3339(t.created_at))
}

fn branch_tuple(b: BranchInfo) -> BranchTuple {
    let (from, from_version) = b.from.map_or((None, None), |(branch, v)| (Some(branch), Some(v)));
    (b.name, from, from_version, b.created_at.map(rfc3339))
}

/// The version number `version` (a number or a tag's name) names on the handle's
/// branch (a tag of another branch is refused).
#[pyfunction]
pub(crate) fn version_of(py: Python<'_>, table: &Bound<'_, NativeTable>, version: Bound<'_, PyAny>) -> PyResult<u64> {
    guard(|| {
        let Some(at) = version_ref(Some(&version))? else { return Err(Error::Usage("give a version number or a tag name".into()).into()) };
        let table = table.get().current(py)?;
        Ok(run(py, async move { Ok(table.version_of(&at).await?) })?)
    })
}

/// Tags version `version` (a number or a tag's name; the latest without) of the
/// handle's branch as `name`.
#[pyfunction]
#[pyo3(signature = (table, name, version=None))]
pub(crate) fn create_tag(
    py: Python<'_>,
    table: &Bound<'_, NativeTable>,
    name: String,
    version: Option<Bound<'_, PyAny>>,
) -> PyResult<TagTuple> {
    guard(|| {
        let version = version_ref(version.as_ref())?;
        let table = table.get().current(py)?;
        let tag = run(py, async move {
            let version = match version {
                Some(at) => Some(table.version_of(&at).await?),
                None => None,
            };
            Ok(table.create_tag(&name, version).await?)
        })?;
        Ok(tag_tuple(tag))
    })
}

/// Tag `name`; `delete`: deletes it (returning what it was).
#[pyfunction]
#[pyo3(signature = (table, name, delete=false))]
pub(crate) fn tag(py: Python<'_>, table: &Bound<'_, NativeTable>, name: String, delete: bool) -> PyResult<TagTuple> {
    guard(|| {
        let table = table.get().current(py)?;
        let tag = run(py, async move { Ok(if delete { table.delete_tag(&name).await? } else { table.tag(&name).await? }) })?;
        Ok(tag_tuple(tag))
    })
}

/// Every tag, by name.
#[pyfunction]
pub(crate) fn tags(py: Python<'_>, table: &Bound<'_, NativeTable>) -> PyResult<Vec<TagTuple>> {
    guard(|| {
        let table = table.get().current(py)?;
        let tags = run(py, async move { Ok(table.tags().await?) })?;
        Ok(tags.into_iter().map(tag_tuple).collect())
    })
}

/// A handle on branch `name` at its latest version (`main`: the table's own chain).
#[pyfunction]
pub(crate) fn branch(py: Python<'_>, table: &Bound<'_, NativeTable>, name: String) -> PyResult<NativeTable> {
    guard(|| {
        let native = table.get();
        let table = native.current(py)?;
        let branch = run(py, async move { Ok(table.branch(&name).await?) })?;
        Ok(NativeTable::new(&native.origin, branch))
    })
}

/// Makes branch `name` from version `from_version` (a number of the handle's branch or a tag's
/// name; its latest without); returns a handle on it.
#[pyfunction]
#[pyo3(signature = (table, name, from_version=None))]
pub(crate) fn create_branch(
    py: Python<'_>,
    table: &Bound<'_, NativeTable>,
    name: String,
    from_version: Option<Bound<'_, PyAny>>,
) -> PyResult<NativeTable> {
    guard(|| {
        let from = version_ref(from_version.as_ref())?;
        let native = table.get();
        let table = native.current(py)?;
        let branch = run(py, async move { Ok(table.create_branch(&name, from.as_ref()).await?) })?;
        Ok(NativeTable::new(&native.origin, branch))
    })
}

/// Every branch, `main` first, then by name.
#[pyfunction]
pub(crate) fn branches(py: Python<'_>, table: &Bound<'_, NativeTable>) -> PyResult<Vec<BranchTuple>> {
    guard(|| {
        let table = table.get().current(py)?;
        let branches = run(py, async move { Ok(table.branches().await?) })?;
        Ok(branches.into_iter().map(branch_tuple).collect())
    })
}

/// Deletes branch `name`; returns what it was.
#[pyfunction]
pub(crate) fn delete_branch(py: Python<'_>, table: &Bound<'_, NativeTable>, name: String) -> PyResult<BranchTuple> {
    guard(|| {
        let table = table.get().current(py)?;
        Ok(branch_tuple(run(py, async move { Ok(table.delete_branch(&name).await?) })?))
    })
}

/// Merges branch `name` into `into` (`main` without) as one version; a handle on
/// `into` then reads that version. Returns what the merge did, as
/// `concord branch merge --json` prints it.
#[pyfunction]
#[pyo3(signature = (table, name, into=None, fast_forward_only=false))]
pub(crate) fn merge_branch<'py>(
    py: Python<'py>,
    table: &Bound<'py, NativeTable>,
    name: String,
    into: Option<String>,
    fast_forward_only: bool,
) -> PyResult<Bound<'py, PyDict>> {
    guard(|| {
        let native = table.get();
        let table = native.current(py)?;
        let (info, merged) = run(py, async move {
            let into = into.unwrap_or_else(|| MAIN_BRANCH.to_string());
            let info = table.merge_branch(&name, Some(&into), fast_forward_only).await?;
            let merged = match info.version {
                Some(v) if table.branch_name() == into => Some(table.checkout(v).await?),
                _ => None,
            };
            Ok::<_, Error>((info, merged))
        })?;
        if let Some(merged) = merged {
            native.advance(merged);
        }
        let d = PyDict::new(py);
        d.set_item("branch", &info.branch)?;
        d.set_item("into", &info.into)?;
        d.set_item("version", info.version)?;
        d.set_item("branch_versions", info.branch_versions)?;
        d.set_item("transactions", info.transactions)?;
        Ok(d)
    })
}

//! The table handle and the module's functions. Each call converts its arguments, runs
//! the library's operation on the runtime with the GIL released, and converts the
//! result; the Python API around them is python/concord/_table.py.

use std::collections::BTreeMap;
use std::sync::Mutex;

use arrow::ffi_stream::ArrowArrayStreamReader;
use concord::manifest::Fragment;
use concord::{Assignment, CommitInfo, Env, Input, OperationKind, ScanOptions, Schema, SqlSession, Table, VersionRef, Write};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyString};

use crate::arrow_ffi::{import_schema, import_stream, input_stream, pump, ArrowSchemaExport, ArrowStreamExport, BatchIterator};
use crate::errors::Error;
use crate::options::{commit_options, parse_time, schema_from_arrow, version_ref, Origin};
use crate::runtime::{guard, run};

/// The library's write of `kind` (an operation's name) from the Python package's
/// arguments (`python/concord/_table.py` builds them). The one translation of writes.
fn write_of(kind: &str, args: &Bound<'_, PyDict>) -> PyResult<Write> {
    let get = |name: &str| -> PyResult<Bound<'_, PyAny>> {
        args.get_item(name)?.ok_or_else(|| Error::Internal(format!("{kind}: missing argument {name}")).into())
    };
    let opt = |name: &str| -> PyResult<Option<String>> {
        match args.get_item(name)? {
            Some(v) if !v.is_none() => Ok(Some(v.extract()?)),
            _ => Ok(None),
        }
    };
    let input = |name: &str| -> PyResult<Input> { Ok(Input::Stream(input_stream(reader(&get(name)?)?))) };
    let Some(kind) = OperationKind::parse(kind) else { return Err(Error::Internal(format!("no write '{kind}'")).into()) };
    Ok(match kind {
        OperationKind::Append => Write::Append { input: input("data")? },
        OperationKind::Overwrite => Write::Overwrite { input: input("data")?, filter: opt("where")? },
        OperationKind::Delete => Write::Delete { filter: get("where")?.extract()? },
        OperationKind::Update => Write::Update { set: assignments(get("set")?.extract()?), filter: opt("where")? },
        OperationKind::Merge => Write::Merge { input: input("data")?, on: get("on")?.extract()? },
        OperationKind::Restore => Write::Restore { version: get("version")?.extract()? },
        OperationKind::AddColumn => Write::AddColumn { definition: get("definition")?.extract()? },
        OperationKind::DropColumn => Write::DropColumn { name: get("name")?.extract()? },
        OperationKind::RenameColumn => Write::RenameColumn { from: get("old")?.extract()?, to: get("new")?.extract()? },
        OperationKind::WidenColumn => Write::WidenColumn { name: get("name")?.extract()?, to: get("type")?.extract()? },
        OperationKind::SetProperties => Write::SetProperties { set: get("set")?.extract()?, unset: get("unset")?.extract()? },
        OperationKind::Compact => Write::Compact { target_rows: get("target_rows")?.extract()? },
        other => return Err(Error::Internal(format!("'{other}' is not a write")).into()),
    })
}

/// A commit's outcome as a dict (python/concord/_table.py makes it a `CommitInfo`).
pub(crate) fn commit_info<'py>(py: Python<'py>, info: &CommitInfo) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("version", info.version)?;
    d.set_item("operation", info.operation.name())?;
    d.set_item("attempts", info.attempts)?;
    d.set_item("rows_written", info.rows_written)?;
    d.set_item("rows_deleted", info.rows_deleted)?;
    d.set_item("transaction_id", info.transaction_id.to_string())?;
    d.set_item("rebased_over", PyList::new(py, &info.rebased_over)?)?;
    d.set_item("rerun", info.rerun)?;
    d.set_item("idempotent_replay", info.idempotent_replay)?;
    d.set_item("abandoned", &info.abandoned)?;
    Ok(d)
}

/// The handle's table, and the process it belongs to.
struct State {
    pid: u32,
    table: Table,
}

/// A table handle: reads one version (moved by writes and `refresh`), commits on top
/// of the latest. Safe to share between threads: each call works on a clone of the
/// table (clones share the handle's caches and its group commit).
#[pyclass(module = "concord._concord", frozen)]
pub(crate) struct NativeTable {
    /// Where the table is, and the handle's branch.
    pub(crate) origin: Origin,
    state: Mutex<State>,
}

impl NativeTable {
    /// A handle on `table` (on its branch) at `origin`.
    pub(crate) fn new(origin: &Origin, table: Table) -> Self {
        let origin = origin.on_branch_of(&table);
        NativeTable { origin, state: Mutex::new(State { pid: std::process::id(), table }) }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The table to work on. In a child forked from the process that opened the
    /// handle, the handle's version (of its branch) is opened again: the parent's
    /// connections and random state must not be shared with it.
    pub(crate) fn current(&self, py: Python<'_>) -> Result<Table, Error> {
        let (pid, table) = {
            let state = self.state();
            (state.pid, state.table.clone())
        };
        let here = std::process::id();
        if pid == here {
            return Ok(table);
        }
        let origin = self.origin.on_branch_of(&table);
        let version = table.version();
        let reopened = run(py, async move { origin.open(Some(version)).await })?;
        let mut state = self.state();
        if state.pid != here {
            *state = State { pid: here, table: reopened.clone() };
        }
        Ok(reopened)
    }

    /// Moves the handle to `table`'s version if that is not older than its own.
    pub(crate) fn advance(&self, table: Table) {
        let mut state = self.state();
        if state.pid == std::process::id() && table.version() >= state.table.version() {
            state.table = table;
        }
    }

    /// The table at `version` (a number, or a tag's version wherever it is) or `as_of`
    /// (RFC 3339), or the handle's version.
    async fn at(table: Table, version: Option<VersionRef>, as_of: Option<String>) -> Result<Table, Error> {
        match (version, as_of) {
            (Some(_), Some(_)) => Err(Error::Usage("give version or as_of, not both".into())),
            (Some(v), None) => Ok(table.checkout_ref(&v).await?),
            (None, Some(t)) => Ok(table.checkout_as_of(parse_time(&t)?).await?),
            (None, None) => Ok(table),
        }
    }
}

fn scan_options(columns: Option<Vec<String>>, filter: Option<String>, limit: Option<usize>) -> ScanOptions {
    ScanOptions { columns, filter, limit, ..ScanOptions::default() }
}

fn reader(data: &Bound<'_, PyAny>) -> PyResult<ArrowArrayStreamReader> {
    import_stream(data)
}

/// The write options every write takes.
#[pymethods]
impl NativeTable {
    /// The table's URI, as given.
    #[getter]
    fn uri(&self) -> String {
        self.origin.uri.clone()
    }

    /// The version this handle reads.
    #[getter]
    fn version(&self) -> u64 {
        self.state().table.version()
    }

    /// The branch this handle reads and writes (`main`: the table's own chain).
    #[getter]
    fn branch_name(&self) -> String {
        self.state().table.branch_name().to_string()
    }

    /// The schema of that version (an object with `__arrow_c_schema__`).
    fn schema(&self) -> PyResult<ArrowSchemaExport> {
        guard(|| Ok(ArrowSchemaExport::new(self.state().table.schema().arrow_schema())))
    }

    /// The schema of that version in Concord's string form.
    fn schema_definition(&self) -> String {
        self.state().table.schema().definition()
    }

    /// The table properties of that version (e.g. `isolation`).
    fn properties(&self) -> BTreeMap<String, String> {
        self.state().table.manifest().properties.clone()
    }

    /// The explicit store settings and coordinator the handle was opened with.
    fn origin(&self) -> (String, Vec<(String, String)>, Option<String>) {
        (self.origin.uri.clone(), self.origin.options.clone(), self.origin.coordinator.clone())
    }

    /// Moves the handle to the latest version.
    fn refresh(&self, py: Python<'_>) -> PyResult<u64> {
        guard(|| {
            let table = self.current(py)?;
            let latest = run(py, async move { Ok(table.latest().await?) })?;
            let version = latest.version();
            self.advance(latest);
            Ok(version)
        })
    }

    /// Prepares and commits a write: `kind`, an operation's name, with its arguments
    /// (see `write_of`) and the commit options (see `commit_options`).
    fn write(&self, py: Python<'_>, kind: &str, args: &Bound<'_, PyDict>, options: &Bound<'_, PyDict>) -> PyResult<Py<PyDict>> {
        guard(|| {
            let (write, options) = (write_of(kind, args)?, commit_options(options)?);
            let table = self.current(py)?;
            let (info, newest) = run(py, async move {
                let info = table.write(write, &options).await?;
                Ok((info, table.newest_known()))
            })?;
            self.advance(newest);
            Ok(commit_info(py, &info)?.unbind())
        })
    }

    /// Prepares a write (as `write`) and records it as a staged transaction; returns
    /// its id.
    fn stage(&self, py: Python<'_>, kind: &str, args: &Bound<'_, PyDict>, options: &Bound<'_, PyDict>) -> PyResult<String> {
        guard(|| {
            let (write, options) = (write_of(kind, args)?, commit_options(options)?);
            let table = self.current(py)?;
            let id = run(py, async move {
                let txn = table.prepare(write).await?;
                Ok(table.stage(&txn, &options).await?)
            })?;
            Ok(id.to_string())
        })
    }

    /// Commits staged transactions: all in one version, or none (`together`), or one
    /// after another in the order given. Returns one outcome per id.
    fn commit_staged(&self, py: Python<'_>, ids: Vec<String>, together: bool, options: &Bound<'_, PyDict>) -> PyResult<Py<PyList>> {
        guard(|| {
            let options = commit_options(options)?;
            let table = self.current(py)?;
            let (infos, newest) = run(py, async move {
                let mut txns = Vec::with_capacity(ids.len());
                for id in &ids {
                    txns.push(table.load_staged(id).await?);
                }
                let infos = table.commit_staged(&txns, together, &options).await?;
                Ok((infos, table.newest_known()))
            })?;
            self.advance(newest);
            let list = PyList::empty(py);
            for info in &infos {
                list.append(commit_info(py, info)?)?;
            }
            Ok(list.unbind())
        })
    }

    /// Reads rows into memory (all batches), as a stream to import.
    #[pyo3(signature = (columns=None, filter=None, version=None, as_of=None, limit=None))]
    fn to_arrow(
        &self,
        py: Python<'_>,
        columns: Option<Vec<String>>,
        filter: Option<String>,
        version: Option<Bound<'_, PyAny>>,
        as_of: Option<String>,
        limit: Option<usize>,
    ) -> PyResult<ArrowStreamExport> {
        guard(|| {
            let version = version_ref(version.as_ref())?;
            let table = self.current(py)?;
            let (schema, batches) = run(py, async move {
                let scan = NativeTable::at(table, version, as_of).await?.scan(scan_options(columns, filter, limit)).await?;
                let schema = scan.schema();
                Ok((schema, scan.collect().await?))
            })?;
            Ok(ArrowStreamExport::of_batches(schema, batches))
        })
    }

    /// Reads rows as they come: batches for Python one at a time (typed errors).
    #[pyo3(signature = (columns=None, filter=None, version=None, as_of=None, limit=None))]
    fn scan(
        &self,
        py: Python<'_>,
        columns: Option<Vec<String>>,
        filter: Option<String>,
        version: Option<Bound<'_, PyAny>>,
        as_of: Option<String>,
        limit: Option<usize>,
    ) -> PyResult<BatchIterator> {
        guard(|| {
            let version = version_ref(version.as_ref())?;
            let table = self.current(py)?;
            let channel = run(py, async move {
                let scan = NativeTable::at(table, version, as_of).await?.scan(scan_options(columns, filter, limit)).await?;
                Ok(pump(scan.schema(), scan.into_stream()))
            })?;
            Ok(BatchIterator::new(channel))
        })
    }

    /// Rows as an Arrow C stream: of the latest version (`latest`, looked up now; the
    /// handle does not move), else of the handle's version.
    #[pyo3(signature = (latest=true, columns=None, filter=None))]
    fn stream(&self, py: Python<'_>, latest: bool, columns: Option<Vec<String>>, filter: Option<String>) -> PyResult<ArrowStreamExport> {
        guard(|| {
            let table = self.current(py)?;
            let channel = run(py, async move {
                let table = if latest { table.latest().await? } else { table };
                let scan = table.scan(scan_options(columns, filter, None)).await?;
                Ok(pump(scan.schema(), scan.into_stream()))
            })?;
            Ok(ArrowStreamExport::of_channel(channel))
        })
    }

    /// Rows matching `filter` (all live rows without one).
    #[pyo3(signature = (filter=None, version=None, as_of=None))]
    fn count(&self, py: Python<'_>, filter: Option<String>, version: Option<Bound<'_, PyAny>>, as_of: Option<String>) -> PyResult<u64> {
        guard(|| {
            let version = version_ref(version.as_ref())?;
            let table = self.current(py)?;
            Ok(run(py, async move { Ok(NativeTable::at(table, version, as_of).await?.count(filter.as_deref()).await?) })?)
        })
    }

    /// The Iceberg metadata file of version `version` (default: the latest), published
    /// first if needed (with every earlier version not yet published), for any Iceberg
    /// reader.
    #[pyo3(signature = (version=None))]
    fn iceberg_metadata_path(&self, py: Python<'_>, version: Option<Bound<'_, PyAny>>) -> PyResult<String> {
        guard(|| {
            let version = version_ref(version.as_ref())?;
            let table = self.current(py)?;
            Ok(run(py, async move { Ok(NativeTable::at(table, version, None).await?.publish_iceberg().await?) })?)
        })
    }

    /// The table's history up to its latest version, as `concord history --format
    /// json` prints it (a JSON array).
    fn history_json(&self, py: Python<'_>) -> PyResult<String> {
        guard(|| {
            let table = self.current(py)?;
            let history = run(py, async move { Ok(table.latest().await?.history().await?) })?;
            serde_json::to_string(&history).map_err(|e| Error::Internal(format!("history does not serialize: {e}")).into())
        })
    }

    /// The fragments of a version: (id, live rows, the fragment as JSON, version, its
    /// branch). With `filter`, only those its statistics do not rule out.
    #[pyo3(signature = (version=None, as_of=None, filter=None))]
    fn fragments(
        &self,
        py: Python<'_>,
        version: Option<Bound<'_, PyAny>>,
        as_of: Option<String>,
        filter: Option<String>,
    ) -> PyResult<Vec<(u64, u64, String, u64, String)>> {
        guard(|| {
            let version = version_ref(version.as_ref())?;
            let table = self.current(py)?;
            let (fragments, version, branch) = run(py, async move {
                let table = NativeTable::at(table, version, as_of).await?;
                Ok((table.fragments_matching(filter.as_deref()).await?, table.version(), table.branch_name().to_string()))
            })?;
            let mut out = Vec::with_capacity(fragments.len());
            for f in &fragments {
                let json = serde_json::to_string(f).map_err(|e| Error::Internal(format!("a fragment does not serialize: {e}")))?;
                out.push((f.id, f.live_rows(), json, version, branch.clone()));
            }
            Ok(out)
        })
    }

    /// Reads one fragment of a version of branch `branch` (the handle's without; see
    /// `read_fragment`), through this handle.
    #[pyo3(signature = (version, fragment_json, columns=None, filter=None, branch=None))]
    fn read_fragment(
        &self,
        py: Python<'_>,
        version: u64,
        fragment_json: &str,
        columns: Option<Vec<String>>,
        filter: Option<String>,
        branch: Option<String>,
    ) -> PyResult<ArrowStreamExport> {
        guard(|| {
            let fragment = parse_fragment(fragment_json)?;
            let table = self.current(py)?;
            let open = async move {
                Ok(match branch {
                    Some(name) if name != table.branch_name() => table.branch(&name).await?.checkout(version).await?,
                    _ => table.checkout(version).await?,
                })
            };
            fragment_stream(py, open, fragment, columns, filter)
        })
    }

    /// The changes after `from_version` (or the version current at `from_time`, or
    /// consumer `consumer`'s position) up to `to_version` (or `to_time`; the latest
    /// without), all in memory.
    #[pyo3(signature = (from_version=None, to_version=None, from_time=None, to_time=None, consumer=None, columns=None, filter=None, net=false, schema_of=None))]
    #[allow(clippy::too_many_arguments)]
    fn changes(
        &self,
        py: Python<'_>,
        from_version: Option<Bound<'_, PyAny>>,
        to_version: Option<Bound<'_, PyAny>>,
        from_time: Option<String>,
        to_time: Option<String>,
        consumer: Option<String>,
        columns: Option<Vec<String>>,
        filter: Option<String>,
        net: bool,
        schema_of: Option<u64>,
    ) -> PyResult<ArrowStreamExport> {
        guard(|| {
            let (from_version, to_version) = (version_ref(from_version.as_ref())?, version_ref(to_version.as_ref())?);
            let table = self.current(py)?;
            let (schema, batches) = run(py, async move {
                let options = concord::ChangeOptions { columns, filter, net, schema_of };
                let table = table.latest().await?;
                let at = |t: String| {
                    let table = table.clone();
                    async move {
                        let when = concord::time::parse_time(&t).map_err(|e| Error::Usage(e.to_string()))?;
                        Ok::<u64, Error>(table.checkout_as_of(when).await?.version())
                    }
                };
                let to = match (to_version, to_time) {
                    (Some(v), _) => Some(table.version_of(&v).await?),
                    (None, Some(t)) => Some(at(t).await?),
                    (None, None) => None,
                };
                let feed = match (from_version, from_time, consumer) {
                    (Some(v), _, _) => table.changes(table.version_of(&v).await?, to, &options).await?,
                    (None, Some(t), _) => table.changes(at(t).await?, to, &options).await?,
                    (None, None, Some(name)) => table.consumer_changes(&name, to, &options).await?.1,
                    (None, None, None) => return Err(Error::Usage("give from_version, from_time or a consumer".into())),
                };
                let schema = feed.schema();
                Ok((schema, feed.collect().await?))
            })?;
            Ok(ArrowStreamExport::of_batches(schema, batches))
        })
    }

    /// Consumer `name`'s position: (name, version, updated_at RFC 3339); `action`
    /// "get", "create", "advance" (to `version`, if still at `expected`) or "drop".
    #[pyo3(signature = (action, name, version=None, expected=None))]
    fn consumer(
        &self,
        py: Python<'_>,
        action: &str,
        name: String,
        version: Option<Bound<'_, PyAny>>,
        expected: Option<u64>,
    ) -> PyResult<(String, u64, String)> {
        guard(|| {
            let version = version_ref(version.as_ref())?;
            let table = self.current(py)?;
            let action = action.to_string();
            let info = run(py, async move {
                let version = match version {
                    Some(at) => Some(table.version_of(&at).await?),
                    None => None,
                };
                Ok(match action.as_str() {
                    "get" => table.consumer(&name).await?,
                    "create" => table.create_consumer(&name, version).await?,
                    "advance" => table.advance_consumer(&name, version, expected).await?,
                    "drop" => table.drop_consumer(&name).await?,
                    other => return Err(Error::Usage(format!("unknown consumer action '{other}'"))),
                })
            })?;
            Ok((info.name, info.version, info.updated_at.to_rfc3339_opts(chrono::SecondsFormat::Micros, true)))
        })
    }

    /// Every consumer: (name, version, updated_at RFC 3339).
    fn consumers(&self, py: Python<'_>) -> PyResult<Vec<(String, u64, String)>> {
        guard(|| {
            let table = self.current(py)?;
            let all = run(py, async move { Ok(table.consumers().await?) })?;
            Ok(all.into_iter().map(|c| (c.name, c.version, c.updated_at.to_rfc3339_opts(chrono::SecondsFormat::Micros, true))).collect())
        })
    }

    /// Removes versions older than `older_than_s` seconds (never the latest) and the
    /// objects only they used. Returns the report (`held_by_*`: lists of (name,
    /// version), as `concord vacuum --json` gives them).
    #[pyo3(signature = (older_than_s, allow_short_retention=false))]
    fn vacuum<'py>(&self, py: Python<'py>, older_than_s: f64, allow_short_retention: bool) -> PyResult<Bound<'py, PyDict>> {
        guard(|| {
            let older_than = crate::options::seconds_to_duration("older_than", older_than_s)?;
            let table = self.current(py)?;
            let report = run(py, async move { Ok(table.vacuum(older_than, allow_short_retention).await?) })?;
            let d = PyDict::new(py);
            d.set_item("versions_removed", report.versions_removed)?;
            d.set_item("oldest_retained", report.oldest_retained)?;
            d.set_item("objects_removed", report.objects_removed)?;
            d.set_item("bytes_removed", report.bytes_removed)?;
            d.set_item("objects_kept", report.objects_kept)?;
            d.set_item("held_by_consumers", report.held_by_consumers)?;
            d.set_item("held_by_tags", report.held_by_tags)?;
            d.set_item("held_by_branches", report.held_by_branches)?;
            Ok(d)
        })
    }
}

fn assignments(set: Vec<(String, String)>) -> Vec<Assignment> {
    set.into_iter().map(|(column, expr)| Assignment { column, expr }).collect()
}

fn parse_fragment(json: &str) -> Result<Fragment, Error> {
    serde_json::from_str(json).map_err(|e| Error::Usage(format!("not a fragment of a Concord table: {e}")))
}

/// The rows of `fragment` in the table `open` gives (its version), collected.
fn fragment_stream(
    py: Python<'_>,
    open: impl std::future::Future<Output = Result<Table, Error>> + Send + 'static,
    fragment: Fragment,
    columns: Option<Vec<String>>,
    filter: Option<String>,
) -> PyResult<ArrowStreamExport> {
    let (schema, batches) = run(py, async move {
        let table = open.await?;
        let scan = table.scan_fragments(vec![fragment], scan_options(columns, filter, None)).await?;
        let schema = scan.schema();
        Ok((schema, scan.collect().await?))
    })?;
    Ok(ArrowStreamExport::of_batches(schema, batches))
}

fn origin(uri: String, options: Vec<(String, String)>, coordinator: Option<String>) -> Origin {
    Origin { uri, options, coordinator, branch: None }
}

/// Creates an empty table (version 0). `schema` is the string form
/// ("id bigint not null, name varchar") or an object with `__arrow_c_schema__`.
#[pyfunction]
#[pyo3(signature = (uri, schema, options, coordinator=None))]
pub(crate) fn create(
    py: Python<'_>,
    uri: String,
    schema: &Bound<'_, PyAny>,
    options: Vec<(String, String)>,
    coordinator: Option<String>,
) -> PyResult<NativeTable> {
    guard(|| {
        let schema: Schema = if schema.is_instance_of::<PyString>() {
            Schema::parse(&schema.extract::<String>()?).map_err(Error::from)?
        } else {
            schema_from_arrow(&import_schema(schema)?)?
        };
        let origin = origin(uri, options, coordinator);
        let at = origin.clone();
        // Resolving may set up clients (a DynamoDB coordinator): off the GIL too.
        let table = run(py, async move { Ok(Table::create(at.location()?, Env::system(), schema).await?) })?;
        Ok(NativeTable::new(&origin, table))
    })
}

/// Opens a table on branch `branch` (`main` without): its latest version, `version`
/// (a number, or a tag's version wherever it is), or the newest at or before `as_of`.
#[pyfunction]
#[pyo3(signature = (uri, options, coordinator=None, version=None, as_of=None, branch=None))]
#[allow(clippy::too_many_arguments)]
pub(crate) fn open(
    py: Python<'_>,
    uri: String,
    options: Vec<(String, String)>,
    coordinator: Option<String>,
    version: Option<Bound<'_, PyAny>>,
    as_of: Option<String>,
    branch: Option<String>,
) -> PyResult<NativeTable> {
    guard(|| {
        let version = version_ref(version.as_ref())?;
        if version.is_some() && as_of.is_some() {
            return Err(Error::Usage("give version or as_of, not both".into()).into());
        }
        let as_of = as_of.as_deref().map(parse_time).transpose()?;
        let origin = Origin { branch: branch.filter(|b| b != concord::MAIN_BRANCH), ..origin(uri, options, coordinator) };
        let at = origin.clone();
        let table = run(py, async move {
            Ok(match (version, as_of) {
                (Some(VersionRef::Number(v)), _) => at.open(Some(v)).await?,
                (Some(tag), _) => at.open(None).await?.checkout_ref(&tag).await?,
                (None, Some(t)) => at.open(None).await?.checkout_as_of(t).await?,
                (None, None) => at.open(None).await?,
            })
        })?;
        Ok(NativeTable::new(&origin, table))
    })
}

/// Reads one fragment of version `version` of branch `branch` (`main` without) of the
/// table at `uri` (in a worker process that received a pickled fragment).
#[pyfunction]
#[pyo3(signature = (uri, options, coordinator, version, fragment_json, columns=None, filter=None, branch=None))]
#[allow(clippy::too_many_arguments)]
pub(crate) fn read_fragment(
    py: Python<'_>,
    uri: String,
    options: Vec<(String, String)>,
    coordinator: Option<String>,
    version: u64,
    fragment_json: &str,
    columns: Option<Vec<String>>,
    filter: Option<String>,
    branch: Option<String>,
) -> PyResult<ArrowStreamExport> {
    guard(|| {
        let fragment = parse_fragment(fragment_json)?;
        let at = Origin { branch: branch.filter(|b| b != concord::MAIN_BRANCH), ..origin(uri, options, coordinator) };
        fragment_stream(py, worker_table(at, version), fragment, columns, filter)
    })
}

/// Tables a worker process has read fragments of, by where they are: a worker reading
/// many fragments reuses the store's client (and its connections). Few entries.
static WORKER_TABLES: Mutex<Vec<(u32, String, Table)>> = Mutex::new(Vec::new());
const WORKER_TABLES_KEPT: usize = 8;

/// Version `version` of the table at `origin`, through a handle this process keeps.
async fn worker_table(origin: Origin, version: u64) -> Result<Table, Error> {
    let key = format!("{:?}", (&origin.uri, &origin.options, &origin.coordinator, &origin.branch));
    let pid = std::process::id();
    let cached = {
        let tables = WORKER_TABLES.lock().unwrap_or_else(|e| e.into_inner());
        tables.iter().find(|(p, k, _)| *p == pid && *k == key).map(|(_, _, t)| t.clone())
    };
    if let Some(table) = cached {
        return Ok(table.checkout(version).await?);
    }
    let table = origin.open(Some(version)).await?;
    let mut tables = WORKER_TABLES.lock().unwrap_or_else(|e| e.into_inner());
    tables.retain(|(p, k, _)| *p == pid && *k != key);
    if tables.len() >= WORKER_TABLES_KEPT {
        tables.remove(0);
    }
    tables.push((pid, key, table.clone()));
    Ok(table)
}

/// Seconds in a duration of the CLI's form (`500ms`, `30s`, `5m`, `1h`, `7d`).
#[pyfunction]
pub(crate) fn parse_duration(text: &str) -> PyResult<f64> {
    guard(|| Ok(crate::options::parse_duration(text)?.as_secs_f64()))
}

/// Runs a read-only SQL query over tables, each registered under its name at its
/// handle's version, or with `as_of` (RFC 3339), every one as of that time; returns
/// the result, collected.
#[pyfunction]
#[pyo3(signature = (query, tables, as_of=None))]
pub(crate) fn sql(
    py: Python<'_>,
    query: String,
    tables: Vec<(String, Py<NativeTable>)>,
    as_of: Option<String>,
) -> PyResult<ArrowStreamExport> {
    guard(|| {
        let as_of = as_of.as_deref().map(crate::options::parse_time).transpose()?;
        let mut registered = Vec::with_capacity(tables.len());
        for (name, table) in &tables {
            registered.push((name.clone(), table.get().current(py)?));
        }
        let (schema, batches) = run(py, async move {
            let session = SqlSession::new();
            for (name, table) in &registered {
                match as_of {
                    Some(at) => session.register_as_of(name, table, at).await?,
                    None => session.register(name, table)?,
                }
            }
            let stream = session.query(&query).await?;
            let schema = stream.schema();
            Ok((schema, stream.collect().await?))
        })?;
        Ok(ArrowStreamExport::of_batches(schema, batches))
    })
}

/// Test seam: panics, in this thread (`inside_runtime` false) or in a task on the
/// runtime, so that tests can check that a panic arrives as `ConcordError`.
#[pyfunction]
pub(crate) fn _panic_for_tests(py: Python<'_>, inside_runtime: bool) -> PyResult<()> {
    guard(|| {
        if inside_runtime {
            run(py, async { panic!("a test panic inside the runtime") })?;
            Ok(())
        } else {
            panic!("a test panic in the calling thread")
        }
    })
}

/// Creates the DynamoDB table a commit coordinator uses (`dynamodb://<table>`), as
/// `concord coordinator create-table`; false if it already exists.
#[pyfunction]
pub(crate) fn create_coordinator_table(py: Python<'_>, spec: String, options: Vec<(String, String)>) -> PyResult<bool> {
    guard(|| {
        let settings = origin(String::new(), options, None).settings();
        Ok(run(py, async move { Ok(concord::store::create_coordinator_table(&spec, &settings).await?) })?)
    })
}

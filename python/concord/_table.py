"""Tables, commits and fragments: the Python API over the native module.

Everything a table does is done by the Rust library (through ``concord._concord``);
this module turns Python arguments (pyarrow data, datetimes, timedeltas, dicts) into
what the library takes and its results into Python objects.
"""

from __future__ import annotations

import datetime as _dt
import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Dict, Iterable, List, Mapping, NamedTuple, Optional, Sequence, Tuple, TypedDict, Union

import pyarrow as pa

from . import _concord
from ._errors import InvalidInputError
from ._refs import MAIN_BRANCH, RefsMixin, VersionLike

if TYPE_CHECKING:
    from typing_extensions import Unpack

__all__ = ["Table", "CommitInfo", "Fragment", "WriteOptions", "create", "open", "sql", "create_coordinator_table"]

TimeLike = Union[_dt.datetime, str]
DurationLike = Union[str, _dt.timedelta]
StorageOptions = Optional[Mapping[str, Any]]

#: Rows per rewritten fragment when ``compact`` is given no ``target_rows``.
DEFAULT_COMPACT_TARGET_ROWS: int = _concord.DEFAULT_COMPACT_TARGET_ROWS

_COORDINATOR_KEY = "commit_coordinator"


@dataclass(frozen=True)
class CommitInfo:
    """The outcome of a successful write.

    Attributes:
        version: the version it committed as (when ``abandoned`` or
            ``idempotent_replay``: the version already holding it, or the latest).
        operation: the operation's name (``append``, ``delete``, ...).
        attempts: commit attempts it took.
        rows_written: rows it added.
        rows_deleted: rows it removed.
        transaction_id: the transaction's id (a UUID, as str).
        rebased_over: versions that other writers committed first, which it rebased over.
        rerun: whether part of it was re-run on those writers' changes.
        idempotent_replay: True when its ``idempotency_key`` was already committed:
            nothing new was written and ``version`` is the earlier commit's.
        abandoned: why nothing was committed, when nothing was (an append of no rows,
            a delete matching none, a compaction that gave way); else ``None``.
    """

    version: int
    operation: str
    attempts: int
    rows_written: int
    rows_deleted: int
    transaction_id: str
    rebased_over: List[int] = field(default_factory=list)
    rerun: bool = False
    idempotent_replay: bool = False
    abandoned: Optional[str] = None

    @property
    def committed(self) -> bool:
        """Whether this write made a new version (not a replay, not abandoned)."""
        return not self.idempotent_replay and self.abandoned is None

    def to_dict(self) -> Dict[str, Any]:
        """The outcome as the CLI's ``--json`` object."""
        return {
            "version": self.version,
            "operation": self.operation,
            "attempts": self.attempts,
            "rows_written": self.rows_written,
            "rows_deleted": self.rows_deleted,
            "transaction_id": self.transaction_id,
            "rebased_over": list(self.rebased_over),
            "rerun": self.rerun,
            "idempotent_replay": self.idempotent_replay,
            "abandoned": self.abandoned,
        }


def _info(d: Dict[str, Any]) -> CommitInfo:
    return CommitInfo(**d)


def _options(storage_options: StorageOptions) -> Tuple[List[Tuple[str, str]], Optional[str]]:
    """Explicit store settings as (key, value) pairs, and the commit coordinator."""
    if storage_options is None:
        return [], None
    if not isinstance(storage_options, Mapping):
        raise TypeError("storage_options must be a dict of str to str")
    pairs: List[Tuple[str, str]] = []
    coordinator: Optional[str] = None
    for key, value in storage_options.items():
        if not isinstance(key, str):
            raise TypeError("storage_options keys must be str")
        if isinstance(value, bool):
            value = "true" if value else "false"
        if key.lower() == _COORDINATOR_KEY:
            coordinator = None if value is None else str(value)
        elif value is None:
            # Never sent as the text "None", never silently dropped.
            raise TypeError(f"storage_options[{key!r}] is None; give a str or leave the key out")
        else:
            pairs.append((key, str(value)))
    return pairs, coordinator


def _time(as_of: Optional[TimeLike]) -> Optional[str]:
    """RFC 3339 text; a naive datetime is taken as UTC."""
    if as_of is None:
        return None
    if isinstance(as_of, str):
        return as_of
    if isinstance(as_of, _dt.datetime):
        if as_of.tzinfo is None:
            as_of = as_of.replace(tzinfo=_dt.timezone.utc)
        return as_of.astimezone(_dt.timezone.utc).isoformat()
    if isinstance(as_of, _dt.date):
        raise TypeError("as_of must be a datetime or an RFC 3339 str, not a date")
    raise TypeError(f"as_of must be a datetime or an RFC 3339 str, not {type(as_of).__name__}")


def _seconds(value: Optional[float], what: str) -> Optional[float]:
    if value is None:
        return None
    if isinstance(value, _dt.timedelta):
        return value.total_seconds()
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{what} must be a number of seconds (float)")
    return float(value)


def _stream(data: Any) -> Any:
    """An object with ``__arrow_c_stream__`` holding ``data``'s rows (no copy)."""
    if isinstance(data, pa.RecordBatch):
        return pa.Table.from_batches([data])
    if hasattr(data, "__arrow_c_stream__"):
        return data
    if hasattr(data, "__arrow_c_array__"):
        return pa.Table.from_batches([pa.record_batch(data)])
    if isinstance(data, (list, tuple)) and data and all(isinstance(b, pa.RecordBatch) for b in data):
        return pa.Table.from_batches(list(data))
    if isinstance(data, dict):
        return pa.table(data)
    if type(data).__module__.startswith("pandas") and hasattr(data, "columns"):
        return pa.Table.from_pandas(data, preserve_index=False)
    raise TypeError(
        "data must be a pyarrow Table, RecordBatch or RecordBatchReader, or an object with "
        f"__arrow_c_stream__ (polars, DuckDB, pandas through pyarrow), not {type(data).__name__}"
    )


def _columns(columns: Optional[Union[str, Sequence[str]]]) -> Optional[List[str]]:
    if columns is None:
        return None
    if isinstance(columns, str):
        return [columns]
    return list(columns)


def _read_all(export: Any) -> pa.Table:
    return pa.RecordBatchReader.from_stream(export).read_all()


class WriteOptions(TypedDict, total=False):
    """The keyword arguments every write takes (all optional)."""

    #: "serializable" or "snapshot" (default: the table's).
    isolation: str
    #: Commit only if the latest version is still this one (compare-and-swap).
    expect_version: int
    #: A retry with the same key never writes twice.
    idempotency_key: str
    #: Retries after losing a commit race.
    max_retries: int
    #: Total time budget of the commit, in seconds (or a datetime.timedelta).
    timeout: float


def _write_options(method: str, options: Mapping[str, Any], committing: bool = True) -> Dict[str, Any]:
    """The commit options of a write, checked: known names only (as Python would for
    keyword arguments); ``max_retries`` and ``timeout`` only where something commits
    (as the CLI refuses them with --stage)."""
    unknown = [k for k in options if k not in WriteOptions.__annotations__]
    if unknown:
        raise TypeError(f"{method}() got an unexpected keyword argument {unknown[0]!r}")
    out = {k: v for k, v in options.items() if v is not None}
    if not committing:
        for name in ("max_retries", "timeout"):
            if name in out:
                raise InvalidInputError(f"{name} applies when committing, and {method} commits nothing; give it to commit_staged instead")
    if "timeout" in out:
        out["timeout"] = _seconds(out["timeout"], "timeout")
    return out


def _assignments(set: Mapping[str, str]) -> List[Tuple[str, str]]:
    """An update's ``set`` as (column, SQL expression) pairs."""
    if not isinstance(set, Mapping) or not set:
        raise InvalidInputError('set must be a non-empty dict of column name to SQL expression, e.g. {"score": "score + 1"}')
    return [(str(column), str(expr)) for column, expr in set.items()]


class Table(RefsMixin):
    """A Concord table: reads one version (``version``), writes on top of the latest.

    Get one with :func:`concord.create` or :func:`concord.open`. A write commits
    against the latest version, rebasing over (or re-running on) what other writers
    committed meanwhile, and the handle then reads the version it committed. Reads
    (``to_arrow``, ``scan``, ``count``, ``fragments``) read the handle's version unless
    given ``version=`` or ``as_of=``; ``refresh()`` moves the handle to the latest.

    A handle is safe to share between threads; the GIL is released during all I/O
    and commits, and writes from threads sharing a handle may share a version (group
    commit), each with its own outcome. A handle can be pickled (it reopens its
    version on the other side) and survives ``fork`` (the child reopens it).

    A handle is on one branch (``branch_name``; ``main`` unless opened with
    ``branch=`` or got from ``branch``/``create_branch``): it reads and writes that
    branch's versions. ``version=`` takes a version number or a tag's name.

    Every write takes the keyword arguments ``isolation`` ("serializable" or
    "snapshot"), ``expect_version`` (commit only if the latest version is still this
    one), ``idempotency_key`` (a retry with the same key never writes twice),
    ``max_retries`` and ``timeout`` (seconds), and returns a :class:`CommitInfo`.
    """

    __slots__ = ("_native", "_storage_options", "__weakref__")

    def __init__(self, native: Any, storage_options: StorageOptions = None) -> None:
        # Use concord.create / concord.open.
        self._native = native
        self._storage_options = dict(storage_options) if storage_options else None

    # ---------------------------------------------------------------- the handle

    @property
    def uri(self) -> str:
        """The table's URI, as given."""
        return self._native.uri

    @property
    def version(self) -> int:
        """The version this handle reads."""
        return self._native.version

    @property
    def schema(self) -> pa.Schema:
        """The pyarrow schema of the handle's version."""
        return pa.schema(self._native.schema())

    @property
    def schema_definition(self) -> str:
        """The handle's version's schema in the string form ``create`` takes
        (``"id bigint not null, name varchar"``, with defaults of added columns)."""
        return self._native.schema_definition()

    @property
    def properties(self) -> Dict[str, str]:
        """The table properties of the handle's version (e.g. ``isolation``)."""
        return dict(self._native.properties())

    def refresh(self) -> "Table":
        """Moves the handle to the table's latest version; returns the handle."""
        self._native.refresh()
        return self

    def __repr__(self) -> str:
        branch = self.branch_name
        on = "" if branch == MAIN_BRANCH else f", branch={branch!r}"
        return f"concord.Table({self.uri!r}, version={self.version}{on})"

    def __reduce__(self) -> Any:
        branch = self.branch_name
        return (_reopen, (self.uri, self._storage_options, self.version, None if branch == MAIN_BRANCH else branch))

    # ---------------------------------------------------------------- writes
    # Each write is its kind's name and its arguments, handed to the library's one
    # write (and one stage) through `_write`; the commit options (`WriteOptions`) are
    # checked once, in `_write_options`.

    def _write(self, kind: str, args: Dict[str, Any], options: Mapping[str, Any]) -> CommitInfo:
        return _info(self._native.write(kind, args, _write_options(kind, options)))

    def _stage(self, kind: str, args: Dict[str, Any], options: Mapping[str, Any]) -> str:
        return self._native.stage(kind, args, _write_options(f"stage_{kind}", options, committing=False))

    def append(self, data: Any, **options: Unpack[WriteOptions]) -> CommitInfo:
        """Appends rows, matched to the table's columns by name.

        ``data`` is a pyarrow Table, RecordBatch or RecordBatchReader (read as it
        streams, in bounded memory), or any object with ``__arrow_c_stream__``
        (polars, DuckDB results, ...). Values are converted to the columns' types
        only if they convert exactly; if any row does not fit, nothing is committed
        (``InvalidInputError``). An append of no rows commits nothing
        (``CommitInfo.abandoned`` says so).
        """
        return self._write("append", {"data": _stream(data)}, options)

    def delete(self, where: str, **options: Unpack[WriteOptions]) -> CommitInfo:
        """Deletes the rows matching the SQL predicate ``where`` (e.g. ``"score < 0"``).
        A delete matching no row commits nothing."""
        return self._write("delete", {"where": where}, options)

    def update(self, set: Mapping[str, str], where: Optional[str] = None, **options: Unpack[WriteOptions]) -> CommitInfo:
        """Sets columns to SQL expressions of the row's values (``set={"score":
        "score + 1"}``) on the rows matching ``where`` (every row without one)."""
        return self._write("update", {"set": _assignments(set), "where": where}, options)

    def merge(self, data: Any, on: Union[str, Sequence[str]], **options: Unpack[WriteOptions]) -> CommitInfo:
        """Upsert on the key columns ``on``: rows whose key matches a row of ``data``
        take its values (of the columns ``data`` has), the other rows of ``data`` are
        inserted. Keys must be unique in ``data``."""
        return self._write("merge", {"data": _stream(data), "on": _columns(on) or []}, options)

    def overwrite(self, data: Any, where: Optional[str] = None, **options: Unpack[WriteOptions]) -> CommitInfo:
        """Replaces every row with ``data``'s rows; with ``where``, only the rows
        matching that SQL predicate, and every row of ``data`` must match it too."""
        return self._write("overwrite", {"data": _stream(data), "where": where}, options)

    def restore(self, version: VersionLike, **options: Unpack[WriteOptions]) -> CommitInfo:
        """Makes ``version`` (its schema and rows; a number or a tag of this branch) the
        newest state, as a new version."""
        return self._write("restore", {"version": self._version_number(version)}, options)

    def _version_number(self, version: VersionLike) -> int:
        """The number of ``version`` on the handle's branch (a tag's, looked up)."""
        return _concord.version_of(self._native, version) if isinstance(version, str) else version

    def add_column(self, definition: str, **options: Unpack[WriteOptions]) -> CommitInfo:
        """Adds a column: ``"name type [not null] [default <SQL expression>]"``.
        Existing rows read the default (NULL without one); no data file is rewritten."""
        return self._write("add_column", {"definition": definition}, options)

    def drop_column(self, name: str, **options: Unpack[WriteOptions]) -> CommitInfo:
        """Removes a column (its values stay in old data files, unread)."""
        return self._write("drop_column", {"name": name}, options)

    def rename_column(self, old: str, new: str, **options: Unpack[WriteOptions]) -> CommitInfo:
        """Renames a column (by field id: no data file is rewritten); a new name that
        is not a plain identifier is given in double quotes (``'"Customer ID"'``)."""
        return self._write("rename_column", {"old": old, "new": new}, options)

    def widen_column(self, name: str, type: str, **options: Unpack[WriteOptions]) -> CommitInfo:
        """Widens a column's type without rewriting data files (old values read as the
        wider type): an integer to a wider one (``"int"`` to ``"bigint"``; unsigned also
        to a wider signed one), ``float`` to ``double``, ``decimal(p, s)`` to
        ``decimal(q, s)`` with ``q > p``. Anything else raises ``InvalidInputError``."""
        return self._write("widen_column", {"name": name, "type": type}, options)

    def set_properties(
        self, set: Optional[Mapping[str, str]] = None, unset: Optional[Sequence[str]] = None, **options: Unpack[WriteOptions]
    ) -> CommitInfo:
        """Sets and removes table properties, e.g. ``set={"isolation": "snapshot"}``
        (the default isolation of writes; the CLI's ``alter set-property``)."""
        args = {"set": {str(k): str(v) for k, v in (set or {}).items()}, "unset": list(unset or [])}
        return self._write("set_properties", args, options)

    def compact(self, target_rows: Optional[int] = None, **options: Unpack[WriteOptions]) -> CommitInfo:
        """Rewrites small fragments (fewer live rows than ``target_rows``) and
        fragments with deleted rows into larger ones. Gives way to concurrent writers:
        if nothing is left to do, commits nothing (``CommitInfo.abandoned``)."""
        rows = DEFAULT_COMPACT_TARGET_ROWS if target_rows is None else target_rows
        return self._write("compact", {"target_rows": rows}, options)

    def vacuum(self, older_than: DurationLike, *, allow_short_retention: bool = False) -> Dict[str, Any]:
        """Removes versions committed more than ``older_than`` ago (``"7d"``, ``"1h"``,
        ``"30m"`` or a ``datetime.timedelta``; never the latest version) and the files
        only they used. A retention under one hour is refused unless
        ``allow_short_retention=True`` (only safe if no write takes longer than it).
        Returns the report: ``versions_removed``, ``oldest_retained``,
        ``objects_removed``, ``bytes_removed``, ``objects_kept`` (ints), and
        ``held_by_consumers``, ``held_by_branches``, ``held_by_tags``: lists of
        (name, version) of what kept versions older than the retention."""
        if isinstance(older_than, str):
            seconds = _concord.parse_duration(older_than)
        elif isinstance(older_than, _dt.timedelta):
            seconds = older_than.total_seconds()
        else:
            raise TypeError('older_than must be a duration such as "7d" or "1h", or a datetime.timedelta')
        return dict(self._native.vacuum(seconds, allow_short_retention))

    # ---------------------------------------------------------------- staged commits
    # ``stage_<write>`` prepares the write as ``<write>`` does and records it in the
    # table without committing it; it returns the staged id, which ``commit_staged``
    # (from any process) commits. The isolation, expected version and idempotency key
    # given when staging hold at commit; ``max_retries`` and ``timeout`` belong to
    # ``commit_staged``.

    def stage_append(self, data: Any, **options: Unpack[WriteOptions]) -> str:
        """Prepares an append (see ``append``) without committing it; returns the staged id."""
        return self._stage("append", {"data": _stream(data)}, options)

    def stage_delete(self, where: str, **options: Unpack[WriteOptions]) -> str:
        """Prepares a delete (see ``delete``) without committing it; returns the staged id."""
        return self._stage("delete", {"where": where}, options)

    def stage_update(self, set: Mapping[str, str], where: Optional[str] = None, **options: Unpack[WriteOptions]) -> str:
        """Prepares an update (see ``update``) without committing it; returns the staged id."""
        return self._stage("update", {"set": _assignments(set), "where": where}, options)

    def stage_merge(self, data: Any, on: Union[str, Sequence[str]], **options: Unpack[WriteOptions]) -> str:
        """Prepares a merge (see ``merge``) without committing it; returns the staged id."""
        return self._stage("merge", {"data": _stream(data), "on": _columns(on) or []}, options)

    def stage_overwrite(self, data: Any, where: Optional[str] = None, **options: Unpack[WriteOptions]) -> str:
        """Prepares an overwrite (see ``overwrite``) without committing it; returns the staged id."""
        return self._stage("overwrite", {"data": _stream(data), "where": where}, options)

    def stage_restore(self, version: VersionLike, **options: Unpack[WriteOptions]) -> str:
        """Prepares a restore (see ``restore``) without committing it; returns the staged id."""
        return self._stage("restore", {"version": self._version_number(version)}, options)

    def stage_add_column(self, definition: str, **options: Unpack[WriteOptions]) -> str:
        """Prepares ``add_column`` without committing it; returns the staged id."""
        return self._stage("add_column", {"definition": definition}, options)

    def stage_drop_column(self, name: str, **options: Unpack[WriteOptions]) -> str:
        """Prepares ``drop_column`` without committing it; returns the staged id."""
        return self._stage("drop_column", {"name": name}, options)

    def stage_rename_column(self, old: str, new: str, **options: Unpack[WriteOptions]) -> str:
        """Prepares ``rename_column`` without committing it; returns the staged id."""
        return self._stage("rename_column", {"old": old, "new": new}, options)

    def stage_widen_column(self, name: str, type: str, **options: Unpack[WriteOptions]) -> str:
        """Prepares ``widen_column`` without committing it; returns the staged id."""
        return self._stage("widen_column", {"name": name, "type": type}, options)

    def stage_compact(self, target_rows: Optional[int] = None, **options: Unpack[WriteOptions]) -> str:
        """Prepares ``compact`` (rewrites the fragments now) without committing it; returns the staged id."""
        rows = DEFAULT_COMPACT_TARGET_ROWS if target_rows is None else target_rows
        return self._stage("compact", {"target_rows": rows}, options)

    def commit_staged(
        self, staged_ids: Union[str, Iterable[str]], *, together: bool = True, **options: Unpack[WriteOptions]
    ) -> List[CommitInfo]:
        """Commits staged transactions (ids from ``stage_*``, possibly of other
        processes or machines) against whatever the table is now, rebasing or
        re-running as the concurrency contract says. Returns one ``CommitInfo`` each.

        With ``together=True`` (the default) they commit as one version, all or none
        (a job commit), each member applied as if committed right after the ones
        before it: if one is incompatible with what landed meanwhile, nothing commits
        and the error's ``staged_id`` names it. An ``idempotency_key`` given here is
        the whole job's: a retry of the job under it (same staged ids or others)
        commits nothing and returns the job's outcomes (``idempotent_replay`` True).
        With ``together=False`` they commit one after another, in the order given.
        """
        ids = [staged_ids] if isinstance(staged_ids, str) else [str(i) for i in staged_ids]
        infos = self._native.commit_staged(ids, together, _write_options("commit_staged", options))
        return [_info(d) for d in infos]

    # ---------------------------------------------------------------- reads

    def to_arrow(
        self,
        columns: Optional[Sequence[str]] = None,
        where: Optional[str] = None,
        version: Optional[VersionLike] = None,
        as_of: Optional[TimeLike] = None,
        limit: Optional[int] = None,
    ) -> pa.Table:
        """Reads rows into a pyarrow Table: ``columns`` (all by default) of the rows
        matching ``where`` (a SQL predicate), of the handle's version, or of
        ``version``, or of the newest version committed at or before ``as_of``
        (a datetime, naive taken as UTC, or RFC 3339 text), at most ``limit`` rows."""
        export = self._native.to_arrow(_columns(columns), where, version, _time(as_of), limit)
        return _read_all(export)

    def scan(
        self,
        columns: Optional[Sequence[str]] = None,
        where: Optional[str] = None,
        version: Optional[VersionLike] = None,
        as_of: Optional[TimeLike] = None,
        limit: Optional[int] = None,
    ) -> pa.RecordBatchReader:
        """As ``to_arrow``, as a streaming ``pyarrow.RecordBatchReader``: batches are
        read as the reader is consumed (a couple ahead), in bounded memory."""
        batches = self._native.scan(_columns(columns), where, version, _time(as_of), limit)
        schema = pa.schema(batches.schema())
        return pa.RecordBatchReader.from_batches(schema, (pa.record_batch(b) for b in batches))

    def count(self, where: Optional[str] = None, version: Optional[VersionLike] = None, as_of: Optional[TimeLike] = None) -> int:
        """Rows matching ``where`` (every live row without one; then no data is read)."""
        return self._native.count(where, version, _time(as_of))

    def iceberg_metadata_path(self, version: Optional[VersionLike] = None) -> str:
        """The Iceberg metadata file (a ``file://`` or ``s3://`` URI) of ``version``
        (default: the latest), published first if needed with every earlier version
        not yet published, for any Iceberg reader: ``duckdb``'s ``iceberg_scan``,
        ``pyiceberg.table.StaticTable.from_metadata``, ``polars.scan_iceberg``."""
        return self._native.iceberg_metadata_path(version)

    def history(self) -> List[Dict[str, Any]]:
        """Every retained version of the table, oldest first, as dicts with the fields
        of ``concord history --format json`` (``version``, ``timestamp``,
        ``operation``, ``read_version``, ``transaction_id``, ``attempts``,
        ``rebased_over``, ``rerun``, ``idempotency_key``, ``rows_written``,
        ``rows_deleted``, ``rows``, ``transactions``). Reads the latest version (the
        handle does not move)."""
        return json.loads(self._native.history_json())

    def fragments(
        self, version: Optional[VersionLike] = None, *, where: Optional[str] = None, as_of: Optional[TimeLike] = None
    ) -> List["Fragment"]:
        """The fragments of the handle's version (or of ``version``, or the version as
        of ``as_of``): picklable pieces of the table that workers (multiprocessing,
        Ray, Dask) read on their own with ``Fragment.to_arrow``. With ``where``, only
        the fragments whose statistics do not rule the predicate out (read them with
        the same ``where``)."""
        return [
            Fragment(fid, rows, fjson, fversion, self.uri, self._storage_options, self._native, branch)
            for fid, rows, fjson, fversion, branch in self._native.fragments(version, _time(as_of), where)
        ]

    def changes(
        self,
        from_version: Optional[VersionLike] = None,
        to_version: Optional[VersionLike] = None,
        columns: Optional[Sequence[str]] = None,
        where: Optional[str] = None,
        net: bool = False,
        *,
        from_time: Optional[TimeLike] = None,
        to_time: Optional[TimeLike] = None,
    ) -> pa.Table:
        """The changes after version ``from_version`` (exclusive; or after the version
        current at ``from_time``) up to ``to_version`` (inclusive; or the version current
        at ``to_time``; the latest without), row by row on stable row ids: ``columns``
        of the table (all by default; the schema of the range's last version), then
        ``_change_type`` (``insert``, ``delete``, ``update_preimage``,
        ``update_postimage``), ``_row_id``, ``_version``, ``_txn_id`` and
        ``_committed_at``. ``where`` keeps the rows matching a SQL predicate (an update's
        two rows go together); ``net`` collapses each row's changes into one (its state
        before the range and at its end)."""
        if from_version is None and from_time is None:
            raise InvalidInputError("give from_version or from_time")
        export = self._native.changes(from_version, to_version, _time(from_time), _time(to_time), None, _columns(columns), where, net)
        return _read_all(export)

    def consumer(self, name: str) -> "Consumer":
        """Consumer ``name``: a named cursor of the change feed, stored in the table
        (``create``, ``advance``, ``read``, ``drop``); vacuum keeps the versions it has
        not read yet."""
        return Consumer(self, name)

    def consumers(self) -> List["ConsumerInfo"]:
        """Every consumer of the table and its position."""
        return [ConsumerInfo(*c) for c in self._native.consumers()]

    def __arrow_c_stream__(self, requested_schema: Any = None) -> Any:
        """The rows of the table's latest version (looked up now; the handle does not
        move) as an Arrow C stream (the PyCapsule interface), read as it is consumed:
        ``pyarrow.table(t)``, ``polars.DataFrame(t)`` (``polars.from_arrow(t)``: a
        Series of row structs) and ``duckdb.sql("select ... from t")`` read it. ``requested_schema`` is ignored (the protocol allows it)."""
        return self._native.stream(True).__arrow_c_stream__(requested_schema)


class ConsumerInfo(NamedTuple):
    """A consumer's position: its changes are those after ``version``."""

    name: str
    version: int
    updated_at: str


class Consumer:
    """A named cursor of a table's change feed (``Table.consumer``)."""

    def __init__(self, table: Table, name: str) -> None:
        self._table = table
        self.name = name

    def __repr__(self) -> str:
        return f"Consumer({self._table.uri!r}, {self.name!r})"

    def create(self, version: Optional[VersionLike] = None) -> ConsumerInfo:
        """Creates the consumer at ``version`` (the latest without): its first changes
        are those after it. A name in use raises ``TableExistsError``."""
        return ConsumerInfo(*self._table._native.consumer("create", self.name, version, None))

    def info(self) -> ConsumerInfo:
        """Its position (``InvalidInputError`` if it does not exist)."""
        return ConsumerInfo(*self._table._native.consumer("get", self.name, None, None))

    @property
    def version(self) -> int:
        """The version it has read up to."""
        return self.info().version

    def advance(self, to_version: Optional[VersionLike] = None, expected_version: Optional[int] = None) -> ConsumerInfo:
        """Moves it to ``to_version`` (the latest without). If another process moved it
        meanwhile (or since ``expected_version``), nothing changes and
        ``VersionMovedError`` is raised (compare-and-swap)."""
        return ConsumerInfo(*self._table._native.consumer("advance", self.name, to_version, expected_version))

    def read(
        self,
        to_version: Optional[VersionLike] = None,
        columns: Optional[Sequence[str]] = None,
        where: Optional[str] = None,
        net: bool = False,
    ) -> pa.Table:
        """The changes after its position (as ``Table.changes``); reading moves
        nothing (``advance`` does)."""
        export = self._table._native.changes(None, to_version, None, None, self.name, _columns(columns), where, net)
        return _read_all(export)

    def drop(self) -> ConsumerInfo:
        """Drops it: vacuum no longer keeps versions for it."""
        return ConsumerInfo(*self._table._native.consumer("drop", self.name, None, None))


def _reopen(uri: str, storage_options: StorageOptions, version: int, branch: Optional[str] = None) -> Table:
    return open(uri, version=version, storage_options=storage_options, branch=branch)


class Fragment:
    """A fragment of one version of a table: data files and their deleted rows.
    Picklable: send fragments to workers, which each read theirs with ``to_arrow``
    (the worker opens the table with the same URI and storage options, and its
    environment's store settings).

    Attributes:
        id: the fragment's id (unique in the table).
        rows: its live rows.
        version: the version it was listed from (and is read at).
        branch: the branch of that version (``None``: main).
    """

    __slots__ = ("id", "rows", "version", "branch", "_json", "_uri", "_storage_options", "_native")

    def __init__(
        self,
        id: int,
        rows: int,
        fragment_json: str,
        version: int,
        uri: str,
        storage_options: StorageOptions,
        native: Any = None,
        branch: Optional[str] = None,
    ) -> None:
        self.id = id
        self.rows = rows
        self.version = version
        self.branch = None if branch == MAIN_BRANCH else branch
        self._json = fragment_json
        self._uri = uri
        self._storage_options = storage_options
        self._native = native

    def to_arrow(self, columns: Optional[Sequence[str]] = None, where: Optional[str] = None) -> pa.Table:
        """Reads the fragment's live rows (``columns``, those matching ``where``)."""
        if self._native is not None:
            export = self._native.read_fragment(self.version, self._json, _columns(columns), where, self.branch or MAIN_BRANCH)
        else:
            pairs, coordinator = _options(self._storage_options)
            args = (self._uri, pairs, coordinator, self.version, self._json, _columns(columns), where, self.branch)
            export = _concord.read_fragment(*args)
        return _read_all(export)

    def __reduce__(self) -> Any:
        return (Fragment, (self.id, self.rows, self._json, self.version, self._uri, self._storage_options, None, self.branch))

    def __repr__(self) -> str:
        on = "" if self.branch is None else f", branch={self.branch!r}"
        return f"concord.Fragment(id={self.id}, rows={self.rows}, version={self.version}{on}, uri={self._uri!r})"

    def _key(self) -> Tuple[str, Optional[str], int]:
        return (self._uri, self.branch, self.version)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Fragment) and (self._key(), self._json) == (other._key(), other._json)

    def __hash__(self) -> int:
        return hash((self._key(), self.id))


def create(uri: str, schema: Union[pa.Schema, str], storage_options: StorageOptions = None) -> Table:
    """Creates an empty table (version 0) at ``uri`` and returns a handle to it.

    ``uri`` is a local path, ``file://...``, ``memory://name`` (this process only),
    ``s3://bucket/prefix``, ``az://container/prefix`` or ``gs://bucket/prefix``.
    ``schema`` is a ``pyarrow.Schema`` (each type maps to the Concord type that reads
    back as it: int8 to tinyint ... uint64 to ubigint, decimal128/256(p, s) to
    decimal(p, s), fixed_size_binary(n) to fixed(n), pa.uuid() to uuid, time64 to time,
    timestamp("us"/"ns", tz="UTC") to timestamp/timestamp_ns, zone-less timestamps to
    timestamp_ntz/timestamp_ntz_ns; large and view strings and binaries, dictionaries,
    date64 and second or millisecond timestamps to their canonical type; a zone other
    than UTC raises ``InvalidInputError``; non-nullable fields are ``not null``) or the
    string form ``"id bigint not null, name varchar"``.
    ``storage_options`` takes object_store's keys (``AWS_ENDPOINT_URL``,
    ``AWS_REGION``, ...; the environment's ``AWS_*``, ``AZURE_*`` and ``GOOGLE_*``
    variables are read too) and ``commit_coordinator`` (``dynamodb://<table>``;
    default: the ``CONCORD_COMMIT_COORDINATOR`` environment variable).
    Raises ``TableExistsError`` if a table is already there.
    """
    pairs, coordinator = _options(storage_options)
    if not isinstance(schema, str) and not hasattr(schema, "__arrow_c_schema__"):
        raise TypeError('schema must be a pyarrow.Schema or a str such as "id bigint not null, name varchar"')
    return Table(_concord.create(uri, schema, pairs, coordinator), storage_options)


def open(
    uri: str,
    version: Optional[VersionLike] = None,
    as_of: Optional[TimeLike] = None,
    storage_options: StorageOptions = None,
    branch: Optional[str] = None,
) -> Table:
    """Opens the table at ``uri`` on ``branch`` (default ``main``): its latest version,
    or ``version`` (a number, or a tag's name: the handle is then on the tag's branch),
    or the newest version committed at or before ``as_of`` (a datetime, naive taken as
    UTC, or RFC 3339 text). ``storage_options`` as for ``create``. Raises
    ``TableNotFoundError`` if there is no table, ``InvalidInputError`` for an unknown
    branch or tag."""
    pairs, coordinator = _options(storage_options)
    return Table(_concord.open(uri, pairs, coordinator, version, _time(as_of), branch), storage_options)


def sql(
    query: str,
    tables: Optional[Mapping[str, Union[Table, str]]] = None,
    storage_options: StorageOptions = None,
    as_of: Optional[TimeLike] = None,
) -> pa.Table:
    """Runs a read-only DataFusion SQL query over Concord tables; returns a pyarrow Table.

    ``tables`` maps the names the query uses to tables: a ``Table`` (read at its
    handle's version) or a URI (opened at its latest version, with
    ``storage_options``). With ``as_of`` (a UTC datetime or RFC 3339 text), every
    table is read as it was then (its newest version committed at or before it). Each
    table is read at exactly one version. Column names resolve as everywhere else:
    exactly, else the one column matching ignoring case.
    """
    handles = []
    for name, table in (tables or {}).items():
        if isinstance(table, Table):
            handles.append((str(name), table._native))
        elif isinstance(table, str):
            handles.append((str(name), open(table, storage_options=storage_options)._native))
        else:
            raise TypeError(f"tables[{name!r}] must be a concord.Table or a URI, not {type(table).__name__}")
    return _read_all(_concord.sql(query, handles, _time(as_of)))


def create_coordinator_table(spec: str, storage_options: StorageOptions = None) -> bool:
    """Creates the DynamoDB table a commit coordinator uses (``spec`` is
    ``dynamodb://<table>``), as ``concord coordinator create-table``: needed once
    before tables on an S3-compatible store without conditional writes commit through
    it (``storage_options={"commit_coordinator": spec}``). Settings (credentials,
    ``AWS_ENDPOINT_URL_DYNAMODB`` or ``AWS_ENDPOINT_URL``, ...) come from the
    environment and ``storage_options``. Returns False if it already exists."""
    pairs, _ = _options(storage_options)
    return _concord.create_coordinator_table(spec, pairs)

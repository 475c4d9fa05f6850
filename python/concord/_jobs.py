"""What the engine integrations (``concord.ray``, ``concord.dask``) share: a worker
stages its part of a job, the driver commits the staged ids of the parts that finished
as one version (a job commit) under the job's idempotency key, and plans reads as
groups of fragments.

Exactly once: an engine re-runs a failed or lost task, which stages again under a new
id; only the ids returned by finished tasks reach the commit, so a staged part of a
failed attempt is never committed (vacuum removes its files). The job's key makes a
retried commit (after a lost response) replay instead of committing twice. With
``branch``, parts are staged and committed on that branch, and reads read its versions.
"""

from __future__ import annotations

import uuid
from typing import Any, Iterable, List, Optional, Sequence, Tuple

import pyarrow as pa

from ._errors import CommitStateUnknownError, InvalidInputError
from ._refs import VersionLike
from ._table import CommitInfo, Fragment, StorageOptions, TimeLike, open

MODES = ("append", "overwrite")

# Commit attempts of a job whose outcome stayed unknown (each replays if an earlier one landed).
COMMIT_TRIES = 3


def check_mode(mode: str) -> str:
    if mode not in MODES:
        raise ValueError(f"mode must be one of {', '.join(MODES)}, not {mode!r}")
    return mode


def job_key(idempotency_key: Optional[str]) -> str:
    """The job's idempotency key: the caller's, or a fresh one for this write call."""
    return idempotency_key if idempotency_key is not None else f"job-{uuid.uuid4()}"


def stage_part(uri: str, storage_options: StorageOptions, tables: Iterable[pa.Table], branch: Optional[str] = None) -> List[str]:
    """Stages one task's rows as an append; returns its staged id (none for no rows)."""
    tables = [t for t in tables if t.num_rows]
    if not tables:
        return []
    schema = tables[0].schema
    batches = (b for t in tables for b in t.cast(schema).to_batches())
    reader = pa.RecordBatchReader.from_batches(schema, batches)
    return [open(uri, storage_options=storage_options, branch=branch).stage_append(reader)]


def commit_job(
    uri: str, storage_options: StorageOptions, staged: Sequence[str], mode: str, key: str, branch: Optional[str] = None
) -> List[CommitInfo]:
    """Commits a job's staged appends as one version (of ``branch``); ``overwrite`` first
    removes every row (in the same version), so the table holds exactly the job's rows. A
    commit whose outcome stays unknown is tried again under the same key (it replays if
    it landed)."""
    table = open(uri, storage_options=storage_options, branch=branch)
    ids = list(staged)
    if mode == "overwrite":
        empty = table.schema.empty_table()
        ids.insert(0, table.stage_overwrite(empty))
    if not ids:
        return []
    for attempt in range(COMMIT_TRIES):
        try:
            return table.commit_staged(ids, idempotency_key=key)
        except CommitStateUnknownError:
            if attempt + 1 == COMMIT_TRIES:
                raise
    raise AssertionError("unreachable")


def plan_read(
    uri: str,
    version: Optional[VersionLike],
    as_of: Optional[TimeLike],
    filter: Optional[str],
    storage_options: StorageOptions,
    groups: Optional[int],
    branch: Optional[str] = None,
) -> "tuple[pa.Schema, List[List[Fragment]]]":
    """The version's fragments that ``filter``'s statistics do not rule out, in about
    ``groups`` groups of similar row counts (by default one per fragment, at most 64)."""
    table = open(uri, version=version, as_of=as_of, storage_options=storage_options, branch=branch)
    fragments = table.fragments(table.version, where=filter)
    n = max(1, min(groups or min(len(fragments), 64), len(fragments)))
    buckets: List[List[Fragment]] = [[] for _ in range(n)]
    sizes = [0] * n
    for f in sorted(fragments, key=lambda f: -f.rows):
        i = sizes.index(min(sizes))
        buckets[i].append(f)
        sizes[i] += f.rows
    # Each group reads in fragment order.
    return table.schema, [sorted(b, key=lambda f: f.id) for b in buckets if b]


def read_group(group: Sequence[Fragment], columns: Optional[Sequence[str]], filter: Optional[str], schema: pa.Schema) -> pa.Table:
    """The rows of a group of fragments (``schema``: the projected columns)."""
    tables = [f.to_arrow(columns=columns, where=filter) for f in group]
    return pa.concat_tables(tables) if tables else schema.empty_table()


def projected(schema: pa.Schema, columns: Optional[Sequence[str]]) -> pa.Schema:
    return schema if columns is None else pa.schema([schema.field(c) for c in columns])


def staged_ids(returns: Iterable[Any]) -> List[str]:
    """The staged ids the finished tasks returned (each a list)."""
    return [i for r in returns for i in (r or [])]


def plan_changes(
    uri: str,
    from_version: VersionLike,
    to_version: Optional[VersionLike],
    columns: Optional[Sequence[str]],
    storage_options: StorageOptions,
    parallelism: Optional[int],
    branch: Optional[str] = None,
) -> Tuple[pa.Schema, int, List[Tuple[int, int]]]:
    """The change feed after ``from_version`` up to ``to_version`` (the latest without;
    each a number or a tag of the branch) cut into consecutive version ranges, one a
    task (``parallelism`` of them at most, default 64): its schema (the last
    version's), the last version, the ranges."""
    table = open(uri, storage_options=storage_options, branch=branch)
    from_version = table._version_number(from_version)
    to = table.version if to_version is None else table._version_number(to_version)
    if from_version > to:
        raise InvalidInputError(f"the change range starts at version {from_version}, after its end {to}")
    schema = table.changes(to, to, columns).schema
    count = to - from_version
    parts = max(1, min(count, parallelism or 64))
    bounds = [from_version + (count * k) // parts for k in range(parts + 1)]
    return schema, to, [(bounds[k], bounds[k + 1]) for k in range(parts) if bounds[k] < bounds[k + 1]]


def read_changes(
    uri: str,
    storage_options: StorageOptions,
    span: Tuple[int, int],
    schema_of: int,
    columns: Optional[Sequence[str]],
    where: Optional[str],
    branch: Optional[str] = None,
) -> pa.Table:
    """The changes of one range of ``plan_changes`` (rows in the schema of version
    ``schema_of``, so that every task gives the same columns)."""
    table = open(uri, storage_options=storage_options, branch=branch)
    export = table._native.changes(span[0], span[1], None, None, None, list(columns) if columns else None, where, False, schema_of)
    return pa.RecordBatchReader.from_stream(export).read_all()

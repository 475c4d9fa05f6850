"""Dask reads and writes Concord tables (``pip install ./python[dask]``).

``read_concord`` gives a ``dask.dataframe.DataFrame`` of a version, one partition per
group of fragments (those the filter's statistics do not rule out). ``to_concord``
writes a dataframe as one version: each partition's task stages its rows, and the
client commits the staged ids of the tasks that finished as one job commit, so a task
re-run after a worker died is committed once and a job that fails commits nothing.
Each takes ``branch``: read that branch's versions, or commit the job on it (only).
"""

from __future__ import annotations

from typing import Any, List, Optional, Sequence

import pyarrow as pa

try:
    import dask
    import dask.dataframe as dd
    import pandas as pd
except ImportError as e:  # the optional dependency, named
    raise ImportError(f"concord.dask needs Dask: pip install './python[dask]' ({e})") from e

from . import _jobs
from ._refs import VersionLike
from ._table import CommitInfo, StorageOptions, TimeLike

__all__ = ["read_concord", "read_concord_changes", "to_concord"]


def _read(group: Sequence[Any], columns: Optional[Sequence[str]], filter: Optional[str], schema: pa.Schema) -> pd.DataFrame:
    return _jobs.read_group(group, columns, filter, schema).to_pandas()


def read_concord(
    uri: str,
    version: Optional[VersionLike] = None,
    as_of: Optional[TimeLike] = None,
    columns: Optional[Sequence[str]] = None,
    filter: Optional[str] = None,
    storage_options: StorageOptions = None,
    npartitions: Optional[int] = None,
    branch: Optional[str] = None,
) -> dd.DataFrame:
    """A dataframe of the rows of ``version`` (a number or a tag's name; default: the
    latest; or the version as of ``as_of``) of ``branch`` (default ``main``): ``columns``
    of the rows matching ``filter`` (a SQL predicate, as ``where`` everywhere else), in
    ``npartitions`` partitions (default: one per fragment, at most 64)."""
    columns = list(columns) if columns is not None else None
    schema, groups = _jobs.plan_read(uri, version, as_of, filter, storage_options, npartitions, branch)
    schema = _jobs.projected(schema, columns)
    meta = schema.empty_table().to_pandas()
    if not groups:
        return dd.from_pandas(meta, npartitions=1)
    return dd.from_map(_read, groups, columns=columns, filter=filter, schema=schema, meta=meta, enforce_metadata=False)


def _read_changes(
    span: Any, uri: str, storage_options: StorageOptions, last: int, data_columns: Any, filter: Any, branch: Optional[str] = None
) -> pd.DataFrame:
    # Not named `columns`: Dask would then push its projections into it, change columns
    # (`_change_type`, ...) included, which are not the table's.
    return _jobs.read_changes(uri, storage_options, span, last, data_columns, filter, branch).to_pandas()


def read_concord_changes(
    uri: str,
    from_version: VersionLike,
    to_version: Optional[VersionLike] = None,
    columns: Optional[Sequence[str]] = None,
    filter: Optional[str] = None,
    storage_options: StorageOptions = None,
    npartitions: Optional[int] = None,
    branch: Optional[str] = None,
) -> dd.DataFrame:
    """A dataframe of the changes after ``from_version`` up to ``to_version`` (the latest
    without; each a number or a tag of the branch) of ``branch`` (default ``main``), as
    ``Table.changes`` gives them, one partition per consecutive range of versions
    (``npartitions`` at most, default 64)."""
    columns = list(columns) if columns is not None else None
    schema, last, spans = _jobs.plan_changes(uri, from_version, to_version, columns, storage_options, npartitions, branch)
    meta = schema.empty_table().to_pandas()
    if not spans:
        return dd.from_pandas(meta, npartitions=1)
    return dd.from_map(
        _read_changes,
        spans,
        uri=uri,
        storage_options=storage_options,
        last=last,
        data_columns=columns,
        filter=filter,
        branch=branch,
        meta=meta,
        enforce_metadata=False,
    )


def _stage(part: pd.DataFrame, uri: str, storage_options: StorageOptions, branch: Optional[str] = None) -> List[str]:
    return _jobs.stage_part(uri, storage_options, [pa.Table.from_pandas(part, preserve_index=False)], branch)


def to_concord(
    df: dd.DataFrame,
    uri: str,
    mode: str = "append",
    storage_options: StorageOptions = None,
    idempotency_key: Optional[str] = None,
    branch: Optional[str] = None,
) -> List[CommitInfo]:
    """Writes ``df`` into the table at ``uri`` (on ``branch``, default ``main``) as one
    version, or nothing: ``append`` adds its rows, ``overwrite`` leaves the table holding
    exactly them. Each partition is staged by a task (on the cluster's workers when a
    ``distributed`` client is active); the caller commits. ``idempotency_key``: the job's key (default: a fresh one per
    call); a commit whose outcome stayed unknown is retried under it. Returns the job's
    outcomes."""
    _jobs.check_mode(mode)
    key = _jobs.job_key(idempotency_key)
    tasks = [dask.delayed(_stage)(part, uri, storage_options, branch) for part in df.to_delayed()]
    returns = dask.compute(*tasks)
    return _jobs.commit_job(uri, storage_options, _jobs.staged_ids(returns), mode, key, branch)

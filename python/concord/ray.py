"""Ray Data reads and writes Concord tables (``pip install ./python[ray]``).

``read_concord`` gives a ``ray.data.Dataset`` of a version, one read task per group of
fragments (those the filter's statistics do not rule out). ``ConcordDatasink`` (or
``write_concord``) writes a dataset as one version: each write task stages its blocks,
and the driver commits the staged ids of the tasks that finished as one job commit, so
a re-run task's earlier attempt is never committed and a job that fails commits nothing.
Each takes ``branch``: read that branch's versions, or commit the job on it (only).
"""

from __future__ import annotations

from typing import Any, Dict, Iterable, List, Optional, Sequence

try:
    import ray
    import ray.data
    from ray.data.block import Block, BlockAccessor, BlockMetadata
    from ray.data.datasource import Datasink, Datasource, ReadTask
except ImportError as e:  # the optional dependency, named
    raise ImportError(f"concord.ray needs Ray Data: pip install './python[ray]' ({e})") from e

from . import _jobs
from ._refs import VersionLike
from ._table import CommitInfo, StorageOptions, TimeLike

__all__ = ["ConcordChangesDatasource", "ConcordDatasink", "ConcordDatasource", "read_concord", "read_concord_changes", "write_concord"]


class ConcordDatasource(Datasource):
    """The rows of one version of a Concord table (see ``read_concord``)."""

    def __init__(
        self,
        uri: str,
        version: Optional[VersionLike] = None,
        as_of: Optional[TimeLike] = None,
        columns: Optional[Sequence[str]] = None,
        filter: Optional[str] = None,
        storage_options: StorageOptions = None,
        branch: Optional[str] = None,
    ) -> None:
        self._uri = uri
        self._branch = branch
        self._version = version
        self._as_of = as_of
        self._columns = list(columns) if columns is not None else None
        self._filter = filter
        self._storage_options = storage_options

    def estimate_inmemory_data_size(self) -> Optional[int]:
        return None

    def get_read_tasks(self, parallelism: int, **_: Any) -> List[ReadTask]:
        schema, groups = _jobs.plan_read(
            self._uri, self._version, self._as_of, self._filter, self._storage_options, parallelism, self._branch
        )
        schema = _jobs.projected(schema, self._columns)
        columns, where = self._columns, self._filter
        tasks = []
        for group in groups:
            metadata = BlockMetadata(num_rows=None, size_bytes=None, input_files=None, exec_stats=None)

            def read(group=group) -> Iterable[Block]:
                yield _jobs.read_group(group, columns, where, schema)

            tasks.append(ReadTask(read, metadata, schema=schema))
        return tasks


def read_concord(
    uri: str,
    version: Optional[VersionLike] = None,
    as_of: Optional[TimeLike] = None,
    columns: Optional[Sequence[str]] = None,
    filter: Optional[str] = None,
    storage_options: StorageOptions = None,
    branch: Optional[str] = None,
    **read_args: Any,
) -> "ray.data.Dataset":
    """A dataset of the rows of ``version`` (a number or a tag's name; default: the
    latest; or the version as of ``as_of``) of ``branch`` (default ``main``): ``columns``
    of the rows matching ``filter`` (a SQL predicate, as ``where`` everywhere else).
    ``read_args`` go to ``ray.data.read_datasource`` (e.g. ``override_num_blocks``)."""
    source = ConcordDatasource(uri, version, as_of, columns, filter, storage_options, branch)
    return ray.data.read_datasource(source, **read_args)


class ConcordChangesDatasource(Datasource):
    """The change feed of a Concord table over a range of versions (see
    ``read_concord_changes``): one read task per consecutive range of versions."""

    def __init__(
        self,
        uri: str,
        from_version: VersionLike,
        to_version: Optional[VersionLike] = None,
        columns: Optional[Sequence[str]] = None,
        filter: Optional[str] = None,
        storage_options: StorageOptions = None,
        branch: Optional[str] = None,
    ) -> None:
        self._uri = uri
        self._branch = branch
        self._from = from_version
        self._to = to_version
        self._columns = list(columns) if columns is not None else None
        self._filter = filter
        self._storage_options = storage_options

    def estimate_inmemory_data_size(self) -> Optional[int]:
        return None

    def get_read_tasks(self, parallelism: int, **_: Any) -> List[ReadTask]:
        schema, last, spans = _jobs.plan_changes(
            self._uri, self._from, self._to, self._columns, self._storage_options, parallelism, self._branch
        )
        uri, options, columns, where, branch = self._uri, self._storage_options, self._columns, self._filter, self._branch
        tasks = []
        for span in spans:
            metadata = BlockMetadata(num_rows=None, size_bytes=None, input_files=None, exec_stats=None)

            def read(span=span) -> Iterable[Block]:
                yield _jobs.read_changes(uri, options, span, last, columns, where, branch)

            tasks.append(ReadTask(read, metadata, schema=schema))
        return tasks


def read_concord_changes(
    uri: str,
    from_version: VersionLike,
    to_version: Optional[VersionLike] = None,
    columns: Optional[Sequence[str]] = None,
    filter: Optional[str] = None,
    storage_options: StorageOptions = None,
    branch: Optional[str] = None,
    **read_args: Any,
) -> "ray.data.Dataset":
    """A dataset of the changes after ``from_version`` up to ``to_version`` (the latest
    without; each a number or a tag of the branch) of ``branch`` (default ``main``), as
    ``Table.changes`` gives them (rows in the schema of the range's last
    version), read by tasks each taking a consecutive range of versions. ``read_args``
    go to ``ray.data.read_datasource``."""
    source = ConcordChangesDatasource(uri, from_version, to_version, columns, filter, storage_options, branch)
    return ray.data.read_datasource(source, **read_args)


class ConcordDatasink(Datasink):
    """Writes a dataset into a Concord table as one version (a job commit), or nothing.

    ``mode="append"`` adds the dataset's rows; ``"overwrite"`` leaves the table holding
    exactly them (the overwrite and the appends in one version). ``idempotency_key``:
    the job's key (default: a fresh one per sink); a commit whose outcome stayed
    unknown is retried under it and replays if it had landed. ``branch``: the branch the
    job commits on (default ``main``). After the write, ``result`` holds the job's
    ``CommitInfo`` list.
    """

    def __init__(
        self,
        uri: str,
        mode: str = "append",
        storage_options: StorageOptions = None,
        idempotency_key: Optional[str] = None,
        branch: Optional[str] = None,
    ) -> None:
        self.uri = uri
        self.branch = branch
        self.mode = _jobs.check_mode(mode)
        self.storage_options = storage_options
        self.idempotency_key = _jobs.job_key(idempotency_key)
        self.result: List[CommitInfo] = []

    def write(self, blocks: Iterable[Block], ctx: Any) -> List[str]:
        tables = (BlockAccessor.for_block(b).to_arrow() for b in blocks)
        return _jobs.stage_part(self.uri, self.storage_options, tables, self.branch)

    def on_write_complete(self, write_result: Any) -> None:
        returns = getattr(write_result, "write_returns", write_result)
        staged = _jobs.staged_ids(returns)
        self.result = _jobs.commit_job(self.uri, self.storage_options, staged, self.mode, self.idempotency_key, self.branch)

    def get_name(self) -> str:
        return "Concord"


def write_concord(
    ds: "ray.data.Dataset",
    uri: str,
    mode: str = "append",
    storage_options: StorageOptions = None,
    idempotency_key: Optional[str] = None,
    branch: Optional[str] = None,
    **write_args: Dict[str, Any],
) -> List[CommitInfo]:
    """Writes ``ds`` into the table at ``uri`` (on ``branch``, default ``main``) as one
    version (see ``ConcordDatasink``); returns the job's outcomes."""
    sink = ConcordDatasink(uri, mode=mode, storage_options=storage_options, idempotency_key=idempotency_key, branch=branch)
    ds.write_datasink(sink, **write_args)
    return sink.result

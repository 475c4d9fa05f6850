"""Ray Data and Dask read and write Concord tables, a whole job as one version, exactly
once under task retries and killed workers. Real local clusters on 2 CPUs.

Skipped when Ray or Dask is not installed, except under CONCORD_REQUIRE_ENGINES
(scripts/test-python installs them and sets it: there a skip would hide a failure)."""

from __future__ import annotations

import collections
import importlib
import multiprocessing
import os
import pathlib
import threading

import pyarrow as pa
import pyarrow.compute as pc
import pytest

import workers
from conftest import rows


def _engine(name: str):
    try:
        return importlib.import_module(name)
    except ImportError as e:
        if os.environ.get("CONCORD_REQUIRE_ENGINES"):
            pytest.fail(f"{name} is not installed but CONCORD_REQUIRE_ENGINES is set: {e}")
        pytest.skip(f"{name} is not installed (scripts/test-python installs it)")


@pytest.fixture(scope="module")
def ray_cluster():
    ray = _engine("ray")
    _engine("concord.ray")
    # Ray's workers import this module's functions by name.
    tests = str(pathlib.Path(__file__).parent)
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (tests, os.environ.get("PYTHONPATH")) if p)
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    ray.data.DataContext.get_current().enable_progress_bars = False
    yield ray
    ray.shutdown()


@pytest.fixture(scope="module")
def dask_client():
    _engine("dask")
    distributed = _engine("distributed")
    _engine("concord.dask")
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None)
    client = distributed.Client(cluster)
    yield client
    client.close()
    cluster.close()


def _to_rows(batch: pa.Table) -> pa.Table:
    """Ray's `range` ids as rows of the test schema."""
    return rows(batch.column("id").to_pylist())


def _ids(table: pa.Table) -> list:
    return sorted(table.column("id").to_pylist())


def _sorted(table: pa.Table) -> pa.Table:
    return table.sort_by("id").select(["id", "name", "score"])


def _one_version(t, infos, before: int) -> int:
    """The job's outcomes all name one version, the one after `before` (or later, with
    concurrent writers)."""
    versions = {i.version for i in infos}
    assert len(versions) == 1, versions
    (version,) = versions
    assert version > before
    return version


# ------------------------------------------------------------------------- Ray


def test_ray_writes_a_million_rows_from_16_tasks_as_one_version_and_reads_them_back(store, ray_cluster):
    import concord.ray

    ray = ray_cluster
    t = store.create()
    ds = ray.data.range(1_000_000, override_num_blocks=16).map_batches(_to_rows, batch_format="pyarrow")
    infos = concord.ray.write_concord(ds, t.uri, storage_options=store.options)
    assert len(infos) == 16 and _one_version(t, infos, 0) == 1
    t.refresh()
    assert t.version == 1 and t.count() == 1_000_000
    assert pc.sum(t.to_arrow(columns=["id"]).column("id")).as_py() == sum(range(1_000_000))
    back = concord.ray.read_concord(t.uri, storage_options=store.options)
    assert _sorted(pa.concat_tables(ray.get(back.to_arrow_refs()))).equals(_sorted(t.to_arrow()))
    where = "id % 1000 = 7 or id >= 999990"
    filtered = concord.ray.read_concord(t.uri, filter=where, columns=["id", "score"], storage_options=store.options)
    got = pa.concat_tables(ray.get(filtered.to_arrow_refs()))
    assert got.column_names == ["id", "score"]
    assert _ids(got) == _ids(t.to_arrow(where=where))
    # Statistics prune: a filter on one block's ids reads one fragment's group.
    assert len(t.fragments(where="id < 10")) == 1 and len(t.fragments()) >= 16


class _FailOnce:
    """Raises the first time it sees a block (by its first id), recorded in `folder`:
    Ray's retry runs the task again."""

    def __init__(self, folder: str) -> None:
        self.folder = folder

    def first_try(self, key: str) -> bool:
        marker = pathlib.Path(self.folder) / key
        if marker.exists():
            return False
        marker.touch()
        return True


def test_ray_tasks_that_fail_after_staging_are_retried_and_committed_once(local, ray_cluster, tmp_path):
    """Write tasks that raise after staging their blocks (on their first try) and map
    tasks that raise before it: Ray re-runs them; only the staged ids of finished tasks
    are committed, so every row is in the table once, in one version."""
    import concord.ray

    ray = ray_cluster
    t = local.create()
    once = _FailOnce(str(tmp_path))

    def flaky_rows(batch: pa.Table) -> pa.Table:
        first = batch.column("id")[0].as_py()
        if first % 2 == 0 and once.first_try(f"map-{first}"):
            raise RuntimeError("the map function fails on its first try")
        return _to_rows(batch)

    class FlakySink(concord.ray.ConcordDatasink):
        def write(self, blocks, ctx):
            blocks = list(blocks)
            staged = super().write(blocks, ctx)
            first = concord.ray.BlockAccessor.for_block(blocks[0]).to_arrow().column("id")[0].as_py()
            if once.first_try(f"write-{first}"):
                raise RuntimeError("the write task fails after staging")
            return staged

    retry = {"max_retries": 3, "retry_exceptions": True}
    ds = ray.data.range(80_000, override_num_blocks=8).map_batches(flaky_rows, batch_format="pyarrow", **retry)
    sink = FlakySink(t.uri)
    ds.write_datasink(sink, ray_remote_args=retry)
    assert _one_version(t, sink.result, 0) == 1
    assert _ids(t.refresh().to_arrow()) == list(range(80_000))
    staged_files = list((pathlib.Path(t.uri) / "_transactions").glob("*.json"))
    assert len(staged_files) >= 16, "the failed attempts' staged parts exist, uncommitted"


def test_a_ray_job_that_fails_for_good_leaves_the_table_unchanged(local, ray_cluster):
    import concord.ray

    ray = ray_cluster
    t = local.create()
    t.append(rows(range(5)))

    def broken(batch):
        if batch.column("id")[0].as_py() >= 500:
            raise ValueError("this job fails")
        return _to_rows(batch)

    ds = ray.data.range(1_000, override_num_blocks=4).map_batches(broken, batch_format="pyarrow")
    with pytest.raises(Exception, match="this job fails"):
        concord.ray.write_concord(ds, t.uri)
    assert t.refresh().version == 1 and _ids(t.to_arrow()) == list(range(5))


def test_a_ray_overwrite_leaves_exactly_the_jobs_rows_in_one_version(local, ray_cluster):
    import concord.ray

    ray = ray_cluster
    t = local.create()
    t.append(rows(range(-50, 0)))
    ds = ray.data.range(1_000, override_num_blocks=4).map_batches(_to_rows, batch_format="pyarrow")
    infos = concord.ray.write_concord(ds, t.uri, mode="overwrite")
    assert _one_version(t, infos, 1) == 2 and len(infos) == 5
    assert _ids(t.refresh().to_arrow()) == list(range(1_000))
    with pytest.raises(ValueError, match="mode"):
        concord.ray.ConcordDatasink(t.uri, mode="upsert")


def test_a_retried_ray_job_commit_replays_under_its_key(local, ray_cluster):
    """The job's key: a second write under the same key (a driver retrying after a lost
    response) commits nothing and reports the first one's outcome."""
    import concord.ray

    ray = ray_cluster
    t = local.create()
    ds = ray.data.range(100, override_num_blocks=2).map_batches(_to_rows, batch_format="pyarrow")
    first = concord.ray.write_concord(ds, t.uri, idempotency_key="nightly-2026-12-04")
    again = concord.ray.write_concord(ds, t.uri, idempotency_key="nightly-2026-12-04")
    assert [i.version for i in again] == [i.version for i in first] and all(i.idempotent_replay for i in again)
    assert t.refresh().count() == 100 and t.version == 1


def test_two_ray_jobs_and_four_processes_write_at_once(local, ray_cluster):
    """Every job's rows land exactly once, each job in one version of its own."""
    import concord.ray

    ray = ray_cluster
    t = local.create()
    results = {}

    def job(name: str, start: int) -> None:
        ds = ray.data.range(20_000, override_num_blocks=4).map_batches(
            lambda b, start=start: rows([start + i for i in b.column("id").to_pylist()]), batch_format="pyarrow"
        )
        results[name] = concord.ray.write_concord(ds, t.uri)

    threads = [threading.Thread(target=job, args=(name, start)) for name, start in (("a", 1_000_000), ("b", 2_000_000))]
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(4)
    queue = ctx.Queue()
    procs = [ctx.Process(target=workers.append_many, args=(t.uri, None, w, 5, 10, barrier, queue)) for w in range(4)]
    for x in threads + procs:
        x.start()
    outs = [queue.get(timeout=300) for _ in procs]
    for x in threads + procs:
        x.join(timeout=300)
    assert all(not o["errors"] for o in outs), [o["errors"] for o in outs]
    ids = collections.Counter(t.refresh().to_arrow(columns=["id"]).column("id").to_pylist())
    assert max(ids.values()) == 1, "no row twice"
    for name, start in (("a", 1_000_000), ("b", 2_000_000)):
        _one_version(t, results[name], 0)
        assert all(start + i in ids for i in range(20_000)), f"job {name}"
    assert sum(1 for i in ids if i < 1_000_000) == 4 * 5 * 10


def test_ray_jobs_write_and_read_a_branch_only(store, ray_cluster):
    import concord.ray

    ray = ray_cluster
    t = store.create()
    t.append(rows(range(5)))  # main v1
    dev = t.create_branch("dev")
    ds = ray.data.range(1000, override_num_blocks=4).map_batches(_to_rows, batch_format="pyarrow")
    infos = concord.ray.write_concord(ds, t.uri, storage_options=store.options, branch="dev")
    assert len(infos) == 4 and _one_version(dev, infos, 1) == 2
    assert t.refresh().version == 1 and t.count() == 5, "main did not move"
    assert dev.refresh().version == 2 and dev.count() == 1005
    back = concord.ray.read_concord(t.uri, storage_options=store.options, branch="dev")
    assert _ids(pa.concat_tables(ray.get(back.to_arrow_refs()))) == _ids(dev.to_arrow())
    main = concord.ray.read_concord(t.uri, storage_options=store.options)
    assert _ids(pa.concat_tables(ray.get(main.to_arrow_refs()))) == list(range(5))
    dev.tags.create("dev-job")
    tagged = concord.ray.read_concord(t.uri, version="dev-job", storage_options=store.options)
    assert tagged.count() == 1005
    over = ray.data.range(3).map_batches(_to_rows, batch_format="pyarrow")
    infos = concord.ray.write_concord(over, t.uri, mode="overwrite", storage_options=store.options, branch="dev")
    assert _ids(dev.refresh().to_arrow()) == [0, 1, 2] and t.refresh().count() == 5
    feed = concord.ray.read_concord_changes(t.uri, "dev-job", storage_options=store.options, branch="dev")
    assert feed.count() == 1005 + 3


# ------------------------------------------------------------------------ Dask


def _frame(n: int, partitions: int, start: int = 0):
    import dask.dataframe as dd

    return dd.from_pandas(rows(range(start, start + n)).to_pandas(), npartitions=partitions)


def test_dask_writes_a_million_rows_as_one_version_and_reads_them_back(store, dask_client):
    import concord.dask

    t = store.create()
    infos = concord.dask.to_concord(_frame(1_000_000, 16), t.uri, storage_options=store.options)
    assert len(infos) == 16 and _one_version(t, infos, 0) == 1
    assert t.refresh().count() == 1_000_000
    df = concord.dask.read_concord(t.uri, storage_options=store.options)
    assert df.npartitions >= 16
    back = pa.Table.from_pandas(df.compute(), preserve_index=False)
    assert _sorted(back).to_pydict() == _sorted(t.to_arrow()).to_pydict()
    where = "id % 1000 = 7"
    filtered = concord.dask.read_concord(t.uri, filter=where, columns=["id"], storage_options=store.options).compute()
    assert list(filtered.columns) == ["id"] and sorted(filtered["id"]) == _ids(t.to_arrow(where=where))
    # A version before the job: empty, with the table's columns.
    assert len(concord.dask.read_concord(t.uri, version=0, storage_options=store.options).compute()) == 0


def _die_once(part, folder: str):
    """Kills its worker process the first time it sees this partition (by its first id):
    the scheduler re-runs the task on a worker that lives."""
    marker = pathlib.Path(folder) / f"part-{part['id'].iloc[0]}"
    if len(part) and not marker.exists():
        marker.touch()
        if part["id"].iloc[0] == 0:
            os._exit(1)
    return part


def test_a_dask_worker_killed_during_the_write_still_gives_every_row_once(local, dask_client, tmp_path):
    import concord.dask

    t = local.create()
    df = _frame(40_000, 8).map_partitions(_die_once, str(tmp_path), meta=rows([]).to_pandas())
    infos = concord.dask.to_concord(df, t.uri)
    assert _one_version(t, infos, 0) == 1
    assert _ids(t.refresh().to_arrow()) == list(range(40_000))
    assert (tmp_path / "part-0").exists(), "the worker was killed"


def test_a_dask_job_that_fails_leaves_the_table_unchanged_and_overwrite_replaces(local, dask_client):
    import concord.dask

    t = local.create()
    t.append(rows(range(5)))

    def broken(part):
        if len(part) and part["id"].iloc[0] >= 500:
            raise ValueError("this job fails")
        return part

    with pytest.raises(ValueError, match="this job fails"):
        concord.dask.to_concord(_frame(1_000, 4).map_partitions(broken, meta=rows([]).to_pandas()), t.uri)
    assert t.refresh().version == 1 and _ids(t.to_arrow()) == list(range(5))
    infos = concord.dask.to_concord(_frame(1_000, 4, start=100), t.uri, mode="overwrite")
    assert _one_version(t, infos, 1) == 2
    assert _ids(t.refresh().to_arrow()) == list(range(100, 1_100))


def test_dask_jobs_write_and_read_a_branch_only(store, dask_client):
    import concord.dask

    t = store.create()
    t.append(rows(range(5)))  # main v1
    dev = t.create_branch("dev")
    infos = concord.dask.to_concord(_frame(1000, 4, start=100), t.uri, storage_options=store.options, branch="dev")
    assert len(infos) == 4 and _one_version(dev, infos, 1) == 2
    assert t.refresh().version == 1 and t.count() == 5, "main did not move"
    assert dev.refresh().count() == 1005
    back = concord.dask.read_concord(t.uri, storage_options=store.options, branch="dev").compute()
    assert sorted(back["id"]) == _ids(dev.to_arrow())
    assert sorted(concord.dask.read_concord(t.uri, storage_options=store.options).compute()["id"]) == list(range(5))
    assert len(concord.dask.read_concord(t.uri, version=1, storage_options=store.options, branch="dev").compute()) == 5
    concord.dask.to_concord(_frame(3, 1), t.uri, mode="overwrite", storage_options=store.options, branch="dev")
    assert _ids(dev.refresh().to_arrow()) == [0, 1, 2] and t.refresh().count() == 5
    feed = concord.dask.read_concord_changes(t.uri, 2, storage_options=store.options, branch="dev").compute()
    assert sorted(feed["_change_type"].value_counts().items()) == [("delete", 1005), ("insert", 3)]


def _history_table(store):
    t = store.create()
    for k in range(6):
        t.append(rows(range(k * 10, k * 10 + 5)))
        t.update({"score": "score + 1"}, where=f"id = {k * 10}")
    t.delete("id % 10 = 3")
    return t


def test_ray_reads_a_change_feed_in_version_ranges(local, ray_cluster):
    import concord.ray

    t = _history_table(local)
    expected = t.changes(2)
    ds = concord.ray.read_concord_changes(t.uri, 2, override_num_blocks=4)
    got = ds.to_arrow_refs()
    table = pa.concat_tables(ray_cluster.get(got)) if got else expected.schema.empty_table()
    assert table.schema.names == expected.schema.names
    key = ["_version", "_row_id", "_change_type"]
    assert table.sort_by([(k, "ascending") for k in key]).equals(expected.sort_by([(k, "ascending") for k in key]))


def test_dask_reads_a_change_feed_in_version_ranges(local, dask_client):
    import pandas as pd

    import concord.dask

    t = _history_table(local)
    expected = t.changes(1, columns=["id"]).to_pandas()
    df = concord.dask.read_concord_changes(t.uri, 1, columns=["id"], npartitions=3).compute()
    assert list(df.columns) == list(expected.columns)
    key = ["_version", "_row_id", "_change_type"]
    # Dask keeps strings as its own string dtype: compare values.
    got, want = (d.sort_values(key).reset_index(drop=True) for d in (df, expected))
    pd.testing.assert_frame_equal(got, want, check_dtype=False)

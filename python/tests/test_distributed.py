"""Distributed jobs: fragments pickled to worker processes and read there; staged
appends from several processes committed as one version (a job commit)."""

from __future__ import annotations

import multiprocessing

import pytest

import concord
import workers
from conftest import rows


def test_fragments_are_read_by_worker_processes(store):
    t = store.create()
    for i in range(6):
        t.append(rows(range(i * 100, i * 100 + 100)))
    t.delete("id % 10 = 0")
    fragments = t.fragments()
    assert len(fragments) == 6 and sum(f.rows for f in fragments) == 540
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(3) as pool:
        parts = pool.map(workers.read_fragment, fragments)
        filtered = pool.starmap(workers.read_fragment, [(f, "id % 2 = 1") for f in fragments])
    got = sorted(i for part in parts for i in part)
    assert got == [i for i in range(600) if i % 10 != 0]
    assert sorted(i for part in filtered for i in part) == [i for i in range(600) if i % 2 == 1]
    # Fragments name their version: later commits do not change what they read.
    t.append(rows([10_000]))
    with ctx.Pool(1) as pool:
        assert pool.map(workers.read_fragment, fragments[:1]) == [parts[0]]


def test_a_job_commit_of_staged_appends_from_several_processes(store):
    t = store.create()
    t.append(rows([-1]))
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(4) as pool:
        staged = pool.starmap(workers.stage_share, [(t.uri, store.options, w, 25) for w in range(4)])
    assert len(set(staged)) == 4
    assert concord.open(t.uri, storage_options=store.options).count() == 1, "staged: nothing visible yet"
    concord.open(t.uri, storage_options=store.options).append(rows([-2]))  # landed meanwhile: rebased over
    infos = t.commit_staged(staged)
    assert len({i.version for i in infos}) == 1
    version = infos[0].version
    history = t.history()
    entry = history[version]
    assert [tx["transaction_id"] for tx in entry["transactions"]] == [i.transaction_id for i in infos]
    assert entry["rows_written"] == 100 and version == len(history) - 1
    assert t.count() == 102
    # The job's rows appear at once: the version before has none of them.
    assert t.count(version=version - 1) == 2


def test_a_job_with_an_incompatible_member_commits_nothing(local):
    t = local.create()
    t.append(rows([1]))
    ok = t.stage_append(rows([2]))
    bad = t.stage_append(rows([3]))
    concord.open(t.uri).drop_column("score")  # the staged appends wrote score: incompatible
    with pytest.raises(concord.IncompatibleError) as e:
        t.commit_staged([ok, bad])
    assert e.value.staged_id in (ok, bad)
    assert t.refresh().count() == 1

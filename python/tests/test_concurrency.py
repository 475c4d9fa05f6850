"""Many writers at once from Python: 8 threads through one handle, 8 processes
(multiprocessing, spawn), on local disk and on moto S3. Counts exact, no duplicate,
one chain of versions, every acknowledged commit in the history exactly once."""

from __future__ import annotations

import multiprocessing
import statistics
import threading
import time

import pytest

import concord
import workers
from conftest import rows

WRITERS = 8
ROWS_EACH = 10


def appends_per_writer(store) -> int:
    return 10 if store.name == "local" else 4


def p99(values):
    values = sorted(values)
    return values[min(len(values) - 1, int(round(0.99 * (len(values) - 1))))]


def verify(store, uri, infos, expected_ids):
    """The promise: exactly the acknowledged rows, once each; one chain; each
    acknowledged transaction in the history once, in the version it reported."""
    t = store.open(uri)
    got = t.to_arrow(columns=["id"]).column("id").to_pylist()
    assert len(got) == len(set(got)), "no duplicate row"
    assert sorted(got) == sorted(expected_ids), "exactly the acknowledged rows"
    history = t.history()
    assert [h["version"] for h in history] == list(range(len(history))), "one chain, no gaps"
    where = {}
    for h in history:
        for tx in h["transactions"]:
            assert tx["transaction_id"] not in where, "a transaction is in one version only"
            where[tx["transaction_id"]] = h["version"]
    for info in infos:
        assert where.get(info["transaction_id"]) == info["version"], info
    keys = [tx["idempotency_key"] for h in history for tx in h["transactions"] if tx["idempotency_key"]]
    assert len(keys) == len(set(keys)), "no key committed twice"
    return history


def test_threads_share_one_handle(store, measure):
    t = store.create()
    appends = appends_per_writer(store)
    barrier = threading.Barrier(WRITERS)
    infos, errors, latencies = [], [], []
    lock = threading.Lock()

    def write(writer):
        barrier.wait()
        for i in range(appends):
            first = (writer * appends + i) * ROWS_EACH
            started = time.perf_counter()
            try:
                info = t.append(rows(range(first, first + ROWS_EACH)), idempotency_key=f"t{writer}-{i}")
            except concord.ConcordError as e:  # a typed failure is allowed; a silent loss is not
                with lock:
                    errors.append(e)
                continue
            with lock:
                infos.append(info.to_dict())
                latencies.append(time.perf_counter() - started)

    started = time.perf_counter()
    threads = [threading.Thread(target=write, args=(w,)) for w in range(WRITERS)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    elapsed = time.perf_counter() - started
    assert not errors, errors
    expected = []
    for w in range(WRITERS):
        for i in range(appends):
            first = (w * appends + i) * ROWS_EACH
            expected.extend(range(first, first + ROWS_EACH))
    history = verify(store, t.uri, infos, expected)
    assert t.version == history[-1]["version"], "the handle reads the newest version it committed"
    versions = len(history) - 1
    measure(
        f"{store.name}: {WRITERS} threads x {appends} appends through one handle: {len(infos)} commits in {versions} versions "
        f"(group commit), {len(infos) / elapsed:.1f} commits/s, latency p50 {statistics.median(latencies) * 1000:.0f} ms "
        f"p99 {p99(latencies) * 1000:.0f} ms, 0 failures"
    )


def test_processes_append_at_once(store, measure):
    t = store.create()
    appends = appends_per_writer(store)
    ctx = multiprocessing.get_context("spawn")
    barrier, results = ctx.Barrier(WRITERS), ctx.Queue()
    procs = [
        ctx.Process(target=workers.append_many, args=(t.uri, store.options, w, appends, ROWS_EACH, barrier, results))
        for w in range(WRITERS)
    ]
    for p in procs:
        p.start()
    outs = [results.get(timeout=600) for _ in procs]
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    infos = [i for o in outs for i in o["infos"]]
    errors = [e for o in outs for e in o["errors"]]
    # Every failure must be typed and must have left nothing; with the default budget none is expected.
    assert not errors, errors
    expected = []
    for o in outs:
        w = o["writer"]
        for i in range(appends):
            first = (w * appends + i) * ROWS_EACH
            expected.extend(range(first, first + ROWS_EACH))
    history = verify(store, t.uri, infos, expected)
    # From the moment all were ready (past the barrier) to the last commit.
    elapsed = max(o["end"] for o in outs) - min(o["start"] for o in outs)
    latencies = [x for o in outs for x in o["latencies"]]
    rebased = sum(1 for i in infos if i["rebased_over"])
    # Cooperative commits: an append that lost a race may be carried by another
    # process's commit; history names the carrying transaction, the version's first.
    carried = 0
    for h in history:
        for tx in h["transactions"]:
            if tx["carried_by"] is not None:
                carried += 1
                assert tx["carried_by"] == h["transactions"][0]["transaction_id"], h
    measure(
        f"{store.name}: {WRITERS} processes x {appends} appends: {len(infos)} commits, {len(history) - 1} versions, "
        f"{len(infos) / elapsed:.1f} commits/s, latency p50 {statistics.median(latencies) * 1000:.0f} ms "
        f"p99 {p99(latencies) * 1000:.0f} ms, {rebased} rebased, {carried} carried, 0 failures"
    )


def test_the_gil_is_released_during_a_write(local, measure):
    t = local.create()
    big = rows(range(500_000))
    done = threading.Event()

    def write():
        t.append(big)
        done.set()

    writer = threading.Thread(target=write)
    last, longest, ticks = time.perf_counter(), 0.0, 0
    started = last
    writer.start()
    while not done.is_set():
        now = time.perf_counter()
        longest = max(longest, now - last)
        last = now
        ticks += 1
        time.sleep(0.001)
    writer.join()
    took = time.perf_counter() - started
    assert t.count() == 500_000
    # Holding the GIL through the write would stall this loop for the whole write.
    assert longest < max(0.25, took / 4), (longest, took)
    measure(f"a 500k-row append took {took:.2f} s; the main thread ran {ticks} times, longest stall {longest * 1000:.0f} ms")


def test_a_handle_survives_fork(local):
    if "fork" not in multiprocessing.get_all_start_methods():
        pytest.skip("no fork here")
    t = local.create()
    t.append(rows([1]))
    ctx = multiprocessing.get_context("fork")
    q = ctx.Queue()

    def child():
        try:
            info = t.append(rows([2]))
            q.put((info.version, t.count()))
        except Exception as e:  # noqa: BLE001
            q.put(repr(e))

    p = ctx.Process(target=child)
    p.start()
    got = q.get(timeout=120)
    p.join(timeout=60)
    assert got == (2, 2), got
    assert t.refresh().count() == 2
    # The parent's handle still works after the child used its copy.
    t.append(rows([3]))
    assert t.count() == 3


def test_threads_through_a_dynamodb_coordinator(s3, measure):
    """S3-compatible stores without conditional writes commit through DynamoDB:
    `commit_coordinator` in storage_options (or CONCORD_COMMIT_COORDINATOR)."""
    spec = "dynamodb://concord-py-test-commits"
    concord.create_coordinator_table(spec, storage_options=s3.options)
    assert concord.create_coordinator_table(spec, storage_options=s3.options) is False, "already there"
    options = dict(s3.options, commit_coordinator=spec)
    uri = s3.uri("ddb")
    concord.create(uri, "id bigint not null, name varchar, score double", storage_options=options)
    handles = [concord.open(uri, storage_options=options) for _ in range(4)]
    infos, errors = [], []

    def write(w, h):
        for i in range(3):
            try:
                infos.append(h.append(rows(range((w * 3 + i) * 10, (w * 3 + i) * 10 + 10))).to_dict())
            except concord.ConcordError as e:
                errors.append(e)

    threads = [threading.Thread(target=write, args=(w, h)) for w, h in enumerate(handles)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors, errors
    history = verify(s3.__class__("s3", s3.base, options), uri, infos, list(range(120)))
    # The create and 12 appends, each in exactly one version; appends that lost a race
    # may share one (cooperative commits), so there are 13 versions or fewer.
    transactions = [t for v in history for t in v["transactions"]]
    assert len(transactions) == 13 and len(history) <= 13, history
    measure(f"s3 + DynamoDB coordinator: 4 handles x 3 appends: {len(infos)} commits, one chain of {len(history)} versions")

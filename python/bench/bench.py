#!/usr/bin/env python3
"""Concord from Python beside Lance (pylance) and Delta (deltalake), on local disk.

A benchmark, not a test: CI never runs it. Run it with scripts/bench-python, which
builds a release wheel of concord and installs it with pinned pylance, deltalake and
pyarrow into .tools/py-bench-venv. Each workload runs on a fresh table in a temporary
folder, for each system in turn (workload by workload, so that passing load on a
shared machine weighs on all alike):

  append small    one writer, N appends of 100 rows: latency p50 / p99 per append
  append 1M       one writer, M appends of 1,000,000 rows: latency p50, rows/s
  append 10M      one append of 10,000,000 rows (a pyarrow Table in memory), in a fresh
                  process: seconds, and peak RSS (MiB) beside the RSS the input
                  table left before the call
  W processes     W writer processes (spawn) each doing K appends of 100 rows to one
                  table at once: commits/s (from the moment all are ready), latency
                  p50 / p99, failures; rows checked afterwards
  read 10M        a 10,000,000-row table (10 appends of 1M) read whole into a
                  pyarrow.Table: median of 3 reads, rows/s; then the rows with
                  x < 10 (1%, spread over every page of every file) and with
                  id < 100000 (1%, clustered in a few row groups), all columns:
                  median of 3 each
  vectors         1,000,000 rows of a 768-float32 vector (3 GB) appended from a
                  streamed RecordBatchReader in one write, then read whole into
                  pyarrow; each in a fresh process: seconds and peak RSS (MiB), rows
                  checked against what was written; the append also until its rows
                  are on disk (the call, then a sync: Concord's are already)
  smallfiles      Concord alone: 1,000 appends of 100 rows, then a whole-table read
                  (median of 3), without and with automatic compaction
                  (auto_compact.small_fragments=32): seconds of the appends and of
                  the read, fragments left
  changes         a 10,000,000-row table (10 appends of 1M), then 100 versions each
                  touching 1% of the rows (in turn: an update of a 1% range of ids,
                  a delete of another, an append of 1% new rows); then the change
                  feed of the last 1, 10 and 100 versions read into pyarrow (median
                  of 3 each): Concord's Table.changes, Delta's load_cdf (change data
                  feed on from the table's creation), Lance's delta API (stable row
                  ids on: inserted and updated rows, deleted row ids), and the rows
                  each gives
  ray             a local Ray cluster (2 CPUs) writes 10,000,000 rows from 16 tasks
                  into one table (concord.ray.write_concord: one version; Lance:
                  lance_ray.write_lance), then reads them back (read_concord /
                  lance_ray.read_lance, materialized): seconds, rows checked (not
                  delta-rs)

Schema: id bigint not null, x bigint not null (id * 7919 mod 1000), v double, name varchar. With --rounds N each
workload runs N rounds, every system once a round, in turn; each figure printed is the
median of its rounds. Prints one markdown table (and, with --json PATH, the raw figures
of every round).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import shutil
import statistics
import sys
import tempfile
import time
import traceback

import pyarrow as pa
import pyarrow.compute as pc

SYSTEMS = ("concord", "lance", "delta")
SCHEMA = pa.schema(
    [
        pa.field("id", pa.int64(), nullable=False),
        pa.field("x", pa.int64(), nullable=False),
        pa.field("v", pa.float64()),
        pa.field("name", pa.string()),
    ]
)
SELECTIVE = "x < 10"  # 1% of the rows, in every file
CLUSTERED = "id < 100000"  # 1% of the rows, in the first file's first row groups


def batch(first: int, n: int) -> pa.Table:
    import numpy as np

    ids = np.arange(first, first + n, dtype=np.int64)
    x = (ids * 7919) % 1000
    columns = [pa.array(ids), pa.array(x), pa.array(ids * 0.5), pc.cast(pa.array(ids), pa.string())]
    return pa.Table.from_arrays(columns, schema=SCHEMA)


# ---------------------------------------------------------------- the systems


class Concord:
    name = "concord"

    def __init__(self, uri: str, create: bool):
        import concord

        self.t = concord.create(uri, SCHEMA) if create else concord.open(uri)

    def append(self, table: pa.Table) -> None:
        self.t.append(table)

    def read(self, where=None) -> pa.Table:
        return self.t.refresh().to_arrow(where=where)


class Lance:
    name = "lance"

    def __init__(self, uri: str, create: bool):
        import lance

        self.lance, self.uri = lance, uri
        if create:
            lance.write_dataset(batch(0, 0), uri, mode="create")

    def append(self, table: pa.Table) -> None:
        self.lance.write_dataset(table, self.uri, mode="append")

    def read(self, where=None) -> pa.Table:
        return self.lance.dataset(self.uri).to_table(filter=where)


class Delta:
    name = "delta"

    def __init__(self, uri: str, create: bool):
        import deltalake

        self.deltalake, self.uri = deltalake, uri
        if create:
            deltalake.write_deltalake(uri, batch(0, 0), mode="append")

    def append(self, table: pa.Table) -> None:
        self.deltalake.write_deltalake(self.uri, table, mode="append")

    def read(self, where=None) -> pa.Table:
        filters = {None: None, SELECTIVE: [("x", "<", 10)], CLUSTERED: [("id", "<", 100_000)]}[where]
        return self.deltalake.DeltaTable(self.uri).to_pyarrow_table(filters=filters)


def system(name: str, uri: str, create: bool):
    return {"concord": Concord, "lance": Lance, "delta": Delta}[name](uri, create)


# ---------------------------------------------------------------- workloads


def pct(values, q):
    values = sorted(values)
    return values[min(len(values) - 1, int(round(q * (len(values) - 1))))]


def timed_appends(s, tables):
    latencies = []
    for table in tables:
        started = time.perf_counter()
        s.append(table)
        latencies.append(time.perf_counter() - started)
    return latencies


def single_small(name, root, n):
    s = system(name, os.path.join(root, f"{name}-small"), True)
    timed_appends(s, [batch(-100 * (i + 1), 100) for i in range(3)])  # warm up
    lat = timed_appends(s, [batch(i * 100, 100) for i in range(n)])
    return {"p50_ms": statistics.median(lat) * 1000, "p99_ms": pct(lat, 0.99) * 1000}


def single_big(name, root, m):
    s = system(name, os.path.join(root, f"{name}-big"), True)
    tables = [batch(i * 1_000_000, 1_000_000) for i in range(m)]
    lat = timed_appends(s, tables)
    return {"p50_ms": statistics.median(lat) * 1000, "rows_per_s": 1_000_000 / statistics.median(lat)}


def huge_phase(name, uri, rows, out):
    try:
        s = system(name, uri, True)
        table = batch(0, rows)
        before = peak_mib()
        started = time.perf_counter()
        s.append(table)
        out.put({"s": time.perf_counter() - started, "input_mib": before, "peak_mib": peak_mib()})
    except Exception:  # noqa: BLE001
        out.put({"error": traceback.format_exc()[-800:]})


def single_huge(name, root, rows=10_000_000):
    ctx = multiprocessing.get_context("spawn")
    out = ctx.Queue()
    proc = ctx.Process(target=huge_phase, args=(name, os.path.join(root, f"{name}-huge"), rows, out))
    proc.start()
    result = out.get()
    proc.join()
    if "error" in result:
        raise RuntimeError(result["error"])
    return result


def writer(name, uri, w, k, barrier, results):
    out = {"latencies": [], "failures": 0, "ok": 0, "errors": []}
    try:
        s = system(name, uri, False)
        barrier.wait()
        out["start"] = time.time()
        for i in range(k):
            started = time.perf_counter()
            try:
                s.append(batch((w * k + i) * 100, 100))
                out["ok"] += 1
                out["latencies"].append(time.perf_counter() - started)
            except Exception as e:  # noqa: BLE001 - a failed append is a data point
                out["failures"] += 1
                if len(out["errors"]) < 3:
                    out["errors"].append(f"{type(e).__name__}: {str(e)[:200]}")
        out["end"] = time.time()
    except Exception:  # noqa: BLE001
        out["errors"].append(traceback.format_exc()[-500:])
        out["failures"] += k
    results.put(out)


def concurrent(name, root, writers, k):
    uri = os.path.join(root, f"{name}-w{writers}")
    system(name, uri, True)
    ctx = multiprocessing.get_context("spawn")
    barrier, results = ctx.Barrier(writers), ctx.Queue()
    procs = [ctx.Process(target=writer, args=(name, uri, w, k, barrier, results)) for w in range(writers)]
    for p in procs:
        p.start()
    outs = [results.get(timeout=3600) for _ in procs]
    for p in procs:
        p.join()
    start = min(o.get("start", time.time()) for o in outs)
    end = max(o.get("end", time.time()) for o in outs)
    lat = [x for o in outs for x in o["latencies"]]
    ok = sum(o["ok"] for o in outs)
    rows = system(name, uri, False).read().num_rows
    return {
        "commits_per_s": ok / (end - start),
        "p50_ms": statistics.median(lat) * 1000 if lat else float("nan"),
        "p99_ms": pct(lat, 0.99) * 1000 if lat else float("nan"),
        "failures": sum(o["failures"] for o in outs),
        "rows_ok": rows == ok * 100,
        "errors": [e for o in outs for e in o["errors"]][:3],
    }


VECTOR_BATCH = 8192


def vector_schema(dim):
    return pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("emb", pa.list_(pa.float32(), dim))])


def vector_batches(rows, dim):
    """`rows` rows in batches of VECTOR_BATCH: ids, and vectors whose values are i / 1000
    (row r's vector is the block after row r - 1's, wrapping every batch)."""
    n = VECTOR_BATCH
    values = pc.divide(pc.cast(pa.array(range(n * dim), pa.int32()), pa.float32()), pa.scalar(1000, pa.float32()))
    emb = pa.FixedSizeListArray.from_arrays(values, dim)
    for first in range(0, rows, n):
        k = min(n, rows - first)
        yield pa.record_batch([pa.array(range(first, first + k), pa.int64()), emb.slice(0, k)], schema=vector_schema(dim))


def peak_mib():
    """This process's peak RSS: VmHWM where there is one (getrusage's figure survives
    exec, so a process spawned from a large parent would report the parent's)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def vector_phase(name, uri, rows, dim, phase, out):
    try:
        started = time.perf_counter()
        if phase == "append":
            reader = pa.RecordBatchReader.from_batches(vector_schema(dim), vector_batches(rows, dim))
            if name == "concord":
                import concord

                concord.create(uri, vector_schema(dim)).append(reader)
            elif name == "lance":
                import lance

                lance.write_dataset(reader, uri, schema=vector_schema(dim))
            else:
                import deltalake

                deltalake.write_deltalake(uri, reader)
            # Concord's local writes are durable when the append returns (each file is
            # fsynced); the peers leave theirs in the page cache. "Durable" is the time
            # until the rows are on disk for all three: the call, then a sync.
            written = time.perf_counter() - started
            os.sync()
            out.put({"s": written, "durable_s": time.perf_counter() - started, "peak_mib": peak_mib()})
            return
        else:
            table = system(name, uri, False).read()
            seconds, peak = time.perf_counter() - started, peak_mib()
            assert table.num_rows == rows, (name, table.num_rows)
            if not table.column("id").slice(0, 1).equals(pa.chunked_array([pa.array([0], pa.int64())])):
                table = table.sort_by("id")
            first = next(vector_batches(rows, dim))
            got = table.slice(0, first.num_rows)
            assert got.column("id").equals(pa.chunked_array([first.column(0)])), name
            emb = got.column("emb").combine_chunks()
            assert emb.cast(pa.list_(pa.float32(), dim)).equals(first.column(1)), f"{name}: vectors read back changed"
            out.put({"s": seconds, "peak_mib": peak})
            return
        out.put({"s": time.perf_counter() - started, "peak_mib": peak_mib()})
    except Exception:  # noqa: BLE001
        out.put({"error": traceback.format_exc()[-800:]})


def vectors(name, root, rows, dim):
    uri = os.path.join(root, f"{name}-vectors")
    os.sync()  # the previous system's writes are not this one's to flush
    result = {}
    ctx = multiprocessing.get_context("spawn")
    for phase in ("append", "read"):
        out = ctx.Queue()
        proc = ctx.Process(target=vector_phase, args=(name, uri, rows, dim, phase, out))
        proc.start()
        result[phase] = out.get()
        proc.join()
        if "error" in result[phase]:
            raise RuntimeError(result[phase]["error"])
    return result


def read_big(name, root, rows):
    s = system(name, os.path.join(root, f"{name}-read"), True)
    per = 1_000_000
    for i in range(0, rows, per):
        s.append(batch(i, min(per, rows - i)))
    times = []
    for _ in range(3):
        started = time.perf_counter()
        table = s.read()
        times.append(time.perf_counter() - started)
        assert table.num_rows == rows, (name, table.num_rows)
        del table
    t = statistics.median(times)
    expected = rows // 100
    filtered = []
    for _ in range(3):
        started = time.perf_counter()
        table = s.read(SELECTIVE)
        filtered.append(time.perf_counter() - started)
        assert table.num_rows == expected and table.num_columns == 4, (name, table.num_rows)
        del table
    clustered = []
    for _ in range(3):
        started = time.perf_counter()
        table = s.read(CLUSTERED)
        clustered.append(time.perf_counter() - started)
        assert table.num_rows == min(rows, 100_000) and table.num_columns == 4, (name, table.num_rows)
        del table
    return {"s": t, "rows_per_s": rows / t, "filtered_s": statistics.median(filtered), "clustered_s": statistics.median(clustered)}


# ---------------------------------------------------------------- report


def small_files(name, root, appends=1_000):
    if name != "concord":
        return None
    import concord

    out = {}
    for mode, properties in (("off", {}), ("on", {"auto_compact.small_fragments": "32"})):
        t = concord.create(os.path.join(root, f"small-{mode}"), SCHEMA)
        if properties:
            t.set_properties(set=properties)
        started = time.perf_counter()
        for i in range(appends):
            t.append(batch(i * 100, 100))
        append_s = time.perf_counter() - started
        reads = []
        for _ in range(3):
            started = time.perf_counter()
            assert t.refresh().to_arrow().num_rows == appends * 100
            reads.append(time.perf_counter() - started)
        out[mode] = {"append_s": append_s, "read_s": statistics.median(reads), "fragments": len(t.fragments())}
    return out


def changes_bench(name, root, rows, versions=100):
    """See the module docs (workload `changes`)."""
    uri = os.path.join(root, f"{name}-changes")
    per = min(1_000_000, rows)
    step = rows // 100
    if name == "concord":
        import concord

        t = concord.create(uri, SCHEMA)
        for i in range(0, rows, per):
            t.append(batch(i, min(per, rows - i)))
    elif name == "delta":
        import deltalake

        cdf = {"delta.enableChangeDataFeed": "true"}
        for i in range(0, rows, per):
            deltalake.write_deltalake(uri, batch(i, min(per, rows - i)), mode="append", configuration=cdf)
        dt = deltalake.DeltaTable(uri)
    else:
        import lance

        for i in range(0, rows, per):
            lance.write_dataset(batch(i, min(per, rows - i)), uri, mode="create" if i == 0 else "append", enable_stable_row_ids=True)
    next_id = rows
    started = time.perf_counter()
    for k in range(versions):
        low = ((k * 37) % 97) * step
        where = f"id >= {low} AND id < {low + step}"
        if k % 3 == 0:
            if name == "concord":
                t.update({"v": "v + 1"}, where=where)
            elif name == "delta":
                dt.update(updates={"v": "v + 1"}, predicate=where)
            else:
                lance.dataset(uri).update({"v": "v + 1"}, where=where)
        elif k % 3 == 1:
            if name == "concord":
                t.delete(where)
            elif name == "delta":
                dt.delete(where)
            else:
                lance.dataset(uri).delete(where)
        else:
            new = batch(next_id, step)
            next_id += step
            if name == "concord":
                t.append(new)
            elif name == "delta":
                deltalake.write_deltalake(uri, new, mode="append")
                dt = deltalake.DeltaTable(uri)
            else:
                lance.write_dataset(new, uri, mode="append")
    history_s = time.perf_counter() - started
    if name == "concord":
        last = t.refresh().version
    elif name == "delta":
        dt = deltalake.DeltaTable(uri)
        last = dt.version()
    else:
        last = lance.dataset(uri).version

    def feed(first):
        if name == "concord":
            return t.changes(first).num_rows
        if name == "delta":
            return deltalake.DeltaTable(uri).load_cdf(starting_version=first + 1, ending_version=last).read_all().num_rows
        delta = lance.dataset(uri).delta(begin_version=first, end_version=last)
        n = delta.get_inserted_rows().read_all().num_rows + delta.get_updated_rows().read_all().num_rows
        return n + delta.get_deleted_row_ids().read_all().num_rows

    out = {"history_s": history_s}
    for span in (1, 10, 100):
        times, got = [], 0
        for _ in range(3):
            started = time.perf_counter()
            got = feed(last - span)
            times.append(time.perf_counter() - started)
        out[f"feed{span}_s"] = statistics.median(times)
        out[f"feed{span}_rows"] = got
    return out


def _ray():
    import ray

    if not ray.is_initialized():
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
        ray.data.DataContext.get_current().enable_progress_bars = False
    return ray


def _ray_rows(b: pa.Table) -> pa.Table:
    ids = b.column("id")
    return pa.Table.from_arrays([ids, pc.multiply(ids, 3), pc.cast(ids, pa.string())], schema=SCHEMA)


def ray_job(name, root, rows, tasks=16):
    if name not in ("concord", "lance"):
        return None
    ray = _ray()
    uri = os.path.join(root, f"{name}-ray")
    ds = ray.data.range(rows, override_num_blocks=tasks).map_batches(_ray_rows, batch_format="pyarrow")
    started = time.perf_counter()
    if name == "concord":
        import concord
        import concord.ray

        concord.create(uri, SCHEMA)
        infos = concord.ray.write_concord(ds, uri)
        assert len({i.version for i in infos}) == 1
    else:
        # Lance's own Ray integration (Ray's built-in write_lance expects a newer pylance).
        import lance_ray

        lance_ray.write_lance(ds, uri)
    write_s = time.perf_counter() - started
    started = time.perf_counter()
    back = concord.ray.read_concord(uri) if name == "concord" else lance_ray.read_lance(uri)
    back = back.materialize()
    read_s = time.perf_counter() - started
    count = back.count()
    assert count == rows, (count, rows)
    return {"write_s": write_s, "read_s": read_s}


def fmt(v, digits=1):
    if isinstance(v, bool):
        return "yes" if v else "NO"
    if isinstance(v, float):
        return f"{v:,.{digits}f}"
    return f"{v:,}" if isinstance(v, int) else str(v)


def median_of(rounds):
    """One result from several rounds' (dicts alike): each number the median of its
    rounds; an error if any round failed."""
    for r in rounds:
        if isinstance(r, dict) and "error" in r:
            return r
    first = rounds[0]
    if isinstance(first, dict):
        return {k: median_of([r[k] for r in rounds]) for k in first}
    if isinstance(first, (int, float)) and not isinstance(first, bool):
        return statistics.median(rounds)
    return first


def report(results, args):
    systems = [s for s in SYSTEMS if s in results]
    lines = ["| workload | " + " | ".join(systems) + " |", "|---|" + "---:|" * len(systems)]

    def row(label, cell):
        cells = []
        for s in systems:
            try:
                cells.append(cell(results[s]))
            except (KeyError, TypeError):
                cells.append("n/a")
        if any(c != "n/a" for c in cells):  # rows of workloads not run are left out
            lines.append(f"| {label} | " + " | ".join(cells) + " |")

    row(
        f"append 100 rows, p50 / p99 ms ({args.small} appends)",
        lambda r: f"{fmt(r['small']['p50_ms'], 2)} / {fmt(r['small']['p99_ms'], 2)}",
    )
    row(f"append 1M rows, p50 ms ({args.big} appends)", lambda r: fmt(r["big"]["p50_ms"], 0))
    row("append 1M rows, rows/s", lambda r: fmt(r["big"]["rows_per_s"], 0))
    row("append 10M rows (one call), s", lambda r: fmt(r["huge"]["s"], 2))
    row(
        "append 10M rows: peak RSS MiB (input table alone)",
        lambda r: f"{fmt(r['huge']['peak_mib'], 0)} ({fmt(r['huge']['input_mib'], 0)})",
    )
    for w in args.writers:
        row(f"{w} processes x {args.appends} appends: commits/s", lambda r, w=w: fmt(r[f"w{w}"]["commits_per_s"]))
        row(f"{w} processes: latency p50 / p99 ms", lambda r, w=w: f"{fmt(r[f'w{w}']['p50_ms'], 0)} / {fmt(r[f'w{w}']['p99_ms'], 0)}")
        row(f"{w} processes: failed appends; all rows present", lambda r, w=w: f"{r[f'w{w}']['failures']}; {fmt(r[f'w{w}']['rows_ok'])}")
    row(f"read {args.read_rows:,} rows into pyarrow, s (median of 3)", lambda r: fmt(r["read"]["s"], 2))
    row("read, M rows/s", lambda r: fmt(r["read"]["rows_per_s"] / 1e6, 1))
    row(f"read rows with {SELECTIVE} (1%, in every page), all columns, s (median of 3)", lambda r: fmt(r["read"]["filtered_s"], 3))
    row(f"read rows with {CLUSTERED} (1%, clustered), all columns, s (median of 3)", lambda r: fmt(r["read"]["clustered_s"], 3))
    v = f"{args.vector_rows:,} x {args.vector_dim} float32"
    row(
        f"{v}: append from a stream, s / peak RSS MiB",
        lambda r: f"{fmt(r['vectors']['append']['s'])} / {fmt(r['vectors']['append']['peak_mib'], 0)}",
    )
    row(f"{v}: append until on disk (the call, then a sync), s", lambda r: fmt(r["vectors"]["append"]["durable_s"]))
    row(
        f"{v}: read into pyarrow, s / peak RSS MiB",
        lambda r: f"{fmt(r['vectors']['read']['s'])} / {fmt(r['vectors']['read']['peak_mib'], 0)}",
    )

    def small(mode):
        return lambda r: (
            f"{fmt(r['smallfiles'][mode]['append_s'])}, {fmt(r['smallfiles'][mode]['read_s'], 3)}, {r['smallfiles'][mode]['fragments']}"
        )

    row("1,000 appends of 100 rows: appends s, then read s, fragments (auto compaction off)", small("off"))
    row("the same with auto_compact.small_fragments=32", small("on"))
    for span in (1, 10, 100):
        row(
            f"changes of the last {span} of 100 versions (1% each) of {args.changes_rows:,} rows: s (rows)",
            lambda r, span=span: f"{fmt(r['changes'][f'feed{span}_s'], 3)} ({fmt(r['changes'][f'feed{span}_rows'])})",
        )
    row("changes: the 100 versions' writes, s", lambda r: fmt(r["changes"]["history_s"], 1))
    row(f"Ray, {args.ray_rows:,} rows from 16 tasks: write, s", lambda r: fmt(r["ray"]["write_s"], 2))
    row("Ray: read back (materialized), s", lambda r: fmt(r["ray"]["read_s"], 2))
    return "\n".join(lines)


def versions():
    out = {}
    for _module, dist in (("concord", "concord"), ("lance", "pylance"), ("deltalake", "deltalake"), ("pyarrow", "pyarrow"), ("ray", "ray")):
        try:
            import importlib.metadata as m

            out[dist] = m.version(dist)
        except Exception:  # noqa: BLE001
            out[dist] = "?"
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--systems", default=",".join(SYSTEMS))
    p.add_argument("--small", type=int, default=100, help="appends of 100 rows (single writer)")
    p.add_argument("--big", type=int, default=5, help="appends of 1M rows (single writer)")
    p.add_argument("--writers", default="8,16")
    p.add_argument("--appends", type=int, default=20, help="appends per writer process")
    p.add_argument("--read-rows", type=int, default=10_000_000)
    p.add_argument("--vector-rows", type=int, default=1_000_000)
    p.add_argument("--vector-dim", type=int, default=768)
    p.add_argument("--ray-rows", type=int, default=10_000_000)
    p.add_argument("--changes-rows", type=int, default=10_000_000)
    p.add_argument(
        "--workloads",
        default="small,big,huge,writers,read,vectors",
        help="which workloads to run (comma-separated; also: ray, smallfiles, changes)",
    )
    p.add_argument("--rounds", type=int, default=1, help="rounds of each workload (figures: the median of the rounds)")
    p.add_argument("--dir", default=None, help="folder for the tables (default: a temporary folder)")
    p.add_argument("--json", default=None)
    args = p.parse_args()
    args.writers = [int(w) for w in args.writers.split(",") if w]
    root = tempfile.mkdtemp(prefix="concord-bench-", dir=args.dir)
    results = {}
    try:
        # Workload by workload, each system in turn: on a shared machine, load that
        # comes and goes then weighs on all systems alike.
        names = args.systems.split(",")
        wanted = args.workloads.split(",")
        steps = [("small", lambda name: single_small(name, root, args.small)), ("big", lambda name: single_big(name, root, args.big))]
        steps += [("huge", lambda name: single_huge(name, root))]
        steps += [(f"w{w}", lambda name, w=w: concurrent(name, root, w, args.appends)) for w in args.writers]
        steps += [("read", lambda name: read_big(name, root, args.read_rows))]
        steps += [("vectors", lambda name: vectors(name, root, args.vector_rows, args.vector_dim))]
        steps += [("ray", lambda name: ray_job(name, root, args.ray_rows))]
        steps += [("smallfiles", lambda name: small_files(name, root))]
        steps += [("changes", lambda name: changes_bench(name, root, args.changes_rows))]
        steps = [(key, step) for key, step in steps if (key if not key.startswith("w") else "writers") in wanted]
        rounds = {}
        for key, step in steps:
            for round_ in range(args.rounds):
                for name in names:
                    print(f"bench: {name} {key} (round {round_ + 1} of {args.rounds}) ...", file=sys.stderr, flush=True)
                    started = time.perf_counter()
                    try:
                        r = step(name)
                    except Exception:  # noqa: BLE001
                        r = {"error": traceback.format_exc()[-800:]}
                        print(r["error"], file=sys.stderr)
                    rounds.setdefault(name, {}).setdefault(key, []).append(r)
                    print(f"bench: {name} {key}: {r} ({time.perf_counter() - started:.0f} s)", file=sys.stderr, flush=True)
                    shutil.rmtree(os.path.join(root), ignore_errors=True)
                    os.makedirs(root, exist_ok=True)
        results = {name: {key: median_of(rs) for key, rs in by_key.items()} for name, by_key in rounds.items()}
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(f"versions: {versions()}; cpus: {os.cpu_count()}; local disk ({tempfile.gettempdir()})")
    print(report(results, args))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"versions": versions(), "results": results, "rounds": rounds}, f, indent=2)


if __name__ == "__main__":
    main()

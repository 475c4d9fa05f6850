"""Functions run in worker processes (multiprocessing, spawn start method): importable
by name from a fresh interpreter."""

from __future__ import annotations

import os
import resource
import time
import traceback

import pyarrow as pa
import pyarrow.compute as pc

import concord
from conftest import rows


def append_many(uri, options, writer, appends, rows_each, barrier, results):
    """Opens the table, waits for the others, appends `appends` times ids of its own
    (each append under its own idempotency key); reports every outcome."""
    out = {"writer": writer, "infos": [], "errors": [], "latencies": []}
    try:
        t = concord.open(uri, storage_options=options)
        barrier.wait()
        out["start"] = time.time()
        for i in range(appends):
            first = (writer * appends + i) * rows_each
            started = time.perf_counter()
            try:
                info = t.append(rows(range(first, first + rows_each)), idempotency_key=f"w{writer}-a{i}")
                out["infos"].append(info.to_dict())
            except concord.ConcordError as e:
                out["errors"].append(f"{type(e).__name__}: {e}")
            out["latencies"].append(time.perf_counter() - started)
        out["end"] = time.time()
    except Exception:  # noqa: BLE001 - reported to the parent
        out["errors"].append(traceback.format_exc())
    results.put(out)


def stage_share(uri, options, writer, rows_each):
    """A job's worker: stages an append of its share; returns the staged id."""
    t = concord.open(uri, storage_options=options)
    first = writer * rows_each
    return t.stage_append(rows(range(first, first + rows_each)))


def read_fragment(fragment, where=None):
    """Reads one pickled fragment; returns its ids."""
    return sorted(fragment.to_arrow(columns=["id"], where=where).column("id").to_pylist())


def peak_rss_mib() -> float:
    """This process's peak resident set size: VmHWM on Linux (the high-water mark of
    this process image; getrusage's ru_maxrss also counts the forking parent's RSS,
    carried across exec), else ru_maxrss."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def measured_append(uri, schema, warm_up, batches):
    """Appends `warm_up` (one batch: the code of the same path paged in, the runtime
    started), then `batches` (an iterable made as it is read) through a
    RecordBatchReader; returns the peak RSS in MiB once imported and opened, before the
    append (after the warm-up), after it; the data's in-memory size in MiB; the rows
    committed."""
    t = concord.open(uri)
    data_bytes = 0

    def counted():
        nonlocal data_bytes
        for batch in batches:
            data_bytes += batch.nbytes
            yield batch

    imported = peak_rss_mib()
    t.append(pa.RecordBatchReader.from_batches(schema, [warm_up]))
    before = peak_rss_mib()
    info = t.append(pa.RecordBatchReader.from_batches(schema, counted()))
    after = peak_rss_mib()
    return imported, before, after, data_bytes / (1 << 20), info.rows_written


def wide_append(uri, total_rows, batch_rows, width):
    """`measured_append` of `total_rows` rows of an id and a vector of `width` bytes of
    random float32 (a `float[width / 4]` column: 3,072 bytes is a 768-float vector)."""
    dim = width // 4
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("v", pa.list_(pa.float32(), dim))])

    def row(start, n, data):
        values = pa.Array.from_buffers(pa.float32(), n * dim, [None, pa.py_buffer(data)])
        vectors = pa.FixedSizeListArray.from_arrays(values, dim)
        return pa.record_batch([pa.array(range(start, start + n), pa.int64()), vectors], schema=schema)

    batches = (
        row(s, min(batch_rows, total_rows - s), os.urandom(min(batch_rows, total_rows - s) * width))
        for s in range(0, total_rows, batch_rows)
    )
    return measured_append(uri, schema, row(-1, 1, bytes(width)), batches)


def big_append(uri, total_rows, batch_rows):
    """`measured_append` of `total_rows` rows of an id, a 64-character name and a score."""
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("name", pa.string()), pa.field("score", pa.float64())])

    def batch(start, n):
        ids = pa.array(range(start, start + n), pa.int64())
        return pa.record_batch(
            [ids, pc.utf8_lpad(pc.cast(ids, pa.string()), 64, "0"), pc.divide(pc.cast(ids, pa.float64()), 7.0)],
            schema=schema,
        )

    batches = (batch(s, min(batch_rows, total_rows - s)) for s in range(0, total_rows, batch_rows))
    warm_up = pa.record_batch([[-1], ["w"], [0.0]], schema=schema)
    return measured_append(uri, schema, warm_up, batches)

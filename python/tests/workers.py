"""Functions run in worker processes (multiprocessing, spawn start method): importable
by name from a fresh interpreter."""

from __future__ import annotations

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


def big_append(uri, total_rows, batch_rows):
    """Appends `total_rows` rows streamed from a RecordBatchReader whose batches are made
    as it is read; returns the peak RSS in MiB once imported and opened, before the
    append (after a one-row warm-up append), after it; the data's in-memory size in
    MiB; the rows committed."""
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("name", pa.string()), pa.field("score", pa.float64())])
    t = concord.open(uri)
    data_bytes = 0

    def batches():
        nonlocal data_bytes
        for start in range(0, total_rows, batch_rows):
            n = min(batch_rows, total_rows - start)
            ids = pa.array(range(start, start + n), pa.int64())
            batch = pa.record_batch(
                [ids, pc.utf8_lpad(pc.cast(ids, pa.string()), 64, "0"), pc.divide(pc.cast(ids, pa.float64()), 7.0)],
                schema=schema,
            )
            data_bytes += batch.nbytes
            yield batch

    # Warm up (the code of the same path paged in, the runtime started), then measure.
    imported = peak_rss_mib()
    t.append(pa.RecordBatchReader.from_batches(schema, [pa.record_batch([[-1], ["w"], [0.0]], schema=schema)]))
    before = peak_rss_mib()
    data_bytes = 0
    info = t.append(pa.RecordBatchReader.from_batches(schema, batches()))
    after = peak_rss_mib()
    return imported, before, after, data_bytes / (1 << 20), info.rows_written

"""Shared pieces of the peer benchmark (scripts/bench-peers).

- the rows every system appends (schema `id bigint not null, val bigint not null`,
  ids unique per writer and append, the same ids `concord stress` uses);
- the worker protocol every writer process follows, so that all systems are timed
  the same way:
    1. the driver starts W worker processes; each one imports its library and
       prepares its K batches, then prints `ready` on stdout;
    2. when all are ready the driver notes the time and writes `go` to each
       worker's stdin;
    3. each worker runs its K appends one after the other and prints one JSON line
       per append: {"writer", "index", "ok", "latency_ms", "end", "error"?, ...},
       where latency is measured from just before the write call to its return
       and `end` is time.monotonic() at its return (one clock for every process on
       Linux, so the driver computes the workload's wall time from it);
- percentiles computed the way `concord stress` computes them (nearest rank over the
  successful appends), so the peers' numbers and stress's are comparable.

Only the standard library here: the driver runs it too, and so do workers that
import pyarrow, lance or deltalake.
"""
import json
import os
import sys
import time
import traceback

SCHEMA_SQL = "id bigint not null, val bigint not null"
ROWS_PER_APPEND = 100


def row_ids(writer, index, rows=ROWS_PER_APPEND):
    """The ids of append `index` of `writer`: distinct across writers and appends."""
    base = (writer + 1) * 1_000_000_000 + index * 10_000
    return list(range(base, base + rows))


def arrow_schema():
    import pyarrow as pa

    return pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("val", pa.int64(), nullable=False)])


def arrow_table(ids):
    import pyarrow as pa

    return pa.table({"id": pa.array(ids, pa.int64()), "val": pa.array([0] * len(ids), pa.int64())}, schema=arrow_schema())


def short_error(exc):
    """One line naming the exception type and the start of its message."""
    text = " ".join(str(exc).split())
    if len(text) > 300:
        text = text[:300] + "..."
    return f"{type(exc).__name__}: {text}"


def emit(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def wait_for_go():
    """Steps 1-2 of the protocol: say ready, block until the driver says go."""
    emit("ready")
    line = sys.stdin.readline()
    if line.strip() != "go":
        sys.exit(f"worker: expected 'go' on stdin, got {line!r}")


def run_worker(writer, appends, prepare, append_fn):
    """The whole protocol for one writer: prepare every payload, wait for go, then
    time each `append_fn(index, payload)` call. `append_fn` returns a dict of extra
    fields (or None) on success and raises on failure; the failure is recorded, the
    worker goes on with its next append."""
    payloads = [prepare(i) for i in range(appends)]
    wait_for_go()
    for index, payload in enumerate(payloads):
        started = time.perf_counter()
        try:
            extra = append_fn(index, payload) or {}
            ok, error = True, None
        except Exception as exc:  # any failure is a result, not a crash
            extra, ok, error = {}, False, short_error(exc)
            if "--debug" in sys.argv:
                traceback.print_exc()
        latency_ms = (time.perf_counter() - started) * 1000.0
        record = {"writer": writer, "index": index, "ok": ok, "latency_ms": latency_ms, "end": time.monotonic()}
        if error is not None:
            record["error"] = error
        record.update(extra)
        emit(record)


def percentile(sorted_values, p):
    """Nearest rank, as `concord stress` computes it: value at round((n-1)*p)."""
    if not sorted_values:
        return None
    return sorted_values[int(round((len(sorted_values) - 1) * p))]


def summarize(records, wall_s):
    """Commits/s, latency percentiles and attempts over one workload's appends."""
    ok = [r for r in records if r.get("ok")]
    lat = sorted(r["latency_ms"] for r in ok)
    attempts = [r["attempts"] for r in ok if r.get("attempts") is not None]
    return {
        "appends": len(records),
        "commits": len(ok),
        "failed": len(records) - len(ok),
        "wall_s": wall_s,
        "commits_per_s": (len(ok) / wall_s) if wall_s and wall_s > 0 else None,
        "latency_ms": {"p50": percentile(lat, 0.5), "p99": percentile(lat, 0.99), "max": lat[-1] if lat else None},
        "attempts": {"mean": sum(attempts) / len(attempts), "max": max(attempts)} if attempts else None,
    }


def cpu_snapshot(pid):
    """(CPU seconds used by process `pid`, busy and total CPU ticks of the machine), to
    tell whether a server was the limit of a run; None where /proc is not there."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        ticks = os.sysconf("SC_CLK_TCK")
        process = (int(fields[11]) + int(fields[12])) / ticks
        with open("/proc/stat") as f:
            cpu = [int(x) for x in f.readline().split()[1:]]
        idle = cpu[3] + cpu[4]
        return process, sum(cpu) - idle, sum(cpu)
    except (OSError, ValueError, IndexError):
        return None


def load_between(before, after, wall_s):
    """What a run between two `cpu_snapshot`s used: the process's share of one core and
    the machine's busy share of all its CPUs."""
    if before is None or after is None or not wall_s:
        return None
    total = after[2] - before[2]
    return {"server_core": round((after[0] - before[0]) / wall_s, 3),
            "machine_busy": round((after[1] - before[1]) / total, 3) if total else None}

#!/usr/bin/env python3
"""The CLI's append of a Parquet file beside the Python append of the same rows.

A benchmark, not a test: CI never runs it. Each round appends the rows of FILE into a
fresh table once from Python (`Table.append` of the pyarrow Table read beforehand,
timed in process) and once with each given `concord` binary (`concord append t FILE`,
a whole process: start-up, decoding the input, encoding, fsync), and reports the
median of the rounds after an untimed first one, with the CPU seconds of each
(Python's from the process clock, the CLI's from the children's rusage) and each
binary's ratio to Python. Several binaries make an A/B of two builds in one run.

    .tools/py-bench-venv/bin/python python/bench/cli_append.py in1m.parquet 7 \\
        target/release/concord [other/concord ...]

FILE must have the columns of SCHEMA below (bench.py's), e.g. written by pyarrow.
"""

from __future__ import annotations

import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

SCHEMA = "id bigint not null, x bigint not null, v double, name varchar"


def children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def main() -> int:
    if len(sys.argv) < 4:
        print(__doc__, file=sys.stderr)
        return 2
    import pyarrow.parquet as pq

    import concord

    source, rounds, binaries = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
    rows = pq.read_table(source)
    root = tempfile.mkdtemp(prefix="concord-cli-append-")
    wall = {name: [] for name in ["python", *binaries]}
    cpu = {name: [] for name in wall}
    try:
        for r in range(rounds + 1):
            uri = os.path.join(root, "py")
            shutil.rmtree(uri, ignore_errors=True)
            table = concord.create(uri, rows.schema)
            started, clock = time.perf_counter(), time.process_time()
            table.append(rows)
            if r:
                wall["python"].append(time.perf_counter() - started)
                cpu["python"].append(time.process_time() - clock)
            for binary in binaries:
                uri = os.path.join(root, "cli")
                shutil.rmtree(uri, ignore_errors=True)
                subprocess.run([binary, "create", uri, "--schema", SCHEMA], check=True, capture_output=True)
                started, clock = time.perf_counter(), children_cpu()
                subprocess.run([binary, "append", uri, source], check=True, capture_output=True)
                if r:
                    wall[binary].append(time.perf_counter() - started)
                    cpu[binary].append(children_cpu() - clock)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    base = statistics.median(wall["python"])
    print(f"{rows.num_rows:,} rows from {source}, median of {rounds} rounds\n")
    print("| append | wall ms | CPU ms | wall vs Python |")
    print("|---|---:|---:|---:|")
    for name in wall:
        w, c = statistics.median(wall[name]), statistics.median(cpu[name])
        print(f"| {name} | {w * 1000:.0f} | {c * 1000:.0f} | {w / base:.2f}x |")
    return 0


if __name__ == "__main__":
    sys.exit(main())

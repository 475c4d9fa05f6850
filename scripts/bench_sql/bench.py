"""The driver of scripts/bench-sql: builds the tables, times the queries, prints the table.

Method (see scripts/bench-sql): each system answers each query once untimed, then
`--runs` times; the median wall time is reported. Concord runs as a whole process
(`concord sql`), DuckDB and pylance in this process. Answers are compared.
"""

import argparse
import concurrent.futures
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import lance
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset  # noqa: F401  (pa.dataset)
import pyarrow.ipc  # noqa: F401  (pa.ipc)
import pyarrow.parquet as pq

SCHEMA = "id bigint not null, x bigint not null, g bigint not null, v double not null, name varchar not null"
POINT = 7654321

QUERIES = {
    "count": "SELECT count(*) AS n FROM t WHERE x > 500",
    "group by": "SELECT g, count(*) AS n, sum(v) AS s, avg(x) AS ax FROM t GROUP BY g ORDER BY g",
    "project": "SELECT v FROM t",
    "point": f"SELECT * FROM t WHERE id = {POINT}",
    "join": "SELECT d.label, count(*) AS n, sum(t.v) AS s FROM t JOIN d ON t.g = d.g WHERE t.x < 100 GROUP BY d.label ORDER BY d.label",
    # The same count as `concord count --where` (no SQL session): Concord's own scan path.
    "count --where": "SELECT count(*) AS n FROM t WHERE x > 500",
}
# Goals of issue 14: aggregates within 1.5x of DuckDB, the point lookup faster than
# both, every query at least as fast as Lance.
AGGREGATES = {"count", "group by", "join", "count --where"}


def say(*a):
    print("bench-sql:", *a, file=sys.stderr, flush=True)


def run(cmd, **kw):
    done = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(map(str, cmd))} failed ({done.returncode}): {done.stderr}")
    return done.stdout


def part(i, rows_per_part, rng):
    ids = pa.array(np.arange(i * rows_per_part, (i + 1) * rows_per_part, dtype=np.int64))
    return pa.table({
        "id": ids,
        "x": pa.array(rng.integers(0, 1000, rows_per_part, dtype=np.int64)),
        "g": pa.array(rng.integers(0, 100, rows_per_part, dtype=np.int64)),
        "v": pa.array(rng.random(rows_per_part)),
        "name": pc.binary_join_element_wise("n", pc.cast(ids, pa.string()), ""),
    })


def build(args, concord):
    """The tables, unless already built with these sizes."""
    root = Path(args.dir)
    marker = root / "built.json"
    wanted = {"rows": args.rows, "fragments": args.fragments}
    if not args.fresh and marker.exists() and json.loads(marker.read_text()) == wanted:
        return root
    if root.exists():
        shutil.rmtree(root)
    (root / "parts").mkdir(parents=True)
    per = args.rows // args.fragments
    rng = np.random.default_rng(14)
    say(f"writing {args.fragments} Parquet files of {per} rows")
    files = []
    for i in range(args.fragments):
        path = root / "parts" / f"part-{i:04}.parquet"
        pq.write_table(part(i, per, rng), path)
        files.append(path)
    t, d = root / "t", root / "d"
    run([concord, "create", t, "--schema", SCHEMA])
    say(f"appending them to a Concord table ({args.fragments} appends, two at a time)")
    started = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        list(pool.map(lambda f: run([concord, "append", t, f]), files))
    say(f"  {time.perf_counter() - started:.1f} s")
    fragments = len(list((t / "data").glob("*.parquet")))
    assert fragments == args.fragments, f"{fragments} data files"
    dims = pa.table({"g": pa.array(range(100), pa.int64()), "label": pa.array([f"label-{g % 10}" for g in range(100)])})
    pq.write_table(dims, root / "d.parquet")
    run([concord, "create", d, "--schema", "g bigint not null, label varchar not null"])
    run([concord, "append", d, root / "d.parquet"])
    say("writing the Lance dataset")
    lance.write_dataset(pa.dataset.dataset([str(f) for f in files]).to_table(), str(root / "t.lance"), max_rows_per_file=per, max_rows_per_group=per)
    lance.write_dataset(dims, str(root / "d.lance"))
    marker.write_text(json.dumps(wanted))
    return root


def concord_runner(concord, root):
    """`concord sql` as a whole process, its rows read back from its Arrow IPC output."""
    def query(sql, name):
        cmd = [concord, "sql", root / "t", sql, "--table", f"d={root / 'd'}", "--format", "arrow"]
        if name == "count --where":
            cmd = [concord, "count", root / "t", "--where", "x > 500"]

        def once():
            done = subprocess.run(cmd, capture_output=True)
            if done.returncode != 0:
                raise SystemExit(f"concord sql failed ({done.returncode}): {done.stderr.decode()}")
            return done.stdout  # parsed after timing
        return once
    return {name: query(sql, name) for name, sql in QUERIES.items()}


def duckdb_runner(root):
    con = duckdb.connect()
    con.execute(f"CREATE VIEW t AS SELECT * FROM read_parquet('{root / 't' / 'data'}/*.parquet')")
    con.execute(f"CREATE VIEW d AS SELECT * FROM read_parquet('{root / 'd' / 'data'}/*.parquet')")
    return {name: (lambda sql=sql: con.sql(sql).to_arrow_table()) for name, sql in QUERIES.items()}


def lance_runner(root):
    ds = lance.dataset(str(root / "t.lance"))
    dims = lance.dataset(str(root / "d.lance")).to_table()

    def group_by():
        sql = QUERIES["group by"].replace("FROM t", "FROM dataset")
        return pa.Table.from_batches(ds.sql(sql).build().to_batch_records())

    def join():
        rows = ds.to_table(columns=["g", "v"], filter="x < 100").join(dims, "g")
        return rows.group_by("label").aggregate([("v", "count"), ("v", "sum")]).sort_by("label")

    return {
        "count": lambda: ds.count_rows(filter="x > 500"),
        "group by": group_by,
        "project": lambda: ds.to_table(columns=["v"]),
        "point": lambda: ds.to_table(filter=f"id = {POINT}"),
        "join": join,
        "count --where": lambda: ds.count_rows(filter="x > 500"),
    }


def timed(f, runs):
    answer = f()  # untimed: caches warm
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        f()
        times.append((time.perf_counter() - started) * 1000)
    return answer, statistics.median(times)


def summary(name, answer):
    """What must agree across systems: counts and ids, from any system's answer."""
    if isinstance(answer, int):
        return answer
    if name == "count --where" and isinstance(answer, bytes):
        return int(answer)  # `concord count` prints one integer
    table = pa.ipc.open_stream(answer).read_all() if isinstance(answer, bytes) else answer
    if name in ("count", "count --where"):
        return table.column(0)[0].as_py()
    if name == "project":
        return table.num_rows
    if name == "point":
        return str(table.column("id")[0].as_py())
    counts = table.column("n" if "n" in table.column_names else "v_count")
    return [str(c.as_py()) for c in counts]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--concord", required=True)
    p.add_argument("--dir", required=True)
    p.add_argument("--rows", type=int, default=10_000_000)
    p.add_argument("--fragments", type=int, default=100)
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--fresh", action="store_true")
    args = p.parse_args()
    # The same relative position at every size (id 7654321 of 10M rows).
    global POINT
    POINT = args.rows * 7654321 // 10_000_000
    QUERIES["point"] = f"SELECT * FROM t WHERE id = {POINT}"
    root = build(args, args.concord)
    systems = {"Concord": concord_runner(args.concord, root), "DuckDB": duckdb_runner(root), "Lance": lance_runner(root)}
    results = {}
    for name in QUERIES:
        for system, runner in systems.items():
            answer, ms = timed(runner[name], args.runs)
            results[(name, system)] = (summary(name, answer), ms)
        agreed = len({json.dumps(results[(name, s)][0]) for s in systems}) == 1
        if not agreed:
            raise SystemExit(f"answers to '{name}' differ: { {s: results[(name, s)][0] for s in systems} }")
        say(f"{name}: " + ", ".join(f"{s} {results[(name, s)][1]:.1f} ms" for s in systems) + " (answers agree)")
    floor = timed(lambda: run([args.concord, "sql", root / "t", "SELECT 1"]), args.runs)[1]

    cores = os.cpu_count()
    print(f"\n{args.rows:,} rows in {args.fragments} fragments; {cores} cores; median of {args.runs} runs after one untimed run; "
          f"Concord = `concord sql` whole process (its floor, `SELECT 1`: {floor:.1f} ms); DuckDB {duckdb.__version__} and "
          f"pylance {lance.__version__} in-process.\n")
    print("| query | Concord ms | DuckDB ms | Lance ms | Concord / DuckDB | Concord / Lance | goal |")
    print("|---|---:|---:|---:|---:|---:|---|")
    for name in QUERIES:
        c, d, l = (results[(name, s)][1] for s in systems)
        if name in AGGREGATES:
            goal = ("met" if c <= 1.5 * d and c <= l else "not met") + ": within 1.5x of DuckDB, at least as fast as Lance"
        elif name == "point":
            goal = ("met" if c < d and c < l else "not met") + ": faster than both"
        else:
            goal = ("met" if c <= l else "not met") + ": at least as fast as Lance"
        print(f"| {name} | {c:.1f} | {d:.1f} | {l:.1f} | {c / d:.2f} | {c / l:.2f} | {goal} |")


if __name__ == "__main__":
    main()

"""TPC-H's 22 queries in process: Concord (concord.sql) beside DataFusion over the same
Parquet files (its Python package, the same engine: the yardstick) and DuckDB.

Run by `scripts/bench-sql --tpch` (an interpreter with concord, datafusion, duckdb
1.5.5 and duckdb-extension-tpch). The tables are generated once with DuckDB's dbgen
and loaded into Concord with their types unchanged (decimal(15,2), date, ...:
tpch_load.py), in DIR (kept between runs). DataFusion and DuckDB read the Concord
tables' own data files (`<table>/data/*.parquet`: valid because no row was deleted).
The queries are DuckDB's (`tpch_queries()`). Each system answers each query once
untimed, then RUNS times; the median per query is reported and summed. The answers
are compared (rows as multisets; numbers to 1e-9 relative or 1e-6 absolute: DataFusion
rounds an average of decimals to 6 places where DuckDB gives a double). A
benchmark: CI never runs it.
"""

from __future__ import annotations

import argparse
import decimal
import glob
import math
import os
import statistics
import subprocess
import sys
import time

import pyarrow as pa
import pyarrow.ipc

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tpch_load  # noqa: E402

TABLES = tpch_load.TABLES


def say(*a):
    print("tpch:", *a, file=sys.stderr, flush=True)


def queries():
    import duckdb

    con = duckdb.connect()
    con.execute(f"LOAD '{extension(duckdb)}'")
    return [(n, q.strip().rstrip(";")) for n, q in con.execute("SELECT query_nr, query FROM tpch_queries() ORDER BY query_nr").fetchall()]


def extension(duckdb):
    import duckdb_extension_tpch

    base = os.path.dirname(duckdb_extension_tpch.__file__)
    return os.path.join(base, "extensions", f"v{duckdb.__version__}", "tpch.duckdb_extension")


def prepare(directory: str, sf: float) -> str:
    """Generates and loads the tables once; returns the folder of the Concord tables."""
    raw = os.path.join(directory, "parquet")
    root = os.path.join(directory, "concord")
    if not os.path.exists(os.path.join(raw, "lineitem.parquet")):
        tpch_load.generate(raw, sf)
    if not os.path.exists(os.path.join(root, "lineitem")):
        if tpch_load.load(raw, root):
            raise SystemExit("loading TPC-H into Concord did not keep its rows or types")
    return root


class Concord:
    name = "concord"

    def __init__(self, root):
        import concord

        self.concord = concord
        self.tables = {t: concord.open(os.path.join(root, t)) for t in TABLES}

    def run(self, q):
        return self.concord.sql(q, self.tables)


class ConcordCli:
    """`concord sql` as a whole process per query (start, open the 8 tables, plan, read,
    write the answer as an Arrow IPC stream, read back here)."""

    name = "concord-cli"

    def __init__(self, root, binary):
        self.args = [binary, "sql", os.path.join(root, "nation"), "--format", "arrow"]
        for t in TABLES:
            self.args += ["--table", f"{t}={os.path.join(root, t)}"]

    def run(self, q):
        done = subprocess.run(self.args + [q], capture_output=True, check=False)
        if done.returncode:
            raise SystemExit(f"concord sql failed ({done.returncode}): {done.stderr.decode()[-2000:]}")
        return pyarrow.ipc.open_stream(done.stdout).read_all()


class DataFusion:
    name = "datafusion"

    def __init__(self, root):
        import datafusion

        self.ctx = datafusion.SessionContext()
        for t in TABLES:
            self.ctx.register_parquet(t, os.path.join(root, t, "data") + "/", file_extension=".parquet")

    def run(self, q):
        return self.ctx.sql(q).to_arrow_table()


class DuckDB:
    name = "duckdb"

    def __init__(self, root):
        import duckdb

        self.con = duckdb.connect()
        for t in TABLES:
            files = sorted(glob.glob(os.path.join(root, t, "data", "*.parquet")))
            self.con.execute(f"CREATE VIEW {t} AS SELECT * FROM read_parquet({files!r})")

    def run(self, q):
        return self.con.execute(q).to_arrow_table()


def rows(table: pa.Table):
    def norm(v):
        if isinstance(v, float):
            return ("f", v)
        if isinstance(v, decimal.Decimal):
            return ("f", float(v))
        return ("v", v)

    return sorted(tuple(norm(v) for v in row.values()) for row in table.to_pylist())


def same(a: pa.Table, b: pa.Table) -> bool:
    if a.num_rows != b.num_rows or a.num_columns != b.num_columns:
        return False
    for ra, rb in zip(rows(a), rows(b)):
        for (ka, va), (kb, vb) in zip(ra, rb):
            if ka == "f" and kb == "f":
                if not math.isclose(va, vb, rel_tol=1e-9, abs_tol=1e-6):
                    return False
            elif va != vb:
                return False
    return True


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--dir", required=True, help="where the generated and loaded tables live (kept)")
    p.add_argument("--sf", type=float, default=1.0)
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--systems", default="concord,datafusion,duckdb")
    p.add_argument("--queries", default="", help="comma-separated query numbers (default: all 22)")
    p.add_argument("--cli", default="", help="a concord binary: adds the system concord-cli (`concord sql` per query, whole process)")
    args = p.parse_args()
    root = prepare(args.dir, args.sf)
    wanted = {int(n) for n in args.queries.split(",") if n}
    qs = [(n, q) for n, q in queries() if not wanted or n in wanted]
    systems = [{"concord": Concord, "datafusion": DataFusion, "duckdb": DuckDB}[s](root) for s in args.systems.split(",")]
    if args.cli:
        systems.append(ConcordCli(root, args.cli))
    times = {s.name: {} for s in systems}
    mismatches = []
    for n, q in qs:
        answers = {}
        for s in systems:
            answers[s.name] = s.run(q)  # untimed: caches warm
            runs = []
            for _ in range(args.runs):
                started = time.perf_counter()
                s.run(q)
                runs.append(time.perf_counter() - started)
            times[s.name][n] = statistics.median(runs)
        first = systems[0].name
        for s in systems[1:]:
            if not same(answers[first], answers[s.name]):
                mismatches.append((n, s.name))
        say(f"q{n:02d} " + "  ".join(f"{s.name} {times[s.name][n] * 1000:8.1f} ms" for s in systems))
    names = [s.name for s in systems]
    print(f"TPC-H scale factor {args.sf:g}, in process, median of {args.runs} runs per query (ms)\n")
    print("| query | " + " | ".join(names) + (" | concord / datafusion |" if "datafusion" in names and "concord" in names else " |"))
    print("|---|" + "---:|" * (len(names) + ("datafusion" in names and "concord" in names)))
    ratio = "datafusion" in names and "concord" in names
    for n, _ in qs:
        cells = [f"{times[s][n] * 1000:.0f}" for s in names]
        if ratio:
            cells.append(f"{times['concord'][n] / times['datafusion'][n]:.2f}x")
        print(f"| q{n} | " + " | ".join(cells) + " |")
    sums = {s: sum(times[s].values()) for s in names}
    cells = [f"{sums[s] * 1000:.0f}" for s in names]
    if ratio:
        cells.append(f"**{sums['concord'] / sums['datafusion']:.2f}x**")
    print("| **sum** | " + " | ".join(cells) + " |")
    if args.cli and "concord" in names:
        cli = systems[-1]
        startup = []
        cli.run("SELECT 1")
        for _ in range(max(args.runs, 5)):
            started = time.perf_counter()
            cli.run("SELECT 1")
            startup.append(time.perf_counter() - started)
        added = {n: times["concord-cli"][n] - times["concord"][n] for n, _ in qs}
        print(
            f"\nconcord-cli minus concord in process, per query: median {statistics.median(added.values()) * 1000:.0f} ms, "
            f"from {min(added.values()) * 1000:.0f} to {max(added.values()) * 1000:.0f} ms; "
            f"`SELECT 1` through the CLI (start-up, the 8 tables opened): {statistics.median(startup) * 1000:.0f} ms"
        )
    for n, s in mismatches:
        print(f"ANSWER DIFFERS: q{n}, {s} vs {names[0]}")
    return 1 if mismatches else 0


if __name__ == "__main__":
    sys.exit(main())

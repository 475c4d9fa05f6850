"""TPC-H loaded into Concord with its types unchanged (decimal(15,2), date, ...).

`generate DIR [--sf N]` (run with an interpreter that has duckdb==1.5.5 and the
duckdb-extension-tpch package) writes each TPC-H table of scale factor N as
DIR/<table>.parquet with DuckDB's dbgen. `load DIR ROOT` (run with one that has
concord) creates ROOT/<table> from each file's Arrow schema, appends the file, and
checks that the table's schema is the file's and its rows are the file's; it prints
rows, seconds and rows/s per table, and a revenue sum computed by Concord's SQL beside
the same sum computed by pyarrow over the file. A benchmark: CI never runs it."""

from __future__ import annotations

import argparse
import decimal
import os
import sys
import time

TABLES = ["region", "nation", "supplier", "customer", "part", "partsupp", "orders", "lineitem"]


def generate(directory: str, sf: float) -> None:
    import duckdb
    import duckdb_extension_tpch

    extension = os.path.join(
        os.path.dirname(duckdb_extension_tpch.__file__), "extensions", f"v{duckdb.__version__}", "tpch.duckdb_extension"
    )
    con = duckdb.connect()
    con.execute(f"LOAD '{extension}'")
    start = time.perf_counter()
    con.execute(f"CALL dbgen(sf = {sf})")
    os.makedirs(directory, exist_ok=True)
    for table in TABLES:
        con.execute(f"COPY {table} TO '{os.path.join(directory, table + '.parquet')}' (FORMAT parquet)")
    print(f"generated TPC-H sf {sf} in {time.perf_counter() - start:.1f} s into {directory}")


def load(directory: str, root: str) -> int:
    import pyarrow as pa
    import pyarrow.parquet as pq

    import concord

    failures = 0
    for table in TABLES:
        path = os.path.join(directory, table + ".parquet")
        file = pq.ParquetFile(path)
        schema = file.schema_arrow
        start = time.perf_counter()
        t = concord.create(os.path.join(root, table), schema)
        t.append(pa.RecordBatchReader.from_batches(schema, file.iter_batches(batch_size=65_536)))
        seconds = time.perf_counter() - start
        t = concord.open(t.uri)
        rows = file.metadata.num_rows
        same_schema = t.schema == schema.remove_metadata()
        same_rows = t.count() == rows
        failures += (not same_schema) + (not same_rows)
        print(
            f"{table:9s} {rows:>9,} rows in {seconds:6.2f} s ({rows / seconds:>10,.0f} rows/s); "
            f"schema {'unchanged' if same_schema else 'CHANGED: ' + str(t.schema)}; rows {'equal' if same_rows else 'DIFFER'}; "
            f"types: {t.schema_definition[:110]}"
        )
    lineitem = os.path.join(root, "lineitem")
    got = concord.sql("select sum(l_extendedprice * (1 - l_discount)) as revenue from t", {"t": lineitem}).column(0)[0].as_py()
    data = pq.read_table(os.path.join(directory, "lineitem.parquet"), columns=["l_extendedprice", "l_discount"])
    price = data.column("l_extendedprice").to_pylist()
    discount = data.column("l_discount").to_pylist()
    expected = sum(p * (1 - d) for p, d in zip(price, discount))
    same = decimal.Decimal(got) == expected
    print(f"revenue by Concord's SQL {got}; by Python's decimals over the file {expected}: {'equal' if same else 'DIFFER'}")
    return failures + (not same)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    g = sub.add_parser("generate")
    g.add_argument("directory")
    g.add_argument("--sf", type=float, default=1.0)
    ld = sub.add_parser("load")
    ld.add_argument("directory")
    ld.add_argument("root")
    args = parser.parse_args()
    if args.command == "generate":
        generate(args.directory, args.sf)
        return 0
    return 1 if load(args.directory, args.root) else 0


if __name__ == "__main__":
    sys.exit(main())

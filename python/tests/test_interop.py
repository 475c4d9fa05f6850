"""Other engines read a table through the Arrow C stream (PyCapsule interface), and
write into one from theirs."""

from __future__ import annotations

import pyarrow as pa
import pytest

import concord
from conftest import rows


def test_duckdb_reads_the_table(local):
    duckdb = pytest.importorskip("duckdb")
    t = local.create()
    t.append(rows(range(1000)))
    t.delete("id >= 900")
    result = duckdb.sql("select count(*), sum(id), min(name) from t where score >= 50").fetchall()
    assert result == [(400, sum(range(500, 900)), "n500")]
    # The latest version, even when the handle is older.
    concord.open(t.uri).append(rows([5000]))
    assert duckdb.sql("select max(id) from t").fetchall() == [(5000,)]


def test_duckdb_results_append(local):
    duckdb = pytest.importorskip("duckdb")
    t = local.create()
    rel = duckdb.sql("select i::bigint as id, 'd' || i::varchar as name, i / 2 as score from range(100) r(i)")
    t.append(rel.arrow() if not hasattr(rel, "__arrow_c_stream__") else rel)
    assert t.count() == 100 and t.to_arrow(where="id = 3").column("name").to_pylist() == ["d3"]


def test_polars_both_ways(local):
    pl = pytest.importorskip("polars")
    t = local.create()
    t.append(pl.DataFrame({"id": [1, 2, 3], "name": ["a", "b", "c"], "score": [0.1, 0.2, 0.3]}))
    # polars reads the table itself, through its Arrow C stream: pl.DataFrame(t) a
    # frame, pl.from_arrow(t) (as for any C stream) a Series of structs, one per row.
    df = pl.DataFrame(t)
    assert df.shape == (3, 3) and sorted(df["id"].to_list()) == [1, 2, 3]
    assert df.schema == {"id": pl.Int64, "name": pl.String, "score": pl.Float64}
    series = pl.from_arrow(t)
    assert sorted(series.struct.unnest()["id"].to_list()) == [1, 2, 3]


def test_pyarrow_dataset_of_a_stream(local):
    t = local.create()
    t.append(rows(range(10)))
    reader = pa.RecordBatchReader.from_stream(t)
    assert reader.schema == t.schema
    assert sum(b.num_rows for b in reader) == 10

"""Every version published as Iceberg metadata over the same Parquet files: pyiceberg
and polars (through pyiceberg's planning) read each version's rows as Concord does."""

from __future__ import annotations

import collections

import pytest

import concord
from conftest import rows


def _multiset(table) -> collections.Counter:
    cols = [table.column(n).to_pylist() for n in table.column_names]
    return collections.Counter(zip(*cols))


def _concord_rows(t, version):
    return _multiset(t.to_arrow(version=version))


def _pyiceberg_properties(store) -> dict:
    """pyiceberg's FileIO settings for the test's store (moto's S3, or none)."""
    o = store.options or {}
    if not o:
        return {}
    return {
        "s3.endpoint": o["AWS_ENDPOINT_URL"],
        "s3.access-key-id": o["AWS_ACCESS_KEY_ID"],
        "s3.secret-access-key": o["AWS_SECRET_ACCESS_KEY"],
        "s3.region": o["AWS_REGION"],
    }


def _pyiceberg_rows(path, properties=None):
    from pyiceberg.table import StaticTable

    return _multiset(StaticTable.from_metadata(path, properties=properties or {}).scan().to_arrow())


def test_pyiceberg_reads_every_version_after_appends_deletes_updates_and_schema_changes(store):
    pytest.importorskip("pyiceberg")
    t = store.create()
    t.append(rows(range(100)))
    t.append(rows(range(100, 150)))
    t.delete("id % 7 = 0")
    t.update({"score": "score + 1"}, where="id < 20")
    t.merge(rows([5, 500]), on="id")
    t.add_column("tag varchar")
    t.rename_column("name", "label")
    t.compact()
    t.overwrite(rows(range(10)).rename_columns(["id", "label", "score"]), where="id < 10")
    path = t.iceberg_metadata_path()
    assert path.startswith("file://" if store.name == "local" else "s3://"), path
    assert path.endswith(f"v{t.refresh().version}.metadata.json")
    for v in range(1, t.version + 1):
        got = _pyiceberg_rows(t.iceberg_metadata_path(version=v), _pyiceberg_properties(store))
        assert got == _concord_rows(t, v), f"version {v}"


def test_publishing_is_idempotent_and_the_cli_prints_the_same_path(local, cli):
    import subprocess

    pytest.importorskip("pyiceberg")
    t = local.create()
    t.append(rows(range(10)))
    first = t.iceberg_metadata_path()
    again = t.iceberg_metadata_path()
    out = subprocess.run([cli, "iceberg", "path", t.uri], capture_output=True, text=True, check=True).stdout.strip()
    assert first == again == out
    # A published version is found by its metadata file and not redone: an object of
    # version 1 removed by hand stays removed when version 2 is published.
    import pathlib

    (pathlib.Path(t.uri) / "_iceberg" / "snap-1.avro").unlink()
    t.append(rows(range(10, 20)))
    out = subprocess.run([cli, "iceberg", "publish", t.uri], capture_output=True, text=True, check=True).stdout.strip()
    assert out.endswith("v2.metadata.json")
    assert _pyiceberg_rows(out) == _concord_rows(t, 2)
    assert not (pathlib.Path(t.uri) / "_iceberg" / "snap-1.avro").exists()


def test_polars_scan_iceberg_reads_a_version_with_deletes(local):
    pl = pytest.importorskip("polars")
    pytest.importorskip("pyiceberg")
    t = local.create()
    t.append(rows(range(50)))
    t.delete("id >= 40")
    df = pl.scan_iceberg(t.iceberg_metadata_path()).collect()
    assert sorted(df["id"].to_list()) == list(range(40))


def test_a_type_iceberg_cannot_read_is_refused_by_name(local):
    t = concord.create(local.uri(), "id bigint not null, big ubigint")
    with pytest.raises(concord.InvalidInputError, match="big"):
        t.iceberg_metadata_path()


DUCKDB_QUERY = """
import json, sys, duckdb, duckdb_extension_avro, duckdb_extension_iceberg, pathlib
con = duckdb.connect()
for module in (duckdb_extension_avro, duckdb_extension_iceberg):
    (ext,) = pathlib.Path(module.__file__).parent.glob("extensions/*/*.duckdb_extension")
    con.execute(f"LOAD '{ext}'")
out = []
for path in sys.argv[1:]:
    rel = con.sql(f"select * from iceberg_scan('{path}')")
    out.append([list(map(str, row)) for row in rel.fetchall()])
print(json.dumps(out))
"""


def _duckdb_rows(paths):
    """Rows of each metadata file as DuckDB 1.5.5's iceberg extension reads them (its own
    venv, CONCORD_TEST_DUCKDB_ICEBERG): multisets of rows as text."""
    import json
    import os
    import subprocess

    python = os.environ.get("CONCORD_TEST_DUCKDB_ICEBERG")
    if not python:
        pytest.skip("CONCORD_TEST_DUCKDB_ICEBERG is not set (scripts/test-python sets it)")
    out = subprocess.run([python, "-c", DUCKDB_QUERY, *paths], capture_output=True, text=True, check=True).stdout
    return [collections.Counter(tuple(r) for r in rows) for rows in json.loads(out)]


def test_duckdb_reads_every_version(local):
    t = local.create()
    t.append(rows(range(100)))
    t.delete("id % 7 = 0")
    t.update({"score": "score + 1"}, where="id < 20")
    t.merge(rows([5, 500]), on="id")
    t.compact()
    t.overwrite(rows(range(10)), where="id < 10")
    versions = list(range(1, t.version + 1))
    got = _duckdb_rows([t.iceberg_metadata_path(version=v) for v in versions])
    for v, duck in zip(versions, got):
        expected = collections.Counter(tuple(map(str, r)) for r in _concord_rows(t, v).elements())
        assert duck == expected, f"version {v}"

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
    t.drop_column("tag")
    t.restore(3)
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


def test_polars_scan_iceberg_reads_every_version(store):
    pl = pytest.importorskip("polars")
    pytest.importorskip("pyiceberg")
    t = store.create()
    t.append(rows(range(50)))
    t.delete("id >= 40")
    t.update({"score": "score + 1"}, where="id < 5")
    t.merge(rows([5, 500]), on="id")
    t.add_column("tag varchar")
    t.compact()
    options = _pyiceberg_properties(store) or None
    for v in range(1, t.version + 1):
        frame = pl.scan_iceberg(t.iceberg_metadata_path(version=v), storage_options=options).collect()
        assert _multiset(frame.to_arrow()) == _concord_rows(t, v), f"version {v}"


def test_a_type_iceberg_cannot_read_is_refused_by_name(local):
    t = concord.create(local.uri(), "id bigint not null, big ubigint")
    with pytest.raises(concord.InvalidInputError, match="big"):
        t.iceberg_metadata_path()


DUCKDB_QUERY = """
import json, sys, duckdb, pathlib
import duckdb_extension_avro, duckdb_extension_httpfs, duckdb_extension_iceberg
spec = json.loads(sys.argv[1])
con = duckdb.connect()
for module in (duckdb_extension_avro, duckdb_extension_httpfs, duckdb_extension_iceberg):
    (ext,) = pathlib.Path(module.__file__).parent.glob("extensions/*/*.duckdb_extension")
    con.execute(f"LOAD '{ext}'")
if spec["secret"]:
    con.execute(spec["secret"])
print(json.dumps([[list(map(str, row)) for row in con.sql(q).fetchall()] for q in spec["queries"]]))
"""


def _duckdb(queries, store=None):
    """The rows of each query as DuckDB 1.5.5 with its iceberg extension returns them
    (its own venv, CONCORD_TEST_DUCKDB_ICEBERG; moto's S3 through httpfs): multisets of
    rows as text."""
    import json
    import os
    import subprocess
    from urllib.parse import urlparse

    python = os.environ.get("CONCORD_TEST_DUCKDB_ICEBERG")
    if not python:
        pytest.skip("CONCORD_TEST_DUCKDB_ICEBERG is not set (scripts/test-python sets it)")
    secret = None
    if store is not None and store.options:
        o = store.options
        endpoint = urlparse(o["AWS_ENDPOINT_URL"]).netloc
        secret = (
            f"CREATE SECRET (TYPE s3, KEY_ID '{o['AWS_ACCESS_KEY_ID']}', SECRET '{o['AWS_SECRET_ACCESS_KEY']}', "
            f"REGION '{o['AWS_REGION']}', ENDPOINT '{endpoint}', URL_STYLE 'path', USE_SSL false)"
        )
    spec = json.dumps({"secret": secret, "queries": list(queries)})
    out = subprocess.run([python, "-c", DUCKDB_QUERY, spec], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    return [collections.Counter(tuple(r) for r in rows) for rows in json.loads(out.stdout)]


def _as_text(counter) -> collections.Counter:
    return collections.Counter(tuple(map(str, r)) for r in counter.elements())


def test_duckdb_reads_every_version(store):
    t = store.create()
    t.append(rows(range(100)))
    t.delete("id % 7 = 0")
    t.update({"score": "score + 1"}, where="id < 20")
    t.merge(rows([5, 500]), on="id")
    t.compact()
    t.overwrite(rows(range(10)), where="id < 10")
    t.restore(2)
    versions = list(range(1, t.version + 1))
    got = _duckdb([f"select * from iceberg_scan('{t.iceberg_metadata_path(version=v)}')" for v in versions], store)
    for v, duck in zip(versions, got):
        assert duck == _as_text(_concord_rows(t, v)), f"version {v}"


def _timestamp_ms(entry) -> int:
    import datetime

    at = datetime.datetime.fromisoformat(entry["timestamp"].replace("Z", "+00:00"))
    return (at - datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)) // datetime.timedelta(milliseconds=1)


def test_engines_travel_to_a_snapshot_by_id_and_by_timestamp(store):
    """The latest metadata file lists every snapshot: pyiceberg, polars and DuckDB read an
    older one by id (= its version) and as of its time (versions within one millisecond
    resolve to the later one)."""
    import datetime

    pl = pytest.importorskip("polars")
    from pyiceberg.table import StaticTable

    t = store.create()
    t.append(rows(range(30)))
    t.delete("id >= 20")
    t.append(rows(range(100, 105)))
    t.update({"score": "score * 2"}, where="id < 5")
    latest = t.iceberg_metadata_path()
    ms = {e["version"]: _timestamp_ms(e) for e in t.history()}
    as_of = {v: max(w for w in ms if ms[w] <= ms[v]) for v in ms}
    table = StaticTable.from_metadata(latest, properties=_pyiceberg_properties(store))
    versions = range(1, t.version + 1)
    queries = []
    for v in versions:
        expected = _concord_rows(t, v)
        assert _multiset(table.scan(snapshot_id=v).to_arrow()) == expected, f"pyiceberg, snapshot {v}"
        snapshot = table.snapshot_as_of_timestamp(ms[v])
        assert _multiset(table.scan(snapshot_id=snapshot.snapshot_id).to_arrow()) == _concord_rows(t, as_of[v]), f"pyiceberg at {v}"
        frame = pl.scan_iceberg(latest, snapshot_id=v, storage_options=_pyiceberg_properties(store) or None).collect()
        assert _multiset(frame.to_arrow()) == expected, f"polars, snapshot {v}"
        at = datetime.datetime.fromtimestamp(ms[v] / 1000, datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f")
        queries += [
            f"select * from iceberg_scan('{latest}', snapshot_from_id={v})",
            f"select * from iceberg_scan('{latest}', snapshot_from_timestamp=TIMESTAMP '{at}')",
        ]
    got = _duckdb(queries, store)
    for i, v in enumerate(versions):
        assert got[2 * i] == _as_text(_concord_rows(t, v)), f"duckdb, snapshot {v}"
        assert got[2 * i + 1] == _as_text(_concord_rows(t, as_of[v])), f"duckdb at {v}"


def _published(store, t) -> set:
    """The versions whose Iceberg metadata file exists."""
    import re

    if store.name == "local":
        import pathlib

        names = [p.name for p in (pathlib.Path(t.uri) / "_iceberg").glob("*")]
    else:
        from urllib.parse import urlparse

        import pyarrow.fs as pafs

        o = store.options
        endpoint = urlparse(o["AWS_ENDPOINT_URL"])
        fs = pafs.S3FileSystem(
            access_key=o["AWS_ACCESS_KEY_ID"],
            secret_key=o["AWS_SECRET_ACCESS_KEY"],
            region=o["AWS_REGION"],
            endpoint_override=endpoint.netloc,
            scheme=endpoint.scheme,
        )
        found = fs.get_file_info(pafs.FileSelector(t.uri.removeprefix("s3://") + "/_iceberg", allow_not_found=True))
        names = [f.base_name for f in found]
    return {int(m.group(1)) for n in names if (m := re.fullmatch(r"v(\d+)\.metadata\.json", n))}


def test_writers_publish_each_version_when_the_table_says_so(local, cli):
    import subprocess

    uri = local.uri()
    run = lambda *args: subprocess.run([cli, *args], capture_output=True, text=True, check=True).stdout  # noqa: E731
    run("create", uri, "--schema", "id bigint not null, name varchar, score double", "--property", "iceberg.publish=true")
    t = concord.open(uri)
    assert t.properties["iceberg.publish"] == "true"
    t.append(rows(range(10)))
    t.delete("id < 3")
    assert _published(local, t) == {0, 1, 2}
    t.set_properties(set={"iceberg.publish": "false"})
    t.append(rows(range(10, 12)))
    assert _published(local, t) == {0, 1, 2}, "off: nothing published"
    run("alter", uri, "set-property", "iceberg.publish=true")
    assert _published(local, t) == {0, 1, 2, 3, 4, 5}, "the next writer publishes the versions before it"
    for v in range(6):
        assert _pyiceberg_rows(t.iceberg_metadata_path(version=v)) == _concord_rows(t, v), f"version {v}"


def test_eight_processes_appending_with_publishing_on_leave_every_version_published(store, cli):
    """8 CLI processes append at once (3 appends each) with iceberg.publish=true: every
    version is published, and pyiceberg and DuckDB count at each version what Concord does."""
    import os
    import subprocess
    import tempfile

    from pyiceberg.table import StaticTable

    t = store.create()
    t.set_properties(set={"iceberg.publish": "true"})
    with tempfile.TemporaryDirectory() as folder:
        files = []
        for w in range(8):
            path = os.path.join(folder, f"w{w}.csv")
            with open(path, "w") as f:
                f.write("id,name,score\n" + "".join(f"{w * 100 + i},n,{i}\n" for i in range(w + 1)))
            files.append(path)
        script = " && ".join(f"{cli} append {t.uri} {{f}} {' '.join(store.cli_args())}" for _ in range(3))
        procs = [subprocess.Popen(["sh", "-c", script.format(f=f)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE) for f in files]
        for p in procs:
            assert p.wait(timeout=300) == 0, p.stderr.read()
    t = t.refresh()
    # Cooperative commits may carry several appends in one version: one snapshot.
    assert t.count() == 3 * sum(range(1, 9)) and t.version <= 1 + 24
    assert _published(store, t) == set(range(t.version + 1))
    latest = StaticTable.from_metadata(t.iceberg_metadata_path(), properties=_pyiceberg_properties(store))
    counts = {v: t.count(version=v) for v in range(t.version + 1)}
    # pyiceberg takes snapshot id 0 for "no id" (the current snapshot): version 0, the
    # empty table, is read from its own metadata file.
    assert len(_pyiceberg_rows(t.iceberg_metadata_path(version=0), _pyiceberg_properties(store))) == 0
    for v, expected in list(counts.items())[1:]:
        assert len(latest.scan(snapshot_id=v).to_arrow()) == expected, f"pyiceberg, version {v}"
    got = _duckdb([f"select count(*) from iceberg_scan('{t.iceberg_metadata_path(version=v)}')" for v in counts], store)
    assert [int(next(iter(c))[0]) for c in got] == list(counts.values())


def test_a_version_left_unpublished_is_published_by_the_next_writer(local):
    """A writer that dies between its commit and its publishing leaves the version without
    metadata (made here by a file where the `_iceberg` folder goes, so publishing fails at
    once). The commit did not fail, and the next writer publishes both versions."""
    import pathlib

    t = local.create()
    t.set_properties(set={"iceberg.publish": "true"})
    t.append(rows(range(10)))
    folder = pathlib.Path(t.uri) / "_iceberg"
    folder.rename(folder.with_name("_iceberg.away"))
    folder.write_text("not a folder")
    info = t.delete("id >= 5")
    assert info.version == 3
    folder.unlink()
    folder.with_name("_iceberg.away").rename(folder)
    assert _published(local, t) == {0, 1, 2}
    t.append(rows(range(20, 22)))
    assert _published(local, t) == {0, 1, 2, 3, 4}
    for v in (3, 4):
        assert _pyiceberg_rows(t.iceberg_metadata_path(version=v)) == _concord_rows(t, v)


def test_killed_writers_leave_versions_the_next_writer_publishes(local, cli, measure):
    """CLI appends killed at random moments (over an append's duration) with publishing
    on: some die between their commit and their publishing. The next writer publishes
    what they left, and every version reads as Concord's (nothing half-written is
    referenced); `concord iceberg publish` does it by hand between kills."""
    import pathlib
    import random
    import signal
    import subprocess
    import time

    t = local.create()
    t.set_properties(set={"iceberg.publish": "true"})
    data = pathlib.Path(local.base) / "rows.csv"
    data.write_text("id,name,score\n" + "".join(f"{i},n,{i}\n" for i in range(50)))
    # Kills spread over an append's duration, measured here (the machine may be loaded).
    started = time.perf_counter()
    subprocess.run([cli, "append", t.uri, str(data)], check=True, capture_output=True)
    took = time.perf_counter() - started
    rng = random.Random(7)
    left = 0
    for i in range(30):
        p = subprocess.Popen([cli, "append", t.uri, str(data)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(rng.uniform(0.3, 1.2) * took)
        p.send_signal(signal.SIGKILL)
        p.wait()
        if _published(local, t.refresh()) != set(range(t.version + 1)):
            left += 1
            if i % 2:
                subprocess.run([cli, "iceberg", "publish", t.uri], check=True, capture_output=True)
    subprocess.run([cli, "append", t.uri, str(data)], check=True, capture_output=True)
    measure(
        f"iceberg: {left} of 30 killed appends left their version unpublished (half then published by hand, the rest by the next writer)"
    )
    t = t.refresh()
    assert _published(local, t) == set(range(t.version + 1))
    for v in range(t.version + 1):
        assert _pyiceberg_rows(t.iceberg_metadata_path(version=v)) == _concord_rows(t, v), f"version {v}"


def test_vacuum_removes_the_iceberg_files_of_removed_versions_only(local):
    import pathlib
    import time

    t = local.create()
    t.set_properties(set={"iceberg.publish": "true"})
    t.append(rows(range(10)))
    t.delete("id < 2")
    t.append(rows(range(10, 12)))
    folder = pathlib.Path(t.uri) / "_iceberg"
    before = {p.name for p in folder.iterdir()}
    time.sleep(1.1)
    t.compact()
    report = t.vacuum("1s", allow_short_retention=True)
    assert report["versions_removed"] == 5
    after = {p.name for p in folder.iterdir()}
    assert {"v0.metadata.json", "snap-1.avro", "v3.metadata.json"} <= before - after
    assert any(n.startswith("pd-") for n in before - after), "the position delete file went with its deletion vector"
    assert _published(local, t) == {t.version}
    assert _pyiceberg_rows(t.iceberg_metadata_path()) == _concord_rows(t, t.version)


def test_column_bounds_prune_files_and_filtered_reads_match(local):
    """Each data file's bounds (from Concord's statistics) let pyiceberg and DuckDB skip
    files; a filter on every bounded type reads the rows Concord reads. A widened column
    (int to bigint) gets its bounds rewritten in the wider type."""
    import datetime
    import decimal

    import pyarrow as pa
    from pyiceberg.expressions import GreaterThanOrEqual, LessThan
    from pyiceberg.table import StaticTable

    schema = "i int, b bigint, d double, s varchar, day date, ts timestamp, money decimal(10, 2), ok boolean"
    t = concord.create(local.uri(), schema)
    utc = datetime.timezone.utc
    for part in range(4):
        ids = list(range(part * 10, part * 10 + 10))
        t.append(
            pa.table(
                {
                    "i": pa.array(ids, pa.int32()),
                    "b": pa.array([i * 1000 for i in ids], pa.int64()),
                    "d": pa.array([i / 4 for i in ids], pa.float64()),
                    "s": pa.array([f"s{i:03}" for i in ids]),
                    "day": pa.array([datetime.date(2024, 1, 1) + datetime.timedelta(days=i) for i in ids], pa.date32()),
                    "ts": pa.array(
                        [datetime.datetime(2024, 1, 1, tzinfo=utc) + datetime.timedelta(hours=i) for i in ids], pa.timestamp("us", "UTC")
                    ),
                    "money": pa.array([decimal.Decimal(i) / 4 - 5 for i in ids], pa.decimal128(10, 2)),
                    "ok": pa.array([part % 2 == 0] * 10),
                }
            )
        )
    filters = {
        "i >= 25": GreaterThanOrEqual("i", 25),
        "b < 5000": LessThan("b", 5000),
        "d >= 7.5": GreaterThanOrEqual("d", 7.5),
        "s >= 's031'": GreaterThanOrEqual("s", "s031"),
        "day < DATE '2024-01-05'": LessThan("day", "2024-01-05"),
        "ts >= TIMESTAMP '2024-01-02 10:00:00'": GreaterThanOrEqual("ts", "2024-01-02T10:00:00+00:00"),
        "money < -3.00": LessThan("money", decimal.Decimal("-3.00")),
    }
    path = t.iceberg_metadata_path()
    table = StaticTable.from_metadata(path)
    files = len(list(table.scan().plan_files()))
    assert files == 4
    duck = _duckdb([f"select * from iceberg_scan('{path}') where {sql}" for sql in filters])
    for (sql, expression), duck_rows in zip(filters.items(), duck):
        expected = _multiset(t.to_arrow(where=sql))
        scan = table.scan(row_filter=expression)
        assert len(list(scan.plan_files())) < files, f"{sql}: no file pruned"
        assert _multiset(scan.to_arrow()) == expected, sql
        assert duck_rows == _as_text(expected), sql
    t.widen_column("i", "bigint")
    widened = StaticTable.from_metadata(t.iceberg_metadata_path())
    scan = widened.scan(row_filter=GreaterThanOrEqual("i", 25))
    assert len(list(scan.plan_files())) == 2
    assert _multiset(scan.to_arrow()) == _multiset(t.to_arrow(where="i >= 25"))


def test_columns_added_with_defaults_read_as_their_defaults_from_iceberg_v3(store):
    """A column added with a default makes the published table Iceberg v3 from that
    version on: data files written before it lack the column and read as its
    `initial-default` (pyiceberg and DuckDB), as Concord reads them."""
    import json

    t = store.create()
    t.append(rows(range(5)))
    t.add_column("tag varchar default 'none'")
    t.add_column("weight double default 1.5")
    t.add_column("since date default DATE '2024-01-02'")
    t.add_column("seen timestamp default TIMESTAMP '2024-01-02 03:04:05.5'")
    t.add_column("level int default 3")
    t.append(rows(range(5, 8)))
    t.delete("id = 1")
    path = t.iceberg_metadata_path()
    metadata = _read_text(store, path)
    assert json.loads(metadata)["format-version"] == 3
    properties = _pyiceberg_properties(store)
    for v in range(1, t.version + 1):
        assert _pyiceberg_rows(t.iceberg_metadata_path(version=v), properties) == _concord_rows(t, v), f"pyiceberg, version {v}"
    versions = list(range(1, t.version + 1))
    got = _duckdb([f"select * from iceberg_scan('{t.iceberg_metadata_path(version=v)}')" for v in versions], store)
    for v, duck in zip(versions, got):
        assert duck == _as_text(_concord_rows(t, v)), f"duckdb, version {v}"


def _read_text(store, uri: str) -> str:
    from pyiceberg.io import load_file_io

    with load_file_io(_pyiceberg_properties(store), uri).new_input(uri).open() as f:
        return f.read().decode()


def test_engines_read_a_parquet_file_the_cli_spliced(store, cli, tmp_path):
    """`concord append` of a pyarrow-written Parquet file of the table's own types copies
    its column chunks (several row groups, a dictionary, NULLs, columns in another
    order): pyiceberg and DuckDB read the rows Concord does, whole and filtered."""
    import subprocess

    import pyarrow as pa
    import pyarrow.parquet as pq

    t = store.create()
    t.set_properties(set={"iceberg.publish": "true"})
    ids = range(5_000)
    data = pa.table(
        {
            "score": pa.array([None if i % 11 == 0 else i / 10 for i in ids], pa.float64()),
            "name": pa.array([f"n{i % 7}" for i in ids], pa.string()),
            "id": pa.array(ids, pa.int64()),
        }
    )
    path = tmp_path / "in.parquet"
    pq.write_table(data, path, row_group_size=1_000)
    subprocess.run([cli, "append", t.uri, str(path), *store.cli_args()], check=True, capture_output=True)
    t = t.refresh()
    expected = _multiset(data.select(["id", "name", "score"]))
    assert _concord_rows(t, t.version) == expected
    if store.name == "local":
        import glob

        (spliced,) = glob.glob(t.uri.removeprefix("file://") + "/data/*.parquet")
        assert pq.ParquetFile(spliced).metadata.num_row_groups == 5, "the input's row groups, copied"
    properties = _pyiceberg_properties(store)
    path = t.iceberg_metadata_path()
    assert _pyiceberg_rows(path, properties) == expected
    from pyiceberg.table import StaticTable

    filtered = StaticTable.from_metadata(path, properties=properties).scan(row_filter="id >= 4990").to_arrow()
    assert sorted(filtered.column("id").to_pylist()) == list(range(4_990, 5_000))
    (duck,) = _duckdb([f"select id, name, score from iceberg_scan('{path}')"], store)
    assert duck == _as_text(expected)


def _lineage(t, version) -> dict:
    """Each live row's (row id, the version that last wrote it) at `version`, by id, from
    Concord's change feed."""
    live = {}
    for c in t.changes(0, version).to_pylist():
        if c["_change_type"] in ("insert", "update_postimage"):
            live[c["_row_id"]] = (c["id"], c["_version"])
        else:
            del live[c["_row_id"]]
    return {row_id: (i, v) for row_id, (i, v) in live.items()}


def test_iceberg_readers_see_concords_row_ids_and_last_updated_versions(store):
    """Row lineage (Iceberg v3): DuckDB's `_row_id` is Concord's row id for every row,
    inserted (derived from its file's first_row_id) or rewritten by update, merge or
    compaction (the file's `_row_id` column); `_last_updated_sequence_number` is the
    version that last wrote the row, or 0 in a compaction's output of rows last written
    at different versions. pyiceberg and polars expose neither and read the same rows."""
    from pyiceberg.table import StaticTable

    t = store.create()
    t.append(rows(range(10)))  # 1
    t.append(rows(range(10, 15)))  # 2
    t.update({"score": "score + 1"}, where="id in (2, 11)")  # 3: rows keep their ids
    t.delete("id in (4, 12)")  # 4
    t.merge(rows([3, 100]), on="id")  # 5: 3 updated, 100 inserted
    t.compact()  # 6
    t.delete("id = 5")  # 7
    t.append(rows([200, 201]))  # 8
    assert t.version == 8
    versions = list(range(1, 9))
    query = "select _row_id, _last_updated_sequence_number, id from iceberg_scan('{}')"
    got = _duckdb([query.format(t.iceberg_metadata_path(version=v)) for v in versions], store)
    for v, duck in zip(versions, got):
        expected = _lineage(t, v)
        seen = {int(r[0]): (int(r[2]), int(r[1])) for r in duck.elements()}
        assert sum(duck.values()) == len(seen) == len(expected), f"version {v}: a row id twice"
        assert {r: i for r, (i, _) in seen.items()} == {r: i for r, (i, _) in expected.items()}, f"version {v}"
        for row_id, (i, last) in seen.items():
            written = expected[row_id][1]
            # Before the compaction every file's rows were written by one version; after
            # it, its output mixes versions 1 to 5 and reads 0 ("not known").
            exact = v < 6 or written > 6
            assert last == (written if exact else 0), f"version {v}, id {i}: {last} != {written}"
        table = StaticTable.from_metadata(t.iceberg_metadata_path(version=v), properties=_pyiceberg_properties(store))
        assert table.format_version == 3
        assert _multiset(table.scan().to_arrow()) == _concord_rows(t, v), f"pyiceberg, version {v}"


def test_pyiceberg_reads_tags_and_branches_by_name(local, cli):
    """`concord iceberg publish --refs`: every tag and branch is an Iceberg ref of one
    metadata file; pyiceberg reads each by name, each as Concord reads that version."""
    import os
    import subprocess

    from pyiceberg.table import StaticTable

    def run(*args):
        return subprocess.run([cli, *args], capture_output=True, text=True, check=True).stdout.strip()

    t = local.create()
    t.append(rows(range(10)))
    run("tag", "create", t.uri, "first")
    run("branch", "create", t.uri, "dev")
    source = os.path.join(os.path.dirname(t.uri), "dev-rows.csv")
    with open(source, "w") as f:
        f.write("id,name,score\n100,x,1.5\n")
    run("--branch", "dev", "append", t.uri, source)
    run("--branch", "dev", "alter", t.uri, "add-column", "extra int")
    t.append(rows(range(10, 15)))
    path = run("iceberg", "publish", t.uri, "--refs")
    table = StaticTable.from_metadata(path)
    assert {name: ref.snapshot_ref_type.value for name, ref in table.refs().items()} == {
        "main": "branch",
        "dev": "branch",
        "first": "tag",
    }

    def read(name):
        snapshot = table.snapshot_by_name(name)
        return sorted(table.scan(snapshot_id=snapshot.snapshot_id).to_arrow().column("id").to_pylist())

    assert read("first") == list(range(10))
    assert read("main") == list(range(15))
    assert read("dev") == list(range(10)) + [100]
    # The latest version's own metadata file names no tag or branch.
    assert set(StaticTable.from_metadata(t.iceberg_metadata_path()).refs()) == {"main"}

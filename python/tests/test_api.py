"""The contract (shared/python-contract.md), call by call: tables, writes, reads."""

from __future__ import annotations

import datetime as dt
import json
import pathlib
import pickle
import subprocess
import time

import pyarrow as pa
import pytest

import concord
from conftest import SCHEMA, rows


def ids(table: pa.Table):
    return sorted(table.column("id").to_pylist())


# ---------------------------------------------------------------- tables


def test_create_with_a_string_schema_and_open(local):
    uri = local.uri()
    t = concord.create(uri, SCHEMA)
    assert isinstance(t, concord.Table)
    assert t.uri == uri and t.version == 0
    assert t.schema == pa.schema(
        [pa.field("id", pa.int64(), nullable=False), pa.field("name", pa.string()), pa.field("score", pa.float64())]
    )
    assert t.schema_definition == SCHEMA
    assert t.properties == {"isolation": "serializable"}
    again = concord.open(uri)
    assert again.version == 0 and again.schema == t.schema
    assert repr(again) == f"concord.Table({uri!r}, version=0)"


def test_create_with_a_pyarrow_schema_maps_types(local):
    schema = pa.schema(
        [
            pa.field("id", pa.int64(), nullable=False),
            pa.field("small", pa.int16()),
            pa.field("i", pa.int32()),
            pa.field("f", pa.float32()),
            pa.field("d", pa.float64()),
            pa.field("s", pa.large_string()),
            pa.field("b", pa.binary()),
            pa.field("day", pa.date32()),
            pa.field("at", pa.timestamp("ns")),
            pa.field("ok", pa.bool_()),
        ]
    )
    t = concord.create(local.uri(), schema)
    assert t.schema_definition == (
        "id bigint not null, small smallint, i int, f float, d double, s varchar, b binary, day date, at timestamp_ntz_ns, ok boolean"
    )
    assert t.schema.field("at").type == pa.timestamp("ns")


def test_a_pyarrow_type_without_a_concord_type_is_invalid_input(local):
    with pytest.raises(concord.InvalidInputError, match="has Arrow type Duration"):
        concord.create(local.uri(), pa.schema([pa.field("xs", pa.duration("s"))]))


def test_uris_file_and_memory(tmp_path):
    path = tmp_path / "f"
    t = concord.create(f"file://{path}", SCHEMA)
    t.append(rows([1]))
    assert concord.open(str(path)).count() == 1
    m = concord.create("memory://py-api/t", SCHEMA)
    m.append(rows([1, 2]))
    assert concord.open("memory://py-api/t").count() == 2, "memory tables are shared within the process"


def test_refresh_moves_the_handle_to_the_latest_version(local):
    t = local.create()
    other = concord.open(t.uri)
    other.append(rows([1]))
    assert t.version == 0 and t.count() == 0, "a handle reads its version"
    assert t.refresh() is t
    assert t.version == 1 and t.count() == 1


def test_a_write_moves_the_handle_to_the_version_it_committed(local):
    t = local.create()
    other = concord.open(t.uri)
    other.append(rows([1]))
    info = t.append(rows([2]))
    assert info.version == 2 and t.version == 2
    assert ids(t.to_arrow()) == [1, 2]


# ---------------------------------------------------------------- writes


def test_commit_info_has_the_contract_attributes(local):
    t = local.create()
    info = t.append(rows([1, 2, 3]))
    assert isinstance(info, concord.CommitInfo)
    assert (info.version, info.operation, info.attempts, info.rows_written, info.rows_deleted) == (1, "append", 1, 3, 0)
    assert isinstance(info.transaction_id, str) and len(info.transaction_id) == 36
    assert info.rebased_over == [] and info.rerun is False and info.idempotent_replay is False
    assert info.committed and info.abandoned is None
    assert pickle.loads(pickle.dumps(info)) == info
    assert info.to_dict()["transaction_id"] == info.transaction_id


def test_every_write(local):
    t = local.create()
    assert t.append(rows(range(10))).rows_written == 10
    info = t.delete("id >= 8")
    assert (info.operation, info.rows_deleted) == ("delete", 2)
    info = t.update(set={"score": "score + 100"}, where="id < 2")
    assert info.operation == "update" and info.rows_written == 2
    assert t.to_arrow(where="id = 1").column("score").to_pylist() == [100.1]
    info = t.merge(pa.table({"id": pa.array([1, 50], pa.int64()), "name": ["one", "fifty"]}), on=["id"])
    assert info.operation == "merge"
    got = {r["id"]: r for r in t.to_arrow().to_pylist()}
    assert got[1]["name"] == "one" and got[1]["score"] == 100.1, "merge changes only the columns its source has"
    assert got[50]["name"] == "fifty" and got[50]["score"] is None
    info = t.overwrite(rows([5, 6]), where="id >= 5")
    assert ids(t.to_arrow()) == [0, 1, 2, 3, 4, 5, 6]
    with pytest.raises(concord.InvalidInputError, match="does not satisfy"):
        t.overwrite(rows([1]), where="id >= 5")
    before = t.version
    t.add_column("qty int not null default 7")
    assert t.to_arrow(columns=["qty"]).column("qty").to_pylist() == [7] * 7
    t.rename_column("qty", "quantity")
    assert "quantity" in t.schema.names
    t.drop_column("quantity")
    assert t.schema.names == ["id", "name", "score"]
    info = t.restore(1)
    assert info.operation == "restore" and ids(t.to_arrow()) == list(range(10))
    assert t.version == before + 4
    info = t.overwrite(rows([42]))
    assert ids(t.to_arrow()) == [42]
    for i in range(5):
        t.append(rows([100 + i]))
    info = t.compact()
    assert info.operation == "compact" and t.count() == 6
    assert t.set_properties({"isolation": "snapshot"}).operation == "set_properties"
    assert t.properties["isolation"] == "snapshot"


def test_write_keyword_arguments(local):
    t = local.create()
    info = t.append(rows([1]), isolation="snapshot", expect_version=0, idempotency_key="k1", max_retries=3, timeout=10.0)
    assert info.version == 1
    with pytest.raises(concord.InvalidInputError, match="isolation"):
        t.append(rows([2]), isolation="linearizable")
    with pytest.raises(concord.InvalidInputError, match="timeout"):
        t.append(rows([2]), timeout=-1.0)
    with pytest.raises(TypeError):
        t.append(rows([2]), 0)  # keyword arguments only
    assert t.version == 1 and t.count() == 1


def test_data_of_every_kind(local):
    t = local.create()
    t.append(rows([1]))
    t.append(rows([2]).to_batches()[0])
    t.append(pa.RecordBatchReader.from_batches(rows([]).schema, rows([3, 4]).to_batches()))
    t.append(rows([5]).to_batches() + rows([6]).to_batches())
    t.append({"id": [7], "name": ["n7"], "score": [0.7]})

    def generate():  # a Python generator behind the reader: streamed, GIL taken per batch
        for i in range(8, 12):
            yield rows([i]).to_batches()[0]

    t.append(pa.RecordBatchReader.from_batches(rows([]).schema, generate()))

    class CStream:  # any object with __arrow_c_stream__
        def __arrow_c_stream__(self, requested_schema=None):
            return rows([12]).__arrow_c_stream__(requested_schema)

    t.append(CStream())
    # Types convert when the values do, exactly (int32 into bigint, int64 text ...).
    t.append(pa.table({"id": pa.array([13], pa.int32()), "name": pa.array(["x"], pa.large_string())}))
    assert ids(t.to_arrow()) == list(range(1, 14))
    with pytest.raises(TypeError):
        t.append(42)


def test_an_append_of_no_rows_commits_nothing(local):
    t = local.create()
    info = t.append(rows([]))
    assert info.abandoned is not None and not info.committed
    assert info.version == 0 and concord.open(t.uri).version == 0


def test_pandas_and_polars_when_installed(local):
    t = local.create()
    pd = pytest.importorskip("pandas")
    t.append(pd.DataFrame({"id": [1, 2], "name": ["a", "b"], "score": [0.1, 0.2]}))
    assert t.count() == 2


def test_idempotency_keys(local):
    t = local.create()
    first = t.append(rows([1, 2]), idempotency_key="load-1")
    again = concord.open(t.uri).append(rows([1, 2]), idempotency_key="load-1")
    assert again.idempotent_replay and again.version == first.version
    assert again.transaction_id == first.transaction_id and not again.committed
    assert concord.open(t.uri).count() == 2, "written once"
    with pytest.raises(concord.InvalidInputError, match="belongs to version 1"):
        t.delete("id = 1", idempotency_key="load-1")
    assert concord.open(t.uri).version == 1
    history = t.history()
    assert history[1]["idempotency_key"] == "load-1"


def test_expect_version_is_compare_and_swap(local):
    t = local.create()
    t.append(rows([1]), expect_version=0)
    with pytest.raises(concord.VersionMovedError) as e:
        t.append(rows([2]), expect_version=0)
    assert (e.value.expected, e.value.latest) == (0, 1)
    assert t.count() == 1


def test_vacuum(local):
    t = local.create()
    for i in range(3):
        t.append(rows([i]))
    report = t.vacuum("7d")
    assert report["versions_removed"] == 0 and report["oldest_retained"] == 0
    report = t.vacuum(dt.timedelta(days=30))
    assert report["versions_removed"] == 0
    with pytest.raises(concord.InvalidInputError, match="allow_short_retention=True"):
        t.vacuum("1s")
    with pytest.raises(concord.InvalidInputError, match="has no unit"):
        t.vacuum("7")
    time.sleep(0.05)
    report = t.vacuum("1ms", allow_short_retention=True)
    assert report["versions_removed"] == 3 and report["oldest_retained"] == 3
    assert t.count() == 3 and [v["version"] for v in t.history()] == [3]


# ---------------------------------------------------------------- staged commits


def test_stage_and_commit_staged(local):
    t = local.create()
    t.append(rows([1, 2, 3]))
    staged = t.stage_delete("id >= 2")
    assert isinstance(staged, str) and t.count() == 3 and t.version == 1
    t.append(rows([4]))
    [info] = t.commit_staged([staged])
    assert info.rerun, "re-ran on the appended row"
    assert ids(t.to_arrow()) == [1]
    ids_ = [t.stage_append(rows([10 + i])) for i in range(3)]
    infos = t.commit_staged(ids_)
    assert len({i.version for i in infos}) == 1, "a job commit: one version"
    assert [i.rows_written for i in infos] == [1, 1, 1]
    with pytest.raises(concord.InvalidInputError, match="commit_staged"):
        t.stage_append(rows([1]), max_retries=3)
    with pytest.raises(concord.InvalidInputError, match="no staged transaction"):
        t.commit_staged(["00000000-0000-0000-0000-000000000000"])
    with pytest.raises(concord.InvalidInputError, match="given twice"):
        t.commit_staged([ids_[0], ids_[0]])
    s1, s2 = t.stage_append(rows([20])), t.stage_append(rows([21]))
    infos = t.commit_staged([s1, s2], together=False)
    assert infos[1].version == infos[0].version + 1


def test_staged_options_hold_at_commit(local):
    t = local.create()
    staged = t.stage_append(rows([1]), idempotency_key="job-7", isolation="snapshot")
    with pytest.raises(concord.InvalidInputError, match="staged with idempotency_key"):
        t.commit_staged([staged], idempotency_key="other")
    [info] = t.commit_staged([staged])
    assert t.history()[-1]["idempotency_key"] == "job-7"
    [again] = t.commit_staged([staged])
    assert again.idempotent_replay and again.version == info.version


# ---------------------------------------------------------------- reads


def test_reads(local):
    t = local.create()
    t.append(rows(range(100)))
    table = t.to_arrow(columns=["name", "id"], where="id >= 90", limit=5)
    assert table.column_names == ["name", "id"] and table.num_rows == 5
    assert t.to_arrow(columns="id").column_names == ["id"]
    reader = t.scan(where="id < 10")
    assert isinstance(reader, pa.RecordBatchReader)
    assert reader.schema == t.schema
    assert reader.read_all().num_rows == 10
    assert t.scan(limit=3).read_all().num_rows == 3
    assert t.count() == 100 and t.count("score > 5") == 49
    with pytest.raises(concord.InvalidInputError, match="unknown column"):
        t.to_arrow(where="nope = 1")
    with pytest.raises(concord.InvalidInputError):
        t.to_arrow(columns=["nope"])


def test_time_travel(local):
    t = local.create()
    t.append(rows([1]))
    time.sleep(0.02)
    middle = dt.datetime.now(dt.timezone.utc)
    time.sleep(0.02)
    t.append(rows([2]))
    assert ids(t.to_arrow(version=1)) == [1]
    assert t.count(version=0) == 0
    assert ids(t.to_arrow(as_of=middle)) == [1]
    assert ids(t.to_arrow(as_of=middle.replace(tzinfo=None))) == [1], "naive datetimes are UTC"
    assert ids(t.to_arrow(as_of=middle.isoformat())) == [1]
    assert t.scan(as_of=middle).read_all().num_rows == 1
    assert t.count(as_of=middle) == 1
    assert concord.open(t.uri, version=1).count() == 1
    assert concord.open(t.uri, as_of=middle).version == 1
    assert concord.open(t.uri, as_of=middle.isoformat()).version == 1
    with pytest.raises(concord.InvalidInputError, match="versions run from 0 to 2"):
        t.to_arrow(version=9)
    with pytest.raises(concord.InvalidInputError, match="no version was committed at or before"):
        t.count(as_of=dt.datetime(2000, 1, 1, tzinfo=dt.timezone.utc))
    with pytest.raises(concord.InvalidInputError, match="RFC 3339"):
        t.count(as_of="yesterday")
    with pytest.raises(concord.InvalidInputError, match="not both"):
        concord.open(t.uri, version=1, as_of=middle)


def test_history_fields(local):
    t = local.create()
    t.append(rows([1]))
    t.delete("id = 1")
    history = t.history()
    assert [h["version"] for h in history] == [0, 1, 2]
    assert [h["operation"] for h in history] == ["create", "append", "delete"]
    for h in history:
        for key in (
            "version",
            "timestamp",
            "operation",
            "read_version",
            "transaction_id",
            "attempts",
            "rebased_over",
            "rerun",
            "idempotency_key",
            "transactions",
        ):
            assert key in h
        assert h["timestamp"].endswith("Z")
        assert h["transactions"][0]["transaction_id"] == h["transaction_id"]


def test_history_equals_the_clis(local, cli):
    t = local.create()
    t.append(rows([1, 2]), idempotency_key="a")
    t.update(set={"score": "score * 2"}, where="id = 1")
    t.delete("id = 2")
    out = subprocess.run([cli, "history", t.uri, "--format", "json"], check=True, capture_output=True, text=True).stdout
    assert t.history() == json.loads(out)


def test_the_table_is_an_arrow_stream_of_its_latest_version(local):
    t = local.create()
    t.append(rows([1, 2, 3]))
    concord.open(t.uri).append(rows([4]))
    assert t.version == 1
    assert ids(pa.table(t)) == [1, 2, 3, 4], "the latest rows"
    assert t.version == 1, "the handle does not move"
    assert pa.RecordBatchReader.from_stream(t).read_all().num_rows == 4


def test_pickled_tables_reopen(local):
    t = local.create()
    t.append(rows([1]))
    copy = pickle.loads(pickle.dumps(t))
    assert (copy.uri, copy.version) == (t.uri, 1)
    copy.append(rows([2]))
    assert t.refresh().count() == 2


def test_fragments(local):
    t = local.create()
    for i in range(4):
        t.append(rows(range(i * 10, i * 10 + 10)))
    t.delete("id < 5")
    fragments = t.fragments()
    assert [f.rows for f in fragments] == [5, 10, 10, 10]
    assert sum(f.to_arrow().num_rows for f in fragments) == 35
    first = fragments[0].to_arrow(columns=["id"], where="id >= 7")
    assert first.column_names == ["id"] and ids(first) == [7, 8, 9]
    copy = pickle.loads(pickle.dumps(fragments[1]))
    assert copy == fragments[1] and copy.id == fragments[1].id and copy.rows == 10
    assert ids(copy.to_arrow()) == list(range(10, 20))
    assert [f.rows for f in t.fragments(version=1)] == [10]
    with pytest.raises(concord.InvalidInputError, match="unknown column"):
        copy.to_arrow(where="nope > 1")


def test_sql(local):
    t = local.create()
    t.append(rows(range(10)))
    result = concord.sql("select count(*) as n, sum(id) as total from t where id >= 5", tables={"t": t})
    assert result.to_pylist() == [{"n": 5, "total": 35}]
    old = concord.open(t.uri, version=0)
    t.append(rows([100]))
    result = concord.sql("select (select count(*) from t) as now, (select count(*) from old) as then", tables={"t": t.uri, "old": old})
    assert result.to_pylist() == [{"now": 11, "then": 0}]
    with pytest.raises(concord.InvalidInputError):
        concord.sql("select nope from t", tables={"t": t})
    with pytest.raises(concord.InvalidInputError, match="only queries"):
        concord.sql("insert into t values (1, 'x', 0.5)", tables={"t": t})
    assert t.count() == 11


def test_automatic_compaction_keeps_small_fragments_few(local, cli):
    """With `auto_compact.small_fragments=8`, the writer whose commit leaves more than 8
    small fragments compacts them after it: from Python and from CLI processes writing
    at once, the fragments stay few and every row stays once."""
    t = local.create()
    with pytest.raises(concord.InvalidInputError, match="auto_compact.small_fragments"):
        t.set_properties(set={"auto_compact.small_fragments": "0"})
    t.set_properties(set={"auto_compact.small_fragments": "8"})
    for i in range(40):
        t.append(rows([i]))
        assert len(t.refresh().fragments()) <= 9
    assert any(h["operation"] == "compact" for h in t.history())
    procs = []
    for w in range(4):
        path = pathlib.Path(local.base) / f"w{w}.csv"
        path.write_text("id,name,score\n" + "".join(f"{100 + w * 10 + i},n,0\n" for i in range(10)))
        script = " && ".join(f"{cli} append {t.uri} {path}" for _ in range(5))
        procs.append(subprocess.Popen(["sh", "-c", script], stderr=subprocess.PIPE))
    for p in procs:
        assert p.wait(timeout=300) == 0, p.stderr.read()
    t.refresh()
    ids = sorted(t.to_arrow(columns=["id"]).column("id").to_pylist())
    assert ids == sorted(list(range(40)) + [100 + w * 10 + i for w in range(4) for i in range(10)] * 5)
    assert len(t.fragments()) <= 9 + 4, "at most one commit per writer past the last compaction"

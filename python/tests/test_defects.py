"""Defects a new user found (issue 19), from the Python package: keys in job commits,
time travel and column names in SQL, values that do not fit, names in quotes."""

from __future__ import annotations

import datetime as dt

import pyarrow as pa
import pytest

import concord
from conftest import rows


def test_a_staged_key_already_committed_replays_in_a_job_commit(local):
    t = local.create()
    t.append(rows([1, 2]), idempotency_key="K1")
    a = t.stage_append(rows([1, 2]), idempotency_key="K1")
    b = t.stage_append(rows([10]))
    first, second = t.commit_staged([a, b])
    assert first.idempotent_replay and first.version == 1
    assert not second.idempotent_replay and second.version == 2
    assert t.count() == 3, "K1's rows once"
    with pytest.raises(concord.InvalidInputError, match="K2"):
        t.commit_staged([t.stage_append(rows([3]), idempotency_key="K2"), t.stage_append(rows([4]), idempotency_key="K2")])


def test_a_job_key_makes_a_retried_job_replay(local):
    t = local.create()
    job = [t.stage_append(rows([i])) for i in range(3)]
    infos = t.commit_staged(job, idempotency_key="job-1")
    assert {i.version for i in infos} == {1}
    # The whole job run again (fresh staged ids) under its key: nothing twice.
    again = t.commit_staged([t.stage_append(rows([i])) for i in range(3)], idempotency_key="job-1")
    assert [i.idempotent_replay for i in again] == [True] * 3 and {i.version for i in again} == {1}
    assert t.count() == 3 and concord.open(t.uri).version == 1


def test_job_members_apply_in_order(local):
    t = local.create()
    t.append(rows(range(4)))
    delete = t.stage_delete("id = 1")
    update = t.stage_update(set={"name": "'z'"}, where="id = 2")
    infos = t.commit_staged([delete, update])
    assert {i.version for i in infos} == {2}
    got = {r["id"]: r["name"] for r in t.to_arrow().to_pylist()}
    assert got == {0: "n0", 2: "z", 3: "n3"}


def test_sql_time_travel_and_names(local):
    t = local.create("CustomerId bigint not null, Name varchar")
    t.append(pa.table({"CustomerId": pa.array([1], pa.int64()), "Name": ["a"]}))
    then = dt.datetime.now(dt.timezone.utc)
    t.append(pa.table({"CustomerId": pa.array([2], pa.int64()), "Name": ["b"]}))
    result = concord.sql("select count(*) as n from t where customerid > 0", tables={"t": t.uri}, as_of=then)
    assert result.to_pylist() == [{"n": 1}]
    assert concord.sql("select CustomerId from t order by 1", tables={"t": t}).column(0).to_pylist() == [1, 2]


def test_values_that_do_not_fit_are_refused(local):
    t = local.create("id bigint not null, x timestamp, f float, d double")
    nanos = pa.table({"id": pa.array([1], pa.int64()), "x": pa.array([1_700_000_000_123_456_789], pa.timestamp("ns"))})
    with pytest.raises(concord.InvalidInputError, match="'x'"):
        t.append(nanos)
    t.append(pa.table({"id": pa.array([1], pa.int64()), "d": pa.array([1.5])}))
    with pytest.raises(concord.InvalidInputError, match="overflow"):
        t.update(set={"id": "id + 9223372036854775807"})
    with pytest.raises(concord.InvalidInputError, match="'f'"):
        t.update(set={"f": "16777217"})
    assert t.count() == 1 and t.to_arrow().column("id").to_pylist() == [1]


def test_any_column_name(local):
    schema = pa.schema([pa.field("Customer ID", pa.int64(), nullable=False), pa.field("été", pa.int32())])
    t = concord.create(local.uri(), schema)
    t.append(pa.table({"Customer ID": pa.array([5], pa.int64()), "été": pa.array([1], pa.int32())}))
    assert t.count('"Customer ID" = 5') == 1
    t.rename_column("été", '"a b"')
    assert t.schema.names == ["Customer ID", "a b"]

"""The change feed from Python: ``Table.changes`` and consumers (the contract's
``t.changes(...)`` and ``t.consumer(name)``), on local disk and moto S3."""

from __future__ import annotations

import datetime as dt

import pyarrow as pa
import pytest

import concord
from conftest import rows

FEED = ["_change_type", "_row_id", "_version", "_txn_id", "_committed_at"]


def test_changes_give_each_writes_rows_on_stable_ids(store):
    t = store.create()
    t.append(rows([1, 2, 3]))  # v1
    t.update({"score": "score + 10"}, where="id = 1")  # v2
    t.delete("id = 2")  # v3
    t.merge(rows([3, 4], offset=5), on="id")  # v4
    feed = t.changes(1)
    assert isinstance(feed, pa.Table)
    assert feed.column_names == ["id", "name", "score"] + FEED
    kinds = list(zip(feed["_version"].to_pylist(), feed["_change_type"].to_pylist(), feed["id"].to_pylist(), feed["_row_id"].to_pylist()))
    assert sorted(k[:3] for k in kinds) == [
        (2, "update_postimage", 1),
        (2, "update_preimage", 1),
        (3, "delete", 2),
        (4, "insert", 4),
        (4, "update_postimage", 3),
        (4, "update_preimage", 3),
    ]
    # Within a transaction, the rows it removed come first; an update's two rows share a row id.
    removed = {"delete", "update_preimage"}
    for v in (2, 3, 4):
        mine = [k[1] for k in kinds if k[0] == v]
        assert mine == sorted(mine, key=lambda kind: kind not in removed), mine
    pairs = {}
    for _, kind, id_, row_id in kinds:
        if kind.startswith("update"):
            pairs.setdefault(id_, set()).add(row_id)
    assert all(len(r) == 1 for r in pairs.values()), "an update keeps its row id"
    assert [k[0] for k in kinds] == [2, 2, 3, 4, 4, 4]
    assert pa.types.is_timestamp(feed.schema.field("_committed_at").type)
    assert t.changes(1, 2).num_rows == 2
    only = t.changes(0, columns=["id"], where="id = 4")
    assert only.column_names == ["id"] + FEED and only.num_rows == 1
    net = t.changes(0, net=True)
    assert sorted(zip(net["_change_type"].to_pylist(), net["id"].to_pylist())) == [("insert", 1), ("insert", 3), ("insert", 4)]
    # By time (UTC): after the version current then. Versions' times have nanoseconds
    # (a datetime holds microseconds: the history's text names the version exactly).
    at = t.history()[3]["timestamp"]
    assert t.changes(from_time=at).num_rows == 3
    assert feed.schema.field("_committed_at").type == pa.timestamp("ns", tz="UTC")


def test_bad_ranges_raise_typed_errors(local):
    t = local.create()
    t.append(rows([1]))
    with pytest.raises(concord.InvalidInputError, match="after its end"):
        t.changes(1, 0)
    with pytest.raises(concord.InvalidInputError, match="not retained"):
        t.changes(0, 9)
    with pytest.raises(concord.InvalidInputError, match="no consumer named"):
        t.consumer("nobody").read()


def test_consumers_read_move_and_hold_vacuum(local):
    t = local.create()
    t.append(rows([1, 2]))  # v1
    c = t.consumer("etl")
    assert c.create().version == 1
    with pytest.raises(concord.TableExistsError):
        c.create()
    t.append(rows([3]))  # v2
    assert c.read().num_rows == 1
    assert c.read().num_rows == 1, "reading moves nothing"
    moved = c.advance()
    assert moved.version == 2 and c.version == 2
    with pytest.raises(concord.VersionMovedError):
        c.advance(to_version=1, expected_version=1)
    assert [i.name for i in t.consumers()] == ["etl"]
    c.advance(to_version=1)
    t.append(rows([4]))  # v3
    report = t.vacuum(dt.timedelta(0), allow_short_retention=True)
    assert report["oldest_retained"] == 1
    assert c.read().num_rows == 2
    c.drop()
    with pytest.raises(concord.InvalidInputError):
        c.info()

"""Nested columns from pyarrow: lists, structs, maps and fixed-size lists (vectors)
round-trip exactly, schema included, with NULL at every level; nested fields filter
and evolve by id; what does not fit is refused naming the column."""

from __future__ import annotations

import pyarrow as pa
import pytest

import concord


def nested_table() -> pa.Table:
    user = pa.struct([pa.field("id", pa.int64(), nullable=False), pa.field("name", pa.string())])
    payload = pa.struct([pa.field("user", user), pa.field("scores", pa.list_(pa.float64()))])
    return pa.table(
        {
            "id": pa.array([1, 2, 3, 4], pa.int64()),
            "tags": pa.array([["a", "b"], None, [None, "c"], []], pa.list_(pa.string())),
            "payload": pa.array(
                [
                    {"user": {"id": 7, "name": "ann"}, "scores": [1.5, None]},
                    None,
                    {"user": None, "scores": None},
                    {"user": {"id": 8, "name": None}, "scores": []},
                ],
                payload,
            ),
            "attrs": pa.array([[("x", [1, 2])], None, [("y", None), ("z", [])], []], pa.map_(pa.string(), pa.list_(pa.int32()))),
            "emb": pa.array([[0.5, -1.0, 2.25], None, [1.0, None, 3.0], [0.0, 0.0, 0.0]], pa.list_(pa.float32(), 3)),
            "deep": pa.array([[[{"k": 1}]], [[None], []], None, [None]], pa.list_(pa.list_(pa.struct([("k", pa.int16())])))),
        }
    )


def test_nested_types_round_trip_with_nulls_at_every_level(local):
    data = nested_table()
    t = concord.create(local.uri(), data.schema)
    assert t.schema_definition == (
        "id bigint, tags list<varchar>, payload struct<user struct<id bigint not null, name varchar>, scores list<double>>, "
        "attrs map<varchar, list<int>>, emb float[3], deep list<list<struct<k smallint>>>"
    )
    t.append(data)
    back = t.to_arrow()
    assert back.schema == data.schema
    assert back.equals(data)
    assert t.count("payload.user.id = 7") == 1
    assert t.count("array_has(tags, 'c')") == 1
    assert t.count("emb[3] = 3.0") == 1
    assert t.to_arrow(where="payload.user.name IS NULL AND payload.user IS NOT NULL").column("id").to_pylist() == [4]


def test_large_and_view_lists_are_stored_as_lists_and_vectors_take_lists_of_their_size(local):
    t = concord.create(local.uri(), "v float[2], l list<bigint>")
    t.append(pa.table({"v": pa.array([[1.0, 2.0]], pa.list_(pa.float32())), "l": pa.array([[1, 2]], pa.large_list(pa.int64()))}))
    back = t.to_arrow()
    assert back.schema.field("v").type == pa.list_(pa.float32(), 2)
    assert back.schema.field("l").type == pa.list_(pa.int64())
    with pytest.raises(concord.InvalidInputError, match="a list of 3 values.*column 'v'"):
        t.append(pa.table({"v": pa.array([[1.0, 2.0, 3.0]], pa.list_(pa.float32()))}))
    with pytest.raises(concord.InvalidInputError, match="'l'"):
        t.append(pa.table({"l": pa.array([[1.5]], pa.list_(pa.float64()))}))


def test_a_null_in_a_not_null_nested_field_is_refused_naming_the_column(local):
    user = pa.struct([pa.field("id", pa.int64(), nullable=False)])
    t = concord.create(local.uri(), pa.schema([pa.field("u", user)]))
    bad = pa.StructArray.from_arrays([pa.array([None], pa.int64())], fields=[pa.field("id", pa.int64())])
    with pytest.raises(concord.InvalidInputError, match="NULL in id.*column 'u'"):
        t.append(pa.table({"u": bad}))
    assert t.to_arrow().num_rows == 0


def test_merge_on_a_nested_key_is_refused_by_name(local):
    t = concord.create(local.uri(), "id bigint, tags list<varchar>")
    t.append(pa.table({"id": [1], "tags": pa.array([["a"]], pa.list_(pa.string()))}))
    with pytest.raises(concord.InvalidInputError, match="'tags' is list<varchar>: merge keys are flat columns"):
        t.merge(pa.table({"id": [1], "tags": pa.array([["a"]], pa.list_(pa.string()))}), on=["tags"])


def test_struct_fields_are_added_renamed_widened_and_dropped_by_path(local):
    t = concord.create(local.uri(), "id bigint, p struct<a int, b varchar>")
    t.append(pa.table({"id": [1], "p": pa.array([{"a": 1, "b": "x"}], pa.struct([("a", pa.int32()), ("b", pa.string())]))}))
    t.add_column("p.c double")
    t.rename_column("p.b", "bee")
    t.widen_column("p.a", "bigint")
    t.drop_column("p.c")
    assert t.schema_definition == "id bigint, p struct<a bigint, bee varchar>"
    assert t.to_arrow().column("p").to_pylist() == [{"a": 1, "bee": "x"}]
    with pytest.raises(concord.InvalidInputError, match="not a struct"):
        t.add_column("p.a.z int")


def test_list_views_are_stored_as_lists(local):
    t = concord.create(local.uri(), "l list<bigint>")
    t.append(pa.table({"l": pa.array([[1, 2], None, []], pa.list_view(pa.int64()))}))
    assert t.to_arrow().column("l").to_pylist() == [[1, 2], None, []]

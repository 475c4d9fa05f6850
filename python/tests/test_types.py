"""Column types from pyarrow: every flat Arrow type a data team has round-trips
exactly, schema included; equivalent types are stored as their canonical one; what
cannot be kept exactly is refused, naming the column and the nearest type."""

from __future__ import annotations

import datetime
import uuid
from decimal import Decimal

import pyarrow as pa
import pytest

import concord


def every_flat_type() -> pa.Table:
    u = uuid.UUID("550e8400-e29b-41d4-a716-446655440000").bytes
    return pa.table(
        {
            "ok": pa.array([True, None, False]),
            "i8": pa.array([-128, None, 127], pa.int8()),
            "i16": pa.array([-32768, None, 32767], pa.int16()),
            "i32": pa.array([-(2**31), None, 2**31 - 1], pa.int32()),
            "i64": pa.array([-(2**63), None, 2**63 - 1], pa.int64()),
            "u8": pa.array([0, None, 255], pa.uint8()),
            "u16": pa.array([0, None, 65535], pa.uint16()),
            "u32": pa.array([0, None, 2**32 - 1], pa.uint32()),
            "u64": pa.array([0, None, 2**64 - 1], pa.uint64()),
            "f32": pa.array([0.1, None, -1.5], pa.float32()),
            "f64": pa.array([float("inf"), None, -0.0], pa.float64()),
            "money": pa.array([Decimal("-9999999999999.99"), None, Decimal("0.01")], pa.decimal128(15, 2)),
            "wide": pa.array([Decimal("1234567890123456789012345678.0123456789"), None, Decimal(0)], pa.decimal128(38, 10)),
            "huge": pa.array([Decimal("1" * 60 + ".5"), None, Decimal("-1")], pa.decimal256(61, 1)),
            "s": pa.array(["é", None, ""], pa.string()),
            "raw": pa.array([b"\x00\xff", None, b""], pa.binary()),
            "fixed": pa.array([b"\x00" * 16, None, b"\xab" * 16], pa.binary(16)),
            "id": pa.array([u, None, bytes(16)], pa.uuid()),
            "day": pa.array([datetime.date(2024, 2, 29), None, datetime.date(1, 1, 1)], pa.date32()),
            "clock": pa.array([datetime.time(23, 59, 59, 999999), None, datetime.time(0)], pa.time64("us")),
            "at": pa.array([1_700_000_000_123_456, None, -1], pa.timestamp("us", tz="UTC")),
            "at_ns": pa.array([1_700_000_000_123_456_789, None, -1], pa.timestamp("ns", tz="UTC")),
            "wall": pa.array([1_700_000_000_123_456, None, 0], pa.timestamp("us")),
            "wall_ns": pa.array([1_700_000_000_123_456_789, None, 0], pa.timestamp("ns")),
        }
    )


def test_every_flat_type_round_trips_exactly(local):
    data = every_flat_type()
    t = concord.create(local.uri(), data.schema)
    assert t.schema_definition.startswith("ok boolean, i8 tinyint, i16 smallint, i32 int, i64 bigint, u8 utinyint")
    assert "money decimal(15, 2), wide decimal(38, 10), huge decimal(61, 1)" in t.schema_definition
    assert "fixed fixed(16), id uuid, day date, clock time, at timestamp, at_ns timestamp_ns, wall timestamp_ntz" in t.schema_definition
    t.append(data)
    back = t.to_arrow()
    assert back.schema == data.schema
    assert back.equals(data)
    assert t.count("money = -9999999999999.99 and u64 = 0 and i64 = -9223372036854775808 and at_ns > '2023-11-14T22:13:20.123456788Z'") == 1


def test_equivalent_arrow_types_are_stored_as_their_canonical_type(local):
    t = concord.create(local.uri(), "s varchar, day date, at timestamp, n bigint")
    data = pa.table(
        {
            "s": pa.array(["a", "b", "a"]).dictionary_encode(),
            "day": pa.array([0, 86_400_000, None], pa.date64()),
            "at": pa.array([1_000, 2_000, None], pa.timestamp("ms", tz="Europe/Paris")),
            "n": pa.array([1, 2, 3], pa.int8()),
        }
    )
    t.append(data)
    back = t.to_arrow()
    assert back.schema == pa.schema([("s", pa.string()), ("day", pa.date32()), ("at", pa.timestamp("us", tz="UTC")), ("n", pa.int64())])
    assert back.column("s").to_pylist() == ["a", "b", "a"]
    assert back.column("at").cast(pa.int64()).to_pylist() == [1_000_000, 2_000_000, None], "the same instants"
    large = pa.table(
        {
            "s": pa.array(["x"], pa.large_string()),
            "day": pa.array([1], pa.date32()),
            "at": pa.array([None], pa.timestamp("us")),
            "n": pa.array([1], pa.uint32()),
        }
    )
    t.append(large)
    assert t.count("s = 'x'") == 1


def test_values_a_type_cannot_keep_are_refused(local):
    with pytest.raises(concord.InvalidInputError, match="nearest type is timestamp"):
        concord.create(local.uri(), pa.schema([pa.field("at", pa.timestamp("ms", tz="Europe/Paris"))]))
    t = concord.create(local.uri(), "money decimal(5, 2), day date, at timestamp, n utinyint, wall timestamp_ntz")
    cases = [
        ("money", pa.array([Decimal("1.234")], pa.decimal128(6, 3)), "1.234"),
        ("money", pa.array([Decimal("1000.00")], pa.decimal128(6, 2)), "1000.00"),
        ("day", pa.array([86_400_001], pa.date64()), "day"),
        ("at", pa.array([1_700_000_000_123_456_789], pa.timestamp("ns")), "123456789"),
        ("n", pa.array([-1], pa.int64()), "-1"),
        ("wall", pa.array([0], pa.timestamp("us", tz="UTC")), "timestamp_ntz"),
    ]
    for column, values, named in cases:
        with pytest.raises(concord.InvalidInputError, match=named):
            t.append(pa.table({column: values}))
    assert t.count() == 0


def test_widen_column(local):
    t = concord.create(local.uri(), "n int, r float, s smallint")
    t.append(pa.table({"n": pa.array([2**31 - 1], pa.int32()), "r": pa.array([0.5], pa.float32())}))
    info = t.widen_column("n", "bigint")
    assert info.operation == "widen_column"
    t.widen_column("r", "double")
    t.append(pa.table({"n": pa.array([2**63 - 1]), "r": pa.array([0.1])}))
    assert t.to_arrow(columns=["n", "r"]).to_pydict() == {"n": [2**31 - 1, 2**63 - 1], "r": [0.5, 0.1]}
    with pytest.raises(concord.InvalidInputError, match="does not widen"):
        t.widen_column("n", "int")
    staged = t.stage_widen_column("s", "int")
    t.commit_staged([staged])
    assert t.schema == pa.schema([("n", pa.int64()), ("r", pa.float64()), ("s", pa.int32())])

"""A big append streamed from a RecordBatchReader stays in bounded memory: 10M rows
(about 800 MiB as Arrow: an id, a 64-character name, a score) written from a generator, in a fresh process whose peak RSS
is measured (VmHWM, else resource.getrusage)."""

from __future__ import annotations

import multiprocessing
import os

import concord
import workers
from conftest import SCHEMA

ROWS = int(os.environ.get("CONCORD_TEST_BIG_ROWS", 10_000_000))
# Peak RSS of the whole process (Python, pyarrow, the extension's code and the write),
# and what the append adds to it.
BOUND_MIB = 400
GROWTH_BOUND_MIB = 250


def test_a_10m_row_append_streams_in_bounded_memory(local, measure):
    t = local.create(SCHEMA)
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(1) as pool:
        imported, before, after, data_mib, written = pool.apply(workers.big_append, (t.uri, ROWS, 65_536))
    assert written == ROWS and concord.open(t.uri).count() == ROWS + 1
    growth = after - before
    measure(
        f"{ROWS:,} rows ({data_mib:.0f} MiB as Arrow) appended from a streaming reader: peak RSS {after:.0f} MiB "
        f"({imported:.0f} MiB once imported, {before:.0f} MiB after a one-row append: +{growth:.0f} MiB)"
    )
    assert data_mib > 2 * BOUND_MIB, "the data is much larger than the bound"
    assert after < BOUND_MIB, f"peak RSS {after:.0f} MiB; the data is {data_mib:.0f} MiB"
    assert growth < GROWTH_BOUND_MIB, f"the append added {growth:.0f} MiB of peak RSS"


WIDE_ROWS = int(os.environ.get("CONCORD_TEST_WIDE_ROWS", 300_000))
WIDE_GROWTH_BOUND_MIB = 600


def test_wide_rows_are_cut_into_files_by_bytes_in_bounded_memory(local, measure):
    """Rows of a 768-float vector (3,072 bytes): 300,000 of them (880 MiB) are fewer
    than a file's 2^20 rows, so a writer that cut files by rows only held them all, and
    their encoding, in memory. Files are cut at 64 MiB of Arrow data (one encodes while the
    one before it uploads)."""
    t = local.create("id bigint not null, v float[768]")
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(1) as pool:
        imported, before, after, data_mib, written = pool.apply(workers.wide_append, (t.uri, WIDE_ROWS, 8_192, 3_072))
    t = concord.open(t.uri)
    assert written == WIDE_ROWS and t.count() == WIDE_ROWS + 1
    fragments = len(t.fragments())
    growth = after - before
    measure(
        f"{WIDE_ROWS:,} rows of 3,072 bytes ({data_mib:.0f} MiB as Arrow) appended from a streaming reader: "
        f"{fragments} fragments, peak RSS {after:.0f} MiB (+{growth:.0f} MiB for the append)"
    )
    assert data_mib > WIDE_GROWTH_BOUND_MIB, "the data is larger than the bound"
    assert fragments >= 1 + data_mib // 64, f"{fragments} fragments for {data_mib:.0f} MiB"
    assert growth < WIDE_GROWTH_BOUND_MIB, f"the append added {growth:.0f} MiB of peak RSS"

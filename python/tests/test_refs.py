"""Tags, branches and multi-table commits from Python (the contract's ``t.tags``,
``t.branch(name)``, ``concord.open(uri, branch=...)``, ``create_branch``,
``merge_branch``, tag names wherever a version is taken, and
``concord.commit_together``), on local disk and moto S3."""

from __future__ import annotations

import datetime as dt
import multiprocessing
import pickle
import uuid

import pyarrow as pa
import pytest

import concord
from conftest import rows


def ids(table: pa.Table) -> list:
    return sorted(table.column("id").to_pylist())


def row_ids(feed: pa.Table, kinds=("insert", "update_postimage")) -> dict:
    """id -> _row_id of the feed's rows of `kinds`."""
    d = feed.to_pydict()
    return {i: r for i, r, k in zip(d["id"], d["_row_id"], d["_change_type"]) if k in kinds}


# ---------------------------------------------------------------- tags


def test_tags_create_list_get_delete_and_refuse_a_duplicate(store):
    t = store.create()
    t.append(rows([1]))  # v1
    t.append(rows([2]))  # v2
    v1 = t.tags.create("v1", version=1)
    assert isinstance(v1, concord.TagInfo)
    assert (v1.name, v1.version, v1.branch) == ("v1", 1, "main")
    assert dt.datetime.fromisoformat(v1.created_at.replace("Z", "+00:00")).tzinfo is not None
    assert t.tags.create("latest").version == 2
    assert t.tags.create("also-v1", version="v1").version == 1, "a tag's name as the version"
    with pytest.raises(concord.TableExistsError, match="has a tag named 'v1' already") as e:
        t.tags.create("v1", version=2)
    assert isinstance(e.value, FileExistsError)
    assert [x.name for x in t.tags.list()] == ["also-v1", "latest", "v1"]
    assert [x.name for x in t.tags] == ["also-v1", "latest", "v1"]
    assert t.tags.get("v1") == v1
    assert t.tags.delete("latest").version == 2
    assert [x.name for x in t.tags.list()] == ["also-v1", "v1"]
    with pytest.raises(concord.InvalidInputError, match="no tag named 'latest'"):
        t.tags.delete("latest")
    with pytest.raises(concord.InvalidInputError, match="not a usable tag name"):
        t.tags.create("7")
    with pytest.raises(concord.InvalidInputError, match="cannot be tagged"):
        t.tags.create("later", version=9)
    # A deleted name can be used again.
    assert t.tags.create("latest", version=1).version == 1


def test_a_tag_name_wherever_a_version_is_taken(local):
    t = local.create()
    t.append(rows([1, 2]))  # v1
    t.tags.create("first")
    t.delete("id = 1")  # v2
    t.append(rows([3]))  # v3
    t.tags.create("third")
    assert ids(t.to_arrow(version="first")) == [1, 2]
    assert t.count(version="first") == 2 and t.count(version="1") == 2, "a str of digits is a number"
    assert ids(t.scan(version="first").read_all()) == [1, 2]
    assert sum(f.rows for f in t.fragments(version="first")) == 2
    assert ids(pickle.loads(pickle.dumps(t.fragments(version="first")[0])).to_arrow()) == [1, 2]
    opened = concord.open(t.uri, version="first")
    assert (opened.version, opened.count()) == (1, 2)
    feed = t.changes(from_version="first", to_version="third")
    assert sorted(zip(feed["_change_type"].to_pylist(), feed["id"].to_pylist())) == [("delete", 1), ("insert", 3)]
    c = t.consumer("etl")
    assert c.create(version="first").version == 1
    assert c.advance(to_version="third").version == 3
    assert t.iceberg_metadata_path(version="first").endswith(".metadata.json")
    info = t.restore("first")
    assert ids(t.to_arrow()) == [1, 2] and info.version == 4
    assert t.stage_restore("third")
    for bad in (lambda: t.to_arrow(version="nope"), lambda: concord.open(t.uri, version="nope"), lambda: t.changes("nope")):
        with pytest.raises(concord.InvalidInputError, match="tag"):
            bad()
    with pytest.raises(concord.InvalidInputError):
        t.count(version="")


def test_vacuum_keeps_tagged_versions_and_says_who_held_what(local):
    t = local.create()
    t.append(rows([1]))  # v1
    t.tags.create("keep")
    t.delete("id = 1")  # v2
    t.append(rows([2]))  # v3
    report = t.vacuum(dt.timedelta(0), allow_short_retention=True)
    assert report["held_by_tags"] == [("keep", 1)] and report["oldest_retained"] == 3
    assert (report["held_by_branches"], report["held_by_consumers"]) == ([], [])
    assert ids(t.to_arrow(version="keep")) == [1], "the tagged version stays readable"
    t.create_branch("dev")  # from v3
    t.consumer("etl").create()  # at v3
    t.append(rows([3]))  # v4
    t.append(rows([4]))  # v5
    report = t.vacuum(dt.timedelta(0), allow_short_retention=True)
    assert report["held_by_branches"] == [("dev", 3)] and report["held_by_consumers"] == [("etl", 3)]
    assert report["oldest_retained"] == 3
    t.tags.delete("keep")
    t.delete_branch("dev")
    t.consumer("etl").drop()
    report = t.vacuum(dt.timedelta(0), allow_short_retention=True)
    assert (report["held_by_tags"], report["held_by_branches"], report["held_by_consumers"]) == ([], [], [])
    assert report["oldest_retained"] == 5


def test_a_tag_of_a_branch_reads_the_branchs_version(local):
    t = local.create()
    t.append(rows([1]))  # main v1
    dev = t.create_branch("dev")
    dev.append(rows([10]))  # dev v2
    tag = dev.tags.create("dev-2")
    assert (tag.version, tag.branch) == (2, "dev")
    t.append(rows([2, 3]))  # main v2
    assert ids(t.to_arrow(version="dev-2")) == [1, 10], "from main's handle: the branch's version"
    assert ids(t.to_arrow(version=2)) == [1, 2, 3]
    opened = concord.open(t.uri, version="dev-2")
    assert (opened.branch_name, opened.version) == ("dev", 2)
    fragments = t.fragments(version="dev-2")
    assert {f.branch for f in fragments} == {"dev"}
    assert sorted(i for f in fragments for i in ids(f.to_arrow())) == [1, 10]
    copies = pickle.loads(pickle.dumps(fragments))
    assert sorted(i for f in copies for i in ids(f.to_arrow())) == [1, 10]
    # A number means a version of the handle's own branch: another branch's tag is refused.
    with pytest.raises(concord.InvalidInputError, match="dev-2"):
        t.changes(from_version="dev-2")
    with pytest.raises(concord.InvalidInputError, match="dev-2"):
        t.restore("dev-2")
    assert dev.changes(from_version="dev-2").num_rows == 0


# ---------------------------------------------------------------- branches


def test_writes_on_a_branch_leave_main_alone_and_back(store):
    t = store.create()
    t.append(rows([1, 2]))  # main v1
    dev = t.create_branch("dev")
    assert isinstance(dev, concord.Table)
    assert (dev.branch_name, dev.version, t.branch_name) == ("dev", 1, "main")
    assert repr(dev).endswith("version=1, branch='dev')")
    dev.append(rows([3]))  # dev v2
    dev.update({"score": "score + 100"}, where="id = 1")  # dev v3
    assert t.refresh().version == 1 and ids(t.to_arrow()) == [1, 2]
    t.append(rows([4]))  # main v2
    assert ids(dev.refresh().to_arrow()) == [1, 2, 3] and dev.version == 3
    assert ids(t.branch("dev").to_arrow()) == [1, 2, 3]
    assert ids(store.open(t.uri, branch="dev").to_arrow()) == [1, 2, 3]
    assert ids(store.open(t.uri, branch="main").to_arrow()) == [1, 2, 4]
    assert ids(dev.branch("main").to_arrow()) == [1, 2, 4]
    assert store.open(t.uri, branch="dev", version=2).count() == 3
    assert [h["operation"] for h in dev.history()][-2:] == ["append", "update"]
    listed = t.branches()
    assert [b.name for b in listed] == ["main", "dev"]
    assert (listed[0].from_branch, listed[0].from_version, listed[0].created_at) == (None, None, None)
    assert (listed[1].from_branch, listed[1].from_version) == ("main", 1)
    assert ids(t.create_branch("empty", from_version=0).to_arrow()) == []
    t.tags.create("one", version=1)
    assert ids(t.create_branch("from-tag", from_version="one").to_arrow()) == [1, 2]
    with pytest.raises(concord.TableExistsError, match="branch named 'dev' already"):
        t.create_branch("dev")
    with pytest.raises(concord.InvalidInputError, match=r"no branch named 'nope'.*t\.create_branch\(\"nope\"\)"):
        t.branch("nope")
    with pytest.raises(concord.InvalidInputError, match="no branch named 'nope'"):
        store.open(t.uri, branch="nope")
    with pytest.raises(concord.InvalidInputError, match="main"):
        t.create_branch("main")


def test_a_deleted_branch_refuses_writers_still_on_it(local):
    t = local.create()
    t.append(rows([1]))
    dev = t.create_branch("dev")
    dev.append(rows([2]))
    gone = t.delete_branch("dev")
    assert (gone.name, gone.from_branch, gone.from_version) == ("dev", "main", 1)
    assert [b.name for b in t.branches()] == ["main"]
    with pytest.raises(concord.IncompatibleError):
        dev.append(rows([3]))
    with pytest.raises(concord.InvalidInputError):
        t.branch("dev")
    with pytest.raises(concord.InvalidInputError):
        t.delete_branch("dev")
    with pytest.raises(concord.InvalidInputError, match="main"):
        t.delete_branch("main")
    assert ids(t.refresh().to_arrow()) == [1]
    assert ids(t.create_branch("dev").to_arrow()) == [1], "the name is free again"


def test_a_merge_replays_the_branch_keeping_row_ids(store):
    t = store.create()
    t.append(rows([1, 2, 3]))  # main v1
    dev = t.create_branch("dev")
    dev.append(rows([10, 11, 12]))  # dev v2
    dev.update({"score": "score + 100"}, where="id = 1 or id = 11")  # dev v3
    dev.delete("id = 2 or id = 12")  # dev v4
    t.append(rows([30]))  # main v2: main goes on meanwhile
    on_branch = row_ids(dev.changes(1))
    before = t.version
    info = t.merge_branch("dev")
    assert isinstance(info, concord.MergeInfo)
    assert (info.branch, info.into, info.transactions, info.branch_versions) == ("dev", "main", 3, (2, 4))
    assert info.version == before + 1 and t.version == info.version, "the handle on main reads the merge"
    assert info.to_dict()["branch_versions"] == [2, 4]
    assert ids(t.to_arrow()) == [1, 3, 10, 11, 30]
    merged = row_ids(t.changes(before))
    for i in (1, 10, 11):
        assert merged[i] == on_branch[i], f"row {i} keeps its row id through the merge"
    assert merged[1] == row_ids(t.changes(0, 1))[1], "and the branch's update kept main's row id"
    assert t.to_arrow(where="id = 11").column("score").to_pylist() == [101.1]
    again = t.merge_branch("dev")
    assert (again.version, again.transactions, again.branch_versions) == (None, 0, None)
    assert t.refresh().version == info.version


def test_merges_refused_typed(local):
    t = local.create()
    t.append(rows([1, 2]))  # main v1
    ff = t.create_branch("ff")
    ff.append(rows([7]))
    assert t.merge_branch("ff", fast_forward_only=True).transactions == 1, "main did not move"
    dev = t.create_branch("dev")
    dev.update({"score": "score + 1"}, where="name = 'n1'")
    t.append(rows([3]))  # main moved
    with pytest.raises(concord.VersionMovedError, match="not a fast-forward") as e:
        t.merge_branch("dev", fast_forward_only=True)
    assert e.value.latest == t.version and e.value.expected < e.value.latest
    with pytest.raises(concord.InvalidInputError, match="into itself"):
        t.merge_branch("dev", into="dev")
    with pytest.raises(concord.InvalidInputError, match="main"):
        t.merge_branch("main", into="dev")
    with pytest.raises(concord.InvalidInputError, match="no branch named"):
        t.merge_branch("nope")
    # What a concurrent writer could not do, a merge cannot: the branch's update reads a
    # column main dropped. Nothing merged.
    t.drop_column("name")
    latest = t.version
    with pytest.raises(concord.IncompatibleError):
        t.merge_branch("dev")
    assert t.refresh().version == latest
    sub = ff.create_branch("sub")
    sub.append(rows([40]))
    with pytest.raises(concord.InvalidInputError, match="made from 'ff'"):
        t.merge_branch("sub")
    assert t.merge_branch("sub", into="ff").transactions == 1
    assert 40 in ids(ff.refresh().to_arrow())


def test_a_branch_handle_pickles_and_survives_fork_on_its_branch(local):
    t = local.create()
    t.append(rows([1]))
    dev = t.create_branch("dev")
    copy = pickle.loads(pickle.dumps(dev))
    assert (copy.branch_name, copy.version) == ("dev", 1)
    copy.append(rows([2]))
    assert ids(dev.refresh().to_arrow()) == [1, 2] and ids(t.refresh().to_arrow()) == [1]
    if "fork" not in multiprocessing.get_all_start_methods():
        pytest.skip("no fork here")
    ctx = multiprocessing.get_context("fork")
    q = ctx.Queue()

    def child():
        try:
            info = dev.append(rows([3]))
            q.put((dev.branch_name, info.version, ids(dev.to_arrow())))
        except Exception as e:  # noqa: BLE001
            q.put(repr(e))

    p = ctx.Process(target=child)
    p.start()
    got = q.get(timeout=120)
    p.join(timeout=60)
    assert got == ("dev", 3, [1, 2, 3]), got
    assert ids(dev.refresh().to_arrow()) == [1, 2, 3]
    assert ids(t.refresh().to_arrow()) == [1] and t.version == 1, "main did not move"


# ---------------------------------------------------------------- multi-table commits


def test_commit_together_moves_every_table_once(store):
    orders, stock = store.create(label="orders"), store.create(label="stock")
    stock.append(rows([1, 2]))  # stock v1
    staged = [orders.stage_append(rows([10])), orders.stage_append(rows([11]))]
    update = stock.stage_update({"score": "score + 100"}, where="id = 1")
    infos = concord.commit_together([(orders, staged), (stock, [update])], idempotency_key="batch-1")
    assert [len(i) for i in infos] == [2, 1] and all(isinstance(x, concord.CommitInfo) for i in infos for x in i)
    assert {x.version for x in infos[0]} == {1} and infos[1][0].version == 2, "each table moved by one version"
    assert [x.transaction_id for x in infos[0]] == staged and infos[1][0].transaction_id == update
    assert (orders.version, stock.version) == (1, 2), "each handle reads the version it committed"
    fresh_orders, fresh_stock = store.open(orders.uri), store.open(stock.uri)
    assert ids(fresh_orders.to_arrow()) == [10, 11] and fresh_orders.version == 1
    assert fresh_stock.to_arrow(where="id = 1").column("score").to_pylist() == [100.1]
    # The same key again: nothing committed again, the outcomes reported.
    again = concord.commit_together([(orders, staged), (stock, [update])], idempotency_key="batch-1")
    assert all(x.idempotent_replay for i in again for x in i)
    assert [[x.version for x in i] for i in again] == [[1, 1], [2]]
    assert (store.open(orders.uri).version, store.open(stock.uri).version) == (1, 2)
    assert (orders.count(), stock.count()) == (2, 2)


def test_commit_together_commits_nothing_when_a_part_cannot(local):
    a, b = local.create(label="a"), local.create(label="b")
    b.append(rows([1]))  # b v1
    ok = a.stage_append(rows([5]))
    stale = b.stage_append(rows([6]), expect_version=1)
    b.append(rows([2]))  # b v2: the staged append's expected version has gone
    with pytest.raises(concord.VersionMovedError, match="nothing of the multi-table transaction was committed"):
        concord.commit_together([(a, [ok]), (b, [stale])])
    # a's part may have landed and been undone (a restore): its rows never count.
    assert local.open(a.uri).count() == 0 and a.refresh().count() == 0
    assert local.open(b.uri).version == 2 and ids(local.open(b.uri).to_arrow()) == [1, 2]
    a.append(rows([7]))
    assert ids(local.open(a.uri).to_arrow()) == [7], "the table goes on as usual"


def test_commit_together_refuses_tables_it_cannot_commit_as_one(local):
    disk = local.create(label="disk")
    mem = concord.create(f"memory://together-{uuid.uuid4().hex[:8]}", "id bigint not null, name varchar, score double")
    on_disk, in_memory = disk.stage_append(rows([1])), mem.stage_append(rows([2]))
    with pytest.raises(concord.InvalidInputError, match="not in one store") as e:
        concord.commit_together([(disk, [on_disk]), (mem, [in_memory])])
    assert isinstance(e.value, ValueError)
    assert (local.open(disk.uri).version, concord.open(mem.uri).version) == (0, 0), "nothing committed"
    other = local.open(disk.uri)
    second = disk.stage_append(rows([3]))
    with pytest.raises(concord.InvalidInputError, match="given twice"):
        concord.commit_together([(disk, [on_disk]), (other, [second])])
    with pytest.raises(concord.InvalidInputError, match="no staged ids"):
        concord.commit_together([(disk, [])])
    with pytest.raises(TypeError):
        concord.commit_together([(disk.uri, [on_disk])])
    assert local.open(disk.uri).version == 0
    assert concord.commit_together([]) == []

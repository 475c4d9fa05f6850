"""Every exception class on its cause, mapped from the library's typed errors as the
CLI maps them to exit codes; messages and exit codes compared with the CLI's."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys
import threading
import time
import urllib.request

import pyarrow as pa
import pytest

import concord
from conftest import ROOT, SCHEMA, Store, rows

CLASSES = {
    concord.InvalidInputError: (2, ValueError),
    concord.IncompatibleError: (3, None),
    concord.TooMuchContentionError: (4, None),
    concord.VersionMovedError: (5, None),
    concord.TableNotFoundError: (7, FileNotFoundError),
    concord.TableExistsError: (7, FileExistsError),
    concord.CommitStateUnknownError: (8, None),
    concord.StorageError: (1, OSError),
    concord.CorruptError: (1, OSError),
}


def test_the_classes():
    for cls, (code, extra) in CLASSES.items():
        assert issubclass(cls, concord.ConcordError) and issubclass(cls, Exception)
        assert cls.exit_code == code
        if extra is not None:
            assert issubclass(cls, extra)
    assert issubclass(concord.ConcordError, Exception)


def files_under(path) -> set:
    return {str(p.relative_to(path)) for p in pathlib.Path(path).rglob("*") if p.is_file() and "_hint" not in p.name}


# ---------------------------------------------------------------- 2: invalid input


@pytest.mark.parametrize(
    "bad, match",
    [
        (lambda t: t.append(pa.table({"id": ["x"], "name": ["a"]})), "column 'id' has type varchar, but the table expects bigint"),
        (lambda t: t.append(pa.table({"id": [2**40], "name": [b"\xff"]})), "name"),
        (lambda t: t.append(pa.table({"id": [1], "nope": ["a"]})), "column 'nope' is not in the table"),
        (lambda t: t.append(pa.table({"name": ["a"]})), "column 'id' is required"),
        (lambda t: t.append(pa.table({"id": pa.array([None, 2], pa.int64())})), "has a null"),
        (lambda t: t.append(pa.table({"id": [1.5]})), "value '1.5' in column 'id' is not a valid bigint"),
        (
            lambda t: t.append(pa.table({"id": pa.array([1], pa.int64()), "name": pa.array([1], pa.int64())})),
            "column 'name' has type bigint, but the table expects varchar",
        ),
        (lambda t: t.delete("id = 'x'"), "is not a valid bigint"),
        (lambda t: t.delete("name > 3"), "do not compare"),
        (lambda t: t.delete("id ==== 1"), "cannot parse"),
        (lambda t: t.update(set={"nope": "1"}), "nope"),
        (lambda t: t.update(set={"id": "'text'"}), "not a valid bigint"),
        (lambda t: t.merge(pa.table({"id": [1, 1], "name": ["a", "b"]}), on=["id"]), "occurs more than once"),
        (lambda t: t.add_column("qty int not null"), "no default"),
        (lambda t: t.add_column("id bigint"), "already has a column"),
        (lambda t: t.drop_column("nope"), "unknown column"),
        (lambda t: t.restore(99), "cannot be restored"),
        (lambda t: t.compact(0), "target_rows=1 or more"),
        (lambda t: t.append(rows([9]), isolation="bogus"), "not an isolation level"),
    ],
)
def test_bad_input_is_invalid_input_and_commits_nothing(local, bad, match):
    t = local.create()
    t.append(rows([1, 2]))
    before_files = files_under(t.uri)
    with pytest.raises(concord.InvalidInputError, match=match) as e:
        bad(t)
    assert isinstance(e.value, ValueError) and e.value.exit_code == 2
    fresh = concord.open(t.uri)
    assert fresh.version == 1 and fresh.count() == 2 and t.version == 1, "nothing committed"
    assert files_under(t.uri) == before_files, "and nothing left behind"


def test_a_bad_schema_or_uri_is_invalid_input(local):
    with pytest.raises(concord.InvalidInputError, match="unknown column type"):
        concord.create(local.uri(), "id biginteger")
    with pytest.raises(concord.InvalidInputError, match="unsupported URI scheme"):
        concord.open("ftp://x/y")
    with pytest.raises(concord.InvalidInputError, match="unknown store option"):
        concord.open("s3://bucket/t", storage_options={"NOT_AN_OPTION": "1"})
    with pytest.raises(concord.InvalidInputError, match="applies to object stores"):
        concord.open(local.uri(), storage_options={"AWS_REGION": "us-east-1"})
    with pytest.raises(concord.InvalidInputError, match="looks like a URI scheme"):
        concord.open("s3:bucket/t")
    with pytest.raises(concord.InvalidInputError, match="dynamodb"):
        concord.open(local.uri(), storage_options={"commit_coordinator": "dynamodb://x"})
    with pytest.raises(TypeError, match="is None"):
        concord.open("s3://bucket/t", storage_options={"AWS_REGION": None})


def test_a_stream_that_fails_midway_commits_nothing(local):
    t = local.create()
    t.append(rows([1]))
    before = files_under(t.uri)

    def generate():
        yield rows([10, 11]).to_batches()[0]
        raise RuntimeError("the producer broke")

    with pytest.raises(concord.InvalidInputError, match="the producer broke"):
        t.append(pa.RecordBatchReader.from_batches(rows([]).schema, generate()))
    assert concord.open(t.uri).count() == 1 and files_under(t.uri) == before


# ---------------------------------------------------------------- 3, 4, 5: commits


def test_incompatible_names_the_winner(local):
    t = local.create()
    t.append(rows([1, 2]))
    staged = t.stage_update(set={"score": "score + 1"})
    won = concord.open(t.uri).drop_column("score")
    with pytest.raises(concord.IncompatibleError, match=f"incompatible with version {won.version} \\(drop_column\\)") as e:
        t.commit_staged([staged])
    assert (e.value.winner_version, e.value.winner_operation) == (won.version, "drop_column")
    assert e.value.exit_code == 3
    assert concord.open(t.uri).version == won.version


def test_a_job_commit_fails_whole_naming_its_member(local):
    t = local.create()
    t.append(rows([1, 2]))
    good = t.stage_append(pa.table({"id": [3]}))
    bad = t.stage_append(rows([4]))  # writes score, which a winner drops
    won = concord.open(t.uri).drop_column("score")
    with pytest.raises(concord.IncompatibleError, match="nothing of the job was committed") as e:
        t.commit_staged([good, bad])
    assert e.value.staged_id == bad
    assert (e.value.winner_version, e.value.winner_operation) == (won.version, "drop_column")
    assert concord.open(t.uri).count() == 2, "all or none"
    [info] = t.commit_staged([good])
    assert info.version == won.version + 1


def test_job_members_apply_in_order_or_the_job_is_refused(local):
    t = local.create()
    t.append(rows([1, 2]))
    append = t.stage_append(rows([3]))
    delete = t.stage_delete("id >= 2")  # re-runs on the rows the append before it adds
    infos = t.commit_staged([append, delete])
    assert [i.operation for i in infos] == ["append", "delete"] and infos[1].rerun and t.count() == 1
    # No serial order: an update of a column an earlier member drops.
    update = t.stage_update(set={"score": "1"})
    drop = t.stage_drop_column("score")
    with pytest.raises(concord.InvalidInputError, match="cannot follow") as e:
        t.commit_staged([drop, update])
    assert e.value.staged_id == update and e.value.exit_code == 2
    assert concord.open(t.uri).version == 2


def test_too_much_contention(local):
    t = local.create()
    staged = t.stage_append(rows([1]))
    concord.open(t.uri).append(rows([2]))
    # The handle still believes version 0 is the latest: its one attempt loses.
    outcomes = []
    try:
        outcomes.append(t.commit_staged([staged], max_retries=0))
    except concord.TooMuchContentionError as e:
        outcomes.append(e)
    if not isinstance(outcomes[0], concord.TooMuchContentionError):
        # It looked the latest version up first (the handle's knowledge was over a
        # second old): make writers race until one loses.
        outcomes = race_without_retries(t.uri)
    e = next(o for o in outcomes if isinstance(o, concord.TooMuchContentionError))
    assert e.exit_code == 4 and e.attempts == 1 and "too much contention" in str(e)


def race_without_retries(uri, writers=8, rounds=20):
    outcomes = []
    for r in range(rounds):
        handles = [concord.open(uri) for _ in range(writers)]
        barrier = threading.Barrier(writers)

        def write(h, w, barrier=barrier, r=r):
            barrier.wait()
            try:
                outcomes.append(h.append(rows([1000 * r + w]), max_retries=0))
            except concord.TooMuchContentionError as e:
                outcomes.append(e)

        threads = [threading.Thread(target=write, args=(h, w)) for w, h in enumerate(handles)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        if any(isinstance(o, concord.TooMuchContentionError) for o in outcomes):
            break
    committed = sum(1 for o in outcomes if isinstance(o, concord.CommitInfo))
    assert concord.open(uri).count() >= committed
    return outcomes


def test_version_moved(local):
    t = local.create()
    t.append(rows([1]))
    with pytest.raises(concord.VersionMovedError, match="expected version 0, but the latest is 1") as e:
        t.delete("id = 1", expect_version=0)
    assert (e.value.expected, e.value.latest, e.value.exit_code) == (0, 1, 5)
    with pytest.raises(concord.VersionMovedError):
        t.stage_append(rows([2]), expect_version=0)


# ---------------------------------------------------------------- 7: missing or existing


def test_table_not_found_and_exists(local):
    uri = local.uri()
    with pytest.raises(concord.TableNotFoundError, match="no Concord table at") as e:
        concord.open(uri)
    assert isinstance(e.value, FileNotFoundError) and e.value.exit_code == 7
    assert "concord.create(" in str(e.value)
    concord.create(uri, SCHEMA)
    with pytest.raises(concord.TableExistsError, match="already exists") as e:
        concord.create(uri, SCHEMA)
    assert isinstance(e.value, FileExistsError)
    path = pathlib.Path(local.uri())
    path.write_text("a file")
    with pytest.raises(concord.TableNotFoundError, match="is a file"):
        concord.open(str(path))


# ---------------------------------------------------------------- 8: unknown outcome


def chattr(flag: str, path) -> bool:
    try:
        return subprocess.run(["chattr", flag, str(path)], capture_output=True).returncode == 0
    except FileNotFoundError:
        return False


def test_a_refused_create_is_a_storage_error_at_once(local):
    """A create the store refuses for good (permission denied) wrote nothing: a storage
    error naming the cause, reported at once (not after the retry budget), the same on
    every machine; a retry once the store accepts writes commits."""
    t = local.create()
    t.append(rows([1]))
    versions = next(p for p in pathlib.Path(t.uri).iterdir() if p.is_dir() and "version" in p.name)
    staged = t.stage_append(rows([2]), idempotency_key="retry-me")
    # Nothing can be created among the versions (even by root), while they read fine.
    if not chattr("+i", versions):
        pytest.skip("chattr +i is not available here (needs ext4-like filesystem and CAP_LINUX_IMMUTABLE)")
    try:
        started = time.monotonic()
        with pytest.raises(concord.StorageError, match="(?i)permission denied|not permitted") as e:
            t.commit_staged([staged], timeout=30)
        took = time.monotonic() - started
    finally:
        chattr("-i", versions)
    assert e.value.exit_code == 1 and took < 10, f"reported at once, not after the 30 s budget ({took:.1f} s)"
    [info] = t.commit_staged([staged])
    assert info.version == 2 and concord.open(t.uri).count() == 2


@pytest.fixture
def outage_proxy(s3):
    """A proxy in front of moto that can make every version request fail (503)."""
    script = ROOT / "scripts" / "lossy_proxy.py"
    proc = subprocess.Popen(
        [sys.executable, str(script), "--target", s3.options["AWS_ENDPOINT_URL"], "--mode", "outage"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        port = int(proc.stdout.readline())
        url = f"http://127.0.0.1:{port}"
        options = dict(s3.options, AWS_ENDPOINT_URL=url)
        yield Store("s3-outage", s3.base, options), lambda on: urllib.request.urlopen(f"{url}/__outage/{'on' if on else 'off'}").read()
    finally:
        proc.kill()
        proc.wait()


def test_commit_state_unknown_then_a_safe_retry(outage_proxy):
    """A store that stays unreachable for commits past the budget: the outcome is
    unknown (the create may have landed), and a retry with the same key is safe."""
    store, outage = outage_proxy
    t = store.create()
    t.append(rows([1]))
    staged = t.stage_append(rows([2]), idempotency_key="retry-me")
    outage(True)
    try:
        with pytest.raises(concord.CommitStateUnknownError, match="retry with the same idempotency key") as e:
            t.commit_staged([staged], timeout=0.5)
    finally:
        outage(False)
    assert e.value.exit_code == 8 and e.value.version == 2
    assert isinstance(e.value.transaction_id, str) and len(e.value.transaction_id) == 36
    assert "pass the same idempotency_key" in str(e.value)
    [info] = t.commit_staged([staged])
    [again] = store.open(t.uri).commit_staged([staged])
    assert info.version == 2 and again.idempotent_replay and store.open(t.uri).count() == 2


# ---------------------------------------------------------------- 1: storage, corrupt


def test_storage_error(local):
    t = local.create()
    t.append(rows([1]))
    data = next(p for p in pathlib.Path(t.uri).iterdir() if p.is_dir() and "data" in p.name)
    if not chattr("+i", data):
        pytest.skip("chattr +i is not available here")
    try:
        with pytest.raises(concord.StorageError, match="storage error while") as e:
            t.append(rows([2]))
    finally:
        chattr("-i", data)
    assert isinstance(e.value, OSError) and e.value.exit_code == 1
    assert concord.open(t.uri).count() == 1


def test_storage_error_of_an_unreachable_store():
    options = {
        "AWS_ACCESS_KEY_ID": "x",
        "AWS_SECRET_ACCESS_KEY": "x",
        "AWS_REGION": "us-east-1",
        "AWS_ENDPOINT_URL": "http://127.0.0.1:9",
        "AWS_ALLOW_HTTP": "true",
    }
    with pytest.raises(concord.StorageError, match="storage error while") as e:
        concord.open("s3://nowhere/t", storage_options=options)
    assert isinstance(e.value, OSError)


def test_corrupt_error(local):
    t = local.create()
    t.append(rows(range(100)))
    for f in pathlib.Path(t.uri).rglob("*.parquet"):
        f.write_bytes(b"PAR1" + os.urandom(200) + b"PAR1")
    with pytest.raises(concord.CorruptError, match="corrupt") as e:
        t.to_arrow()
    assert isinstance(e.value, OSError) and e.value.exit_code == 1
    assert "pass version= to read another version" in str(e.value)
    assert t.count(version=0) == 0, "other versions stay readable"
    with pytest.raises(concord.CorruptError):
        list(t.scan())


# ---------------------------------------------------------------- the CLI's codes and messages


def cli_failure(cli, *args):
    p = subprocess.run([cli, *args], capture_output=True, text=True)
    assert p.returncode != 0
    message = p.stderr.strip()
    assert message.startswith("error: ")
    return p.returncode, message[len("error: ") :]


def test_exit_codes_and_messages_are_the_clis(local, cli, tmp_path):
    t = local.create()
    t.append(rows([1]))
    missing = local.uri()
    cases = [
        (lambda: t.delete("nope = 1"), ["delete", t.uri, "--where", "nope = 1"]),
        (lambda: t.delete("id = 1", expect_version=0), ["delete", t.uri, "--where", "id = 1", "--expect-version", "0"]),
        (lambda: concord.create(t.uri, SCHEMA), ["create", t.uri, "--schema", SCHEMA]),
        (lambda: t.to_arrow(version=7), ["scan", t.uri, "--version", "7"]),
        (lambda: t.update(set={"score": "name"}), ["update", t.uri, "--set", "score = name"]),
        (lambda: t.rename_column("name", "id"), ["alter", t.uri, "rename-column", "name", "id"]),
    ]
    for call, args in cases:
        with pytest.raises(concord.ConcordError) as e:
            call()
        code, message = cli_failure(cli, *args)
        assert e.value.exit_code == code, (args, str(e.value))
        assert str(e.value) == message, args
    # Hints name the Python argument where the CLI names its flag; the rest is the same.
    with pytest.raises(concord.TableNotFoundError) as e:
        concord.open(missing)
    code, message = cli_failure(cli, "count", missing)
    assert code == 7 and str(e.value).split(";")[0] == message.split(";")[0]


# ---------------------------------------------------------------- panics


@pytest.mark.parametrize("inside_runtime", [False, True])
def test_a_panic_arrives_as_concord_error(inside_runtime):
    from concord import _concord

    with pytest.raises(concord.ConcordError, match="internal error .*a test panic") as e:
        _concord._panic_for_tests(inside_runtime)
    assert type(e.value) is concord.ConcordError and isinstance(e.value, Exception)
    # The runtime still works afterwards.
    t = concord.create("memory://after-panic-%d/t" % inside_runtime, "id bigint")
    assert t.append({"id": [1]}).version == 1


def test_every_error_kind_raises_the_contracts_exception():
    """The library's kinds of error, each through the package's map, to the exception
    class and exit code ../shared/python-contract.md gives (the map is a total match on
    the kind: a new kind does not compile without its class)."""
    contract = {
        "invalid_input": ("InvalidInputError", 2, ValueError),
        "incompatible": ("IncompatibleError", 3, None),
        "contention": ("TooMuchContentionError", 4, None),
        "moved": ("VersionMovedError", 5, None),
        "not_found": ("TableNotFoundError", 7, FileNotFoundError),
        "exists": ("TableExistsError", 7, FileExistsError),
        "unknown_outcome": ("CommitStateUnknownError", 8, None),
        "storage": ("StorageError", 1, OSError),
        "corrupt": ("CorruptError", 1, OSError),
    }
    classes = dict(concord._concord._error_classes())
    assert set(classes) == set(contract), "one class per kind, every kind in the contract"
    for kind, class_name in classes.items():
        name, exit_code, base = contract[kind]
        assert class_name == name, kind
        cls = getattr(concord, class_name)
        assert issubclass(cls, concord.ConcordError) and cls.exit_code == exit_code, kind
        if base is not None:
            assert issubclass(cls, base), kind

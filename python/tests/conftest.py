"""Fixtures of the `concord` package's tests.

Stores: local disk always; S3 on moto when scripts/servers.sh started it
(CONCORD_TEST_S3_ENDPOINT, CONCORD_TEST_BUCKET). Without it the S3 tests skip, unless
CONCORD_REQUIRE_SERVERS is set (scripts/test sets it), when they fail instead: as the
Rust tests do (crates/concord/tests/it/servers.rs).

The CLI (for comparisons with `concord history --format json` and exit codes) is
$CONCORD_BIN, else $CARGO_TARGET_DIR/debug/concord, else target/debug/concord.
"""

from __future__ import annotations

import os
import pathlib
import uuid

import pyarrow as pa
import pytest

import concord

ROOT = pathlib.Path(__file__).resolve().parents[2]
SCHEMA = "id bigint not null, name varchar, score double"


def rows(ids, offset: float = 0.0) -> pa.Table:
    """Rows of SCHEMA: id, name "n<id>", score id/10 + offset."""
    ids = list(ids)
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "name": pa.array([f"n{i}" for i in ids], pa.string()),
            "score": pa.array([i / 10 + offset for i in ids], pa.float64()),
        }
    )


def s3_settings():
    """moto's S3 settings, or None (skipping, or failing under CONCORD_REQUIRE_SERVERS)."""
    endpoint = os.environ.get("CONCORD_TEST_S3_ENDPOINT")
    if not endpoint:
        if os.environ.get("CONCORD_REQUIRE_SERVERS"):
            pytest.fail("CONCORD_TEST_S3_ENDPOINT is not set but CONCORD_REQUIRE_SERVERS is: scripts/test starts the servers")
        return None
    return {
        "AWS_ACCESS_KEY_ID": "test",
        "AWS_SECRET_ACCESS_KEY": "test",
        "AWS_REGION": "us-east-1",
        "AWS_ENDPOINT_URL": endpoint,
        "AWS_ALLOW_HTTP": "true",
    }


def s3_bucket() -> str:
    return os.environ.get("CONCORD_TEST_BUCKET", "concord-test")


class Store:
    """Where a test's tables go: fresh URIs and the storage options to reach them."""

    def __init__(self, name: str, base: str, options):
        self.name = name
        self.base = base
        self.options = options

    def uri(self, label: str = "t") -> str:
        sep = "" if self.base.endswith("/") else "/"
        return f"{self.base}{sep}{label}-{uuid.uuid4().hex[:12]}"

    def create(self, schema=SCHEMA, label: str = "t") -> concord.Table:
        return concord.create(self.uri(label), schema, storage_options=self.options)

    def open(self, uri: str, **kwargs) -> concord.Table:
        return concord.open(uri, storage_options=self.options, **kwargs)

    def cli_args(self):
        """The CLI's --storage-option arguments for this store."""
        out = []
        for key, value in (self.options or {}).items():
            out += ["--storage-option", f"{key}={value}"]
        return out


@pytest.fixture
def local(tmp_path) -> Store:
    return Store("local", str(tmp_path), None)


@pytest.fixture
def s3() -> Store:
    settings = s3_settings()
    if settings is None:
        pytest.skip("moto is not running (scripts/test starts it): CONCORD_TEST_S3_ENDPOINT is not set")
    return Store("s3", f"s3://{s3_bucket()}/py-{uuid.uuid4().hex[:8]}", settings)


@pytest.fixture(params=["local", "s3"])
def store(request, tmp_path) -> Store:
    if request.param == "local":
        return Store("local", str(tmp_path), None)
    return request.getfixturevalue("s3")


@pytest.fixture
def cli() -> str:
    candidates = []
    if os.environ.get("CONCORD_BIN"):
        candidates.append(pathlib.Path(os.environ["CONCORD_BIN"]))
    target = os.environ.get("CARGO_TARGET_DIR")
    if target:
        candidates.append(pathlib.Path(target) / "debug" / "concord")
    candidates.append(ROOT / "target" / "debug" / "concord")
    for c in candidates:
        if c.is_file() and os.access(c, os.X_OK):
            return str(c)
    if os.environ.get("CONCORD_REQUIRE_CLI"):
        pytest.fail(f"the concord CLI is not built (looked at {', '.join(map(str, candidates))})")
    pytest.skip("the concord CLI is not built (cargo build -p concord-cli, or set CONCORD_BIN)")


# ---------------------------------------------------------------- measurements
# Tests that measure something (concurrency, memory) add a line here; pytest prints
# them at the end of the run.

MEASUREMENTS = []


@pytest.fixture
def measure(request):
    def add(text: str) -> None:
        MEASUREMENTS.append(f"{request.node.name}: {text}")

    return add


def pytest_terminal_summary(terminalreporter):
    if MEASUREMENTS:
        terminalreporter.section("concord measurements")
        for line in MEASUREMENTS:
            terminalreporter.write_line(line)

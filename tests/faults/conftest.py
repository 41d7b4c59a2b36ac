"""Fixtures of the fault suite; the harness itself is in `harness.py`.

`cluster` gives each test the five services as subprocesses (see `harness.Cluster`) on the
test's own NATS, database and storage, kills every process they started at the end, and
prints the tail of each service's log when the test failed.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from services.core.runtime.settings import Settings
from tests.faults.harness import Cluster
from tests.faults.postgres import OwnPostgres


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[Any]:
    """Keep each phase's report on the test item, so teardown knows whether it failed."""
    report = yield
    setattr(item, f"rep_{report.when}", report)
    return report


@pytest.fixture
async def cluster(
    settings: Settings, tmp_path: Path, request: pytest.FixtureRequest
) -> AsyncIterator[Cluster]:
    """A cluster ready to `up()`; every process it started is killed at the end."""
    started = time.monotonic()
    cluster = Cluster(settings, tmp_path)
    try:
        yield cluster
    finally:
        report = getattr(request.node, "rep_call", None)
        if report is None or report.failed:
            print(f"\n[faults] service logs (test ran {time.monotonic() - started:.1f}s):")
            print(cluster.tails())
        await cluster.close()


@pytest.fixture
def own_postgres(tmp_path: Path) -> Iterator[OwnPostgres]:
    """A PostgreSQL only this test uses, stopped and removed at the end."""
    postgres = OwnPostgres(tmp_path / "pg")
    yield postgres
    postgres.close()

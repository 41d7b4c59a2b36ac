"""PostgreSQL stopped and restarted while jobs flow: submissions go on, the projection
catches up with nothing missing.

Verifies, with the services on a PostgreSQL of this test's own (pgserver in tmp_path),
stopped (fast shutdown, SIGINT) once some jobs are done and started again about 6 s later:
- while it is down, POST /jobs still answers 202 (the log, not Postgres, accepts jobs),
  GET /jobs/{id} answers 503 with a JSON error of type `unavailable` within 6 s, and
  /readyz answers 503 naming Postgres;
- after the restart no service is restarted, and every job, those accepted during the
  outage included, ends `done` exactly once, with one object; the projection holds a row
  for every message of the log.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from services.dev import clear_stale_postgres
from tests.faults.harness import Cluster, assert_no_job_left_behind, poll

OUTAGE = 6.0


def _running(pid: int) -> bool:
    """Alive and not a zombie (this sandbox's init does not reap daemonised processes)."""
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


class OwnPostgres:
    """A pgserver instance only this test uses, so it can be stopped and started."""

    def __init__(self, path: Path) -> None:
        import pgserver

        self.path = path
        self.server: Any = pgserver.get_server(path, cleanup_mode="stop")
        self.server.psql("CREATE DATABASE pressroom;")
        self.url = str(self.server.get_uri("pressroom"))

    def stop(self) -> float:
        """Fast shutdown (SIGINT); returns the seconds it took."""
        started = time.monotonic()
        pid = self.server.get_pid()
        os.kill(pid, signal.SIGINT)
        end = started + 30
        while _running(pid):
            assert time.monotonic() < end, "PostgreSQL did not stop within 30 s"
            time.sleep(0.05)
        return time.monotonic() - started

    def start(self) -> None:
        clear_stale_postgres(self.path)
        self.server.ensure_postgres_running()
        assert str(self.server.get_uri("pressroom")) == self.url

    def close(self) -> None:
        self.server.cleanup()


@pytest.fixture
def own_postgres(tmp_path: Path) -> Iterator[OwnPostgres]:
    postgres = OwnPostgres(tmp_path / "pg")
    yield postgres
    postgres.close()


async def test_postgres_outage_keeps_accepting_and_projection_catches_up(
    cluster: Cluster, own_postgres: OwnPostgres
) -> None:
    await cluster.up(renderers=1, PRESSROOM_DATABASE_URL=own_postgres.url)
    first = await cluster.submit_many(40)

    async def some_done() -> bool:
        return await cluster.count_events("done") >= 10

    await poll(some_done, 60, "10 jobs done")
    stop_seconds = await asyncio.to_thread(own_postgres.stop)
    stopped = time.monotonic()

    during = await cluster.submit_many(30, first=1000)
    slowest_post = max(r.seconds for r in cluster.ledger.answers if r.started >= stopped)
    reads = [await _timed_get(cluster, job_id) for job_id in (first[0], first[-1], during[0])]
    async with cluster.http.get(f"{cluster.url}/readyz") as response:
        readiness = (response.status, await response.json())
    await asyncio.sleep(max(0.0, stopped + OUTAGE - time.monotonic()))  # hold the outage
    await asyncio.to_thread(own_postgres.start)
    restarted = time.monotonic()

    await assert_no_job_left_behind(cluster, "postgres_restart", timeout=90)
    caught_up = time.monotonic() - restarted
    for status, body, seconds in reads:
        assert status == 503, (status, body)
        assert body["error"]["type"] == "unavailable", body
        assert seconds < 6, f"GET /jobs/{{id}} took {seconds:.1f}s while Postgres was down"
    assert slowest_post < 6, f"a POST took {slowest_post:.1f}s while Postgres was down"
    assert readiness[0] == 503 and readiness[1]["checks"]["postgres"] is False, readiness
    print(
        f"[faults] postgres_restart: stop took {stop_seconds:.1f}s; outage "
        f"{restarted - stopped:.1f}s; {len(during)} jobs accepted while down "
        f"(slowest POST {slowest_post:.2f}s); GETs answered 503 in "
        f"{max(r[2] for r in reads):.2f}s at most; all terminal and checked {caught_up:.1f}s "
        f"after the restart"
    )


async def _timed_get(cluster: Cluster, job_id: str) -> tuple[int, Any, float]:
    started = time.monotonic()
    status, body = await cluster.get_job(job_id)
    return status, body, time.monotonic() - started

"""Services that start while PostgreSQL is down: the gateway serves what needs only NATS.

Verifies, with the services on a PostgreSQL of this test's own, stopped after a second
key of the tenant was revoked, and every service that uses PostgreSQL (gateway,
projector, notifier, conductor) then replaced by a fresh process (the gateway can read no
key from PostgreSQL, only the bus copy `gateway/keymirror.py` keeps):
- none of them exits;
- the fresh gateway becomes ready; its `/readyz` answers within a second, `200`, and
  reports `postgres: false`;
- the tenant's key gets `202` for jobs with inline templates, the revoked key `401`, and
  a status read (which needs PostgreSQL) `503` of type `unavailable` with `Retry-After`;
- once PostgreSQL is back, with no service restarted again, every accepted job ends
  `done` exactly once and the projection holds every message of the log
  (`assert_no_job_left_behind`, which fails if a service exited);
- a gateway and a notifier started while PostgreSQL is down, whose keyring is checked
  only once it answers, stop at SIGTERM before then: at once, with status 0 and no
  traceback.
"""

from __future__ import annotations

import asyncio
import time

import aiohttp

from services.core.runtime.lifecycle import STOP_MARGIN
from tests.faults.harness import Cluster, Service, assert_no_job_left_behind, poll
from tests.faults.postgres import OwnPostgres, revoked_key

READY_WITHIN = 1.0
"""Seconds a readiness probe may take, whatever PostgreSQL does."""


async def test_services_started_while_postgres_is_down_take_jobs_from_known_keys(
    cluster: Cluster, own_postgres: OwnPostgres
) -> None:
    await cluster.up(renderers=1, PRESSROOM_DATABASE_URL=own_postgres.url)
    revoked = await revoked_key(cluster)
    before = await cluster.submit_many(3)
    await asyncio.to_thread(own_postgres.stop)
    for name in ("gateway", "projector", "notifier", "conductor"):
        cluster.kill(cluster.running(name)[0])
        cluster.start(name)
    await poll(cluster.gateway_ready, 45, "the fresh gateway ready without PostgreSQL")

    started = time.monotonic()
    async with cluster.http.get(f"{cluster.url}/readyz") as response:
        ready = (response.status, await response.json(), time.monotonic() - started)
    during = await cluster.submit_many(5, first=100)
    async with (
        aiohttp.ClientSession() as http,
        http.post(
            f"{cluster.url}/jobs",
            json={"template": "<p>no</p>"},
            headers={"Authorization": f"Bearer {revoked}"},
        ) as response,
    ):
        refused = (response.status, await response.json())
    async with cluster.http.get(f"{cluster.url}/jobs/{before[0]}") as response:
        read = (response.status, await response.json(), response.headers.get("Retry-After"))

    await asyncio.to_thread(own_postgres.start)
    await assert_no_job_left_behind(cluster, "gateway_started_without_postgres", timeout=120)
    assert ready[0] == 200 and ready[1]["checks"]["postgres"] is False, ready
    assert ready[2] < READY_WITHIN, f"/readyz took {ready[2]:.2f}s"
    assert len(during) == 5
    assert refused[0] == 401 and "revoked" in refused[1]["error"]["message"], refused
    assert read[0] == 503 and read[1]["error"]["type"] == "unavailable", read
    assert read[2] is not None and int(read[2]) > 0, read


STOPS_WITHIN = 3.0
"""Seconds a service waiting for PostgreSQL may take to stop at SIGTERM: the notifier's
last fetch of the log (`bus.fetch`, 1 s) and no more; `PRESSROOM_SHUTDOWN_GRACE` (5 s
here) is for work in flight, and a stop still running 2 s past it exits 1."""


async def _notifier_waiting(notifier: Service) -> bool:
    """The notifier serves, with PostgreSQL (and so its keyring check) still to come."""
    status, body = await notifier.probe("/readyz")
    return status == 200 and body["informs"]["postgres"] is False


async def _gateway_waiting(cluster: Cluster) -> bool:
    async with cluster.http.get(f"{cluster.url}/readyz") as response:
        body = await response.json()
    return response.status == 200 and body["checks"]["postgres"] is False


async def test_sigterm_stops_a_service_still_waiting_for_postgres_to_check_its_keyring(
    cluster: Cluster, own_postgres: OwnPostgres
) -> None:
    """A gateway and a notifier started while PostgreSQL is down check their keyring when
    it first answers (`sealed.check_keyring_later`). SIGTERM before that (PostgreSQL still
    down) stops each within `STOPS_WITHIN`, with status 0 and no traceback in its log."""
    await cluster.up(renderers=0, PRESSROOM_DATABASE_URL=own_postgres.url)
    await asyncio.to_thread(own_postgres.stop)
    fresh: dict[str, Service] = {}
    for name in ("gateway", "notifier"):
        cluster.kill(cluster.running(name)[0])
        fresh[name] = cluster.start(name)
    await poll(cluster.gateway_ready, 45, "the fresh gateway ready without PostgreSQL")
    await poll(lambda: _gateway_waiting(cluster), 10, "the gateway without PostgreSQL")
    await poll(lambda: _notifier_waiting(fresh["notifier"]), 45, "the notifier serving")

    for name, service in fresh.items():
        timeout = float(cluster.env["PRESSROOM_SHUTDOWN_GRACE"]) + STOP_MARGIN + 10
        code, took = await cluster.terminate(service, timeout)
        text = service.log.read_text(errors="replace")
        assert code == 0 and took < STOPS_WITHIN, (name, code, took, service.tail())
        assert "Traceback" not in text and "keyring" not in text.lower(), (name, text)
    assert "PostgreSQL cannot be reached: starting without it" in fresh["gateway"].tail(200)

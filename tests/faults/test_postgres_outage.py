"""PostgreSQL away for a minute under a steady load: the API degrades, it does not fall.

Verifies, with the services on a PostgreSQL of this test's own (pgserver in tmp_path),
once frozen (every PostgreSQL process SIGSTOPped: connections hang, nothing is refused)
and once stopped (fast shutdown: connections are refused), for `OUTAGE` seconds while a
client submits inline jobs all the time and another asks for a job's status:
- every submission is answered `202`, within `FAST` seconds (they need NATS, not
  PostgreSQL);
- the gateway's `/readyz` answers within a second every time, stays `200` (Kubernetes
  keeps the gateway in its Service), and reports `postgres: false` during the outage and
  `true` after it; every service's own `/readyz` (on its metrics port) answers within a
  second too, and says what its own work needs: the projector, which writes to
  PostgreSQL, is not ready while it is away; gateway, renderer, notifier and conductor
  stay ready (reporting PostgreSQL's state beside their checks); all are ready after;
- each status read (which needs PostgreSQL) is answered `200`, or `503` with a JSON error
  of type `unavailable` and a `Retry-After`; once the gateway knows PostgreSQL is down it
  answers within `FAST` seconds, not after a timeout;
- a key revoked before the outage is refused throughout, the client's key accepted;
- after PostgreSQL is back no service is restarted, and every accepted job ends `done`
  exactly once with one object, the projection holds every message of the log, usage
  counts each job once (`assert_no_job_left_behind`).
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Any

import pytest

from tests.faults.harness import Cluster, assert_no_job_left_behind, poll, small_job
from tests.faults.postgres import OwnPostgres, revoked_key

OUTAGE = 60.0
"""Seconds PostgreSQL stays away: "about a minute", as the issue asks."""
PACE = 0.25
"""Seconds between two submissions of the client (4 jobs/s, what one renderer keeps up
with on a loaded machine)."""
FAST = 2.0
"""Seconds within which an answer that needs no waiting on PostgreSQL must come."""
READY_WITHIN = 1.0
"""Seconds a readiness probe may take, whatever PostgreSQL does."""


@dataclass
class Seen:
    """One answer as a client saw it: when asked, how long it took, status, body, headers."""

    at: float
    seconds: float
    status: int
    body: Any
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class Watchers:
    """The clients that run throughout: readiness, status reads, the revoked key."""

    cluster: Cluster
    job_id: str
    revoked_key: str
    stop: asyncio.Event = field(default_factory=asyncio.Event)
    ready: list[Seen] = field(default_factory=list)
    reads: list[Seen] = field(default_factory=list)
    revoked: list[Seen] = field(default_factory=list)

    async def ask(self, path: str, headers: dict[str, str] | None = None) -> Seen:
        started = time.monotonic()
        async with self.cluster.http.get(f"{self.cluster.url}{path}", headers=headers) as r:
            body = await r.json(content_type=None)
            return Seen(started, time.monotonic() - started, r.status, body, dict(r.headers))

    async def every(self, pace: float, into: list[Seen], path: str, **headers: str) -> None:
        while not self.stop.is_set():
            into.append(await self.ask(path, headers or None))
            await asyncio.sleep(pace)

    def tasks(self) -> list[asyncio.Task[None]]:
        revoked = {"Authorization": f"Bearer {self.revoked_key}"}
        return [
            asyncio.create_task(self.every(0.2, self.ready, "/readyz")),
            asyncio.create_task(self.every(0.5, self.reads, f"/jobs/{self.job_id}")),
            asyncio.create_task(self.every(1.0, self.revoked, "/jobs", **revoked)),
        ]


async def _submit_steadily(cluster: Cluster, stop: asyncio.Event) -> None:
    n = 10_000
    while not stop.is_set():
        await cluster.post_job(small_job(n))
        n += 1
        await asyncio.sleep(PACE)


@pytest.mark.parametrize("outage", ["frozen", "stopped"])
async def test_postgres_away_for_a_minute_under_load_degrades_and_converges(
    cluster: Cluster, own_postgres: OwnPostgres, outage: str
) -> None:
    await cluster.up(renderers=1, PRESSROOM_DATABASE_URL=own_postgres.url)
    first = await cluster.submit_many(5)
    await poll(lambda: _done_at_least(cluster, 5), 60, "the first jobs done")
    watchers = Watchers(cluster, first[0], await revoked_key(cluster))
    stop_load = asyncio.Event()
    tasks = [asyncio.create_task(_submit_steadily(cluster, stop_load)), *watchers.tasks()]
    try:
        await asyncio.sleep(3 * PACE)  # load before the outage
        began = time.monotonic()
        await asyncio.to_thread(own_postgres.freeze if outage == "frozen" else own_postgres.stop)
        await poll(lambda: _seen_down(watchers), 10, "/readyz reporting postgres down")
        known_down = time.monotonic()
        during = await poll(lambda: _when_every_watch_saw(cluster), 10, "every watch saw it")
        await asyncio.sleep(max(0.0, began + OUTAGE - time.monotonic()))  # hold the outage
        await asyncio.to_thread(own_postgres.thaw if outage == "frozen" else own_postgres.start)
        back = time.monotonic()
        await poll(lambda: _seen_up(watchers, back), 30, "/readyz reporting postgres up")
        await poll(lambda: _every_service_ready(cluster), 30, "every service ready again")
        await asyncio.sleep(3 * PACE)  # load after the outage
    finally:
        stop_load.set()
        watchers.stop.set()
        results = await asyncio.gather(*tasks, return_exceptions=True)
    errors = [r for r in results if isinstance(r, BaseException)]
    assert not errors, f"a client's request failed: {errors}"

    outcome = await assert_no_job_left_behind(cluster, f"postgres_{outage}", timeout=120)
    _assert_submissions(cluster, began, back)
    _assert_readiness(watchers.ready)
    _assert_reads(watchers.reads, known_down, back)
    assert {s.status for s in watchers.revoked} == {401}, watchers.revoked[:3]
    _assert_service_readiness(during)
    posts = [r for r in cluster.ledger.answers if began <= r.started <= back]
    down_reads = [s for s in watchers.reads if known_down <= s.at <= back]
    slowest_ready = max(s.seconds for s in watchers.ready)
    print(
        f"[faults] postgres_{outage}: {len(posts)} jobs accepted during {back - began:.0f}s "
        f"(slowest POST {max(r.seconds for r in posts):.2f}s); known down after "
        f"{known_down - began:.1f}s; slowest /readyz {slowest_ready:.3f}s; "
        f"status reads while known down: {len(down_reads)}, slowest "
        f"{max(s.seconds for s in down_reads):.3f}s; done={outcome.count('done')}"
    )


async def _service_probes(cluster: Cluster) -> dict[str, tuple[int, Any, float]]:
    """Each service's own `/readyz` (its metrics port): status, body, seconds taken."""
    probes = {}
    for service in cluster.services:
        started = time.monotonic()
        status, body = await service.probe("/readyz")
        probes[service.name] = (status, body, time.monotonic() - started)
    return probes


async def _when_every_watch_saw(cluster: Cluster) -> dict[str, tuple[int, Any, float]] | None:
    """Every service's probe, once each watch of PostgreSQL (one per service that uses
    it, each on its own second) has seen the outage."""
    probes = await _service_probes(cluster)
    bodies = [body for _, body, _ in probes.values() if body is not None]
    seen = [b["checks"].get("postgres", b.get("informs", {}).get("postgres")) for b in bodies]
    return probes if len(bodies) == len(probes) and True not in seen else None


async def _every_service_ready(cluster: Cluster) -> bool:
    probes = await _service_probes(cluster)
    return all(status == 200 for status, _, _ in probes.values())


def _assert_service_readiness(during: dict[str, tuple[int, Any, float]]) -> None:
    assert all(seconds < READY_WITHIN for _, _, seconds in during.values()), during
    status, body, _ = during.pop("projector")
    assert status == 503 and body["checks"] == {"nats": True, "postgres": False}, body
    assert {name: status for name, (status, _, _) in during.items()} == {
        "gateway": 200, "notifier": 200, "conductor": 200, "renderer": 200,
    }, during  # fmt: skip
    for name in ("gateway", "notifier", "conductor"):
        assert during[name][1]["informs"] == {"postgres": False}, during[name]


async def _done_at_least(cluster: Cluster, count: int) -> bool:
    return await cluster.count_events("done") >= count


def _seen_down(watchers: Watchers) -> bool:
    return any(s.body["checks"]["postgres"] is False for s in watchers.ready[-3:])


def _seen_up(watchers: Watchers, since: float) -> bool:
    recent = [s for s in watchers.ready if s.at > since]
    return bool(recent) and recent[-1].body["checks"]["postgres"] is True


def _assert_submissions(cluster: Cluster, began: float, back: float) -> None:
    during = [r for r in cluster.ledger.answers if began <= r.started <= back]
    assert len(during) >= OUTAGE / PACE / 2, f"too few submissions during the outage: {len(during)}"
    refused = [r for r in cluster.ledger.answers if r.status != 202]
    assert not refused, f"submissions not accepted: {refused[:5]}"
    slow = [r for r in during if r.seconds > FAST]
    assert not slow, f"submissions slower than {FAST}s while PostgreSQL was away: {slow[:5]}"


def _assert_readiness(ready: list[Seen]) -> None:
    assert {s.status for s in ready} == {200}, [s for s in ready if s.status != 200][:3]
    assert all(s.body["ready"] is True for s in ready)
    slow = [s for s in ready if s.seconds > READY_WITHIN]
    assert not slow, f"/readyz slower than {READY_WITHIN}s: {slow[:3]}"


def _assert_reads(reads: list[Seen], known_down: float, back: float) -> None:
    assert {s.status for s in reads} <= {200, 503}, [s for s in reads if s.status > 503][:3]
    unavailable = [s for s in reads if s.status == 503]
    assert unavailable, "no status read was refused while PostgreSQL was away"
    for seen in unavailable:
        assert seen.body["error"]["type"] == "unavailable", seen
        assert int(seen.headers["Retry-After"]) > 0, seen
    settled = [s for s in reads if known_down <= s.at and s.at + s.seconds <= back]
    assert settled and {s.status for s in settled} == {503}, settled[:3]
    slow = [s for s in settled if s.seconds > FAST]
    assert not slow, f"status reads slower than {FAST}s once PostgreSQL was known down: {slow}"

"""NATS stopped while a client keeps submitting: quick 503s, and nothing accepted is lost.

Verifies, with a client submitting all the time (three requests at a time, every 0.5 s,
each job with its own Idempotency-Key) while nats-server is stopped for about 8 s and then
started again on the same store dir and port:
- every POST /jobs answers 202 or 503, within 6 s; during the outage it is 503 with a JSON
  error of type `unavailable`, and /readyz answers 503 naming NATS — the gateway's and
  every service's own (on its metrics port, where Kubernetes' readiness probe asks), while
  their /healthz (the liveness probe) stays 200;
- after the restart the services reconnect by themselves (none is restarted), 202s
  resume and every service is ready again;
- the client resubmits each refused job with the same Idempotency-Key and gets 202; how
  many of those refused submissions had reached the log after all is printed;
- every job that got 202 ends `done` exactly once, with one object.

And, with four clients submitting as fast as they are answered while two renderers work,
nats-server SIGKILLed (a crash: no flush, no goodbye) and started again at once on the
same store dir and port, as a supervisor would:
- every job that got 202 before, during or after the crash ends `done` exactly once, with
  one object, and the projection holds every message of the log: a single node with the
  default (lazy) fsync loses nothing it acknowledged to a crash of its process.
"""

from __future__ import annotations

import asyncio
import itertools
import signal
import time
from collections.abc import Awaitable, Callable

from tests.conftest import NatsServer
from tests.faults.harness import Cluster, Reply, assert_no_job_left_behind, poll, small_job

OUTAGE = 8.0
CLIENTS = 3
PACE = 0.5  # seconds between one client's submissions: ~6 jobs/s, what two tabs render


SIGKILL_PACE = 0.2
"""Seconds between a client's submissions in the SIGKILL test (4 clients: ≤ 20 jobs/s,
which two renderers with a browser context per job finish well within the check)."""


class Client:
    """Submits a job every `pace` seconds until stopped; remembers each key's body and reply."""

    def __init__(self, cluster: Cluster, pace: float = PACE) -> None:
        self.cluster = cluster
        self.pace = pace
        self.numbers = itertools.count()
        self.replies: list[tuple[str, Reply]] = []
        self.bodies: dict[str, dict[str, object]] = {}
        self.stop = asyncio.Event()

    async def run(self) -> None:
        while not self.stop.is_set():
            n = next(self.numbers)
            key = f"nats-restart-{n}"
            self.bodies[key] = small_job(n)
            self.replies.append((key, await self.cluster.post_job(self.bodies[key], key=key)))
            await asyncio.sleep(self.pace)

    def count(self, status: int, since: float = 0.0) -> int:
        return sum(1 for _, r in self.replies if r.status == status and r.started >= since)


async def test_nats_outage_answers_503_and_loses_no_accepted_job(
    cluster: Cluster, nats_server: NatsServer
) -> None:
    await cluster.up(renderers=1)
    await poll(lambda: _every_service(cluster, "/readyz", 200), 20, "every service ready")
    client = Client(cluster)
    tasks = [asyncio.create_task(client.run()) for _ in range(CLIENTS)]
    try:
        await poll(lambda: _at_least(client.count(202), 20), 30, "20 jobs accepted")
        await asyncio.to_thread(nats_server.stop)
        stopped = time.monotonic()
        await poll(lambda: _at_least(client.count(503), 3), 20, "503s during the outage")
        async with cluster.http.get(f"{cluster.url}/readyz") as response:
            readiness = (response.status, await response.json())
        await poll(lambda: _every_service(cluster, "/readyz", 503), 10, "no service ready")
        probes = {s.name: await s.probe("/readyz") for s in cluster.services}
        alive = {s.name: (await s.probe("/healthz"))[0] for s in cluster.services}
        await asyncio.sleep(max(0.0, stopped + OUTAGE - time.monotonic()))  # hold the outage
        await asyncio.to_thread(nats_server.start)
        restarted = time.monotonic()
        await poll(lambda: _at_least(client.count(202, restarted), 20), 40, "202s after restart")
        await poll(lambda: _every_service(cluster, "/readyz", 200), 30, "every service ready")
    finally:
        client.stop.set()
        results = await asyncio.gather(*tasks, return_exceptions=True)
    errors = [r for r in results if isinstance(r, BaseException)]
    assert not errors, f"the client's requests failed: {errors}"
    resubmitted_at = time.time()
    resubmitted = await _resubmit_refused(client)

    outcome = await assert_no_job_left_behind(cluster, "nats_restart", timeout=90)
    answers = [reply for _, reply in client.replies]
    unexpected = [r for r in answers if r.status not in (202, 503)]
    assert not unexpected, f"answers other than 202/503: {unexpected[:5]}"
    slow = [r for r in answers if r.seconds >= 6]
    assert not slow, f"answers slower than 6 s: {slow[:5]}"
    wrong = [r for r in answers if r.status == 503 and _error_type(r) != "unavailable"]
    assert not wrong, f"503s without a JSON `unavailable` error: {wrong[:5]}"
    assert readiness[0] == 503 and readiness[1]["checks"]["nats"] is False, readiness
    assert all(body["checks"]["nats"] is False for _, body in probes.values()), probes
    assert set(alive.values()) == {200}, alive
    ghosts = await _submitted_before(cluster, resubmitted, resubmitted_at)
    back = min(r.started + r.seconds for r in answers if r.started > restarted and r.status == 202)
    print(
        f"[faults] nats_restart: {len(answers)} POSTs, {client.count(503)} answered 503 "
        f"(slowest answer {max(r.seconds for r in answers):.2f}s); {len(ghosts)} of the "
        f"{len(resubmitted)} refused jobs had reached the log anyway; first 202 "
        f"{back - restarted:.1f}s after the restart; {len(outcome.statuses)} jobs checked; "
        f"503 messages: {sorted({str(r.body) for r in answers if r.status == 503})}"
    )


async def _every_service(cluster: Cluster, path: str, status: int) -> bool:
    """Whether every service's own probe at `path` answers `status`."""
    answers = [(await s.probe(path))[0] for s in cluster.services]
    return all(answer == status for answer in answers)


async def _resubmit_refused(client: Client) -> list[str]:
    """Each refused submission again, with its Idempotency-Key; the ids (each must be 202)."""
    ids: list[str] = []
    for key, reply in client.replies:
        if reply.status != 202:
            again = await client.cluster.post_job(client.bodies[key], key=key)
            assert again.status == 202, f"resubmitting {key}: {again}"
            ids.append(again.body["id"])
    return ids


async def test_nats_sigkilled_mid_load_loses_no_accepted_job(
    cluster: Cluster, nats_server: NatsServer
) -> None:
    await cluster.up(renderers=2)
    # Fast enough to have submissions in flight at the kill, slow enough that what is
    # accepted (a few hundred jobs) is rendered well within the check's deadline: at full
    # speed a CI run accepted 8,641 jobs, more than two renderers finish in 90 s.
    client = Client(cluster, pace=SIGKILL_PACE)
    tasks = [asyncio.create_task(client.run()) for _ in range(4)]
    try:
        await poll(lambda: _at_least(client.count(202), 60), 30, "60 jobs accepted")
        await poll(_some_done(cluster), 30, "renders done before the crash")
        await asyncio.to_thread(nats_server.stop, signal.SIGKILL)
        accepted_before = client.count(202)
        await asyncio.to_thread(nats_server.start)
        restarted = time.monotonic()
        await poll(lambda: _at_least(client.count(202, restarted), 40), 40, "202s after restart")
    finally:
        client.stop.set()
        results = await asyncio.gather(*tasks, return_exceptions=True)
    errors = [r for r in results if isinstance(r, BaseException)]
    assert not errors, f"the client's requests failed: {errors}"
    resubmitted = await _resubmit_refused(client)
    outcome = await assert_no_job_left_behind(cluster, "nats_sigkill", timeout=90)
    print(
        f"[faults] nats_sigkill: {accepted_before} jobs accepted before the SIGKILL, "
        f"{client.count(503)} answers 503 (resubmitted: {len(resubmitted)}); "
        f"{len(outcome.statuses)} jobs checked"
    )


def _some_done(cluster: Cluster) -> Callable[[], Awaitable[bool]]:
    async def check() -> bool:
        return await cluster.count_events("done") >= 10

    return check


async def _submitted_before(cluster: Cluster, ids: list[str], when: float) -> list[str]:
    """Those of `ids` whose `submitted` event is older than `when` (Unix time)."""
    rows = await cluster.query(
        "SELECT job_id FROM job_events WHERE type = 'submitted' AND job_id = ANY($1::text[]) "
        "AND extract(epoch FROM at) < $2",
        ids, when,
    )  # fmt: skip
    return [r["job_id"] for r in rows]


def _error_type(reply: Reply) -> object:
    """`error.type` of a JSON error body; None for anything else (HTML, text, no error)."""
    error = reply.body.get("error") if isinstance(reply.body, dict) else None
    return error.get("type") if isinstance(error, dict) else None


async def _at_least(value: int, target: int) -> bool:
    return value >= target

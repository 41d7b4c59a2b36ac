"""A job that kills its renderer on every attempt ends `failed`, and is never left `running`.

A watcher subscribed to `jobs.*.started` (core NATS) plays the poison: each time the poison
job starts, it SIGKILLs the renderer that started it (with its Chromium) and starts a new
one. The poison renders for most of a second, so the kill always lands mid-render. The
renderers run with PRESSROOM_MAX_ATTEMPTS=3, a 2 s ack wait, one render at a time and no
prefetched jobs, so the poison job never shares a renderer with another job. Jobs are
submitted before the first renderer starts, so the watcher knows the poison's id before it
can start.

Verifies:
- the poison job is started exactly 3 times (3 deliveries, 3 renderers killed) and then
  ends `failed`, error type `worker_lost`, "gave up after 3 attempts: worker lost": it is
  not left `running` once the deliveries ran out;
- the 10 other jobs submitted alongside end `done`; every job has one terminal event.
"""

from __future__ import annotations

import time
from typing import Any

import msgspec
import nats
from nats.aio.msg import Msg

from tests.faults.harness import (
    TERMINAL,
    Cluster,
    Service,
    assert_no_job_left_behind,
    poll,
    slow_job,
)

ATTEMPTS = 3
POISON = slow_job(0)  # about 90 pages: the kill lands while it renders


class Poison:
    """Kills the renderer that starts `job_id`, every time, and starts a fresh one."""

    def __init__(self, cluster: Cluster, job_id: str) -> None:
        self.cluster = cluster
        self.job_id = job_id
        self.kills: list[tuple[int, float]] = []  # (attempt, seconds from `started` to killed)
        self.errors: list[str] = []

    async def on_started(self, msg: Msg) -> None:
        event: dict[str, Any] = msgspec.json.decode(msg.data)
        if event["job_id"] != self.job_id:
            return
        victim = self._renderer(event["worker"])
        if victim is None:
            self.errors.append(f"attempt {event['attempt']}: no renderer {event['worker']}")
            return
        self.cluster.kill(victim)
        self.kills.append((event["attempt"], time.time() - event["at"]))
        self.cluster.start("renderer")

    def _renderer(self, worker: str) -> Service | None:
        return next((s for s in self.cluster.renderers() if s.worker == worker), None)


async def test_job_that_kills_every_renderer_ends_failed(cluster: Cluster) -> None:
    await cluster.up(
        renderers=0,
        PRESSROOM_MAX_ATTEMPTS=str(ATTEMPTS),
        PRESSROOM_ACK_WAIT="2",
        PRESSROOM_RENDER_CONCURRENCY="1",
        PRESSROOM_RENDER_PREFETCH="0",
    )
    poison_id = (await cluster.post_job(POISON, expect="failed")).body["id"]
    await cluster.submit_many(10)
    poison = Poison(cluster, poison_id)
    nc = await nats.connect(cluster.settings.nats_url)
    try:
        await nc.subscribe("jobs.*.started", cb=poison.on_started)
        await nc.flush()
        cluster.start("renderer")

        async def killed_enough() -> bool:
            return len(poison.kills) >= ATTEMPTS

        await poll(killed_enough, 60, f"{ATTEMPTS} renderers killed by the poison job")
        last_kill = time.monotonic()

        async def poison_terminal() -> str | None:
            _, body = await cluster.get_job(poison_id)
            status = body.get("status")
            return status if status in TERMINAL else None

        try:
            await poll(poison_terminal, 45, "the poison job terminal")
        finally:
            _, body = await cluster.get_job(poison_id)
            print(
                f"[faults] crash_loop: killed at attempts {[a for a, _ in poison.kills]}, "
                f"{max(k for _, k in poison.kills):.3f}s after `started` at most; poison job "
                f"{body.get('status')!r} {body.get('error')} "
                f"{time.monotonic() - last_kill:.1f}s after the last kill"
            )
        outcome = await assert_no_job_left_behind(cluster, "crash_loop", timeout=60)
    finally:
        await nc.close()

    assert not poison.errors, poison.errors
    assert [a for a, _ in poison.kills] == list(range(1, ATTEMPTS + 1)), poison.kills
    error = outcome.statuses[poison_id]["error"]
    assert error["type"] == "worker_lost", error
    assert error["message"] == f"gave up after {ATTEMPTS} attempts: worker lost", error
    starts = [s for s in await cluster.started_events() if s[0] == poison_id]
    assert len(starts) == ATTEMPTS, starts

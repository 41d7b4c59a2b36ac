"""A renderer stopped with SIGTERM exits cleanly and costs no job anything.

Verifies, with two renderers working through 60 jobs (every fifth one a slow, 90-page one),
SIGTERM sent to one of them once 10 are done, while it has renders in flight and at least
20 jobs are not yet done (work that finishes within the grace):
- it exits with status 0 within PRESSROOM_SHUTDOWN_GRACE (5 s) plus 5 s, and none of its
  processes (its Chromium) outlives it;
- every job ends `done` exactly once, with one object;
- no job it had started waits out the ack wait: each either finished there or was handed
  back (JetStream's own advisory says the message was nak'd) and started again elsewhere.
  When it starts again depends on when the other renderer frees a page, so the time is
  printed, not asserted: a job left to the ack wait is one JetStream never saw nak'd.

And, with a renderer holding as many jobs as it takes (two rendering, two waiting for a
page), each loading a page the test's server does not answer (work that cannot finish
within the grace), SIGTERM sent to it while a second renderer waits for work:
- it exits with status 0 within the grace plus the stop margin;
- every job it held is handed back at once: started again by the second renderer within
  a second of the exit, long before the ack wait (12 s here) would bring it back;
- every job ends `done` exactly once, with one object.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import nats
import pytest
from aiohttp import web
from nats.aio.msg import Msg

from services.core.model import subjects
from services.core.runtime.lifecycle import STOP_MARGIN
from tests.conftest import serving
from tests.faults.harness import (
    Cluster,
    assert_no_job_left_behind,
    poll,
    session_members,
    slow_job,
    small_job,
)

JOBS = 60
GRACE = 5.0
NAKED = "$JS.EVENT.ADVISORY.CONSUMER.MSG_NAKED"


def mixed_job(n: int) -> dict[str, Any]:
    """Every fifth job is a slow one, so a render in flight at the signal takes a while."""
    return slow_job(n) if n % 5 == 0 else small_job(n)


@contextlib.asynccontextmanager
async def naks(cluster: Cluster) -> AsyncIterator[set[int]]:
    """The stream sequences of the messages JetStream saw nak'd meanwhile (its
    `MSG_NAKED` advisories, core NATS: only while subscribed)."""
    seen: set[int] = set()

    async def advisory(msg: Msg) -> None:
        seen.add(int(json.loads(msg.data)["stream_seq"]))

    nc = await nats.connect(cluster.settings.nats_url, allow_reconnect=False)
    try:
        await nc.subscribe(f"{NAKED}.{subjects.STREAM}.*", cb=advisory)
        await nc.flush()
        yield seen
    finally:
        await nc.drain()


async def test_sigterm_renderer_exits_zero_and_every_job_is_done_once(cluster: Cluster) -> None:
    # The ack wait outlasts the grace, so a job handed back when the grace ends (a slow one
    # that could not finish) is told apart from one left to wait out the ack wait.
    await cluster.up(
        renderers=2, PRESSROOM_SHUTDOWN_GRACE=str(GRACE), PRESSROOM_ACK_WAIT=str(GRACE + 7)
    )
    victim = cluster.renderers()[0]
    await cluster.submit_many(JOBS, job=mixed_job)

    async def some_done() -> bool:
        return await cluster.count_events("done") >= 10

    await poll(some_done, 60, "10 jobs done")
    done_at_signal = await cluster.count_events("done")
    in_flight = await poll(victim.renders_in_flight, 10, "the victim rendering", interval=0.01)
    async with naks(cluster) as naked:
        code, seconds = await cluster.terminate(victim, timeout=GRACE + 10)
        exited = time.time()

    async def no_leftovers() -> bool:
        return not session_members(victim.pid)

    await poll(no_leftovers, 5, "the stopped renderer's processes gone")
    outcome = await assert_no_job_left_behind(cluster, "sigterm_renderer", timeout=90)
    started = await cluster.started_events()
    mine = [(job, attempt, at) for job, who, attempt, at in started if who == victim.worker]
    again = {  # job -> when it started again elsewhere, s after the victim's exit
        job: min(a for j, _, n, a in started if j == job and n > attempt) - exited
        for job, attempt, at in mine
        if any(j == job and n > attempt for j, _, n, _ in started)
    }
    rows = await cluster.query(
        "SELECT job_id, stream_seq FROM job_events WHERE type = 'submitted' AND job_id = ANY($1)",
        list(again),
    )
    waited = {
        r["job_id"]: round(again[r["job_id"]], 2) for r in rows if r["stream_seq"] not in naked
    }
    print(
        f"[faults] sigterm_renderer: SIGTERM with {in_flight:g} renders in flight, "
        f"{JOBS - done_at_signal} jobs not done; exit {code} after {seconds:.2f}s; it started "
        f"{len(mine)} jobs, {len(again)} of them were started again elsewhere "
        f"{sorted(round(g, 2) for g in again.values())}s after its exit; "
        f"{len(outcome.statuses)} jobs done"
    )
    assert code == 0, f"exit status {code} after {seconds:.1f}s"
    assert seconds < GRACE + 5, f"took {seconds:.1f}s to exit"
    assert JOBS - done_at_signal >= 20, f"only {JOBS - done_at_signal} jobs were left"
    assert len(rows) == len(again), "a job started again has no submission in the projection"
    assert not waited, f"jobs never handed back, started again (s after the exit): {waited}"


@dataclass
class HeldPages:
    """A page server that answers nothing until `release` is set: a render of one of its
    pages cannot finish however long the renderer waits."""

    url: str = ""
    release: asyncio.Event = field(default_factory=asyncio.Event)
    requests: list[str] = field(default_factory=list)

    async def page(self, request: web.Request) -> web.Response:
        self.requests.append(request.path)
        await self.release.wait()
        return web.Response(text=f"<p>page {request.path}</p>", content_type="text/html")


@pytest.fixture
async def held_pages() -> AsyncIterator[HeldPages]:
    server = HeldPages()
    app = web.Application()
    app.router.add_get("/{n}", server.page)
    async with serving(app) as base:
        server.url = base
        try:
            yield server
        finally:
            server.release.set()  # let held handlers end, so the server closes at once


HAND_BACK_ACK_WAIT = 12.0
"""An ack wait long enough that a job the log brings back by itself (after the last
heartbeat + ack wait) cannot be mistaken for one handed back at the exit."""


async def test_sigterm_hands_back_renders_that_cannot_finish_within_the_grace(
    cluster: Cluster, held_pages: HeldPages
) -> None:
    await cluster.up(
        renderers=1,
        PRESSROOM_ACK_WAIT=f"{HAND_BACK_ACK_WAIT:g}",
        PRESSROOM_SHUTDOWN_GRACE=str(GRACE),
    )
    victim = cluster.renderers()[0]
    pages = int(cluster.env["PRESSROOM_RENDER_CONCURRENCY"])
    in_hand = pages + int(cluster.env["PRESSROOM_RENDER_PREFETCH"])  # rendering + waiting
    for n in range(in_hand):
        assert (await cluster.post_job({"url": f"{held_pages.url}/{n}"})).status == 202

    async def all_in_hand() -> bool:
        return await victim.renders_in_flight() == in_hand and len(held_pages.requests) >= pages

    await poll(all_in_hand, 30, f"{in_hand} jobs in the victim's hands, {pages} pages loading")
    cluster.start("renderer")
    await cluster.wait_consuming(2)  # the victim's loop runs on, its hands full
    code, seconds = await cluster.terminate(victim, timeout=GRACE + 10)
    exited = time.time()
    held_pages.release.set()

    await assert_no_job_left_behind(cluster, "sigterm_hand_back", timeout=60)
    started = await cluster.started_events()
    held = {job for job, who, _, _ in started if who == victim.worker}
    again = {
        job: at - exited
        for job, who, attempt, at in started
        if who != victim.worker and attempt > 1
    }
    print(
        f"[faults] sigterm_hand_back: SIGTERM with {in_hand} renders in hand, exit {code} after "
        f"{seconds:.2f}s; started again {sorted(round(g, 2) for g in again.values())}s after"
    )
    assert code == 0, f"exit status {code} after {seconds:.1f}s"
    assert seconds < GRACE + STOP_MARGIN, f"took {seconds:.1f}s to exit"
    assert len(held) == in_hand, f"the victim started {len(held)} of the {in_hand} jobs"
    assert set(again) == held, f"jobs not started again elsewhere: {held - set(again)}"
    late = {job: gap for job, gap in again.items() if gap > 1.0}
    assert not late, f"jobs that were not handed back at the exit (s after it): {late}"

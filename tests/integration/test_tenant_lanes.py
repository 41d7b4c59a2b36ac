"""One tenant's flood of single jobs does not starve another's: each tenant's single jobs
wait in their own durable (`singles-<tenant>`), and the renderer takes from the tenants in
turn.

Alice queues 40 jobs while no renderer runs; a renderer starts; once her first job is
done, Bob submits one. Bob's job is taken at the next free slot (none of Alice's jobs is
taken between his `submitted` and his `started`, but for the race with a slot freeing as
his bell rings), so it is done before all but the few of Alice's jobs that were done or
in the renderer's hand (its pages and prefetch) meanwhile, where one FIFO queue for
everyone would have put it behind all 40. Order is read from the log (the stream
sequence of each event), not from clocks: how many of hers end before his depends on
how fast the machine renders while he submits, which of hers are taken meanwhile does
not.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import replace
from typing import Any

import nats
import pytest
from nats.js import JetStreamContext

from services.core.log import timeline
from services.core.model import events
from services.core.runtime.settings import Settings
from tests.conftest import Stack, Tenant, eventually

FLOOD = 40
JOB = {"template": "<h1>{{ who }} {{ n }}</h1>", "data": {"who": "alice", "n": 0}}


@pytest.fixture
async def js(settings: Settings) -> AsyncIterator[JetStreamContext]:
    nc = await nats.connect(settings.nats_url)
    yield nc.jetstream()
    await nc.close()


async def submit(tenant: Tenant, url: str, body: dict[str, Any]) -> str:
    async with tenant.http.post(f"{url}/jobs", json=body) as response:
        assert response.status == 202, await response.text()
        job_id: str = (await response.json())["id"]
        return job_id


async def done_seq(js: JetStreamContext, job_id: str) -> int | None:
    """The stream sequence of the job's `done`; None while it has not ended."""
    ended = await timeline.terminal_event(js, job_id)
    assert ended is None or isinstance(ended, events.JobDone), ended
    return None if ended is None else await timeline.first_terminal_seq(js, job_id)


async def test_a_tenant_s_flood_of_single_jobs_does_not_starve_another_tenant(
    settings: Settings, js: JetStreamContext
) -> None:
    settings = replace(settings, render_concurrency=2, render_prefetch=2)
    stack = Stack(settings)
    await stack.start("gateway", "projector")
    try:
        alice, bob = stack.tenant, await stack.new_tenant("bob")
        flood = [
            await submit(alice, stack.url, {**JOB, "data": {"who": "alice", "n": n}})
            for n in range(FLOOD)
        ]
        await stack.start("renderer")
        await eventually(lambda: done_seq(js, flood[0]), 60, "alice's first job done")
        bobs = await submit(bob, stack.url, {**JOB, "data": {"who": "bob", "n": 0}})
        bob_done: int = await eventually(lambda: done_seq(js, bobs), 60, "bob's job done")

        async def all_done() -> list[int] | None:
            seqs = [await done_seq(js, job_id) for job_id in flood]
            return None if None in seqs else [s for s in seqs if s is not None]

        alice_done: list[int] = await eventually(all_done, 120, "alice's jobs done")
        bob_events = [
            (seq, events.event_name(e)) for seq, _, e in await timeline.job_events(js, bobs)
        ]
        alice_started = [
            seq
            for job_id in flood
            for seq, _, e in await timeline.job_events(js, job_id)
            if isinstance(e, events.JobStarted)
        ]
    finally:
        await stack.close()
    seqs = {name: seq for seq, name in reversed(bob_events)}  # each event's first sequence
    taken_meanwhile = sum(seqs["submitted"] < seq < seqs["started"] for seq in alice_started)
    # Counted from the log against his submission, not by a look that races the renderer.
    ended_meanwhile = sum(seqs["submitted"] < seq < bob_done for seq in alice_done)
    still_queued = sum(seq > seqs["submitted"] for seq in alice_done)
    seen = (ended_meanwhile, taken_meanwhile, still_queued, bob_events)
    assert still_queued >= FLOOD // 2, seen  # most of hers were still to do when he came
    # Once Bob's job is in the log, the renderer's next free slot takes it: of Alice's jobs
    # none is taken meanwhile but in the race for a slot that frees as his bell rings.
    assert taken_meanwhile <= 2, seen
    # So it is done before most of hers: only those in the renderer's hand when he
    # submitted (its pages and prefetch) and those taken in that race end before it. One
    # FIFO queue for everyone would have put it behind all of them.
    assert ended_meanwhile <= settings.render_concurrency + settings.render_prefetch + 2, seen

"""A renderer that dies on every attempt still leaves its job `failed`, exactly once.

The crash loop is simulated without Chromium: only the gateway and the projector run, and
a raw pull subscriber on the `renderer` durable takes each delivery and never answers, as
a worker that dies mid-render would. Verifies: after `max_attempts` deliveries plus the ack
wait, the MAX_DELIVERIES advisory makes the projector fail the job with `worker_lost` and
"gave up after 2 attempts: worker lost", visible through `GET /jobs/{id}`; a second copy of
the advisory adds no second terminal event.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import replace

import asyncpg
import nats
import pytest
from nats.errors import TimeoutError as NatsTimeout
from nats.js import JetStreamContext

from services.core.log import topology
from services.core.model import subjects
from services.core.runtime.settings import Settings
from tests.conftest import Stack, eventually


@pytest.fixture
async def crash_stack(settings: Settings) -> AsyncIterator[Stack]:
    stack = Stack(replace(settings, max_attempts=2, ack_wait=1.0))
    await stack.start("gateway", "projector")
    yield stack
    await stack.close()


@pytest.fixture
async def js(settings: Settings) -> AsyncIterator[JetStreamContext]:
    nc = await nats.connect(settings.nats_url)
    yield nc.jetstream()
    await nc.close()


async def failed_events(database_url: str, job_id: str) -> int:
    conn = await asyncpg.connect(database_url)
    try:
        count: int = await conn.fetchval(
            "SELECT count(*) FROM job_events WHERE job_id = $1 AND type = 'failed'", job_id
        )
    finally:
        await conn.close()
    return count


async def advisories_handled(js: JetStreamContext, count: int) -> bool:
    info = await js.consumer_info(topology.ADVISORY_STREAM, topology.FINALIZER)
    acked = info.ack_floor.stream_seq if info.ack_floor else 0
    return acked >= count and info.num_pending == 0 and info.num_ack_pending == 0


async def test_crash_loop_job_ends_failed_worker_lost_once(crash_stack: Stack, js):
    accepted = await crash_stack.submit({"template": "<p>never rendered</p>"})
    job_id = accepted["id"]
    durable = subjects.singles_durable(crash_stack.tenant.id)
    dying_worker = await js.pull_subscribe_bind(durable, stream=subjects.STREAM)

    async def take_delivery_then_die() -> dict | None:
        # Each pull also lets the server notice that the last delivery expired: nats-server
        # emits MAX_DELIVERIES when the consumer next handles a pull request.
        with contextlib.suppress(NatsTimeout):
            for msg in await dying_worker.fetch(1, timeout=0.3):
                assert msg.subject == subjects.submitted_subject(job_id, crash_stack.tenant.id)
        job = await crash_stack.job(job_id)
        return job if job["status"] == "failed" else None

    job = await eventually(take_delivery_then_die, 20)
    assert job["error"] == {
        "type": "worker_lost",
        "message": "gave up after 2 attempts: worker lost",
    }
    assert job["attempts"] == 2
    assert await failed_events(crash_stack.settings.database_url, job_id) == 1

    # The same advisory again (nats-server re-fired them before 2.12.9 / 2.14.1).
    stored = await js.get_msg(topology.ADVISORY_STREAM, 1)
    ack = await js.publish(stored.subject, stored.data)
    assert ack.stream == topology.ADVISORY_STREAM
    await eventually(lambda: advisories_handled(js, ack.seq), 10)
    assert await failed_events(crash_stack.settings.database_url, job_id) == 1
    assert (await crash_stack.job(job_id))["status"] == "failed"
    await dying_worker.unsubscribe()

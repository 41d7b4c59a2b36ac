"""One terminal event per job, forever: after the log's duplicate window has passed, a job
that ended neither gets a second, different end nor sends a second, different webhook.

The window is set to 1 s here, and the tests wait it out (a server-side clock: there is no
event to wait for).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import replace

import pytest

from services.core.log import bus, timeline
from services.core.model import events, subjects
from services.core.runtime.settings import Settings
from tests.conftest import Receiver, Stack, eventually

WINDOW = 1.0
HELLO = {"template": "<h1>Hi {{ name }}</h1>", "data": {"name": "Ana"}}


@pytest.fixture
async def stack(settings: Settings) -> AsyncIterator[Stack]:
    stack = Stack(replace(settings, dedup_window=WINDOW))
    await stack.start()
    yield stack
    await stack.close()


async def terminal_subjects(settings: Settings, job_id: str) -> list[str]:
    async with bus.open_bus(settings, name="test") as (_, js):
        found = await timeline.job_events(js, job_id)
    return [events.event_name(e) for _, _, e in found if isinstance(e, events.TERMINAL)]


def late_failure(stack: Stack, job_id: str, webhook_url: str | None = None) -> events.JobFailed:
    """A contradicting end for a job that is done: a verdict arriving far too late."""
    return events.JobFailed(
        job_id=job_id,
        tenant=stack.tenant.id,
        attempt=1,
        error=events.ErrorInfo(type="stalled", message="a late verdict"),
        webhook_url=webhook_url,
    )


async def test_a_job_that_ended_long_ago_gets_no_second_end(stack: Stack) -> None:
    job = await stack.finished((await stack.submit(HELLO))["id"])
    assert job["status"] == "done"
    await asyncio.sleep(WINDOW * 1.5)  # past the duplicate window
    late = late_failure(stack, job["id"])
    async with bus.open_bus(stack.settings, name="test") as (_, js):
        assert await bus.publish_terminal(js, late) is False
    assert await terminal_subjects(stack.settings, job["id"]) == ["done"]
    assert (await stack.job(job["id"]))["status"] == "done"


async def test_a_second_end_in_the_log_sends_no_second_webhook(
    stack: Stack, receiver: Receiver
) -> None:
    job = await stack.finished((await stack.submit({**HELLO, "webhook_url": receiver.url}))["id"])
    assert job["status"] == "done"
    await eventually(lambda: len(receiver.requests) == 1, 15, "the done webhook")
    await asyncio.sleep(WINDOW * 1.5)  # past the duplicate window
    late = late_failure(stack, job["id"], webhook_url=receiver.url)
    async with bus.open_bus(stack.settings, name="test") as (_, js):
        # As an older version could: stored, since the window has passed.
        assert await bus.publish(js, late) is True

        async def notifier_idle() -> bool:
            info = await js.consumer_info(subjects.STREAM, subjects.NOTIFIER)
            return (info.num_pending, info.num_ack_pending) == (0, 0)

        await eventually(notifier_idle, 15, "the notifier has taken the late event")
    assert len(receiver.requests) == 1
    assert receiver.requests[0]["json"]["type"] == "job.done"
    assert (await stack.job(job["id"]))["status"] == "done"

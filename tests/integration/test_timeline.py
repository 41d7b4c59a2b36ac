"""Reading a job's events back from the log, by the JetStream API and by direct get."""

from __future__ import annotations

import dataclasses

import pytest

from services.core import bus, events, timeline
from services.core.settings import Settings
from tests.conftest import NatsServer


@pytest.mark.parametrize("direct", [False, True])
async def test_the_terminal_event_is_found_both_ways(nats_server: NatsServer, direct: bool):
    settings = Settings(nats_url=nats_server.url)
    async with bus.open_bus(settings, name="test") as (_, js):
        await bus.publish(js, events.JobSubmitted(job_id="j1", template="<p>x</p>"))
        assert await timeline.terminal_event(js, "j1", direct=direct) is None
        await bus.publish(js, events.JobCancelled(job_id="j1", reason="not needed"))
        found = await timeline.terminal_event(js, "j1", direct=direct)
        submitted = await timeline.last_event(js, "j1", "submitted", direct=direct)
        missing = await timeline.last_event(js, "j2", "submitted", direct=direct)
    assert isinstance(found, events.JobCancelled) and found.reason == "not needed"
    assert isinstance(submitted, events.JobSubmitted) and submitted.template == "<p>x</p>"
    assert missing is None


async def test_a_stream_made_before_direct_get_gets_it_at_start(nats_server: NatsServer):
    settings = Settings(nats_url=nats_server.url)
    async with bus.open_bus(settings, name="test") as (_, js):
        old = dataclasses.replace(bus.stream_config(settings), allow_direct=False)
        await js.update_stream(old)
        assert (await js.stream_info(events.STREAM)).config.allow_direct is False
    async with bus.open_bus(settings, name="test") as (_, js):
        assert (await js.stream_info(events.STREAM)).config.allow_direct is True

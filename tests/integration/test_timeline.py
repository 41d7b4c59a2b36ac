"""Reading a job's events back from the log, by the JetStream API and by direct get."""

from __future__ import annotations

import dataclasses
import json

import asyncpg
import pytest
from nats.aio.msg import Msg

from services.core.log import bus, timeline, topology
from services.core.model import events, subjects
from services.core.runtime.settings import Settings
from tests.conftest import NatsServer, Stack, eventually


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


async def test_an_end_is_found_with_and_without_a_webhook_and_for_an_item(
    nats_server: NatsServer,
):
    """Ends on `jobs.<id>.<tag>.quiet` (no webhook), on `jobs.<id>.<tag>` (a webhook, an
    end logged before the token, a batch's item), and the first of two counts."""
    settings = Settings(nats_url=nats_server.url)
    hook = "https://example.com/hook"
    error = events.ErrorInfo(type="template", message="x")
    async with bus.open_bus(settings, name="test") as (_, js):
        item = subjects.item_job_id("b1", 0)
        for job_id in ("quiet", "hooked", item):
            await bus.publish(js, events.JobSubmitted(job_id=job_id, template="<p>x</p>"))
        await bus.publish(js, events.JobFailed(job_id="quiet", attempt=1, error=error))
        await bus.publish(
            js, events.JobFailed(job_id="hooked", attempt=1, error=error, webhook_url=hook)
        )
        await bus.publish(js, events.JobCancelled(job_id=item, reason="batch"))
        late = events.JobCancelled(job_id="quiet", reason="late")  # past the dedup window
        await bus.publish(js, late, msg_id="another")
        found = {
            (job_id, direct): await timeline.terminal_event(js, job_id, direct=direct)
            for job_id in ("quiet", "hooked", item)
            for direct in (False, True)
        }
        firsts = {
            job_id: await timeline.first_terminal_seq(js, job_id)
            for job_id in ("quiet", "hooked", item)
        }
        seen = {raw.seq: raw.subject async for raw in timeline.messages(js, "jobs.>")}
    assert {type(event).__name__ for (job_id, _), event in found.items() if job_id == "hooked"} == {
        "JobFailed"
    }
    assert {type(event).__name__ for (job_id, _), event in found.items() if job_id == item} == {
        "JobCancelled"
    }
    assert all(found["quiet", direct] is not None for direct in (False, True))
    assert seen[firsts["quiet"]] == "jobs.quiet.failed.quiet"
    assert seen[firsts["hooked"]] == "jobs.hooked.failed"
    assert seen[firsts[item]] == "jobs.b1.0.cancelled"


async def test_a_conditional_publish_is_stored_only_while_nothing_came_after(
    nats_server: NatsServer,
):
    """`publish(after=seq)`: stored while the job's latest event is `seq`, whatever other
    jobs (one whose id starts the same, a batch's items) publish meanwhile; refused with
    `Moved`, storing nothing, once the job has a later event."""
    settings = Settings(nats_url=nats_server.url)
    async with bus.open_bus(settings, name="test") as (_, js):
        seqs = {}
        for job_id in ("j1", "b1.1", "b1.2"):
            submitted = events.JobSubmitted(job_id=job_id, template="<p>x</p>")
            await bus.publish(js, submitted)
            seqs[job_id] = (
                await js.get_last_msg(subjects.STREAM, events.subject_of(submitted))
            ).seq
        await bus.publish(js, events.JobSubmitted(job_id="j10", template="<p>x</p>"))
        await bus.publish(js, events.JobCancelled(job_id="b1.2", reason="batch cancelled"))
        started = events.JobStarted(job_id="j1", attempt=1, worker="w")
        assert await bus.publish(js, started, after=seqs["j1"]) is True
        assert await bus.publish(
            js, events.JobStarted(job_id="b1.1", attempt=1, worker="w"), after=seqs["b1.1"]
        )
        with pytest.raises(bus.Moved):
            await bus.publish(
                js, events.JobStarted(job_id="b1.2", attempt=1, worker="w"), after=seqs["b1.2"]
            )
        with pytest.raises(bus.Moved):  # j1's own `started` came after its submission
            await bus.publish(
                js, events.JobStarted(job_id="j1", attempt=2, worker="w"), after=seqs["j1"]
            )
        names = [
            events.event_name(event)
            for job_id in ("j1", "b1.2")
            for _, _, event in await timeline.job_events(js, job_id)
        ]
    assert names == ["submitted", "started", "submitted", "cancelled"]


async def test_a_stream_made_before_direct_get_gets_it_at_start(nats_server: NatsServer):
    settings = Settings(nats_url=nats_server.url)
    async with bus.open_bus(settings, name="test") as (_, js):
        old = dataclasses.replace(topology.stream_config(settings), allow_direct=False)
        await js.update_stream(old)
        assert (await js.stream_info(subjects.STREAM)).config.allow_direct is False
    async with bus.open_bus(settings, name="test") as (_, js):
        assert (await js.stream_info(subjects.STREAM)).config.allow_direct is True


async def test_a_timeline_is_read_in_order_and_leaves_no_consumer_behind(
    nats_server: NatsServer,
):
    """Every event of the job, in order, none of another job's (even one whose id starts
    the same); reading it a hundred times creates no consumer on the server."""
    settings = Settings(nats_url=nats_server.url)
    async with bus.open_bus(settings, name="test") as (nc, js):
        created: list[str] = []  # every consumer-creating API request on the server

        async def seen(msg: Msg) -> None:
            created.append(msg.subject)

        watch = await nc.subscribe("$JS.API.CONSUMER.>", cb=seen)
        await bus.publish(js, events.JobSubmitted(job_id="j1", template="<p>x</p>"))
        await bus.publish(js, events.JobSubmitted(job_id="j10", template="<p>y</p>"))
        await bus.publish(js, events.JobStarted(job_id="j1", attempt=1, worker="w"))
        await bus.publish(js, events.JobCancelled(job_id="j1", reason="not needed"))
        consumers = (await js.stream_info(subjects.STREAM)).state.consumer_count
        for _ in range(100):
            found = await timeline.job_events(js, "j1")
        after = (await js.stream_info(subjects.STREAM)).state.consumer_count
        missing = await timeline.job_events(js, "nope")
        await nc.flush()
        await watch.unsubscribe()
    assert [events.event_name(event) for _, _, event in found] == [
        "submitted",
        "started",
        "cancelled",
    ]
    assert [seq for seq, _, _ in found] == sorted(seq for seq, _, _ in found)
    assert [at for _, at, _ in found] == sorted(at for _, at, _ in found)
    assert {event.job_id for _, _, event in found} == {"j1"}
    assert after == consumers and created == []
    assert missing == []


async def test_a_timeline_shows_what_happened_never_the_input_or_the_webhook_secret(
    settings: Settings,
):
    """`GET /jobs/{id}/events` and the projection's `job_events` leave out a submission's
    template, HTML, data and webhook secret; the job row keeps the input, once."""
    stack = Stack(settings)
    await stack.start("gateway", "projector")
    try:
        job_id = (await stack.submit(SECRET_JOB))["id"]
        async with stack.client.get(f"{stack.url}/jobs/{job_id}/events") as response:
            shown = (await response.json())["events"][0]
        recorded, job_input = await eventually(lambda: recorded_submission(settings, job_id))
    finally:
        await stack.close()
    hidden = {"template", "html", "data", "webhook_secret"}
    assert shown["type"] == "submitted" and shown["webhook_url"] == SECRET_JOB["webhook_url"]
    assert not hidden & shown.keys(), shown
    assert recorded["type"] == "submitted" and not hidden & recorded.keys(), recorded
    assert (job_input["template"], job_input["data"]) == (SECRET_JOB["template"], {"n": 1})


SECRET_JOB = {
    "template": "<p>{{ n }}</p>",
    "data": {"n": 1},
    "webhook_url": "http://127.0.0.1:9/hook",
    "webhook_secret": "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
}


async def recorded_submission(settings: Settings, job_id: str) -> tuple[dict, dict] | None:
    """The projected `submitted` event's body and the job row's input, once projected."""
    conn = await asyncpg.connect(settings.database_url)
    try:
        body = await conn.fetchval(
            "SELECT body FROM job_events WHERE job_id = $1 AND type = 'submitted'", job_id
        )
        job_input = await conn.fetchval("SELECT input FROM jobs WHERE id = $1", job_id)
    finally:
        await conn.close()
    if body is None or job_input is None:
        return None
    return json.loads(body), json.loads(job_input)

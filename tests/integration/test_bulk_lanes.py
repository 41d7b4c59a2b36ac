"""Batches' items reach the renderer through their batches' own durables: each item is
rendered with its batch's template and its own data; a single job does not wait behind a
batch; two tenants' batches take turns; a paused batch starts nothing until it runs again.

The tests play the conductor's part themselves (the batch's `submitted` event, its durable,
its items' submissions and its state in `BATCH_STATE`) and run the gateway and a renderer.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import msgspec
import pypdf
import pytest
from nats.js import JetStreamContext

from services.core.log import bus, timeline, topology
from services.core.model import events, subjects
from services.core.runtime.settings import Settings
from services.renderer import consumer
from services.renderer.states import BatchStates
from tests.conftest import Stack, eventually

TEMPLATE = "<h1>{{ tag }}-{{ n }}-end</h1>"


@dataclass
class Batch:
    id: str
    tenant: str
    tag: str
    total: int

    def job_ids(self) -> list[str]:
        return [subjects.item_job_id(self.id, index) for index in range(self.total)]


async def set_state(js: JetStreamContext, batch: Batch, state: str) -> None:
    kv = await js.key_value(subjects.BATCH_STATE)
    await kv.put(batch.id, msgspec.json.encode(events.BatchState(batch.tenant, state)))


async def add_batch(
    js: JetStreamContext,
    settings: Settings,
    tag: str,
    total: int,
    *,
    tenant: str = "t-bulk",
    submitted: bool = True,
) -> Batch:
    """What the conductor does when it expands a batch: its durable, its items'
    submissions (template empty, data their own), its state `running`."""
    batch = Batch("b" + uuid.uuid4().hex[:31], tenant, tag, total)
    if submitted:
        await bus.publish_batch(
            js,
            events.BatchSubmitted(
                batch_id=batch.id,
                tenant=tenant,
                total=total,
                items_key=subjects.batch_items_key(tenant, batch.id),
                template=TEMPLATE,
            ),
        )
    await js.add_consumer(subjects.STREAM, topology.bulk_config(settings, batch.id))
    for index, job_id in enumerate(batch.job_ids()):
        item = events.JobSubmitted(
            job_id=job_id,
            tenant=tenant,
            data={"tag": tag, "n": index},
            batch_id=batch.id,
            index=index,
            filename=f"{tag}-{index}.pdf",
        )
        await bus.publish(js, item)
    await set_state(js, batch, "running")
    return batch


async def first_seqs(js: JetStreamContext, batch: Batch, event: str) -> dict[str, int]:
    """Item job id -> stream sequence of its first `event` in the log."""
    found: dict[str, int] = {}
    async for raw in timeline.messages(js, subjects.subject(f"{batch.id}.*", event)):
        job_id = ".".join((raw.subject or "").split(".")[1:3])
        found.setdefault(job_id, int(raw.seq or 0))
    return found


async def all_done(js: JetStreamContext, *batches: Batch) -> dict[str, int]:
    async def check() -> dict[str, int] | None:
        done: dict[str, int] = {}
        for batch in batches:
            done |= await first_seqs(js, batch, "done")
        return done if len(done) == sum(b.total for b in batches) else None

    result: dict[str, int] = await eventually(check, 180, "every item done")
    return result


async def single_done(stack: Stack, js: JetStreamContext) -> tuple[int, int]:
    """Submit a single job through the API and wait for it: the stream sequences of its
    submission and of its `done`."""
    job_id = (await stack.submit({"template": "<p>single</p>"}))["id"]

    async def done() -> int | None:
        ended = await timeline.terminal_event(js, job_id)
        assert ended is None or isinstance(ended, events.JobDone), ended
        return None if ended is None else await timeline.first_terminal_seq(js, job_id)

    seq: int = await eventually(done, 60, "the single job done")
    submitted = await anext(timeline.messages(js, subjects.subject(job_id, ">")))
    return int(submitted.seq or 0), seq


@pytest.fixture
async def bench(settings: Settings) -> AsyncIterator[tuple[Stack, JetStreamContext]]:
    """A stack not started yet (the test sets up its batches first) and a connection."""
    stack = Stack(settings)
    async with bus.open_bus(settings, name="test") as (_, js):
        yield stack, js
        await stack.close()


def pdf_text(settings: Settings, key: str) -> str:
    pdf = (Path(settings.storage_dir) / key).read_bytes()
    return "".join(page.extract_text() for page in pypdf.PdfReader(io.BytesIO(pdf)).pages)


async def test_two_tenants_batches_take_turns_and_each_item_holds_its_own_data(
    bench: tuple[Stack, JetStreamContext],
) -> None:
    stack, js = bench
    ana = await add_batch(js, stack.settings, "ana", 10, tenant="t-ana")
    bob = await add_batch(js, stack.settings, "bob", 10, tenant="t-bob")
    await stack.start("renderer")
    await all_done(js, ana, bob)
    for batch in (ana, bob):
        for index, job_id in enumerate(batch.job_ids()):
            done = await timeline.terminal_event(js, job_id)
            assert isinstance(done, events.JobDone), done
            assert f"{batch.tag}-{index}-end" in pdf_text(stack.settings, done.object_key)
    started = {**await first_seqs(js, ana, "started"), **await first_seqs(js, bob, "started")}
    first_ten = sorted(started, key=started.__getitem__)[:10]
    owners = [job_id.split(".")[0] for job_id in first_ten]
    assert owners.count(ana.id) >= 3, owners
    assert owners.count(bob.id) >= 3, owners


async def test_a_single_job_does_not_wait_behind_a_batch(
    bench: tuple[Stack, JetStreamContext],
) -> None:
    stack, js = bench
    batch = await add_batch(js, stack.settings, "run", 60)
    await stack.start("gateway", "renderer")
    await eventually(
        lambda: first_seqs(js, batch, "done"), 60, "the batch under way", interval=0.02
    )
    submitted, single = await single_done(stack, js)
    done = await all_done(js, batch)
    # Counted from the log, not by a look that races the renderer.
    done_before = sum(seq < submitted for seq in done.values())
    assert done_before < batch.total // 2  # most of the batch was still queued
    overtaken = [seq for seq in done.values() if seq > single]
    # Only the items in hand when the job came (one per page) may finish before it.
    assert len(overtaken) >= batch.total - done_before - 3, (done_before, len(overtaken))


async def test_a_paused_batch_starts_no_item_until_it_runs_again(
    bench: tuple[Stack, JetStreamContext],
) -> None:
    stack, js = bench
    batch = await add_batch(js, stack.settings, "pause", 12)
    await stack.start("gateway", "renderer")
    await eventually(lambda: _at_least(js, batch, "done", 2), 60, "two items done", interval=0.02)
    await set_state(js, batch, "paused")
    await single_done(stack, js)  # the renderer has taken new work since the pause
    started = await first_seqs(js, batch, "started")
    assert len(started) < batch.total
    await single_done(stack, js)
    assert await first_seqs(js, batch, "started") == started  # nothing started meanwhile
    await set_state(js, batch, "running")
    done = await all_done(js, batch)
    assert sorted(done) == sorted(batch.job_ids())


async def test_an_item_of_a_batch_without_its_submission_fails_clearly(
    bench: tuple[Stack, JetStreamContext],
) -> None:
    stack, js = bench
    batch = await add_batch(js, stack.settings, "lost", 1, submitted=False)
    await stack.start("renderer")
    job_id = batch.job_ids()[0]
    failed = await eventually(lambda: timeline.terminal_event(js, job_id), 60, "the item's end")
    assert isinstance(failed, events.JobFailed), failed
    assert failed.error.type == "invalid_event"
    assert f"batch {batch.id} has no submission" in failed.error.message


def holder(settings: Settings, js: JetStreamContext, batch: Batch, state: str) -> Any:
    """A renderer that sees `batch` in `state` (it renders nothing here: no browser)."""
    known = BatchStates()
    known.set(batch.id, events.BatchState(batch.tenant, state))
    return consumer.Renderer(settings, js, None, None, None, known)  # type: ignore[arg-type]


async def test_an_item_in_hand_when_its_batch_pauses_waits_there_using_no_attempt(
    settings: Settings,
) -> None:
    """Paused for several ack waits, the item stays in the renderer's hand (its heartbeat
    keeps it): never redelivered, so a pause costs none of its attempts; it uses no page
    meanwhile (parked); once its batch is cancelled and its `cancelled` is in the log, it
    is acked, never started."""
    settings = replace(settings, ack_wait=1.0)
    async with bus.open_bus(settings, name="test") as (nc, js):
        batch = await add_batch(js, settings, "held", 1)
        lane = bus.Lane(nc, subjects.bulk_durable(batch.id))
        [msg] = await lane.take(1)
        renderer = holder(settings, js, batch, "paused")
        handling = asyncio.create_task(renderer.handle(msg))
        await eventually(lambda: len(renderer.batches.parked) == 1, 10, "the item parked")
        # What must not happen (a redelivery) can only be waited for: three ack waits.
        await asyncio.sleep(3 * settings.ack_wait)
        assert not handling.done()
        info = await js.consumer_info(subjects.STREAM, subjects.bulk_durable(batch.id))
        assert (info.num_ack_pending, info.num_redelivered, info.num_pending) == (1, 0, 0)
        renderer.batches.set(batch.id, events.BatchState(batch.tenant, "cancelled"))
        job_id = batch.job_ids()[0]
        await bus.publish(js, events.JobCancelled(job_id=job_id, tenant=batch.tenant))
        await asyncio.wait_for(handling, 10)
        assert renderer.batches.parked == set()

        async def settled() -> bool:
            info = await js.consumer_info(subjects.STREAM, subjects.bulk_durable(batch.id))
            return (info.num_pending, info.num_ack_pending) == (0, 0)

        await eventually(settled, 10, "the item acked")
        assert msg.metadata.num_delivered == 1
        assert await first_seqs(js, batch, "started") == {}
        assert isinstance(await timeline.terminal_event(js, job_id), events.JobCancelled)
        await lane.close()


async def test_an_item_held_while_paused_renders_when_its_batch_runs_again(
    settings: Settings,
) -> None:
    """Resumed, the held item goes on to its attempt, the first (here it fails: this
    renderer has no browser, which is beside the point): `started` with attempt 1."""
    async with bus.open_bus(settings, name="test") as (nc, js):
        batch = await add_batch(js, settings, "resumed", 1)
        lane = bus.Lane(nc, subjects.bulk_durable(batch.id))
        [msg] = await lane.take(1)
        renderer = holder(settings, js, batch, "paused")
        handling = asyncio.create_task(renderer.handle(msg))
        await eventually(lambda: len(renderer.batches.parked) == 1, 10, "the item parked")
        assert await first_seqs(js, batch, "started") == {}
        renderer.batches.set(batch.id, events.BatchState(batch.tenant, "running"))
        await eventually(lambda: _at_least(js, batch, "started", 1), 10, "the item started")
        started = await timeline.last_event(js, batch.job_ids()[0], "started")
        assert isinstance(started, events.JobStarted) and started.attempt == 1
        handling.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await handling
        await lane.close()


async def _at_least(js: JetStreamContext, batch: Batch, event: str, count: int) -> bool:
    return len(await first_seqs(js, batch, event)) >= count

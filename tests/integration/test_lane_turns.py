"""Which batch's item a renderer takes next: tenants in turn, then each tenant's batches in
turn; an empty batch passes its turn; paused and cancelled batches wait from the next slot
on; a batch joining takes its place without resetting anyone's turn.

The real `Lanes` takes the items from their batches' durables on a real NATS, one slot at
a time (`limit=1`), and the handler records each item as it is handed over: the order a
renderer's handler sees. The batches' states are the renderer's `BatchStates`, set by the
test where the bucket's watcher would set them."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field

import pytest
from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.js import JetStreamContext

from services.core.log import bus, topology
from services.core.model import events, subjects
from services.core.runtime.settings import Settings
from services.renderer.lanes import Lanes
from services.renderer.states import BatchStates
from tests.conftest import NatsServer


@dataclass
class Bench:
    nc: Client
    js: JetStreamContext
    settings: Settings
    known: BatchStates = field(default_factory=BatchStates)

    async def batch(self, batch_id: str, tenant: str, items: int, state: str | None) -> None:
        """A batch as the conductor leaves it: its durable, `items` submissions, and
        (unless None) its state."""
        await self.js.add_consumer(subjects.STREAM, topology.bulk_config(self.settings, batch_id))
        for index in range(items):
            await bus.publish(
                self.js,
                events.JobSubmitted(
                    job_id=subjects.item_job_id(batch_id, index),
                    tenant=tenant,
                    data={"n": index},
                    batch_id=batch_id,
                    index=index,
                ),
            )
        if state is not None:
            self.set(batch_id, tenant, state)

    def set(self, batch_id: str, tenant: str, state: str) -> None:
        self.known.set(batch_id, events.BatchState(tenant=tenant, state=state))

    async def taken(
        self, count: int, then: dict[int, Callable[[], None]] | None = None
    ) -> list[str]:
        """Run the renderer's lanes until `count` items were handed over; the batch of
        each, in order. `then[n]` runs as the n-th item is handled (a state changing
        while that render is in flight)."""
        seen: list[str] = []
        stop = asyncio.Event()

        async def handler(msg: Msg) -> None:
            seen.append(msg.subject.split(".")[1])  # jobs.<batch>.<index>.submitted
            (then or {}).get(len(seen), lambda: None)()
            await msg.ack()
            if len(seen) == count:
                stop.set()

        lanes = Lanes(self.nc, self.js, handler, self.known, limit=1, bulk_limit=1)
        running = asyncio.create_task(lanes.run(stop, grace=5.0))
        try:
            await asyncio.wait_for(stop.wait(), 30)
        finally:
            stop.set()
            await running
        return seen


@pytest.fixture
async def bench(nats_server: NatsServer) -> AsyncIterator[Bench]:
    settings = Settings(nats_url=nats_server.url)
    async with bus.open_bus(settings, name="test") as (nc, js):
        yield Bench(nc, js, settings)


async def test_tenants_alternate_and_a_tenants_batches_share_its_turns(bench: Bench) -> None:
    await bench.batch("a1", "ana", 6, "running")
    for batch_id in ("b1", "b2", "b3"):
        await bench.batch(batch_id, "bob", 6, "running")
    taken = await bench.taken(8)
    assert taken == ["a1", "b1", "a1", "b2", "a1", "b3", "a1", "b1"]


async def test_a_tenant_whose_batches_are_empty_passes_its_turn(bench: Bench) -> None:
    await bench.batch("a1", "ana", 0, "running")
    await bench.batch("a2", "ana", 1, "running")
    await bench.batch("b1", "bob", 5, "running")
    # a1 is empty: ana's turn goes to a2; once ana has nothing, bob takes every slot.
    assert await bench.taken(6) == ["a2", "b1", "b1", "b1", "b1", "b1"]


async def test_paused_and_cancelled_batches_are_skipped_from_the_next_slot_on(
    bench: Bench,
) -> None:
    await bench.batch("a1", "ana", 9, "running")
    await bench.batch("b1", "bob", 9, "running")
    await bench.batch("c1", "cy", 9, "running")

    def pause() -> None:
        bench.set("b1", "bob", "paused")
        bench.set("c1", "cy", "cancelled")

    def resume() -> None:
        bench.set("b1", "bob", "running")

    taken = await bench.taken(8, {3: pause, 6: resume})
    assert taken == ["a1", "b1", "c1", "a1", "a1", "a1", "b1", "a1"]


async def test_a_batch_joining_takes_its_place_without_resetting_turns(bench: Bench) -> None:
    await bench.batch("a1", "ana", 9, "running")
    await bench.batch("b1", "bob", 9, "running")
    await bench.batch("b2", "bob", 9, None)
    await bench.batch("c1", "cy", 9, None)

    def join() -> None:
        bench.set("c1", "cy", "running")
        bench.set("b2", "bob", "running")

    taken = await bench.taken(7, {1: join})
    assert taken == ["a1", "b1", "c1", "a1", "b2", "c1", "a1"]

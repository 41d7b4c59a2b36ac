"""What a renderer takes next: single jobs first, then batches' items, fairly.

    a slot frees ──> the `renderer` durable, no wait: every single job it has (up to the
                │    free slots)
                └──> one item of the next running batch in turn (its durable
                     `bulk-<batch_id>`), again while slots are left and fewer than
                     `bulk_limit` items are in hand

Turns go round robin over the tenants that have a running batch, and within a tenant over
its running batches (`Rotation`), so two tenants' runs progress at the same rate whatever
their sizes. At most `bulk_limit` items (the browser's pages) are in hand: items in hand
queue for a page ahead of a single job that arrives after them, so with no more than
the pages a single job waits for the shortest render in flight, never behind the run
(docs/design-batches.md, "Choosing the next render").

With no batch running the loop is the plain worker's (`core/worker.py`): a long poll on
`renderer`. With batches running and nothing to take anywhere it waits until a render
ends, a batch's state changes or `IDLE_WAIT` has passed, then asks again.
"""

from __future__ import annotations

import asyncio
import bisect
import contextlib
import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass, field

from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.js import JetStreamContext

from services.core import bus, events, worker
from services.core.errors import NotFound, Unavailable
from services.renderer.states import BatchStates

log = logging.getLogger(__name__)

IDLE_WAIT = 0.2
"""Seconds between asks while batches run and no lane had anything: how long a single
job arriving then waits at most to be taken, and what keeps the loop from spinning."""

TROUBLE_WAIT = 1.0
"""Seconds before asking again after NATS did not answer a pull."""

MISSING_WAIT = 1.0
"""Seconds a running batch without a durable is skipped: the conductor may write the
state just before it makes the durable, and deletes the durable just before the key."""


@dataclass
class Rotation:
    """Whose turn it is: round robin over tenants, then over each tenant's batches.

    Pure (no I/O). It remembers the tenant served last and, per tenant, the batch served
    last; the next order starts just after them in name order, so a batch or tenant
    joining, pausing or ending never resets anyone else's turn. Two tenants alternate
    whatever their number of batches; one tenant's batches share its turns.
    """

    last_tenant: str | None = None
    last_batch: dict[str, str] = field(default_factory=dict)  # one entry per tenant seen

    def order(self, running: Mapping[str, str]) -> list[str]:
        """The batches to try, in turn, for the next item: `running` maps batch id to
        tenant. The first that has an item takes the turn (`served`); an empty one passes
        it on, to its tenant's next batch first."""
        by_tenant: dict[str, list[str]] = {}
        for batch_id, tenant in sorted(running.items()):
            by_tenant.setdefault(tenant, []).append(batch_id)
        tenants = _after(sorted(by_tenant), self.last_tenant)
        return [b for t in tenants for b in _after(by_tenant[t], self.last_batch.get(t))]

    def served(self, batch_id: str, tenant: str) -> None:
        """`batch_id` (of `tenant`) gave the last item: the turn moves on."""
        self.last_tenant = tenant
        self.last_batch[tenant] = batch_id


def _after(names: list[str], last: str | None) -> list[str]:
    """`names` (sorted) rotated to start just after `last` (which may be gone)."""
    start = 0 if last is None else bisect.bisect_right(names, last)
    return names[start:] + names[:start]


async def held(sub: JetStreamContext.PullSubscription, limit: int) -> list[Msg]:
    """Up to `limit` single jobs the subscription already holds: late answers to a long
    poll (`bus.fetch` while no batch ran) that arrived after it timed out here. Read
    without asking the server again: `fetch` would send a pull of its own, whose expiry
    (a status message) also lands late, so every later look waited `IDLE_WAIT` for
    nothing and pages stood idle between items (`bench/batch_run.py`: 40% of a batch).
    Status messages are dropped: they answered pulls that are over."""
    msgs: list[Msg] = []
    while sub.pending_msgs and len(msgs) < limit:
        try:  # nats-py reads what a pull subscription holds only through a new pull
            msg = await sub._sub.next_msg(timeout=IDLE_WAIT)
        except TimeoutError:
            break
        if not (msg.headers or {}).get("Status"):
            msgs.append(msg)
    return msgs


def bulk_room(free: int, interactive: int, bulk_in_hand: int, bulk_limit: int) -> int:
    """How many items to take now: the slots single jobs left free (`interactive` of the
    `free` slots went to them), and no more than `bulk_limit` items in hand in all."""
    return max(0, min(free - interactive, bulk_limit - bulk_in_hand))


class Lanes:
    """Keeps up to `limit` messages in hand, at most `bulk_limit` of them batches' items,
    each handled by `handler` in its own task."""

    def __init__(
        self,
        nc: Client,
        js: JetStreamContext,
        handler: worker.Handler,
        states: BatchStates,
        *,
        limit: int,
        bulk_limit: int,
    ) -> None:
        self.nc = nc
        self.js = js
        self.handler = handler
        self.states = states
        self.limit = limit
        self.bulk_limit = bulk_limit
        self.rotation = Rotation()
        self._inflight: set[asyncio.Task[None]] = set()
        self._bulk: set[asyncio.Task[None]] = set()
        self._lanes: dict[str, bus.Lane] = {}
        self._missing: dict[str, float] = {}  # batch id -> skipped until (monotonic)
        self._wake = asyncio.Event()  # a render ended, a state changed, or stop
        states.listen(self._wake.set)

    async def run(self, stop: asyncio.Event, grace: float) -> None:
        """Take and handle messages until `stop` is set; then hand in-flight work
        `grace` seconds to finish, as `worker.work` does."""
        sub = await bus.subscribe(self.js, events.RENDERER)
        interactive = bus.Lane(self.nc, events.RENDERER)
        waker = asyncio.create_task(self._wake_on(stop))
        try:
            while not stop.is_set():
                self._wake.clear()  # before looking: whatever happens next wakes the wait
                await self._step(sub, interactive)
        finally:
            waker.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await waker
            await self._close_lanes(interactive)
            await bus.close_subscription(sub)
            await worker.drain(self._inflight, grace)

    async def _wake_on(self, stop: asyncio.Event) -> None:
        await stop.wait()
        self._wake.set()

    async def _step(self, sub: JetStreamContext.PullSubscription, interactive: bus.Lane) -> None:
        free = self.limit - len(self._inflight)
        if free <= 0:
            await self._idle(None)
        elif not self.states.running():
            self._start(await bus.fetch(sub, free), bulk=False)
        else:
            try:
                took = await self._fill(sub, interactive, free)
            except Unavailable as exc:
                log.warning("cannot take work: %s", exc)
                await self._idle(TROUBLE_WAIT)
                return
            if not took:
                await self._idle(IDLE_WAIT)

    async def _idle(self, timeout: float | None) -> None:
        """Wait until a render ends, a batch's state changes, stop, or `timeout`."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._wake.wait(), timeout)

    async def _fill(
        self, sub: JetStreamContext.PullSubscription, interactive: bus.Lane, free: int
    ) -> bool:
        """Single jobs first, then items one at a time; whether anything was taken."""
        msgs = await held(sub, free)
        if len(msgs) < free:
            msgs += await interactive.take(free - len(msgs))
        self._start(msgs, bulk=False)
        room = bulk_room(free, len(msgs), len(self._bulk), self.bulk_limit)
        taken = 0
        while taken < room and await self._take_item():
            taken += 1
        return bool(msgs) or taken > 0

    async def _take_item(self) -> bool:
        """One item from the first batch in turn that has one; False if none had any."""
        running = self.states.running()
        await self._forget(running)
        now = time.monotonic()
        for batch_id in self.rotation.order(running):
            if self._missing.get(batch_id, 0.0) > now:
                continue
            msgs = await self._take_from(batch_id)
            if msgs:
                self.rotation.served(batch_id, running[batch_id])
                self._start(msgs, bulk=True)
                return True
        return False

    async def _take_from(self, batch_id: str) -> list[Msg]:
        lane = self._lanes.get(batch_id)
        if lane is None:
            lane = self._lanes[batch_id] = bus.Lane(self.nc, events.bulk_durable(batch_id))
        try:
            return await lane.take(1)
        except NotFound:
            log.info("batch %s has no durable (now); skipped for %g s", batch_id, MISSING_WAIT)
            self._missing[batch_id] = time.monotonic() + MISSING_WAIT
            await lane.close()
            del self._lanes[batch_id]
            return []

    async def _forget(self, running: Mapping[str, str]) -> None:
        """Close the lanes of batches that no longer run (their inboxes); they are made
        again when a batch resumes."""
        for batch_id in [b for b in self._lanes if b not in running]:
            await self._lanes.pop(batch_id).close()
        now = time.monotonic()
        self._missing = {b: until for b, until in self._missing.items() if until > now}

    def _start(self, msgs: list[Msg], *, bulk: bool) -> None:
        for msg in msgs:
            task = asyncio.create_task(self.handler(msg))
            self._inflight.add(task)
            if bulk:
                self._bulk.add(task)
            task.add_done_callback(self._ended)

    def _ended(self, task: asyncio.Task[None]) -> None:
        self._inflight.discard(task)
        self._bulk.discard(task)
        self._wake.set()

    async def _close_lanes(self, interactive: bus.Lane) -> None:
        await interactive.close()
        for lane in self._lanes.values():
            await lane.close()
        self._lanes.clear()


async def work(
    nc: Client,
    js: JetStreamContext,
    handler: worker.Handler,
    states: BatchStates,
    *,
    limit: int,
    bulk_limit: int,
    stop: asyncio.Event,
    grace: float,
) -> None:
    """Run `handler` on single jobs and batches' items until `stop` is set."""
    lanes = Lanes(nc, js, handler, states, limit=limit, bulk_limit=bulk_limit)
    await lanes.run(stop, grace)

"""What a renderer takes next: single jobs first, each tenant in turn, then batches' items,
each batch in turn.

    a slot frees ──> the tenants' durables of single jobs (`singles-<tenant>`, and the
                │    legacy `renderer`) that may have work, round robin: one job each in
                │    turn while several have work, all it has when one alone does
                └──> one item of the next running batch in turn (its durable
                     `bulk-<batch_id>`), again while slots are left and fewer than
                     `bulk_limit` items are in hand

A tenant's flood of single jobs waits in its own durable, so another tenant's job is taken
at the next free slot, not behind the flood. Which tenants may have work is learnt three
ways (`Singles`): the gateway's bell (`subjects.LANE_BELL`, core NATS) right after it stores a
job; a sweep every `SWEEP` seconds that asks every lane (a retry's delay ending, a message
redelivered after a renderer died, a lost bell); and a listing of the durables every
`DISCOVER` seconds (a tenant's first job, made while this renderer was away). A lane that
answered nothing is not asked again until one of those says it may have work, but for
one more ask `RACE_WAIT` later when its bell had rang (JetStream's answer to a no-wait
pull can miss a message stored a moment before).

Batches' turns go round robin over the tenants that have a running batch, and within a
tenant over its running batches (`Rotation`), so two tenants' runs progress at the same
rate whatever their sizes. Items and single jobs in hand together take at most
`bulk_limit` of the items' slots (the browser's pages): items in hand queue for a page
ahead of a single job that arrives after them, and while a single job is in hand no new
item takes the page it will need, so a single job waits for the shortest render in
flight, never behind the run (docs/design-batches.md, "Choosing the next render").

With nothing to take anywhere the loop waits until a bell rings, a render ends, a batch's
state changes, or the next sweep (`IDLE_WAIT` while batches run: their items have no bell).

Size: one scheduler: the tenants' round robin, the batches' rotation and the room rule
between them decide each next take together, over the same count of slots; split apart, that
count would have to cross modules.
"""

from __future__ import annotations

import asyncio
import bisect
import contextlib
import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.js import JetStreamContext

from services.core.log import bus, worker
from services.core.model import subjects
from services.core.model.errors import NotFound, Unavailable
from services.core.runtime import metrics
from services.renderer.states import BatchStates

log = logging.getLogger(__name__)

IDLE_WAIT = 0.2
"""Seconds between asks while batches run and no lane had anything: how long an item
that becomes available then waits at most to be taken, and what keeps the loop from
spinning."""

SWEEP = 1.0
"""Seconds between two asks of every tenant's lane, whatever the bells said: how late at
most a retry whose delay ended, or a job whose bell was lost, is taken."""

DISCOVER = 5.0
"""Seconds between two listings of the durables (tenants' lanes made since)."""

TROUBLE_WAIT = 1.0
"""Seconds before asking again after NATS did not answer a pull."""

RACE_WAIT = 0.05
"""Seconds before a lane whose bell rang, and which answered nothing, is asked once more:
JetStream may answer a no-wait pull "no messages" for a message stored a moment before
(seen about once in 500 right after the publish), and without a second ask the job
would wait for the next sweep."""

FLUSH_WAIT = 1
"""Seconds the hand-back at a stop waits for NATS to confirm it has every nak."""

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


def bulk_room(free: int, taken: int, singles_in_hand: int, bulk_in_hand: int, pages: int) -> int:
    """How many items to take now: no more than the slots left free after this turn's
    single jobs (`taken` of the `free` slots), and no more than the pages that neither an
    item nor a single job in hand (this turn's included) will need.

    A single job in hand counts against the items' pages until it ends: an item taken
    while it is still on its way to a page (its bookkeeping before the render) would get
    the page first, and with every item finishing in turn the single job could be
    overtaken again and again.
    """
    return max(0, min(free - taken, pages - singles_in_hand - bulk_in_hand))


class Singles:
    """The lanes of single jobs: one durable per tenant (and the legacy `renderer`), which
    of them may have work now, and whose turn it is."""

    def __init__(self, nc: Client, js: JetStreamContext, wake: asyncio.Event) -> None:
        self.nc = nc
        self.js = js
        self._wake = wake
        self._lanes: dict[str, bus.Lane] = {}  # durable -> its lane
        self._flagged: set[str] = set()  # durables that may have work
        self._rung: dict[str, int] = {}  # durable -> bells heard (a bell during an ask counts)
        self._fresh: set[str] = set()  # durables rung since they last answered nothing
        self._last: str | None = None  # the durable served last
        self._next_sweep = 0.0
        self._next_discover = 0.0
        self._bells: Any = None
        self.add(subjects.RENDERER)

    async def open(self) -> None:
        """Listen for bells; once NATS has the subscription (a bell rung from now on is
        heard), the renderer counts as taking work."""
        self._bells = await self.nc.subscribe(f"{subjects.LANE_BELL}.*", cb=self._bell)
        with contextlib.suppress(Exception):  # disconnected: the sweep covers the gap
            await self.nc.flush(timeout=2)

    async def close(self) -> None:
        if self._bells is not None:
            with contextlib.suppress(Exception):
                await self._bells.unsubscribe()
        for lane in self._lanes.values():
            await lane.close()
        self._lanes.clear()

    async def _bell(self, msg: Msg) -> None:
        token = msg.subject.rsplit(".", 1)[-1]
        durable = f"{subjects.SINGLES}{token}"
        self.flag(durable)
        self._fresh.add(durable)
        self._wake.set()

    def add(self, durable: str) -> None:
        if durable not in self._lanes:
            self._lanes[durable] = bus.Lane(self.nc, durable)
            self._flagged.add(durable)

    def flag(self, durable: str) -> None:
        """`durable` may have work: add it if new, ask it at the next turn."""
        self.add(durable)
        self._flagged.add(durable)
        self._rung[durable] = self._rung.get(durable, 0) + 1

    def next_sweep(self) -> float:
        """Seconds until the next sweep."""
        return max(0.0, self._next_sweep - time.monotonic())

    async def _refresh(self) -> None:
        now = time.monotonic()
        if now >= self._next_discover:
            self._next_discover = now + DISCOVER
            try:
                async for info in bus.durables(self.js):
                    if (info.name or "").startswith(subjects.SINGLES):
                        self.add(info.name or "")
            except (Unavailable, NotFound) as exc:
                log.warning("cannot list the tenants' lanes: %s", exc)
        if now >= self._next_sweep:
            self._next_sweep = now + SWEEP
            self._flagged.update(self._lanes)

    async def take(self, free: int) -> list[Msg]:
        """Up to `free` single jobs, a tenant at a time in turn."""
        await self._refresh()
        msgs: list[Msg] = []
        while len(msgs) < free and self._flagged:
            took = False
            for durable in _after(sorted(self._flagged), self._last):
                if len(msgs) >= free:
                    break
                want = free - len(msgs) if len(self._flagged) == 1 else 1
                got = await self._ask(durable, want)
                if got:
                    msgs += got
                    self._last = durable
                    took = True
            if not took:
                break
        return msgs

    async def _ask(self, durable: str, want: int) -> list[Msg]:
        rung = self._rung.get(durable, 0)
        try:
            got = await self._lanes[durable].take(want)
        except NotFound:  # deleted: listed again if it is made again
            await self._lanes.pop(durable).close()
            self._flagged.discard(durable)
            return []
        if len(got) < want and self._rung.get(durable, 0) == rung:
            self._flagged.discard(durable)  # nothing more now, and no bell since asking
            if not got and durable in self._fresh:  # rung, yet empty: ask once more soon
                self._fresh.discard(durable)
                asyncio.get_running_loop().call_later(RACE_WAIT, self._ask_again, durable)
        elif got:
            self._fresh.discard(durable)
        return got

    def _ask_again(self, durable: str) -> None:
        if durable in self._lanes:
            self._flagged.add(durable)
            self._wake.set()


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
        self.taking = False  # listening for bells and taking work (the pod is ready)

    async def run(self, stop: asyncio.Event, grace: float) -> None:
        """Take and handle messages until `stop` is set; then hand in-flight work what is
        left of `grace` seconds from the stop to finish, as `worker.work` does, and make
        sure NATS has the messages handed back before anything closes.

        The grace counts from the stop, not from when the last step ended: the process
        is ended `runtime.STOP_MARGIN` after the grace whatever it is doing, and a hand-back
        that came later would then be lost (its jobs waiting out the ack wait)."""
        singles = Singles(self.nc, self.js, self._wake)
        await singles.open()
        stopped = asyncio.get_running_loop().create_future()
        waker = asyncio.create_task(self._wake_on(stop, stopped))
        metrics.RENDERER_TAKING_WORK.set(1)
        self.taking = True
        try:
            while not stop.is_set():
                self._wake.clear()  # before looking: whatever happens next wakes the wait
                await self._step(singles)
        finally:
            metrics.RENDERER_TAKING_WORK.set(0)
            self.taking = False
            waker.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await waker
            await singles.close()
            await self._close_lanes()
            for task in self.states.parked:  # waiting for a resume that may never come
                task.cancel()  # their handlers hand the items back
            since = time.monotonic() - stopped.result() if stopped.done() else 0.0
            await worker.drain(self._inflight, max(0.0, grace - since))
            await self._flush()

    async def _wake_on(self, stop: asyncio.Event, stopped: asyncio.Future[float]) -> None:
        await stop.wait()
        stopped.set_result(time.monotonic())
        self._wake.set()

    async def _flush(self) -> None:
        """Return once NATS has had everything published so far, the naks of the
        handed-back messages included (nats-py only queues them): what closes next (the
        browser) may take the rest of the stop margin, and a nak still queued when the
        process ends never reaches the server."""
        try:
            await self.nc.flush(timeout=FLUSH_WAIT)
        except Exception as exc:  # disconnected: the jobs come back after the ack wait
            log.warning("cannot flush the hand-back to NATS: %r", exc)

    async def _step(self, singles: Singles) -> None:
        free = self.limit - (len(self._inflight) - len(self.states.parked))
        if free <= 0:
            await self._idle(None)
            return
        try:
            took = await self._fill(singles, free)
        except Unavailable as exc:
            log.warning("cannot take work: %s", exc)
            await self._idle(TROUBLE_WAIT)
            return
        if not took:
            await self._idle(IDLE_WAIT if self.states.running() else singles.next_sweep())

    async def _idle(self, timeout: float | None) -> None:
        """Wait until a render ends, a bell rings, a batch's state changes, stop, or
        `timeout`."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._wake.wait(), timeout)

    async def _fill(self, singles: Singles, free: int) -> bool:
        """Single jobs first, then items one at a time; whether anything was taken."""
        msgs = await singles.take(free)
        self._start(msgs, bulk=False)
        if not self.states.running():
            await self._forget({})
            return bool(msgs)
        in_hand = len(self._bulk) - len(self.states.parked)
        singles_in_hand = len(self._inflight) - len(self._bulk)
        room = bulk_room(free, len(msgs), singles_in_hand, in_hand, self.bulk_limit)
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
            lane = self._lanes[batch_id] = bus.Lane(self.nc, subjects.bulk_durable(batch_id))
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

    async def _close_lanes(self) -> None:
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
    health: metrics.Health | None = None,
) -> None:
    """Run `handler` on single jobs and batches' items until `stop` is set; `health`
    reports whether work is being taken (`taking_work`)."""
    lanes = Lanes(nc, js, handler, states, limit=limit, bulk_limit=bulk_limit)
    if health is not None:
        health.check("taking_work", lambda: lanes.taking)
    await lanes.run(stop, grace)

"""Room on the JOBS log: new jobs are refused (`LogFull`, 503) before the log is full.

The stream discards new messages when it reaches `PRESSROOM_STREAM_MAX_BYTES`, so nothing
accepted is ever dropped to make room. But the jobs already accepted still have events to
write (started, done or failed, retries, webhook attempts): the gateway keeps
`RESERVE_PER_JOB` bytes free for each job the renderers have not finished (and for the new
one) and refuses new jobs beyond that. The log's size and the renderers' backlog are read
once a second in the background, never on a submission's path; between two reads each
gateway counts the jobs it accepted itself, and the stream's own limit is the backstop (a
publish it refuses is a `LogFull` too).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass

from nats.js import JetStreamContext

from services.core.log import bus
from services.core.model import events, subjects
from services.core.model.errors import LogFull, NotFound, Unavailable
from services.core.runtime import lifecycle

log = logging.getLogger(__name__)

RESERVE_PER_JOB = 8 * 1024
"""Bytes kept free per unfinished job: its later events (each a few hundred bytes) with
room for every attempt and a full webhook retry schedule."""

CHECK_EVERY = 1.0
"""Seconds between two reads of the log's size."""


@dataclass
class LogRoom:
    """The log's size and backlog as last read; `admit()` refuses new jobs without room."""

    used: int = 0
    limit: int = -1
    unfinished: int = 0

    def full(self) -> bool:
        kept = (self.unfinished + 1) * RESERVE_PER_JOB
        return self.limit > 0 and self.used + kept > self.limit

    def admit(self) -> None:
        """`LogFull` when a new job would eat into the room kept for accepted ones."""
        if self.full():
            raise LogFull(
                f"cannot accept jobs: the job log is full ({self.used} of {self.limit} "
                f"bytes, PRESSROOM_STREAM_MAX_BYTES; room is kept for {self.unfinished} "
                "accepted jobs, which still finish); retry later"
            )

    def admit_batch(self, count: int, size: int) -> None:
        """`LogFull` unless the log has room for `count` more jobs whose submissions add up
        to about `size` bytes (a batch's items), with each one's reserve."""
        kept = (self.unfinished + count) * RESERVE_PER_JOB
        if self.limit > 0 and self.used + size + kept > self.limit:
            raise LogFull(
                f"cannot accept a batch of {count} items: the job log has too little room "
                f"({self.used} of {self.limit} bytes, PRESSROOM_STREAM_MAX_BYTES; room is "
                f"kept for {self.unfinished} accepted jobs); retry later or send fewer items"
            )

    def took_batch(self, count: int, size: int) -> None:
        """Count a batch this gateway just accepted: its items' submissions are still to
        come (the conductor writes them), until the next reading."""
        self.used += size
        self.unfinished += count

    def took(self, event: events.JobSubmitted) -> None:
        """Count a job this gateway just put on the log, until the next reading."""
        self.used += len(events.encode(event))
        self.unfinished += 1

    async def read(self, js: JetStreamContext) -> None:
        """Read the stream's size and the renderers' backlog (single jobs, and every
        batch's items in their own durables); the last reading stays while NATS is away."""
        try:
            with bus.map_bus_errors():
                stream = await js.stream_info(subjects.STREAM)
                unfinished = await _backlog(js)
        except (Unavailable, NotFound) as exc:
            log.debug("log size not read: %r", exc)
            return
        was_full = self.full()
        self.used, self.limit = stream.state.bytes, stream.config.max_bytes or -1
        self.unfinished = unfinished
        if self.full() != was_full:
            log.warning("the job log is %s: %d of %d bytes", _word(self.full()), *self.size())

    def size(self) -> tuple[int, int]:
        return self.used, self.limit


async def _backlog(js: JetStreamContext) -> int:
    """Messages the renderers have still to finish: pending or unacknowledged on every
    durable they take work from (each tenant's single jobs, each batch's items, the legacy
    `renderer`), in one listing."""
    total = 0
    async for info in bus.durables(js):
        if bus.renders_waiting(info):
            total += bus.outstanding(info)
    return total


def _word(full: bool) -> str:
    return "full, new jobs get 503" if full else "no longer full, new jobs are accepted"


async def _watch(room: LogRoom, js: JetStreamContext, stop: asyncio.Event) -> None:
    while not stop.is_set():
        await room.read(js)
        await lifecycle.pause(stop, CHECK_EVERY)


@contextlib.asynccontextmanager
async def watching(room: LogRoom, js: JetStreamContext) -> AsyncIterator[LogRoom]:
    """Keep `room` current while the context is open."""
    await room.read(js)
    stop = asyncio.Event()
    task = asyncio.create_task(_watch(room, js, stop))
    try:
        yield room
    finally:
        stop.set()
        await task

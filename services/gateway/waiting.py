"""Waiting for a job's end, for answers that hold the request until the job is done (the
Gotenberg-compatible routes).

The log says when a job has ended: its terminal event (`timeline.terminal_event`, the
first of `cancelled`, `done` and `failed` that reached it). A core NATS subscription on
the job's subjects is the bell, as for live streams (`streams.py`): the log is read again
only when a terminal subject rings, and once every `RECHECK` seconds in case a bell was
lost while NATS reconnected. Nothing polls in a tight loop, and nothing waits on
PostgreSQL's projection, which may lag behind the log.

A bell can ring before the stream has stored the message that rang it (`settle.py`):
after a terminal bell the log is read again after a short pause that doubles, until it
shows the end (a terminal bell always means an end, so it will).
"""

from __future__ import annotations

import asyncio
import contextlib

from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.js import JetStreamContext

from services.core.log import bus, timeline
from services.core.model import events, subjects
from services.gateway.settle import Settle

RECHECK = 5.0
"""Seconds between reads of the log while no bell rings."""

_TERMINAL_TAGS = frozenset({"done", "failed", "cancelled"})


def _ends(subject: str) -> bool:
    """Whether a job subject (`jobs.<id>.<tag>[.<token>]`) is a terminal event's."""
    parts = subject.split(".")
    return len(parts) >= 3 and parts[2] in _TERMINAL_TAGS


async def job_end(
    nc: Client, js: JetStreamContext, job_id: str, timeout: float
) -> events.AnyEvent | None:
    """The job's terminal event, waiting for it at most `timeout` seconds; None if the
    job has not ended by then (it goes on: only the wait ends)."""
    rang = asyncio.Event()

    async def on_message(msg: Msg) -> None:
        if _ends(msg.subject):
            rang.set()

    with bus.map_bus_errors("cannot follow the job"):
        sub = await nc.subscribe(subjects.job_filter(job_id), cb=on_message)
    try:
        async with asyncio.timeout(timeout):
            settle: Settle | None = None
            while True:  # subscribed first, then read: an end between the two is not missed
                end = await timeline.terminal_event(js, job_id)
                if end is not None:
                    return end
                if settle is not None:  # it rang for an end the log does not show yet
                    await asyncio.sleep(settle.pause())
                    continue
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(RECHECK):
                        await rang.wait()
                settle = Settle() if rang.is_set() else None
                rang.clear()
    except TimeoutError:
        return None
    finally:
        with contextlib.suppress(Exception):
            await sub.unsubscribe()

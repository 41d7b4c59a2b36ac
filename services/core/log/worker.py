"""A bounded pool of message handlers over one durable pull consumer.

`work()` keeps up to `limit` messages in hand, fetching only as slots free up, so a slow
handler never hoards messages another pod could take. On stop it stops fetching, lets
handlers finish within a grace period and cancels the rest; a handler that is cancelled
must hand its message back (nak), so nothing waits for the ack timeout.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine
from typing import Any

from nats.aio.msg import Msg
from nats.js import JetStreamContext

from services.core.log import bus

log = logging.getLogger(__name__)

Handler = Callable[[Msg], Coroutine[Any, Any, None]]


async def work(
    js: JetStreamContext,
    durable: str,
    handler: Handler,
    *,
    limit: int,
    stop: asyncio.Event,
    grace: float,
) -> None:
    """Run `handler` on each message of `durable` until `stop` is set."""
    sub = await bus.subscribe(js, durable)
    inflight: set[asyncio.Task[None]] = set()
    try:
        while not stop.is_set():
            if len(inflight) >= limit:
                await _slot_or_stop(inflight, stop)
                continue
            for msg in await bus.fetch(sub, limit - len(inflight)):
                task = asyncio.create_task(handler(msg))
                inflight.add(task)
                task.add_done_callback(inflight.discard)
    finally:
        await bus.close_subscription(sub)
        await drain(inflight, grace)


async def _slot_or_stop(inflight: set[asyncio.Task[None]], stop: asyncio.Event) -> None:
    """Return once a handler has finished or `stop` is set: with every slot held by work
    that cannot finish (a page that never loads), waiting for a free slot alone would
    never reach the drain, and the messages in hand would never be handed back."""
    stopped = asyncio.create_task(stop.wait())
    try:
        await asyncio.wait({*inflight, stopped}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        stopped.cancel()


async def drain(inflight: set[asyncio.Task[None]], grace: float) -> None:
    """Let handlers in flight finish within `grace`; cancel the rest."""
    if not inflight:
        return
    log.info("waiting up to %.0fs for %d messages in hand", grace, len(inflight))
    _, pending = await asyncio.wait(set(inflight), timeout=grace)
    for task in pending:
        task.cancel()
    await asyncio.gather(*pending, return_exceptions=True)
    if pending:
        log.info("handed back %d messages whose work did not finish in time", len(pending))

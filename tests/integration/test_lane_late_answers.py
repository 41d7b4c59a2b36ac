"""A late answer to the renderer's long poll does not slow every later look for work.

While no batch runs, the renderer long-polls its durable; a poll that times out on the
client is answered by the server a moment later (a `408` status message), which waits in
the subscription. Reading it must not send a new pull whose own late answer is left
behind in turn: that cost every look for work `IDLE_WAIT` for nothing while a batch ran,
and left the pages idle between items (`bench/batch_run.py` measured 18 to 43% of a batch's
rendering time with no item in hand).
"""

from __future__ import annotations

import asyncio
import time

from services.core import bus, events
from services.core.settings import Settings
from services.renderer import lanes
from tests.conftest import eventually


async def test_a_late_answer_is_dropped_at_once_and_leaves_nothing_behind(
    settings: Settings,
) -> None:
    async with bus.open_bus(settings, name="test") as (_, js):
        sub = await bus.subscribe(js, events.RENDERER)
        assert await bus.fetch(sub, 2, timeout=0.2) == []  # no work: the poll times out
        await eventually(lambda: sub.pending_msgs, 5, "the server's late answer")

        started = time.monotonic()
        assert await lanes.held(sub, 2) == []
        assert time.monotonic() - started < lanes.IDLE_WAIT / 2

        await asyncio.sleep(3 * lanes.IDLE_WAIT)  # past any pull the read could have sent
        assert sub.pending_msgs == 0
        await bus.close_subscription(sub)

"""Awaiting pyppeteer without ever cancelling it.

Never cancel an await on pyppeteer. Its protocol futures stay in its callback tables, and
when the tab or connection closes later it calls `set_exception` on the cancelled future;
the `InvalidStateError` escapes into its receive loop and silently kills the whole
connection. Every pyppeteer call therefore runs in a task that is waited on with a
deadline (`finished_within`) but never cancelled while the browser lives.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any

Spawn = Callable[[Coroutine[Any, Any, Any]], asyncio.Task[Any]]
"""Runs a coroutine as a task that its browser keeps until it ends (`Chromium.spawn`)."""


async def finished_within(task: asyncio.Future[Any], seconds: float) -> bool:
    """Wait up to `seconds` for `task` without ever cancelling it; True if it finished."""
    done, _ = await asyncio.wait({task}, timeout=seconds)
    return bool(done)


def describe(exc: BaseException) -> str:
    """`exc` as the text of an error message: its message, else its class name."""
    return str(exc) or type(exc).__name__

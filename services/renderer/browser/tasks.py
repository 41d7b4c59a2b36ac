"""Awaiting the browser with a deadline, in tasks the browser keeps.

A render, a new tab or a disposal runs in a task of its `Chromium` (`Chromium.spawn`),
waited on with a deadline (`finished_within`), so a caller that gives up does not have
to wait for Chromium to answer, and closing the browser can wait for whatever is left.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any

Spawn = Callable[[Coroutine[Any, Any, Any]], asyncio.Task[Any]]
"""Runs a coroutine as a task that its browser keeps until it ends (`Chromium.spawn`)."""


async def finished_within(task: asyncio.Future[Any], seconds: float) -> bool:
    """Wait up to `seconds` for `task` without cancelling it; True if it finished."""
    done, _ = await asyncio.wait({task}, timeout=seconds)
    return bool(done)


def describe(exc: BaseException) -> str:
    """`exc` as the text of an error message: its message, else its class name."""
    return str(exc) or type(exc).__name__

"""How a render on a tab ended: `outcome` tells its own verdict from a timeout, a crash
of its page and the browser going away.

A render waiting for an event (a page's `load`) when the browser dies would wait until
its timeout, so the wait also ends when the connection drops (`Chromium.gone`) or the tab
crashes. Chromium answers a command its tab's crash failed (`Printing failed`) before it
reports the crash, so a failed command waits a moment for that news: a crash is the
page's (`PageCrashed`, which the consumer fails on its second time in a row), not a fault
of Chromium's to retry.
"""

from __future__ import annotations

import asyncio
from typing import Any

from services.core.model.errors import (
    BrowserError,
    PageCrashed,
    PressroomError,
    PrintTimeout,
    RenderTimeout,
)
from services.core.model.pageoptions import PageOptions
from services.renderer.browser.process import Chromium
from services.renderer.browser.tab import Tab
from services.renderer.browser.tasks import describe

CRASH_GRACE = 1.0
"""Seconds a failed DevTools command waits for news of its tab crashing: Chromium answers
the command (`Printing failed`) before it reports the crash that failed it."""


def _crash_of(options: PageOptions) -> PageCrashed:
    """The page's crash, naming its header or footer when it had one: a template that
    loads what a header cannot (a stylesheet, a font by URL) crashes the tab as it is
    printed. Retried once; a second crash in a row fails the job (`PageKeepsCrashing`)."""
    if options.header_template is not None or options.footer_template is not None:
        return PageCrashed(
            "the page crashed its tab (out of memory, a renderer fault, or its header or "
            "footer template, printed on every page)"
        )
    return PageCrashed("the page crashed its tab (out of memory, or a renderer fault)")


async def outcome(
    chromium: Chromium, task: asyncio.Task[Any], tab: Tab, options: PageOptions, timeout: float
) -> None:
    """Return once `task` (the render of `options` on `tab`) succeeded; raise
    `RenderTimeout` after `timeout` s (`PrintTimeout` if `tab` was printing),
    `PageCrashed` or `BrowserError` otherwise, or the `PressroomError` the task raised
    itself (a wait, a source, a limit)."""
    crashed = tab.crashed
    try:
        await asyncio.wait(
            {task, chromium.gone, crashed}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED
        )
    except asyncio.CancelledError:  # the job is handed back: its page has nothing to do
        task.cancel()
        raise
    if task.done() and not task.cancelled() and task.exception() is None:
        return
    if not task.done():
        task.cancel()  # what it would still do on the tab is of no use
    elif not crashed.done():
        await _raise_failure(chromium, task, crashed)
    if crashed.done():
        raise _crash_of(options)
    if chromium.gone.done():
        raise BrowserError(chromium.obituary)
    if tab.printing:
        raise PrintTimeout(
            f"{PrintTimeout.PREFIX} ({timeout:g} s, PRESSROOM_RENDER_TIMEOUT): the document "
            "may be too long or complex to print"
        )
    raise RenderTimeout(f"render took longer than {timeout:g} s")


async def _raise_failure(
    chromium: Chromium, task: asyncio.Task[Any], crashed: asyncio.Future[None]
) -> None:
    """Raise what `task` failed with, unless it was Chromium failing because the tab
    crashed (then return: the caller says so)."""
    exc = task.exception()
    assert exc is not None, "a failed task"
    if isinstance(exc, PressroomError) and not isinstance(exc, BrowserError):
        raise exc  # the render decided: a wait, a source, a limit
    await asyncio.wait(
        {crashed, chromium.gone}, timeout=CRASH_GRACE, return_when=asyncio.FIRST_COMPLETED
    )
    if crashed.done():
        return
    if isinstance(exc, BrowserError):
        raise exc
    raise BrowserError(describe(exc)) from exc

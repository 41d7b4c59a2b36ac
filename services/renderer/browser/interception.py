"""The egress `RequestFilter` wired onto a tab's CDP session: `guard`.

Requests are filtered with the `Fetch` domain on the tab's session, and on the session of
each target that session auto-attaches (out-of-process iframes, workers), which the
page's own `Fetch` domain never sees. The targets attach as flat sessions of the same
connection, paused until their filter is on. In the headless shell a dedicated worker's
requests are paused on the tab's own session (tests/integration/test_egress_chromium.py
watches them there); a worker target without a `Fetch` domain of its own is let be, and
its requests meet the egress proxy, which sees every connection anyway.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from services.renderer.browser.cdp import CommandError, Session
from services.renderer.browser.tasks import Spawn
from services.renderer.egress import RequestFilter

log = logging.getLogger(__name__)

NO_SUCH_METHOD = -32601
"""The DevTools protocol's error code for a command the target does not have."""


async def guard(
    session: Session,
    gate: RequestFilter,
    spawn: Spawn,
    children: set[str],
    *,
    child: bool = False,
) -> None:
    """Pause every request of `session`'s target for `gate` to judge, and do the same for
    the targets it attaches (out-of-process iframes, workers), whose session ids are kept
    in `children` while they are attached. A `child` target without a `Fetch` domain (a
    worker in the headless shell) is let be: the proxy checks it.

    `gate` is one job's (its evidence bound at its making), and so is every session it is
    given to here: a target attached under a tab is its job's, however late it comes."""
    session.on("Fetch.requestPaused", lambda event: spawn(_decide(session, gate, event)))
    session.on(
        "Target.attachedToTarget",
        lambda event: spawn(_adopt(session, gate, event, spawn, children)),
    )
    session.on("Target.detachedFromTarget", lambda event: _detached(session, event, children))
    attach = {"autoAttach": True, "waitForDebuggerOnStart": True, "flatten": True}
    # Sent together, in this order (Chromium runs a session's commands in order).
    fetch = asyncio.ensure_future(session.send("Fetch.enable", {"patterns": [{"urlPattern": "*"}]}))
    attached = asyncio.ensure_future(session.send("Target.setAutoAttach", attach))
    try:
        await fetch
    except CommandError as exc:
        if not child or exc.code != NO_SUCH_METHOD:
            attached.cancel()
            raise
        log.debug("an attached target has no Fetch domain; the egress proxy checks it")
    await attached


async def _decide(session: Session, gate: RequestFilter, event: dict[str, Any]) -> None:
    """Let a paused request continue, or fail it if the egress policy refuses it."""
    method, params = await gate.answer(event)
    await session.send(method, params)


def _detached(session: Session, event: dict[str, Any], children: set[str]) -> None:
    gone = str(event.get("sessionId", ""))
    children.discard(gone)
    session.connection.forget(gone)


async def _adopt(
    parent: Session, gate: RequestFilter, event: dict[str, Any], spawn: Spawn, children: set[str]
) -> None:
    """Filter an attached target's requests too, then let it run (it waits paused)."""
    child = parent.connection.session(str(event["sessionId"]))
    children.add(str(event["sessionId"]))
    try:
        await guard(child, gate, spawn, children, child=True)
    finally:
        await child.send("Runtime.runIfWaitingForDebugger")

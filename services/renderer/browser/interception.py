"""The egress `RequestFilter` wired onto a tab's CDP session: `guard`.

Requests are filtered with the `Fetch` domain on the tab's session, and on the session of
each target that session auto-attaches (out-of-process iframes, workers), which the
page's own `Fetch` domain never sees. The targets attach as flat sessions of the same
connection, paused until their filter is on.
"""

from __future__ import annotations

from typing import Any

from services.renderer.browser.cdp import Session
from services.renderer.browser.tasks import Spawn
from services.renderer.egress import RequestFilter


async def guard(session: Session, gate: RequestFilter, spawn: Spawn) -> None:
    """Pause every request of `session`'s target for `gate` to judge, and do the same for
    the targets it attaches (out-of-process iframes, workers)."""
    session.on("Fetch.requestPaused", lambda event: spawn(_decide(session, gate, event)))
    session.on("Target.attachedToTarget", lambda event: spawn(_adopt(session, gate, event, spawn)))
    session.on(
        "Target.detachedFromTarget",
        lambda event: session.connection.forget(str(event.get("sessionId", ""))),
    )
    await session.send("Fetch.enable", {"patterns": [{"urlPattern": "*"}]})
    await session.send(
        "Target.setAutoAttach",
        {"autoAttach": True, "waitForDebuggerOnStart": True, "flatten": True},
    )


async def _decide(session: Session, gate: RequestFilter, event: dict[str, Any]) -> None:
    """Let a paused request continue, or fail it if the egress policy refuses it."""
    method, params = await gate.answer(event)
    await session.send(method, params)


async def _adopt(parent: Session, gate: RequestFilter, event: dict[str, Any], spawn: Spawn) -> None:
    """Filter an attached target's requests too, then let it run (it waits paused)."""
    child = parent.connection.session(str(event["sessionId"]))
    try:
        await guard(child, gate, spawn)
    finally:
        await child.send("Runtime.runIfWaitingForDebugger")

"""The egress `RequestFilter` wired onto a tab's CDP session: `guard`.

`Page.setRequestInterception` uses `Network.setRequestInterception`, which Chromium no
longer has. Requests are filtered with the `Fetch` domain on a CDP session of our own,
and on a session for each target that session attaches (out-of-process iframes,
workers).
"""

from __future__ import annotations

from typing import Any

from services.renderer.browser.tasks import Spawn
from services.renderer.egress import RequestFilter


async def guard(session: Any, gate: RequestFilter, spawn: Spawn) -> None:
    """Pause every request of `session`'s target for `gate` to judge, and do the same for
    the targets it attaches (out-of-process iframes, workers), which the page's own Fetch
    domain never sees."""
    session.on("Fetch.requestPaused", lambda event: spawn(_decide(session, gate, event)))
    session.on("Target.attachedToTarget", lambda event: spawn(_adopt(session, gate, event, spawn)))
    # pyppeteer listens for a misspelt "Target.detachFromTarget": forget children ourselves.
    session.on("Target.detachedFromTarget", lambda e: session._sessions.pop(e["sessionId"], None))
    await session.send("Fetch.enable", {"patterns": [{"urlPattern": "*"}]})
    await session.send(
        "Target.setAutoAttach",
        {"autoAttach": True, "waitForDebuggerOnStart": True, "flatten": False},
    )


async def _decide(session: Any, gate: RequestFilter, event: dict[str, Any]) -> None:
    """Let a paused request continue, or fail it if the egress policy refuses it."""
    method, params = await gate.answer(event)
    await session.send(method, params)


async def _adopt(parent: Any, gate: RequestFilter, event: dict[str, Any], spawn: Spawn) -> None:
    """Filter an attached target's requests too, then let it run (it waits paused)."""
    child = parent._createSession(event["targetInfo"]["type"], event["sessionId"])
    try:
        await guard(child, gate, spawn)
    finally:
        await child.send("Runtime.runIfWaitingForDebugger")

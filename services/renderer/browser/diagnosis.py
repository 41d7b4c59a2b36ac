"""What a page did during one render, for a diagnosis: `PageReport` and `diagnose`.

The tab records its job's `Evidence` (`renderer/evidence`) from the events it already
listens to (`Network.*`, for its in-flight count and the document's status), plus the
console and uncaught errors, which Chromium reports only while the `Runtime` domain is on:
the tab turns it on only while a job runs script (`Tab.emulate`), since a page without
script logs nothing and throws nothing, so a static invoice pays for none of it.

`diagnose` turns the job's evidence into a `PageReport` once a render failed (or asked
for it): requests joined with the refusals of the CDP filter and the egress proxy (the
very ones the job records), the `wait_for` still pending, and a PNG of the viewport,
bounded in pixels, bytes and time so a stuck page cannot hold the attempt.
"""

from __future__ import annotations

import asyncio
import base64
import dataclasses

import msgspec

from services.core.model.errors import PressroomError
from services.core.objectstore.diagnosis import ConsoleLine, PageError, RequestLine, WaitPending
from services.renderer.browser.tablike import TabLike
from services.renderer.evidence import Evidence, PageLog, RefusedLog

SCREENSHOT_PX = 1280
"""At most this many pixels each way in a diagnosis' screenshot (the viewport's top left)."""
SCREENSHOT_BYTES = 2 * 2**20
"""A diagnosis' screenshot over this many bytes is left out."""
SCREENSHOT_SECONDS = 3.0
"""How long a screenshot may take; a page busy in a loop gets none."""


@dataclasses.dataclass
class PageReport:
    """What `BrowserPool.render` learnt about the page when a diagnosis was due (`taken`);
    the caller passes an empty one in and stores it if it was filled."""

    taken: bool = False
    console: list[ConsoleLine] = dataclasses.field(default_factory=list)
    errors: list[PageError] = dataclasses.field(default_factory=list)
    requests: list[RequestLine] = dataclasses.field(default_factory=list)
    pending_wait_for: WaitPending | None = None
    screenshot: bytes | None = None
    dropped: int = 0


async def diagnose(tab: TabLike, report: PageReport, *, capture: bool) -> None:
    """Fill `report` from the evidence of `tab`'s job; with `capture`, add a screenshot of
    the viewport (none if the page cannot give one in time)."""
    fill(report, tab.evidence)
    if capture:
        report.screenshot = await _screenshot(tab)


def fill(report: PageReport, evidence: Evidence) -> None:
    """`report`'s console, errors, requests and pending wait, from `evidence` alone."""
    seen = evidence.page
    refused = evidence.refused
    report.taken = True
    report.console = list(seen.console)
    report.errors = list(seen.errors)
    report.requests = _with_refusals(seen, refused)
    report.dropped = seen.dropped + refused.dropped
    if seen.pending is not None:
        report.pending_wait_for = WaitPending(**msgspec.structs.asdict(seen.pending))


def _with_refusals(seen: PageLog, refused: RefusedLog) -> list[RequestLine]:
    """Every request, oldest first, each refused one with its refusal's reason; refusals
    no request of the page matches (a proxy's CONNECT, a WebSocket) are listed too."""
    lines = [*seen.redirects, *(request.line for request in seen.requests.values())]
    reasons = {refusal.url: refusal.reason for refusal in refused.refusals}
    for line in lines:
        line.refused = reasons.get(line.url)
    matched = {line.url for line in lines}
    lines.extend(
        RequestLine(url=url, method="", error="refused", refused=reason)
        for url, reason in reasons.items()
        if url not in matched
    )
    return lines


async def _screenshot(tab: TabLike) -> bytes | None:
    try:
        png = await asyncio.wait_for(_capture(tab), SCREENSHOT_SECONDS)
    except (TimeoutError, PressroomError, KeyError, ValueError):
        return None
    return png if len(png) <= SCREENSHOT_BYTES else None


async def _capture(tab: TabLike) -> bytes:
    """The viewport's top left, at most `SCREENSHOT_PX` square, at one pixel per CSS px.
    In front first, one tab at a time, as a PNG render's capture (`tab.py`)."""
    view = tab.emulation.viewport
    clip_box = {
        "x": 0,
        "y": 0,
        "width": min(view.width, SCREENSHOT_PX),
        "height": min(view.height, SCREENSHOT_PX),
        "scale": 1 / view.scale,
    }
    async with tab.foreground:
        await tab.send("Page.bringToFront")
        reply = await tab.send("Page.captureScreenshot", {"format": "png", "clip": clip_box})
    return base64.b64decode(reply["data"])

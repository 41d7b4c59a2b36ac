"""What a page did during one render, for a diagnosis: `PageLog` and `diagnose`.

`PageLog` is kept by each tab from the events it already listens to (`Network.*`, for
its in-flight count and the document's status), plus the console and uncaught errors,
which Chromium reports only while the `Runtime` domain is on: the tab turns it on only
while a job runs script (`Tab.emulate`), since a page without script logs nothing and
throws nothing, so a static invoice pays for none of it. Recording is a small object per
request and per console line, capped (`services.core.diagnosis`).

`diagnose` turns a tab's log into a `PageReport` once a render failed (or asked for it):
requests joined with the refusals of the CDP filter and the egress proxy (the very ones
the job records), the `wait_for` still pending, and a PNG of the viewport, bounded in
pixels, bytes and time so a stuck page cannot hold the attempt.
"""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import time
from typing import TYPE_CHECKING, Any

import msgspec

from services.core.diagnosis import (
    MAX_CONSOLE,
    MAX_ERRORS,
    MAX_REQUESTS,
    ConsoleLine,
    PageError,
    RequestLine,
    WaitPending,
    clipped,
)
from services.core.errors import PressroomError
from services.core.pageoptions import WaitFor
from services.renderer.egress import RefusedLog, clip

if TYPE_CHECKING:
    from services.renderer.browser.tab import Tab

SCREENSHOT_PX = 1280
"""At most this many pixels each way in a diagnosis' screenshot (the viewport's top left)."""
SCREENSHOT_BYTES = 2 * 2**20
"""A diagnosis' screenshot over this many bytes is left out."""
SCREENSHOT_SECONDS = 3.0
"""How long a screenshot may take; a page busy in a loop gets none."""


@dataclasses.dataclass(slots=True)
class _Request:
    line: RequestLine
    started: float  # CDP's monotonic timestamp, seconds


class PageLog:
    """The console lines, uncaught errors and requests of one render, and its pending
    `wait_for`; a tab starts a new one per render (`Tab.forget_requests`)."""

    def __init__(self) -> None:
        self.since_ms = time.time() * 1000  # console entries replayed from before are not ours
        self.console: list[ConsoleLine] = []
        self.errors: list[PageError] = []
        self.requests: dict[str, _Request] = {}
        self.redirects: list[RequestLine] = []
        self.pending: WaitFor | None = None
        self.dropped = 0

    def sent(self, params: dict[str, Any]) -> None:
        request_id = str(params.get("requestId"))
        earlier = self.requests.get(request_id)
        if earlier is not None and "redirectResponse" in params:
            earlier.line.status = int(params["redirectResponse"].get("status", 0))
            self._close(earlier, params)
            self.redirects.append(earlier.line)
        elif len(self.requests) >= MAX_REQUESTS:
            self.dropped += 1
            return
        request = params.get("request", {})
        line = RequestLine(
            url=clip(str(request.get("url", ""))),
            method=str(request.get("method", "GET")),
            type=params.get("type"),
        )
        self.requests[request_id] = _Request(line, float(params.get("timestamp", 0.0)))

    def answered(self, params: dict[str, Any]) -> None:
        if (request := self.requests.get(str(params.get("requestId")))) is not None:
            request.line.status = int(params.get("response", {}).get("status", 0))

    def ended(self, params: dict[str, Any]) -> None:
        if (request := self.requests.get(str(params.get("requestId")))) is not None:
            self._close(request, params)
            if (error := params.get("errorText")) is not None:
                request.line.error = str(error)

    @staticmethod
    def _close(request: _Request, params: dict[str, Any]) -> None:
        ended = float(params.get("timestamp", request.started))
        request.line.ms = max(0, round((ended - request.started) * 1000))

    def console_called(self, params: dict[str, Any]) -> None:
        if float(params.get("timestamp", self.since_ms)) < self.since_ms:
            return
        if len(self.console) >= MAX_CONSOLE:
            self.dropped += 1
            return
        text = " ".join(_argument_text(arg) for arg in params.get("args", []))
        url, line, column = _where(params.get("stackTrace"))
        level = str(params.get("type", "log"))
        self.console.append(
            ConsoleLine(level=level, text=clipped(text), url=url, line=line, column=column)
        )

    def exception_thrown(self, params: dict[str, Any]) -> None:
        if float(params.get("timestamp", self.since_ms)) < self.since_ms:
            return
        if len(self.errors) >= MAX_ERRORS:
            self.dropped += 1
            return
        details = params.get("exceptionDetails", {})
        exception = details.get("exception") or {}
        text = str(exception.get("description") or details.get("text") or "error")
        url, line, column = _where(details.get("stackTrace"))
        self.errors.append(
            PageError(
                text=clipped(text),
                url=details.get("url") or url,
                line=_one_based(details.get("lineNumber"), line),
                column=_one_based(details.get("columnNumber"), column),
            )
        )


def _argument_text(arg: dict[str, Any]) -> str:
    """A console argument as DevTools prints it, roughly: a primitive's value, else the
    object's description (`Error: boom\\n    at …`, `Object`, `Array(3)`)."""
    if "value" in arg:
        value = arg["value"]
        return value if isinstance(value, str) else repr(value)
    return str(arg.get("unserializableValue") or arg.get("description") or arg.get("type", ""))


def _where(stack: dict[str, Any] | None) -> tuple[str | None, int | None, int | None]:
    """The top frame of a stack trace: its URL and 1-based line and column."""
    frames = (stack or {}).get("callFrames") or []
    if not frames:
        return None, None, None
    top = frames[0]
    return (
        str(top.get("url") or "") or None,
        int(top.get("lineNumber", 0)) + 1,
        int(top.get("columnNumber", 0)) + 1,
    )


def _one_based(number: Any, fallback: int | None) -> int | None:
    return int(number) + 1 if isinstance(number, int) else fallback


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


async def diagnose(tab: Tab, refused: RefusedLog, report: PageReport, *, capture: bool) -> None:
    """Fill `report` from `tab`'s log of this render and `refused`; with `capture`, add a
    screenshot of the viewport (none if the page cannot give one in time)."""
    seen = tab.seen
    report.taken = True
    report.console = list(seen.console)
    report.errors = list(seen.errors)
    report.requests = _with_refusals(seen, refused)
    report.dropped = seen.dropped + refused.dropped
    if seen.pending is not None:
        report.pending_wait_for = WaitPending(**msgspec.structs.asdict(seen.pending))
    if capture:
        report.screenshot = await _screenshot(tab)


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


async def _screenshot(tab: Tab) -> bytes | None:
    try:
        png = await asyncio.wait_for(_capture(tab), SCREENSHOT_SECONDS)
    except (TimeoutError, PressroomError, KeyError, ValueError):
        return None
    return png if len(png) <= SCREENSHOT_BYTES else None


async def _capture(tab: Tab) -> bytes:
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

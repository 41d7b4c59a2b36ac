"""The Chromium pool: HTML or a URL in, PDF or PNG bytes out. The only module that knows
pyppeteer.

One Chromium process keeps `pages` tabs open and reuses them, since a new tab per PDF
costs ~100 ms and cuts throughput by about two thirds (see the environment notes). A tab
that times out is replaced; a browser that crashed, disconnected or rendered
`recycle_after` documents is replaced by a fresh one while renders still running on the
old one finish there.

pyppeteer 2.0 against Chromium 156 needs care in six places, each handled below:

- Never cancel an await on pyppeteer. Its protocol futures stay in its callback tables,
  and when the tab or connection closes later it calls `set_exception` on the cancelled
  future; the `InvalidStateError` escapes into its receive loop and silently kills the
  whole connection. Every pyppeteer call therefore runs in a task that is waited on with
  a deadline (`_finished_within`) but never cancelled while the browser lives.
- `Page.setContent` is a bare `document.write`: it neither waits for `load` nor gives the
  document a new JavaScript realm, so globals and patched prototypes of one job would be
  visible to the next. When the tab's realm may hold an earlier job's state (that job
  ran script), a render first navigates to about:blank (a new realm: ~30 ms, a third of
  the throughput on 2 cores), then writes the HTML and waits for `load` itself. Jobs run
  with script disabled unless they ask for it or contain a way to run it (`javascript`
  auto), so a tab of static invoices never pays for the navigation.
- `Page.setRequestInterception` uses `Network.setRequestInterception`, which Chromium no
  longer has. Requests are filtered with the `Fetch` domain on a CDP session of our own.
- A tab crash is emitted as pyee's `error` event, which raises inside pyppeteer's receive
  loop when nobody listens; every tab gets a listener.
- A navigation under way when the browser dies is never settled, so a render also stops
  waiting when the connection drops (`_Chromium.gone`) instead of running into the timeout.
- With our own `userDataDir`, `Browser.close()` neither waits for nor kills the process;
  `_Chromium.close` does both. (`launch` also blocks the event loop for ~0.3 s while it
  polls the DevTools port with `urlopen`; that happens once per browser.)

Printing goes straight to CDP `Page.printToPDF` on the tab's own session: `Page.pdf`
passes neither `generateTaggedPDF` nor anything we did not know about when it was
written, and one path for every option is easier to reason about. Chromium 156 makes
tagged PDFs unless told otherwise (2.4 times the bytes of an untagged invoice), so
`tagged` is always sent. What a job changes on its tab (JavaScript, emulated media,
viewport) is recorded on the `_Tab` and set again only when the next job wants something
else, so a job never depends on the one before it cleaning up.
"""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import functools
import json
import logging
import math
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Self, TypeVar
from xml.sax.saxutils import escape as xml_escape

import pyppeteer
import pyppeteer.connection
from pyppeteer.errors import NetworkError, PageError
from websockets.legacy.client import connect as websocket_connect

from services.core import metrics
from services.core.errors import (
    BrowserError,
    OutputTooLarge,
    PageCrashed,
    PressroomError,
    RenderTimeout,
    RequestError,
    SourceError,
    SourceUnreachable,
    WaitTimeout,
)
from services.core.events import Margin, PageOptions, WaitFor
from services.core.options import CSS_PX_PER_INCH, MAX_PAPER_INCHES, css_px, inches, paper_inches
from services.renderer.egress import Egress, Refusal, RequestFilter
from services.renderer.render import set_metadata

log = logging.getLogger(__name__)

T = TypeVar("T")

WITHOUT_DEFAULTS = ["--disable-popup-blocking", "--disable-features=site-per-process"]
"""pyppeteer's default flags Pressroom drops: Chromium's popup blocker stays on (a page's
`window.open` or form to `_blank` opens no window the request filter never sees), and so
does site isolation (a cross-site frame gets a renderer process of its own)."""

CHROMIUM_ARGS = [
    "--no-sandbox",  # we run as root; the renderer's container is the sandbox
    "--disable-gpu",
    "--disable-dev-shm-usage",
    # Without these Chromium keeps trying to reach Google's servers (environment notes).
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-extensions",
    "--mute-audio",
    "--hide-scrollbars",
    "--font-render-hinting=none",
    # Headless tabs past the first count as hidden and their renderers get background
    # priority; with every tab printing, that cost ~8% of throughput (docs/benchmarks.md).
    "--disable-renderer-backgrounding",
    "--disable-backgrounding-occluded-windows",
    # A page that eats memory dies at 512 MB of JS heap (its tab crashes and is replaced)
    # instead of growing to V8's default of several GB beside the other tabs.
    "--js-flags=--max-old-space-size=512",
]

CLOSE_GRACE = 5.0
"""Seconds a tab or the browser gets to close before it is dropped or killed."""

# Skia writes one `/Type /Page` dictionary per page, and `/Type /Pages` for the tree.
_PAGE_OBJECT = re.compile(rb"/Type\s*/Page[^s]")

# Write the document into the fresh about:blank realm and resolve once `load` has fired,
# i.e. after images, stylesheets and fonts are in (what puppeteer's waitUntil 'load' does).
_LOAD_HTML = """async (html) => {
  document.open();
  document.write(html);
  document.close();
  if (document.readyState !== "complete") {
    await new Promise((resolve) => window.addEventListener("load", resolve, { once: true }));
  }
}"""


# The height a receipt needs: the document's full height at the receipt's width.
_CONTENT_HEIGHT = (
    "Math.ceil(Math.max(document.documentElement.scrollHeight,"
    " document.documentElement.getBoundingClientRect().height))"
)

PDF = "application/pdf"
PNG = "image/png"
EMPTY_TEMPLATE = "<span></span>"
"""Given for the other template when only a header or only a footer is asked for:
an empty string would make Chromium print its default date, title and URL there."""

POLL_INTERVAL = 0.05
"""Seconds between two checks of a `wait_for` condition."""
NETWORK_QUIET = 0.5
"""`network_idle` means no request in flight for this long (puppeteer's networkidle0)."""
PRINT_RESERVE = 1.0
"""Seconds of the render time limit a `wait_for` leaves for printing (at most a quarter)."""
MAX_PNG_HEIGHT = 32768
"""Tallest PNG in device pixels: a full-page bitmap of a taller page costs Chromium
gigabytes (a 40,000 px page took 6.5 s here at scale 1)."""
MAX_PNG_WIDTH = 16384
"""Widest PNG in device pixels: a page's content can overflow the viewport sideways, and
the full-page capture would follow it (a 30,000 px wide page was captured whole)."""
MAX_PNG_PIXELS = 64 * 2**20
"""Most device pixels in one PNG: 256 MB of RGBA bitmap before compression."""


@dataclass(frozen=True)
class Html:
    """A document given as HTML, written into a fresh about:blank realm."""

    text: str


@dataclass(frozen=True)
class Url:
    """A document the browser loads from an http(s) address (waits for `load`)."""

    address: str


Source = Html | Url


@dataclass(frozen=True)
class RenderResult:
    """A rendered document: its bytes, page count (1 for an image) and content type."""

    data: bytes
    pages: int
    content_type: str = PDF
    # Requests the egress policy refused while rendering ({"url", "reason"}); the document
    # was made without them.
    refused: tuple[dict[str, str], ...] = ()

    @property
    def pdf(self) -> bytes:
        """The bytes, under the name older callers use."""
        return self.data

    @property
    def extension(self) -> str:
        """`pdf` or `png`: the file name extension of `content_type`."""
        return "png" if self.content_type == PNG else "pdf"


def count_pages(pdf: bytes) -> int:
    """The number of page objects in `pdf`: a regex, cheap enough for every render."""
    return len(_PAGE_OBJECT.findall(pdf))


def print_params(options: PageOptions) -> dict[str, Any]:
    """`PageOptions` as `Page.printToPDF` parameters (sizes in inches).

    A receipt's `paperHeight` is 0 here; it is measured on the loaded page.
    """
    width, height = paper_inches(options)
    params: dict[str, Any] = {
        "landscape": options.landscape,
        "printBackground": options.print_background,
        "scale": options.scale,
        "paperWidth": width,
        "paperHeight": height,
        "preferCSSPageSize": options.prefer_css_page_size,
        "generateTaggedPDF": options.tagged,
        **_margins(options.margin),
        **_header_footer(options),
    }
    if options.page_ranges is not None:
        params["pageRanges"] = options.page_ranges
    return params


def _margins(margin: Margin | None) -> dict[str, float]:
    # Always sent: Page.printToPDF's own default is 0.4 in on every side.
    margin = margin or Margin()
    return {
        "marginTop": inches(margin.top),
        "marginRight": inches(margin.right),
        "marginBottom": inches(margin.bottom),
        "marginLeft": inches(margin.left),
    }


def _header_footer(options: PageOptions) -> dict[str, Any]:
    header, footer = options.header_template, options.footer_template
    if header is None and footer is None:
        return {"displayHeaderFooter": False}
    return {
        "displayHeaderFooter": True,
        "headerTemplate": header if header is not None else EMPTY_TEMPLATE,
        "footerTemplate": footer if footer is not None else EMPTY_TEMPLATE,
    }


@dataclass(frozen=True)
class _Viewport:
    width: int
    height: int
    scale: float


# pyppeteer gives every new tab this viewport (its `defaultViewport`).
DEFAULT_VIEWPORT = _Viewport(800, 600, 1.0)


@dataclass(frozen=True)
class _Emulation:
    """What a tab pretends to be for one job."""

    javascript: bool = True
    media: str = ""  # "": none, so a PDF is laid out on screen and printed in print media
    viewport: _Viewport = DEFAULT_VIEWPORT


# Anything through which a document can run script. Without a match, "auto" runs the job
# with scripts disabled, so a miss only means a script that does not run, never one that
# runs: and then the tab's realm stays clean for the next job without a navigation.
# HTML names are ASCII case-insensitive: the lowered text is searched, plain substrings
# first (str.find is C; one alternation regex took 0.36 ms on the example invoice, this
# takes 0.16 ms).
_SCRIPT_MARKERS = ("<script", "<iframe", "<frame", "<object", "<embed", "srcdoc", "javascript:")
_EVENT_HANDLER = re.compile(r"\bon[a-z]+\s*=")


def _might_script(text: str) -> bool:
    lowered = text.lower()
    return any(marker in lowered for marker in _SCRIPT_MARKERS) or bool(
        _EVENT_HANDLER.search(lowered)
    )


def javascript_for(options: PageOptions, source: Source | None = None) -> bool:
    """Whether the job runs with script: as asked, else (auto) when it may need it."""
    if options.javascript is not None:
        return options.javascript
    if options.output == "png" or isinstance(source, Url):
        return True  # png: Chromium may never paint a page with script disabled
    if options.wait_for and options.wait_for.expression:
        return True
    return isinstance(source, Html) and _might_script(source.text)


def emulation_for(options: PageOptions, source: Source | None = None) -> _Emulation:
    """The tab settings a job needs.

    A plain PDF keeps Chromium's defaults (printing switches to print media by itself). A
    PNG is laid out `width` CSS px wide at `scale` device pixels per CSS px. A receipt is
    laid out in the media it is printed in, at the printable width (rounded down, so the
    measured height can only be taller than the printed one) and 1 px high, since
    `scrollHeight` is never less than the viewport's height.
    """
    media = "" if options.emulate_media == "print" else options.emulate_media
    viewport = DEFAULT_VIEWPORT
    if options.output == "png":
        media = options.emulate_media
        width = round(css_px(options.width)) if options.width else DEFAULT_VIEWPORT.width
        viewport = _Viewport(width, DEFAULT_VIEWPORT.height, options.scale)
    elif options.receipt_width is not None:
        media = options.emulate_media
        viewport = _Viewport(math.floor(_printable_px(options)), 1, 1.0)
    return _Emulation(javascript_for(options, source), media, viewport)


def _printable_px(options: PageOptions) -> float:
    """The CSS width Chromium lays a page out at: paper minus margins, divided by scale."""
    params = print_params(options)
    printable = params["paperWidth"] - params["marginLeft"] - params["marginRight"]
    return float(printable * CSS_PX_PER_INCH / options.scale)


async def _finished_within(task: asyncio.Future[Any], seconds: float) -> bool:
    """Wait up to `seconds` for `task` without ever cancelling it; True if it finished."""
    done, _ = await asyncio.wait({task}, timeout=seconds)
    return bool(done)


def _describe(exc: BaseException) -> str:
    return str(exc) or type(exc).__name__


def _verdict_of(task: asyncio.Task[Any], exc: BaseException) -> bool:
    """Whether `exc` is what the render task raised itself (not a timeout or crash)."""
    return task.done() and not task.cancelled() and task.exception() is exc


class _Tab:
    """A pooled page, our own CDP session on it (request filter, emulated media), what it
    currently emulates, the requests it has in flight and its main document's status."""

    def __init__(
        self,
        page: Any,
        session: Any,
        gate: RequestFilter,
        crashed: asyncio.Future[None],
        foreground: asyncio.Lock,
    ) -> None:
        self.page = page
        self.foreground = foreground  # shared by the browser's tabs: held to be in front
        self.crashed = crashed  # done once the tab's renderer died; the tab is then replaced
        self.session = session
        self.gate = gate
        self.document_status = 0
        self.emulation = _Emulation()
        # Whether the realm may hold state of an earlier job; a new tab's does not.
        self.dirty = False
        self.requests: set[Any] = set()
        self.quiet_since = time.monotonic()
        page.on("request", self._started)
        page.on("requestfinished", self._ended)
        page.on("requestfailed", self._ended)
        page.on("response", self._answered)

    def _started(self, request: Any) -> None:
        self.requests.add(request)

    def _answered(self, response: Any) -> None:
        # The last response of the main frame's document: after redirects, the final one.
        request = response.request
        if request.resourceType == "document" and request.frame is self.page.mainFrame:
            self.document_status = int(response.status)

    def _ended(self, request: Any) -> None:
        self.requests.discard(request)
        if not self.requests:
            self.quiet_since = time.monotonic()

    def forget_requests(self) -> None:
        """Start counting afresh: what the last job left loading is no longer ours."""
        self.requests.clear()
        self.quiet_since = time.monotonic()
        self.document_status = 0

    async def send(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        """A raw CDP call on the page's own session."""
        reply: dict[str, Any] = await self.page._client.send(method, params or {})
        return reply

    async def evaluate(self, expression: str) -> dict[str, Any]:
        """`Runtime.evaluate` by value; works with JavaScript disabled for the page."""
        return await self.send(
            "Runtime.evaluate", {"expression": expression, "returnByValue": True}
        )

    async def emulate(self, want: _Emulation) -> None:
        """Make the tab emulate `want`, changing only what differs from now."""
        have = self.emulation
        if want.javascript != have.javascript:
            # Runtime.evaluate (our loading, waits and measuring) still works without it.
            await self.send("Emulation.setScriptExecutionDisabled", {"value": not want.javascript})
        if want.media != have.media:
            # On our session, not the page's: with two sessions on a tab, printing follows
            # the media of the session attached last (seen with Chromium 156).
            await self.session.send("Emulation.setEmulatedMedia", {"media": want.media})
        if want.viewport != have.viewport:
            size = want.viewport
            await self.send(
                "Emulation.setDeviceMetricsOverride",
                {
                    "width": size.width,
                    "height": size.height,
                    "deviceScaleFactor": size.scale,
                    "mobile": False,
                },
            )
        self.emulation = want


async def _produce(tab: _Tab, source: Source, options: PageOptions, deadline: float) -> bytes:
    """One document on one tab: emulation, the source, the wait, then the PDF or PNG.

    `deadline` (time.monotonic) is when a `wait_for` must give up, leaving time to print.
    """
    tab.forget_requests()
    if options.output == "png":
        # A screenshot of a document written into a realm made before this job's
        # emulation sometimes never gets painted (Chromium 156): give PNGs a fresh one.
        tab.dirty = True
    await tab.emulate(emulation_for(options, source))
    await _load(tab, source)
    if options.wait_for is not None:
        await _wait(tab, options.wait_for, deadline)
    if options.output == "png":
        return await _screenshot(tab, options.scale)
    return await _print_pdf(tab, options)


async def _load(tab: _Tab, source: Source) -> None:
    """Load the source. A fresh about:blank realm (~30 ms of CPU, a third of a render) is
    made only when the tab's current realm may hold a previous job's state: after a job
    that ran script, or a page from a URL."""
    was_dirty, tab.dirty = tab.dirty, True  # until this load is known to have run no script
    if isinstance(source, Url):
        await _navigate(tab, source.address)
        return
    if was_dirty:
        await tab.page.goto("about:blank", {"waitUntil": "load", "timeout": 0})
    # Not pyppeteer's evaluate: it calls with `userGesture: true`, and the document's own
    # scripts would then run with the user activation that lets them open popups.
    reply = await tab.send(
        "Runtime.evaluate",
        {
            "expression": f"({_LOAD_HTML})({json.dumps(source.text)})",
            "awaitPromise": True,
            "userGesture": False,
            "returnByValue": True,
        },
    )
    if "exceptionDetails" in reply:
        raise BrowserError(f"the document could not be written: {reply['exceptionDetails']}")
    tab.dirty = tab.emulation.javascript


# Navigation failures that would happen again: the request filter refused the URL, or it
# is no page (a download is aborted), or Chromium never loads such a URL at all.
_REFUSED = (
    "net::ERR_BLOCKED_BY_CLIENT",
    "net::ERR_ABORTED",
    "net::ERR_INVALID_URL",
    "net::ERR_UNKNOWN_URL_SCHEME",
    "net::ERR_BLOCKED_BY_RESPONSE",
    "net::ERR_UNSAFE_PORT",
)
# Client errors that a later attempt may not meet: timeouts and rate limits.
_RETRYABLE_STATUS = frozenset({408, 425, 429})


async def _navigate(tab: _Tab, url: str) -> None:
    """Load `url` up to its `load` event; raise `SourceError` if retrying cannot help
    (4xx, refused), `SourceUnreachable` if it may (DNS, connection, 5xx)."""
    try:
        await tab.page.goto(url, {"waitUntil": "load", "timeout": 0})
    except PageError as exc:
        _check_refusal(tab.gate.refused.navigation)
        # An error status with an empty body ends as net::ERR_HTTP_RESPONSE_CODE_FAILURE:
        # the status, seen on the response, says more.
        _check_status(tab.document_status, url)
        text = _describe(exc)
        if text.startswith(_REFUSED):
            raise SourceError(f"cannot load url: {text}") from exc
        raise SourceUnreachable(f"cannot load url: {text}") from exc
    _check_status(tab.document_status, url)


def _check_refusal(refusal: Refusal | None) -> None:
    """The egress policy refused the job's own URL (or a redirect hop): say why. A DNS
    hiccup may pass next time; a forbidden address or scheme never will."""
    if refusal is None:
        return
    message = f"url refused: {refusal.url}: {refusal.reason}"
    raise SourceUnreachable(message) if refusal.transient else SourceError(message)


def _check_status(status: int, url: str) -> None:
    if status >= 500 or status in _RETRYABLE_STATUS:
        raise SourceUnreachable(f"url answered HTTP {status}: {url}")
    if status >= 400:
        raise SourceError(f"url answered HTTP {status}: {url}")


async def _wait(tab: _Tab, wait: WaitFor, deadline: float) -> None:
    """Wait for `wait`'s condition, for `wait.timeout` s but never past `deadline`."""
    end = deadline if wait.timeout is None else min(deadline, time.monotonic() + wait.timeout)
    if wait.network_idle:
        await _network_idle(tab, end)
    else:
        await _until_true(tab, wait, end)


def _probe(wait: WaitFor) -> tuple[str, str, str]:
    """The JS that is true once the wait is over, the option's name and its value."""
    if wait.selector is not None:
        query = f"Boolean(document.querySelector({json.dumps(wait.selector)}))"
        return query, "selector", wait.selector
    # Newlines, so that a trailing `// comment` in the expression cannot swallow the `)`.
    return f"Boolean((\n{wait.expression}\n))", "expression", str(wait.expression)


async def _until_true(tab: _Tab, wait: WaitFor, end: float) -> None:
    """Poll a selector or expression until true; `WaitTimeout` at `end`.

    An invalid selector or an expression that does not parse fails at once (`RequestError`
    naming the option); an expression that throws counts as false until `end`, since late
    content often means an object that does not exist yet.
    """
    expression, name, value = _probe(wait)
    started, error = time.monotonic(), ""
    while True:
        reply = await tab.evaluate(expression)
        if reply.get("result", {}).get("value") is True:
            return
        if (details := reply.get("exceptionDetails")) is not None:
            error = _exception_text(details)
            if name == "selector" or error.startswith("SyntaxError"):
                raise RequestError(
                    f"options.wait_for.{name} is invalid: {error}", field=f"options.wait_for.{name}"
                )
        if time.monotonic() >= end:
            raise WaitTimeout(_wait_message(name, value, time.monotonic() - started, error))
        await asyncio.sleep(POLL_INTERVAL)


def _exception_text(details: dict[str, Any]) -> str:
    exception = details.get("exception") or {}
    return str(exception.get("description") or details.get("text") or "error").split("\n")[0]


def _wait_message(name: str, value: str, waited: float, error: str) -> str:
    what = "matched nothing" if name == "selector" else "was never truthy"
    text = f"wait_for.{name} {value[:200]!r} {what} within {waited:.1f} s"
    return f"{text} (last error: {error})" if error else text


async def _network_idle(tab: _Tab, end: float) -> None:
    """Return once no request has been in flight for `NETWORK_QUIET` s.

    At `end` raise `RenderTimeout`, a transient error: the requests still open are the
    network's, and a slow server may well answer on the next attempt.
    """
    started = time.monotonic()
    while tab.requests or time.monotonic() - tab.quiet_since < NETWORK_QUIET:
        if time.monotonic() >= end:
            raise RenderTimeout(_busy_message(tab, time.monotonic() - started))
        await asyncio.sleep(POLL_INTERVAL)


def _busy_message(tab: _Tab, waited: float) -> str:
    open_urls = sorted(str(request.url)[:200] for request in tab.requests)
    example = f", e.g. {open_urls[0]}" if open_urls else ""
    return (
        f"wait_for.network_idle: the network was still busy after {waited:.1f} s "
        f"({len(open_urls)} requests open{example})"
    )


async def _print_pdf(tab: _Tab, options: PageOptions) -> bytes:
    """Print the loaded document with `Page.printToPDF`."""
    params = print_params(options)
    if options.receipt_width is not None:
        params["paperHeight"] = await _receipt_height(tab, options, params)
    try:
        reply = await tab.send("Page.printToPDF", params)
    except NetworkError as exc:
        # "Page range exceeds page count": the ranges were valid, but not for this document.
        if "Page range" in str(exc):
            message = str(exc).rsplit(": ", 1)[-1]
            raise RequestError(
                f"options.page_ranges: {message}", field="options.page_ranges"
            ) from exc
        raise
    return base64.b64decode(reply["data"])


async def _receipt_height(tab: _Tab, options: PageOptions, params: dict[str, Any]) -> float:
    """Paper height in inches that holds the whole document on one page."""
    reply = await tab.evaluate(_CONTENT_HEIGHT)
    content = float(reply["result"]["value"]) * options.scale / CSS_PX_PER_INCH
    height = float(content + params["marginTop"] + params["marginBottom"])
    if height > MAX_PAPER_INCHES:
        raise OutputTooLarge(
            f"receipt is {height * 25.4:.0f} mm long, over the PDF page limit of 5080 mm"
        )
    return height


def _check_png_size(width: float, height: float) -> None:
    """`OutputTooLarge` for a capture of `width` by `height` device pixels over the limits,
    before Chromium paints a single one of them."""
    if height > MAX_PNG_HEIGHT:
        raise OutputTooLarge(
            f"page is {height:.0f} px tall, over the PNG limit of {MAX_PNG_HEIGHT} px"
        )
    if width > MAX_PNG_WIDTH:
        raise OutputTooLarge(
            f"page is {width:.0f} px wide, over the PNG limit of {MAX_PNG_WIDTH} px"
        )
    if width * height > MAX_PNG_PIXELS:
        raise OutputTooLarge(
            f"page is {width:.0f} by {height:.0f} px, over the PNG limit of "
            f"{MAX_PNG_PIXELS // 2**20} megapixels"
        )


async def _screenshot(tab: _Tab, scale: float) -> bytes:
    """A PNG of the whole page, `scale` device pixels per CSS pixel."""
    metrics = await tab.send("Page.getLayoutMetrics")
    size = metrics["cssContentSize"]
    width, height = math.ceil(size["width"]), math.ceil(size["height"])
    _check_png_size(width * scale, height * scale)
    clip = {"x": 0, "y": 0, "width": width, "height": height, "scale": 1}
    # A screenshot waits for the tab to commit a frame. Headless tabs in the background
    # (all but the last one opened) are reported elsewhere to sometimes never commit one;
    # here a capture hung once until the render timeout, in ~300 not reproduced. So the
    # capturing tab is brought to the front first, one tab at a time, so that no other
    # capture sends it back meanwhile.
    async with tab.foreground:
        await tab.send("Page.bringToFront")
        reply = await tab.send(
            "Page.captureScreenshot",
            {"format": "png", "clip": clip, "captureBeyondViewport": True},
        )
    return base64.b64decode(reply["data"])


# Exec'd between pyppeteer's fork and Chromium: asks the kernel to SIGKILL Chromium when
# the renderer process dies, however it dies (pyppeteer offers no preexec hook, and a
# SIGKILLed renderer would otherwise leave a ~1 GB browser behind).
_PDEATHSIG_SHIM = """import ctypes, os, signal, sys
ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
if os.getppid() == 1:
    sys.exit(1)  # the renderer is already gone
os.execv(sys.argv[1], sys.argv[1:])
"""


def _dying_with_us(executable: str, folder: str) -> str:
    """A launcher script for `executable` that dies with this process (Linux only)."""
    if not sys.platform.startswith("linux"):
        return executable
    script = os.path.join(folder, "launch-chromium.sh")
    with open(script, "w", encoding="utf-8") as file:
        file.write(
            f"#!/bin/sh\nexec {shlex.quote(sys.executable)} -c "
            f'{shlex.quote(_PDEATHSIG_SHIM)} {shlex.quote(executable)} "$@"\n'
        )
    os.chmod(script, 0o700)
    return script


def _uncompressed_devtools() -> None:
    """Make pyppeteer's DevTools connections without permessage-deflate.

    Chromium otherwise deflates every message on a loopback socket, a PDF's ~120 KB of
    base64 included, and Python inflates it again: CPU both sides spend for nothing (on
    the example invoice, ~5% of the throughput of a CPU-bound renderer). pyppeteer
    offers no option, so the connect function it calls is replaced; done at launch, so
    only processes that launch through this module are affected.
    """
    pyppeteer.connection.ws_connect = functools.partial(websocket_connect, compression=None)


_FONTS_CONF = """<?xml version="1.0"?>
<!DOCTYPE fontconfig SYSTEM "fonts.dtd">
<fontconfig>
  <include ignore_missing="yes">/etc/fonts/fonts.conf</include>
  <dir>{fonts}</dir>
  <cachedir>{cache}</cachedir>
</fontconfig>
"""


def _settle(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


_CHROMIUM_ENV = ("PATH", "LANG", "LANGUAGE", "TZ", "TMPDIR")
"""What Chromium is given of the renderer's environment (and `LC_*`): nothing else, so
the URL-signing key, webhook and S3 secrets and the database URL stay out of reach of a
page that takes over a Chromium process."""


def chromium_env(fonts_dir: str, profile: str) -> dict[str, str]:
    """Chromium's environment: the locale, `PATH` and `TMPDIR` of the renderer, `HOME` in
    the profile, and with `fonts_dir` a fontconfig file that adds that folder to the
    system's fonts (Chromium finds fonts through fontconfig on Linux)."""
    env = {
        name: value
        for name, value in os.environ.items()
        if name in _CHROMIUM_ENV or name.startswith("LC_")
    }
    env.setdefault("PATH", os.defpath)
    env["HOME"] = profile
    if fonts_dir:
        conf = os.path.join(profile, "fonts.conf")
        with open(conf, "w", encoding="utf-8") as file:
            file.write(
                _FONTS_CONF.format(
                    fonts=xml_escape(os.path.abspath(fonts_dir)),
                    cache=xml_escape(os.path.join(profile, "fontcache")),
                )
            )
        env["FONTCONFIG_FILE"] = conf
    return env


class _Chromium:
    """One Chromium process, its profile directory and its queue of idle tabs.

    The queue always accounts for every tab: a render takes one and puts back either the
    same tab, a replacement or, when the browser is broken, the broken tab, so that a
    render waiting for a tab is never left waiting on a browser that can no longer return
    one (it gets the broken tab, fails at once and raises `BrowserError`).
    """

    def __init__(self, browser: Any, profile: str, egress: Egress) -> None:
        self.browser = browser
        self.profile = profile
        self.egress = egress
        self.idle: asyncio.Queue[_Tab] = asyncio.Queue()
        self.renders = 0
        self.in_flight = 0
        self.retired = False
        self.closing = False
        # Done once the DevTools connection dropped: the browser exited or crashed.
        self.gone: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.foreground = asyncio.Lock()
        self._tasks: set[asyncio.Task[Any]] = set()
        browser.on("disconnected", self._on_disconnected)

    @classmethod
    async def launch(
        cls, executable: str, pages: int, egress: Egress, fonts_dir: str = ""
    ) -> _Chromium:
        """Start Chromium with `pages` idle tabs; `BrowserError` if it cannot start.

        With `fonts_dir`, the fonts in that folder are usable from documents by family name.
        """
        profile = tempfile.mkdtemp(prefix="pressroom-chromium-")
        _uncompressed_devtools()
        try:
            browser = await pyppeteer.launch(
                env=chromium_env(fonts_dir, profile),
                # Always ours: pyppeteer would otherwise download its own Chromium.
                executablePath=_dying_with_us(executable, profile),
                args=CHROMIUM_ARGS,
                ignoreDefaultArgs=WITHOUT_DEFAULTS,
                headless=True,
                handleSIGINT=False,  # shutdown is ours: drain renders, then close
                handleSIGTERM=False,
                handleSIGHUP=False,
                userDataDir=profile,
                autoClose=False,
                dumpio=False,
            )
        except Exception as exc:
            shutil.rmtree(profile, ignore_errors=True)
            raise BrowserError(f"cannot start Chromium ({executable}): {_describe(exc)}") from exc
        chromium = cls(browser, profile, egress)
        await chromium._open_tabs(pages)
        return chromium

    async def _open_tabs(self, pages: int) -> None:
        try:
            for _ in range(pages):
                self.idle.put_nowait(await self.run(self.open_tab(), CLOSE_GRACE))
        except BaseException:
            await self.close()
            raise

    @property
    def alive(self) -> bool:
        return not self.gone.done() and self.browser.process.poll() is None

    @property
    def obituary(self) -> str:
        code = self.browser.process.poll()
        return "Chromium disconnected" + (f" (exit code {code})" if code is not None else "")

    @property
    def pid(self) -> int:
        return int(self.browser.process.pid)

    def _on_disconnected(self) -> None:
        if not self.gone.done():
            self.gone.set_result(None)

    def spawn(self, work: Coroutine[Any, Any, Any]) -> asyncio.Task[Any]:
        """Run `work` as a task this browser keeps until it ends (awaited on close)."""
        task = asyncio.ensure_future(work)
        self._tasks.add(task)
        task.add_done_callback(self._forget)
        return task

    def _forget(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.debug("chromium background task failed: %r", task.exception())

    async def run(self, work: Coroutine[Any, Any, Any], seconds: float) -> Any:
        """Await pyppeteer `work` for at most `seconds`, without cancelling it.

        Raises `BrowserError` on timeout or on any error of the work itself.
        """
        task = self.spawn(work)
        if not await _finished_within(task, seconds):
            raise BrowserError(f"Chromium did not answer within {seconds:g} s")
        if (exc := task.exception()) is not None:
            raise BrowserError(_describe(exc)) from exc
        return task.result()

    async def open_tab(self) -> _Tab:
        """A new tab that filters its requests and never blocks on a dialog or crash."""
        page = await self.browser.newPage()
        page.on("error", lambda exc: log.warning("Chromium tab crashed: %s", exc))
        crashed: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        page.on("error", lambda exc: _settle(crashed))
        page.on("dialog", lambda dialog: self.spawn(dialog.dismiss()))
        session = await page.target.createCDPSession()
        gate = RequestFilter(self.egress, main_frame_id=page.target._targetId)
        await _guard(session, gate, self.spawn)
        return _Tab(page, session, gate, crashed, self.foreground)

    async def replace_tab(self, tab: _Tab) -> None:
        """Close `tab` (it may be stuck) and queue a new tab in its place.

        On failure the old tab goes back to the queue (see the class docstring) and
        `BrowserError` is raised: the browser itself is then in doubt.
        """
        try:
            self.spawn(tab.page.close())  # a hung renderer may never confirm; don't wait for it
            self.idle.put_nowait(await self.run(self.open_tab(), CLOSE_GRACE))
        except BrowserError:
            self.idle.put_nowait(tab)
            raise

    async def close(self) -> None:
        """Close the browser, kill it if not gone after `CLOSE_GRACE` s, remove its profile."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + CLOSE_GRACE
        await _finished_within(self.spawn(self.browser.close()), CLOSE_GRACE)
        await _reap(self.browser.process, max(0.0, deadline - loop.time()))
        await self._end_tasks()
        shutil.rmtree(self.profile, ignore_errors=True)

    async def _end_tasks(self) -> None:
        # The connection is disposed by now, which failed every pending protocol call, so
        # those tasks end within a few loop turns. What is left waits for an event that
        # will never come (a tab's "closed"), and with the connection gone it can be
        # cancelled without harm.
        if not self._tasks:
            return
        _, pending = await asyncio.wait(set(self._tasks), timeout=0.1)
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)


Spawn = Callable[[Coroutine[Any, Any, Any]], asyncio.Task[Any]]


async def _guard(session: Any, gate: RequestFilter, spawn: Spawn) -> None:
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
        await _guard(child, gate, spawn)
    finally:
        await child.send("Runtime.runIfWaitingForDebugger")


async def _reap(process: subprocess.Popen[bytes], grace: float) -> None:
    """Wait up to `grace` seconds for Chromium to exit, then SIGKILL it.

    Its helper processes (zygotes, renderers, GPU, network) exit by themselves once the
    browser process is gone.
    """
    try:
        await asyncio.to_thread(process.wait, grace)
    except subprocess.TimeoutExpired:
        log.warning(
            "Chromium (pid %d) did not exit within %g s; killing it", process.pid, CLOSE_GRACE
        )
        process.kill()
        await asyncio.to_thread(process.wait)


class BrowserPool:
    """`pages` reusable Chromium tabs behind `render()`; use as an async context manager.

    `timeout` bounds the work on a tab (navigation, load, waiting, printing), not the wait
    for a free tab: a render queued behind others is not stuck. `max_output_bytes` caps
    the document, `max_pages` a PDF's page count. After `recycle_after` renders the
    browser is replaced, so a slow leak in Chromium cannot grow forever.
    """

    def __init__(
        self,
        executable: str,
        *,
        pages: int,
        timeout: float,
        max_output_bytes: int,
        recycle_after: int = 1000,
        max_pages: int = 500,
        allow_private_networks: bool = False,
        fonts_dir: str = "",
    ) -> None:
        self.executable = executable
        self.pages = pages
        self.timeout = timeout
        self.max_output_bytes = max_output_bytes
        self.recycle_after = recycle_after
        self.max_pages = max_pages
        self.fonts_dir = fonts_dir
        # One policy (and DNS cache) for every tab of every browser this pool launches.
        self.egress = Egress(allow_private=allow_private_networks)
        self._chromium: _Chromium | None = None
        self._relaunching = asyncio.Lock()
        self._background: set[asyncio.Task[Any]] = set()

    async def __aenter__(self) -> Self:
        self._chromium = await self._launch()
        metrics.BROWSER_LAUNCHES.labels("start").inc()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        async with self._relaunching:  # a relaunch under way finishes first
            chromium, self._chromium = self._chromium, None
        if chromium is not None:
            await chromium.close()
        while self._background:  # recoveries, launches, closes of replaced browsers
            await asyncio.wait(set(self._background))
        await self.egress.aclose()

    @property
    def alive(self) -> bool:
        """Whether the current browser process runs and its connection is open."""
        return self._chromium is not None and self._chromium.alive

    @property
    def pid(self) -> int | None:
        """The current Chromium browser process id (None when closed), for fault tests."""
        return self._chromium.pid if self._chromium is not None else None

    async def render(self, source: Source, options: PageOptions) -> RenderResult:
        """Render `source` (`Html` or `Url`) on a pooled tab as `options.output` says.

        Raises `RenderTimeout` after `timeout` s (the tab is replaced), `BrowserError` if
        Chromium crashed or the tab broke (the browser is relaunched when it is the
        browser that broke), `OutputTooLarge` over `max_output_bytes` or `max_pages`,
        `WaitTimeout` when `wait_for` never came true, `RequestError` when an option does
        not fit the document (`page_ranges` past its end, an invalid selector), and
        `SourceError`/`SourceUnreachable` when a URL fails for good or for now.
        """
        chromium = await self._current()
        chromium.in_flight += 1
        try:
            data, refused = await self._render(chromium, source, options)
        finally:
            chromium.in_flight -= 1
            self._close_if_idle(chromium)
        if options.output == "png":
            result = RenderResult(data, 1, PNG)
        else:
            result = await self._finish_pdf(data, options)
        return self._checked(dataclasses.replace(result, refused=refused))

    async def pdf(self, html: str, options: PageOptions) -> RenderResult:
        """`render(Html(html), options)`: print HTML (kept for callers that only do that)."""
        return await self.render(Html(html), options)

    async def _finish_pdf(self, pdf: bytes, options: PageOptions) -> RenderResult:
        """Count the pages, enforce `max_pages`, then write the metadata if asked."""
        pages = count_pages(pdf)
        if pages > self.max_pages:
            raise OutputTooLarge(f"PDF has {pages} pages, over the limit of {self.max_pages}")
        if options.metadata is not None:
            # pypdf is CPU work (~5 ms an invoice): off the loop, so heartbeats keep going.
            pdf = await asyncio.to_thread(set_metadata, pdf, options.metadata)
        return RenderResult(pdf, pages, PDF)

    def _checked(self, result: RenderResult) -> RenderResult:
        if len(result.data) > self.max_output_bytes:
            raise OutputTooLarge(
                f"{result.extension.upper()} is {len(result.data)} bytes, "
                f"over the limit of {self.max_output_bytes}"
            )
        return result

    async def _current(self) -> _Chromium:
        """The browser new renders go to, relaunched first if dead or worn out."""
        chromium = self._chromium
        if chromium is None:
            raise RuntimeError("BrowserPool is not open; use `async with BrowserPool(...)`")
        if not chromium.alive or chromium.renders >= self.recycle_after:
            await self._relaunch(chromium)
            chromium = self._chromium or chromium
        return chromium

    async def _render(
        self, chromium: _Chromium, source: Source, options: PageOptions
    ) -> tuple[bytes, tuple[dict[str, str], ...]]:
        """The document's bytes and the requests refused while making it."""
        tab = await chromium.idle.get()
        refusals = tab.gate.begin()  # this render's refusals, apart from the previous job's
        chromium.renders += 1
        deadline = time.monotonic() + self.timeout - min(PRINT_RESERVE, self.timeout / 4)
        task = chromium.spawn(_produce(tab, source, options, deadline))
        try:
            await self._outcome(chromium, task, tab.crashed)
        except asyncio.CancelledError:
            # Our caller gave up (shutdown); the tab may still be busy, so swap it out.
            self._track(self._recover(chromium, tab))
            raise
        except PressroomError as exc:
            if _verdict_of(task, exc):  # the render itself decided; the tab is fine
                chromium.idle.put_nowait(tab)
            else:
                await asyncio.shield(self._track(self._recover(chromium, tab)))
            raise
        chromium.idle.put_nowait(tab)
        data: bytes = task.result()
        return data, tuple(refusals.facts())

    async def _outcome(
        self, chromium: _Chromium, task: asyncio.Task[Any], crashed: asyncio.Future[None]
    ) -> None:
        """Return once `task` succeeded; raise `RenderTimeout` or `BrowserError` otherwise,
        or the `PressroomError` the task raised itself (a wait, a source, a limit).

        A crash must not look like a timeout: pyppeteer leaves a navigation on a dead
        browser waiting forever, so the wait also ends when the connection drops.
        """
        await asyncio.wait(
            {task, chromium.gone, crashed},
            timeout=self.timeout,
            return_when=asyncio.FIRST_COMPLETED,
        )
        if task.done():
            if isinstance(exc := task.exception(), PressroomError):
                raise exc
            if exc is not None:
                raise BrowserError(_describe(exc)) from exc
        elif crashed.done():
            raise PageCrashed("the page crashed its tab (out of memory, or a renderer fault)")
        elif chromium.gone.done():
            raise BrowserError(chromium.obituary)
        else:
            raise RenderTimeout(f"render took longer than {self.timeout:g} s")

    async def _recover(self, chromium: _Chromium, tab: _Tab) -> None:
        """After a failed render: a new tab if the browser is fine, else a new browser.

        Runs as a task of its own (`_track`), so a caller cancelled meanwhile cannot leave
        the tab queue one tab short.
        """
        if chromium.alive:
            try:
                await chromium.replace_tab(tab)
                return
            except BrowserError as exc:
                log.warning("cannot replace a Chromium tab (%s); relaunching", exc)
        else:
            chromium.idle.put_nowait(tab)
        try:
            await self._relaunch(chromium)
        except BrowserError as exc:  # the next render tries again
            log.error("cannot relaunch Chromium: %s", exc)

    async def _relaunch(self, stale: _Chromium) -> None:
        """Replace `stale` with a new browser, once however many renders ask at once."""
        async with self._relaunching:
            if self._chromium is not stale:
                return
            log.info("relaunching Chromium (alive=%s, renders=%d)", stale.alive, stale.renders)
            reason = "recycle" if stale.alive else "crash"
            self._chromium = await self._launch()
            metrics.BROWSER_LAUNCHES.labels(reason).inc()
            stale.retired = True
            self._close_if_idle(stale)

    def _close_if_idle(self, chromium: _Chromium) -> None:
        """Close a replaced browser once the last render on it has finished."""
        if chromium.retired and chromium.in_flight == 0 and not chromium.closing:
            chromium.closing = True
            self._track(chromium.close())

    async def _launch(self) -> _Chromium:
        """Start a browser. A caller cancelled meanwhile does not stop the launch halfway,
        which would orphan the Chromium process; the browser is closed once up instead."""
        launch = self._track(
            _Chromium.launch(self.executable, self.pages, self.egress, self.fonts_dir)
        )
        try:
            return await asyncio.shield(launch)
        except asyncio.CancelledError:
            launch.add_done_callback(self._close_unwanted)
            raise

    def _close_unwanted(self, launch: asyncio.Task[_Chromium]) -> None:
        if not launch.cancelled() and launch.exception() is None:
            self._track(launch.result().close())

    def _track(self, work: Coroutine[Any, Any, T]) -> asyncio.Task[T]:
        """Run `work` in the background; `__aexit__` waits for it."""
        task = asyncio.ensure_future(work)
        self._background.add(task)
        task.add_done_callback(self._settled)
        return task

    def _settled(self, task: asyncio.Task[Any]) -> None:
        self._background.discard(task)
        if task.cancelled() or isinstance(task.exception(), BrowserError | None):
            return  # a BrowserError is raised to, or logged by, whoever awaited the task
        log.error("Chromium pool background task failed", exc_info=task.exception())

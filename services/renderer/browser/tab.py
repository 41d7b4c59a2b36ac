"""A tab, and what one render does on it: emulate, load, wait, then print or capture
(`output`).

A tab serves one job and is then thrown away with its browser context (`BrowserPool`),
so a document is written into the tab's first about:blank realm, which no other job's
script ever ran in, and the render waits for `load` itself (`Page.setContent` is a bare
`document.write` that does not). Jobs run with script disabled unless they ask for it or
contain a way to run it (`javascript` auto). What a job changes on its tab (JavaScript,
emulated media, viewport) is compared with what the tab was made with and set only where
it differs.

Size: the `Tab` and one render's steps on it (load or navigate, wait, print or capture),
which work in turn on the tab's one CDP session and read what it tracks (requests in flight,
the main document's status). The waits (`_wait`, its probes and messages) are the part that
would split out next.
"""

from __future__ import annotations

import asyncio
import json
import time
import urllib.parse
from collections.abc import Sequence
from typing import Any

from services.core.model.errors import (
    BrowserError,
    RenderTimeout,
    RequestError,
    SourceError,
    SourceUnreachable,
    WaitTimeout,
)
from services.core.model.options import status_matches
from services.core.model.outputs import is_image
from services.core.model.pageoptions import PageOptions, WaitFor
from services.renderer.browser.cdp import Session
from services.renderer.browser.documents import Source, Url
from services.renderer.browser.limits import (
    Limits,
    check_headings,
    check_nodes,
)
from services.renderer.browser.output import print_pdf, screenshot
from services.renderer.browser.params import (
    DEFAULT_VIEWPORT,
    Emulation,
    Viewport,
)
from services.renderer.browser.tasks import describe
from services.renderer.browser.toc import print_with_toc
from services.renderer.egress import RequestFilter, refused_scheme
from services.renderer.evidence import Refusal, clip
from services.renderer.jobfiles import DOCUMENT
from services.renderer.proxy import Door

_LOCAL_RESOURCE = "Not allowed to load local resource: "
"""How Chromium's security log starts the message of a frame it refused to load."""

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

POLL_INTERVAL = 0.05
"""Seconds between two checks of a `wait_for` condition."""
NETWORK_QUIET = 0.5
"""`network_idle` means no request in flight for this long (puppeteer's networkidle0)."""


class Tab:
    """A page made for one job: its flat CDP session, what it emulates, the requests it
    has in flight, its main document's status, and its job's `evidence`.

    Each tab lives alone in a browser context of its own (`context_id`: cookies, cache,
    storage, service workers, sockets), whose traffic goes through its own door of the
    egress proxy (`door`); the context is thrown away with the tab after its one job
    (`used`). The page target's id is also its main frame's. The evidence is the request
    filter's (`gate`), which the door reports to as well: every source of events is
    bound to it before the tab exists (`renderer/evidence`).
    """

    def __init__(
        self,
        session: Session,
        target_id: str,
        gate: RequestFilter,
        crashed: asyncio.Future[None],
        foreground: asyncio.Lock,
        *,
        context_id: str = "",
        door: Door | None = None,
        framed: bool = True,
    ) -> None:
        self.session = session
        self.framed = framed  # draws display frames (see `Chromium.open_tab`)
        self.target_id = target_id
        self.context_id = context_id
        self.door = door
        self.foreground = foreground  # shared by the browser's tabs: held to be in front
        self.crashed = crashed  # done once the tab's renderer died; the tab is then replaced
        self.gate = gate
        self.evidence = gate.evidence
        self.used = False  # taken by a job: it never serves another
        self.printing = False  # its job's page is loaded and being printed (`output`)
        self.children: set[str] = set()  # sessions of the targets it attached (`guard`)
        self.document_status = 0
        self.emulation = Emulation()
        self.requests: dict[str, str] = {}  # request id -> URL, of requests in flight
        self.quiet_since = time.monotonic()
        self._loads: dict[str, asyncio.Future[None]] = {}  # loader id -> its main-frame load
        evidence = self.evidence
        session.on("Network.requestWillBeSent", self._started)
        session.on("Network.loadingFinished", self._ended)
        session.on("Network.loadingFailed", self._ended)
        session.on("Network.responseReceived", self._answered)
        session.on("Page.lifecycleEvent", self._lifecycle)
        session.on("Log.entryAdded", self._logged)
        # Sent only while `Runtime` is on, i.e. while the job runs script (`emulate`).
        session.on("Runtime.consoleAPICalled", evidence.console_called)
        session.on("Runtime.exceptionThrown", evidence.exception_thrown)

    async def enable(self) -> None:
        """Turn on the events renders use, and what `emulation` stands for: script on for
        a drawing tab (a job that needs frames mostly runs script), off for a frameless
        one (its jobs never do), so a job rarely changes what its new tab was made with.
        The commands go out together (Chromium runs a session's commands in order): one
        round trip for the lot, while the tab's renderer process starts."""
        self.emulation = Emulation(javascript=self.framed)
        commands = [
            ("Page.enable", {}),
            ("Page.setLifecycleEventsEnabled", {"enabled": True}),
            ("Network.enable", {}),
            ("Inspector.enable", {}),
            ("Log.enable", {}),  # Chromium's own refusals of frames (`_logged`)
            # Console and uncaught errors are reported while Runtime is on: with script.
            ("Runtime.enable", {}) if self.framed else ("Runtime.disable", {}),
            ("Emulation.setScriptExecutionDisabled", {"value": not self.framed}),
            ("Emulation.setDeviceMetricsOverride", _metrics(DEFAULT_VIEWPORT)),
        ]
        await asyncio.gather(*(self.send(method, params) for method, params in commands))

    def _started(self, params: dict[str, Any]) -> None:
        self.requests[str(params["requestId"])] = str(params.get("request", {}).get("url", ""))
        self.evidence.sent(params)

    def _answered(self, params: dict[str, Any]) -> None:
        document = params.get("type") == "Document" and params.get("frameId") == self.target_id
        self.evidence.answered(params, document)
        # The last response of the main frame's document: after redirects, the final one.
        if document:
            self.document_status = int(params.get("response", {}).get("status", 0))

    def _ended(self, params: dict[str, Any]) -> None:
        url = self.requests.pop(str(params.get("requestId")), "")
        failed = self.evidence.ended(params)
        if failed is not None and params.get("blockedReason") and not params.get("errorText"):
            # Blocked by Chromium before the filter saw it (a `file:` URL: no error text,
            # only a reason): the policy's own reason, so that every refusal says why. A
            # request the filter failed has its error text, and its refusal is recorded.
            reason = refused_scheme(url)
            if reason is not None:
                failed.refused = reason
                self.evidence.refuse(Refusal(clip(url), reason), "request")
        if not self.requests:
            self.quiet_since = time.monotonic()

    def _logged(self, params: dict[str, Any]) -> None:
        # A frame's `file:` document (`<iframe src="file:…">`, a frame navigated there) is
        # refused by Chromium before any request is made: no network event tells of it,
        # only this security message. Recorded with the policy's own reason, so that every
        # refusal says why (the subresources' are in `_ended`).
        entry = params.get("entry") or {}
        text = str(entry.get("text", ""))
        if entry.get("source") != "security" or not text.startswith(_LOCAL_RESOURCE):
            return
        url = text.removeprefix(_LOCAL_RESOURCE)
        reason = refused_scheme(url)
        if reason is not None:
            self.evidence.refuse(Refusal(clip(url), reason), "request")

    def _lifecycle(self, params: dict[str, Any]) -> None:
        if params.get("name") != "load" or params.get("frameId") != self.target_id:
            return
        loaded = self._loads.setdefault(str(params.get("loaderId")), _future())
        if not loaded.done():
            loaded.set_result(None)

    def loaded(self, loader_id: str) -> asyncio.Future[None]:
        """Done once the main frame's document of navigation `loader_id` fired `load`
        (it may have already: the event can come before `Page.navigate`'s answer)."""
        return self._loads.setdefault(loader_id, _future())

    def forget_loads(self) -> None:
        self._loads.clear()

    async def send(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        """A raw CDP command on the tab's session."""
        return await self.session.send(method, params)

    async def evaluate(self, expression: str) -> dict[str, Any]:
        """`Runtime.evaluate` by value; works with JavaScript disabled for the page."""
        return await self.send(
            "Runtime.evaluate", {"expression": expression, "returnByValue": True}
        )

    async def emulate(self, want: Emulation) -> None:
        """Make the tab emulate `want`, changing only what differs from now."""
        have = self.emulation
        if want.javascript != have.javascript:
            # Runtime.evaluate (our loading, waits and measuring) still works without it.
            await self.send("Emulation.setScriptExecutionDisabled", {"value": not want.javascript})
            # Console messages and uncaught errors need script: without it, no events.
            await self.send("Runtime.enable" if want.javascript else "Runtime.disable")
        if (want.media, want.features) != (have.media, have.features):
            await self.send("Emulation.setEmulatedMedia", want.media_params())
        if want.viewport != have.viewport:
            await self._set_viewport(want.viewport)
        self.emulation = want

    async def _set_viewport(self, size: Viewport) -> None:
        await self.send("Emulation.setDeviceMetricsOverride", _metrics(size))


def _metrics(size: Viewport) -> dict[str, Any]:
    return {"width": size.width, "height": size.height, "deviceScaleFactor": size.scale,
            "mobile": False}  # fmt: skip


def _future() -> asyncio.Future[None]:
    return asyncio.get_running_loop().create_future()


class NavigationFailed(BrowserError):
    """`Page.navigate` failed; the text starts with Chromium's error (`net::ERR_…`)."""


async def navigate(tab: Tab, url: str) -> None:
    """Load `url` in the tab's main frame up to its `load` event; `NavigationFailed` when
    Chromium could not load it (refused, unreachable, no document)."""
    tab.forget_loads()
    reply = await tab.send("Page.navigate", {"url": url})
    if reply.get("errorText"):
        raise NavigationFailed(f"{reply['errorText']} at {url}")
    loader = reply.get("loaderId")
    if loader:  # none: a navigation within the document, which loads nothing
        await tab.loaded(str(loader))


async def produce(
    tab: Tab,
    source: Source,
    options: PageOptions,
    deadline: float,
    limits: Limits,
    emulation: Emulation,
) -> bytes:
    """One document on one tab: emulation, the source, the wait, then the PDF or PNG.

    `deadline` (time.monotonic) is when a `wait_for` must give up, leaving time to print.
    The document is held to `limits` as soon as each can be known (`limits` module): its
    nodes once loaded and again before printing, its headings before a table of
    contents, its pages and bytes while it is printed.
    `emulation` is `emulation_for(options, source)`, which the caller made to choose the tab.
    """
    await tab.emulate(emulation)
    # A screenshot of a document written into a realm made before this job's emulation
    # sometimes never gets painted (Chromium 156): an image gets a realm made after it.
    await _load(tab, source, options.fail_on_status, fresh_realm=is_image(options.output))
    if options.wait_for is not None:
        await check_nodes(tab, limits)  # rather than wait for a document that cannot be
        await _wait(tab, options.wait_for, deadline)
    await check_nodes(tab, limits)  # what is printed: with what its script or frames added
    if is_image(options.output):
        return await screenshot(tab, options)
    if options.toc:  # prints in passes until the page numbers hold (`toc`)
        await check_headings(tab, limits)
        return await print_with_toc(tab, lambda: print_pdf(tab, options, limits))
    return await print_pdf(tab, options, limits)


async def _load(
    tab: Tab, source: Source, fail_on: Sequence[int] | None, *, fresh_realm: bool = False
) -> None:
    """Load the source: navigate to a URL (whose document's status fails the job if it is
    one of `fail_on`, `options.fail_on_status`), navigate to the job's origin whose
    document is the HTML (a job with files, `jobfiles`), or write the HTML into the tab's
    about:blank realm (with `fresh_realm`, a new one made first)."""
    if isinstance(source, Url):
        await _navigate(tab, source.address, fail_on)
        return
    if tab.gate.files is not None:  # served at the job's origin, with its files
        await _navigate(tab, DOCUMENT)
        return
    if fresh_realm:
        await navigate(tab, "about:blank")
    # Without a user gesture: the document's own scripts would otherwise run with the
    # user activation that lets them open popups.
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


async def _navigate(tab: Tab, url: str, fail_on: Sequence[int] | None = None) -> None:
    """Load `url` up to its `load` event; raise `SourceError` if retrying cannot help
    (4xx, refused), `SourceUnreachable` if it may (DNS, connection, 5xx). A document
    status fails the job when it is one of `fail_on` (None: every 4xx and 5xx)."""
    try:
        await navigate(tab, url)
    except NavigationFailed as exc:
        _check_refusal(tab.evidence.refused.navigation)
        # An error status with an empty body ends as net::ERR_HTTP_RESPONSE_CODE_FAILURE:
        # the status, seen on the response, says more. Chromium kept no page then:
        # nothing to print, so an error status fails whatever `fail_on` says.
        _check_status(tab, url, fail_on)
        _check_status(tab, url)
        text = describe(exc)
        if text.startswith(_REFUSED):
            raise SourceError(f"cannot load url: {text}") from exc
        raise SourceUnreachable(f"cannot load url: {text}") from exc
    _check_status(tab, url, fail_on)


def _check_refusal(refusal: Refusal | None) -> None:
    """The egress policy refused the job's own URL (or a redirect hop): say why. A DNS
    hiccup may pass next time; a forbidden address or scheme never will."""
    if refusal is None:
        return
    message = f"url refused: {refusal.url}: {refusal.reason}"
    raise SourceUnreachable(message) if refusal.transient else SourceError(message)


def _check_status(tab: Tab, url: str, fail_on: Sequence[int] | None = None) -> None:
    """Fail the job if its document's status is one of `fail_on` (`X99`: the class; None:
    every 4xx and 5xx): `SourceUnreachable`, retried, for a 5xx or a status a later
    attempt may not meet; `SourceError` for the others. The egress proxy's 502 for a
    server that never answered fails whatever `fail_on` says."""
    status = tab.document_status
    if status == 502 and tab.evidence.unreachable:
        # The egress proxy's answer when the server did not take the connection.
        parts = urllib.parse.urlsplit(url)
        authority = f"{parts.hostname}:{parts.port or 80}"
        if (reason := tab.evidence.unreachable.get(authority)) is not None:
            raise SourceUnreachable(f"cannot load url: cannot connect to {authority}: {reason}")
    if not (status >= 400 if fail_on is None else status_matches(status, fail_on)):
        return
    why = "" if fail_on is None else " (fail_on_status)"
    if status >= 500 or status in _RETRYABLE_STATUS:
        raise SourceUnreachable(f"url answered HTTP {status}: {url}{why}")
    raise SourceError(f"url answered HTTP {status}: {url}{why}")


async def _wait(tab: Tab, wait: WaitFor, deadline: float) -> None:
    """Wait for `wait`'s condition, for `wait.timeout` s but never past `deadline`."""
    end = deadline if wait.timeout is None else min(deadline, time.monotonic() + wait.timeout)
    tab.evidence.page.pending = wait  # what a diagnosis names if the wait never ends
    if wait.network_idle:
        await _network_idle(tab, end)
    else:
        await _until_true(tab, wait, end)
    tab.evidence.page.pending = None


def _probe(wait: WaitFor) -> tuple[str, str, str]:
    """The JS that is true once the wait is over, the option's name and its value."""
    if wait.selector is not None:
        query = f"Boolean(document.querySelector({json.dumps(wait.selector)}))"
        return query, "selector", wait.selector
    # Newlines, so that a trailing `// comment` in the expression cannot swallow the `)`.
    return f"Boolean((\n{wait.expression}\n))", "expression", str(wait.expression)


async def _until_true(tab: Tab, wait: WaitFor, end: float) -> None:
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


async def _network_idle(tab: Tab, end: float) -> None:
    """Return once no request has been in flight for `NETWORK_QUIET` s.

    At `end` raise `RenderTimeout`, a transient error: the requests still open are the
    network's, and a slow server may well answer on the next attempt.
    """
    started = time.monotonic()
    while tab.requests or time.monotonic() - tab.quiet_since < NETWORK_QUIET:
        if time.monotonic() >= end:
            raise RenderTimeout(_busy_message(tab, time.monotonic() - started))
        await asyncio.sleep(POLL_INTERVAL)


def _busy_message(tab: Tab, waited: float) -> str:
    open_urls = sorted(url[:200] for url in tab.requests.values())
    example = f", e.g. {open_urls[0]}" if open_urls else ""
    return (
        f"wait_for.network_idle: the network was still busy after {waited:.1f} s "
        f"({len(open_urls)} requests open{example})"
    )

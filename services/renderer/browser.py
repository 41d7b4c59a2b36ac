"""The Chromium pool: HTML in, PDF bytes out. The only module that knows pyppeteer.

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
  visible to the next. Each render first navigates to about:blank (a new realm; ~30 ms
  and about a third of the throughput on 2 cores), then writes the HTML and waits for
  `load` itself.
- `Page.setRequestInterception` uses `Network.setRequestInterception`, which Chromium no
  longer has. Requests are filtered with the `Fetch` domain on a CDP session of our own.
- A tab crash is emitted as pyee's `error` event, which raises inside pyppeteer's receive
  loop when nobody listens; every tab gets a listener.
- A navigation under way when the browser dies is never settled, so a render also stops
  waiting when the connection drops (`_Chromium.gone`) instead of running into the timeout.
- With our own `userDataDir`, `Browser.close()` neither waits for nor kills the process;
  `_Chromium.close` does both. (`launch` also blocks the event loop for ~0.3 s while it
  polls the DevTools port with `urlopen`; that happens once per browser.)
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import urllib.parse
from collections.abc import Coroutine
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Self, TypeVar

import pyppeteer

from services.core.errors import BrowserError, OutputTooLarge, RenderTimeout
from services.core.events import Margin, PageOptions

log = logging.getLogger(__name__)

T = TypeVar("T")

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
]

ALLOWED_SCHEMES = frozenset({"http", "https", "data", "blob", "about"})
"""URL schemes a page may load; anything else (file, ftp, chrome, view-source…) is aborted."""

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


@dataclass(frozen=True)
class RenderResult:
    """A rendered document and its page count."""

    pdf: bytes
    pages: int


def count_pages(pdf: bytes) -> int:
    """The number of page objects in `pdf`: a regex, cheap enough for every render."""
    return len(_PAGE_OBJECT.findall(pdf))


def is_allowed_url(url: str) -> bool:
    """Whether a page may fetch `url`, judged by its scheme alone (for now)."""
    return urllib.parse.urlsplit(url).scheme.lower() in ALLOWED_SCHEMES


def pdf_options(options: PageOptions) -> dict[str, Any]:
    """`PageOptions` in the shape `Page.pdf` takes."""
    margin = options.margin or Margin()
    return {
        "format": options.format,
        "landscape": options.landscape,
        "printBackground": options.print_background,
        "scale": options.scale,
        "margin": {
            "top": margin.top,
            "right": margin.right,
            "bottom": margin.bottom,
            "left": margin.left,
        },
    }


async def _finished_within(task: asyncio.Future[Any], seconds: float) -> bool:
    """Wait up to `seconds` for `task` without ever cancelling it; True if it finished."""
    done, _ = await asyncio.wait({task}, timeout=seconds)
    return bool(done)


def _describe(exc: BaseException) -> str:
    return str(exc) or type(exc).__name__


async def _print(page: Any, html: str, options: dict[str, Any]) -> bytes:
    """One document on one tab: a fresh realm, the HTML, `load`, then the PDF."""
    await page.goto("about:blank", {"waitUntil": "load", "timeout": 0})
    await page.evaluate(_LOAD_HTML, html)
    pdf: bytes = await page.pdf(options)
    return pdf


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


class _Chromium:
    """One Chromium process, its profile directory and its queue of idle tabs.

    The queue always accounts for every tab: a render takes one and puts back either the
    same tab, a replacement or, when the browser is broken, the broken tab, so that a
    render waiting for a tab is never left waiting on a browser that can no longer return
    one (it gets the broken tab, fails at once and raises `BrowserError`).
    """

    def __init__(self, browser: Any, profile: str) -> None:
        self.browser = browser
        self.profile = profile
        self.idle: asyncio.Queue[Any] = asyncio.Queue()
        self.renders = 0
        self.in_flight = 0
        self.retired = False
        self.closing = False
        # Done once the DevTools connection dropped: the browser exited or crashed.
        self.gone: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._tasks: set[asyncio.Task[Any]] = set()
        browser.on("disconnected", self._on_disconnected)

    @classmethod
    async def launch(cls, executable: str, pages: int) -> _Chromium:
        """Start Chromium with `pages` idle tabs; `BrowserError` if it cannot start."""
        profile = tempfile.mkdtemp(prefix="pressroom-chromium-")
        try:
            browser = await pyppeteer.launch(
                # Always ours: pyppeteer would otherwise download its own Chromium.
                executablePath=_dying_with_us(executable, profile),
                args=CHROMIUM_ARGS,
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
        chromium = cls(browser, profile)
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

    async def open_tab(self) -> Any:
        """A new tab that filters its requests and never blocks on a dialog or crash."""
        page = await self.browser.newPage()
        page.on("error", lambda exc: log.warning("Chromium tab crashed: %s", exc))
        page.on("dialog", lambda dialog: self.spawn(dialog.dismiss()))
        session = await page.target.createCDPSession()
        session.on("Fetch.requestPaused", lambda event: self.spawn(_decide(session, event)))
        await session.send("Fetch.enable", {"patterns": [{"urlPattern": "*"}]})
        return page

    async def replace_tab(self, page: Any) -> None:
        """Close `page` (it may be stuck) and queue a new tab in its place.

        On failure the old tab goes back to the queue (see the class docstring) and
        `BrowserError` is raised: the browser itself is then in doubt.
        """
        try:
            self.spawn(page.close())  # a hung renderer may never confirm; don't wait for it
            self.idle.put_nowait(await self.run(self.open_tab(), CLOSE_GRACE))
        except BrowserError:
            self.idle.put_nowait(page)
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


async def _decide(session: Any, event: dict[str, Any]) -> None:
    """Let a paused request continue, or abort it if its scheme is not allowed."""
    request_id = event["requestId"]
    url = event["request"]["url"]
    if is_allowed_url(url):
        await session.send("Fetch.continueRequest", {"requestId": request_id})
        return
    log.info("aborted a page request to %.200s", url)
    await session.send(
        "Fetch.failRequest", {"requestId": request_id, "errorReason": "BlockedByClient"}
    )


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
    """`pages` reusable Chromium tabs behind `pdf()`; use as an async context manager.

    `timeout` bounds the work on a tab (navigation, load, printing), not the wait for a
    free tab: a render queued behind others is not stuck. `max_output_bytes` caps the PDF.
    After `recycle_after` renders the browser is replaced, so a slow leak in Chromium
    cannot grow forever.
    """

    def __init__(
        self,
        executable: str,
        *,
        pages: int,
        timeout: float,
        max_output_bytes: int,
        recycle_after: int = 1000,
    ) -> None:
        self.executable = executable
        self.pages = pages
        self.timeout = timeout
        self.max_output_bytes = max_output_bytes
        self.recycle_after = recycle_after
        self._chromium: _Chromium | None = None
        self._relaunching = asyncio.Lock()
        self._background: set[asyncio.Task[Any]] = set()

    async def __aenter__(self) -> Self:
        self._chromium = await self._launch()
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

    @property
    def alive(self) -> bool:
        """Whether the current browser process runs and its connection is open."""
        return self._chromium is not None and self._chromium.alive

    @property
    def pid(self) -> int | None:
        """The current Chromium browser process id (None when closed), for fault tests."""
        return self._chromium.pid if self._chromium is not None else None

    async def pdf(self, html: str, options: PageOptions) -> RenderResult:
        """Print `html` to PDF on a pooled tab.

        Raises `RenderTimeout` after `timeout` s (the tab is replaced), `BrowserError` if
        Chromium crashed or the tab broke (the browser is relaunched when it is the
        browser that broke), and `OutputTooLarge` over `max_output_bytes`.
        """
        chromium = await self._current()
        chromium.in_flight += 1
        try:
            pdf = await self._render(chromium, html, pdf_options(options))
        finally:
            chromium.in_flight -= 1
            self._close_if_idle(chromium)
        if len(pdf) > self.max_output_bytes:
            raise OutputTooLarge(
                f"PDF is {len(pdf)} bytes, over the limit of {self.max_output_bytes}"
            )
        return RenderResult(pdf=pdf, pages=count_pages(pdf))

    async def _current(self) -> _Chromium:
        """The browser new renders go to, relaunched first if dead or worn out."""
        chromium = self._chromium
        if chromium is None:
            raise RuntimeError("BrowserPool is not open; use `async with BrowserPool(...)`")
        if not chromium.alive or chromium.renders >= self.recycle_after:
            await self._relaunch(chromium)
            chromium = self._chromium or chromium
        return chromium

    async def _render(self, chromium: _Chromium, html: str, options: dict[str, Any]) -> bytes:
        page = await chromium.idle.get()
        chromium.renders += 1
        task = chromium.spawn(_print(page, html, options))
        try:
            await self._outcome(chromium, task)
        except asyncio.CancelledError:
            # Our caller gave up (shutdown); the tab may still be busy, so swap it out.
            self._track(self._recover(chromium, page))
            raise
        except (RenderTimeout, BrowserError):
            await asyncio.shield(self._track(self._recover(chromium, page)))
            raise
        chromium.idle.put_nowait(page)
        pdf: bytes = task.result()
        return pdf

    async def _outcome(self, chromium: _Chromium, task: asyncio.Task[Any]) -> None:
        """Return once `task` succeeded; raise `RenderTimeout` or `BrowserError` otherwise.

        A crash must not look like a timeout: pyppeteer leaves a navigation on a dead
        browser waiting forever, so the wait also ends when the connection drops.
        """
        await asyncio.wait(
            {task, chromium.gone}, timeout=self.timeout, return_when=asyncio.FIRST_COMPLETED
        )
        if task.done():
            if (exc := task.exception()) is not None:
                raise BrowserError(_describe(exc)) from exc
        elif chromium.gone.done():
            raise BrowserError(chromium.obituary)
        else:
            raise RenderTimeout(f"render took longer than {self.timeout:g} s")

    async def _recover(self, chromium: _Chromium, page: Any) -> None:
        """After a failed render: a new tab if the browser is fine, else a new browser.

        Runs as a task of its own (`_track`), so a caller cancelled meanwhile cannot leave
        the tab queue one tab short.
        """
        if chromium.alive:
            try:
                await chromium.replace_tab(page)
                return
            except BrowserError as exc:
                log.warning("cannot replace a Chromium tab (%s); relaunching", exc)
        else:
            chromium.idle.put_nowait(page)
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
            self._chromium = await self._launch()
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
        launch = self._track(_Chromium.launch(self.executable, self.pages))
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

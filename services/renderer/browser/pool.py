"""`BrowserPool`: HTML or a URL in, PDF or PNG bytes out, on a pool of Chromium tabs.

One Chromium process keeps `pages` tabs open and reuses them, since a new tab per PDF
would cost much of the throughput (docs/benchmarks.md). A tab that times out is
replaced; a browser that crashed, disconnected or rendered `recycle_after` documents is
replaced by a fresh one while renders still running on the old one finish there.

A render waiting for an event (a page's `load`) when the browser dies would wait until
its timeout, so a render also stops waiting when the connection drops (`Chromium.gone`).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import Coroutine
from types import TracebackType
from typing import Any, Self, TypeVar

from services.core import metrics
from services.core.errors import (
    BrowserError,
    OutputTooLarge,
    PageCrashed,
    PressroomError,
    RenderTimeout,
)
from services.core.pageoptions import PageOptions
from services.core.settings import Settings
from services.renderer.browser.diagnosis import PageReport, diagnose
from services.renderer.browser.documents import PDF, PNG, RenderResult, Source
from services.renderer.browser.params import count_pages, emulation_for, needs_frames
from services.renderer.browser.process import Chromium
from services.renderer.browser.tab import Tab, produce
from services.renderer.browser.tasks import describe
from services.renderer.egress import Egress, RefusedLog
from services.renderer.proxy import Door, EgressProxy
from services.renderer.render import set_metadata

log = logging.getLogger(__name__)

T = TypeVar("T")

PRINT_RESERVE = 1.0
"""Seconds of the render time limit a `wait_for` leaves for printing (at most a quarter)."""


def _verdict_of(task: asyncio.Task[Any], exc: BaseException) -> bool:
    """Whether `exc` is what the render task decided itself (not a timeout or crash, nor
    an error of Chromium's, after which the tab is in doubt)."""
    return (
        task.done()
        and not task.cancelled()
        and task.exception() is exc
        and not isinstance(exc, BrowserError)
    )


class BrowserPool:
    """`pages` reusable Chromium tabs behind `render()`; use as an async context manager.

    `timeout` bounds the work on a tab (navigation, load, waiting, printing), not the wait
    for a free tab: a render queued behind others is not stuck. `max_output_bytes` caps
    the document, `max_pages` a PDF's page count. After `recycle_after` renders the
    browser is replaced, so a slow leak in Chromium cannot grow forever. When this process
    is root, Chromium runs as `chromium_uid` (user and group), at niceness
    `chromium_nice`.
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
        egress: Egress | None = None,
        fonts_dir: str = "",
        chromium_uid: int = Settings.chromium_uid,
        chromium_nice: int = Settings.chromium_nice,
    ) -> None:
        self.executable = executable
        self.pages = pages
        self.timeout = timeout
        self.max_output_bytes = max_output_bytes
        self.recycle_after = recycle_after
        self.max_pages = max_pages
        self.fonts_dir = fonts_dir
        self.chromium_uid = chromium_uid
        self.chromium_nice = chromium_nice
        # One policy (and DNS cache) for every tab of every browser this pool launches;
        # `egress` replaces the one built from `allow_private_networks` (tests give their
        # own resolver).
        self.egress = egress or Egress(allow_private=allow_private_networks)
        self.proxy = EgressProxy(self.egress)
        self._door: Door | None = None  # the default context's, for every browser
        self._chromium: Chromium | None = None
        self._relaunching = asyncio.Lock()
        self._background: set[asyncio.Task[Any]] = set()
        self._recovering: set[asyncio.Task[None]] = set()

    async def __aenter__(self) -> Self:
        self._door = await self.proxy.open_door(closed=True)
        try:
            self._chromium = await self._launch()
        except BaseException:
            await self.proxy.aclose()
            raise
        metrics.BROWSER_LAUNCHES.labels("start").inc()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        # The browser closes next: a tab being replaced after a render cancelled by the
        # shutdown is not worth the wait (it ate the stop margin); a relaunch it started
        # still finishes and is closed (`_launch`).
        for task in self._recovering:
            task.cancel()
        await self.settle()
        async with self._relaunching:  # a relaunch under way finishes first
            chromium, self._chromium = self._chromium, None
        if chromium is not None:
            await chromium.close()
        await self.settle()  # recoveries, launches, closes of replaced browsers
        await self.proxy.aclose()
        await self.egress.aclose()

    @property
    def alive(self) -> bool:
        """Whether the current browser process runs and its connection is open."""
        return self._chromium is not None and self._chromium.alive

    @property
    def pid(self) -> int | None:
        """The current Chromium browser process id (None when closed), for fault tests."""
        return self._chromium.pid if self._chromium is not None else None

    async def settle(self) -> None:
        """Return once the work the pool does between renders is done (contexts thrown
        away and replaced, tabs recovered, browsers relaunched or closed)."""
        while self._background:
            await asyncio.wait(set(self._background))

    @property
    def chromium(self) -> Chromium | None:
        """The current browser (None when closed), for tests that look at its tabs."""
        return self._chromium

    async def render(
        self, source: Source, options: PageOptions, report: PageReport | None = None
    ) -> RenderResult:
        """Render `source` (`Html` or `Url`) on a pooled tab as `options.output` says.

        `report`, when given, is filled with what the page did (console, errors, requests,
        pending `wait_for`, a screenshot) if the render fails on the tab, or if
        `options.diagnostics` asks for it on success.

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
            data, refused = await self._render(chromium, source, options, report)
        finally:
            chromium.in_flight -= 1
            self._close_if_idle(chromium)
        if options.output == "png":
            result = RenderResult(data, 1, PNG)
        else:
            result = await self._finish_pdf(data, options)
        return self._checked(dataclasses.replace(result, refused=refused))

    async def _finish_pdf(self, pdf: bytes, options: PageOptions) -> RenderResult:
        """Count the pages, enforce `max_pages`, then write the metadata if asked."""
        pages = count_pages(pdf)
        if pages > self.max_pages:
            raise OutputTooLarge(f"PDF has {pages} pages, over the limit of {self.max_pages}")
        if options.metadata is not None:
            # pypdf is CPU work: off the loop, so heartbeats keep going.
            pdf = await asyncio.to_thread(set_metadata, pdf, options.metadata)
        return RenderResult(pdf, pages, PDF)

    def _checked(self, result: RenderResult) -> RenderResult:
        if len(result.data) > self.max_output_bytes:
            raise OutputTooLarge(
                f"{result.extension.upper()} is {len(result.data)} bytes, "
                f"over the limit of {self.max_output_bytes}"
            )
        return result

    async def _current(self) -> Chromium:
        """The browser new renders go to, relaunched first if dead or worn out."""
        chromium = self._chromium
        if chromium is None:
            raise RuntimeError("BrowserPool is not open; use `async with BrowserPool(...)`")
        if not chromium.alive or chromium.renders >= self.recycle_after:
            await self._relaunch(chromium)
            chromium = self._chromium or chromium
        return chromium

    async def _render(
        self, chromium: Chromium, source: Source, options: PageOptions, report: PageReport | None
    ) -> tuple[bytes, tuple[dict[str, str], ...]]:
        """The document's bytes and the requests refused while making it; `report` is
        filled before the tab is given back or replaced, when the render failed or
        `options.diagnostics` asks."""
        emulation = emulation_for(options, source)  # once: `auto` script reads the HTML
        tab = await chromium.take(needs_frames(options, emulation))
        refusals = tab.gate.begin()  # this render's refusals, apart from the previous job's
        chromium.renders += 1
        deadline = time.monotonic() + self.timeout - min(PRINT_RESERVE, self.timeout / 4)
        task = chromium.spawn(
            produce(tab, source, options, deadline, self.max_output_bytes, emulation)
        )
        try:
            await self._outcome(chromium, task, tab.crashed)
        except asyncio.CancelledError:
            # Our caller gave up (shutdown); the tab may still be busy, so swap it out.
            self._recover_later(chromium, tab)
            raise
        except PressroomError as exc:
            if report is not None:
                await self._diagnose(chromium, tab, refusals, report)
            if _verdict_of(task, exc):  # the render itself decided; the tab is fine
                self._release(chromium, tab)
            else:
                await asyncio.shield(self._recover_later(chromium, tab))
            raise
        if report is not None and options.diagnostics:
            await self._diagnose(chromium, tab, refusals, report)
        self._release(chromium, tab)
        data: bytes = task.result()
        return data, tuple(refusals.facts())

    @staticmethod
    async def _diagnose(
        chromium: Chromium, tab: Tab, refused: RefusedLog, report: PageReport
    ) -> None:
        """Fill `report`; the screenshot only from a tab that draws (a static PDF's tab
        draws nothing to capture: `needs_frames`) and whose page and browser live."""
        capture = tab.framed and chromium.alive and not tab.crashed.done()
        try:
            await diagnose(tab, refused, report, capture=capture)
        except Exception:  # a diagnosis must never change how the render ends
            log.exception("cannot make a diagnosis of the render")

    def _release(self, chromium: Chromium, tab: Tab) -> None:
        """Give `tab` back after a render it finished: as it is, unless its context may
        hold the job's state; then a fresh tab in a fresh context takes its place."""
        if tab.kept_state:
            self._recover_later(chromium, tab)
        else:
            chromium.idle.put_nowait(tab)

    async def _outcome(
        self, chromium: Chromium, task: asyncio.Task[Any], crashed: asyncio.Future[None]
    ) -> None:
        """Return once `task` succeeded; raise `RenderTimeout` or `BrowserError` otherwise,
        or the `PressroomError` the task raised itself (a wait, a source, a limit).

        A crash must not look like a timeout: a render waiting for a dead browser's event
        would wait forever, so the wait also ends when the connection drops.
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
                raise BrowserError(describe(exc)) from exc
        elif crashed.done():
            raise PageCrashed("the page crashed its tab (out of memory, or a renderer fault)")
        elif chromium.gone.done():
            raise BrowserError(chromium.obituary)
        else:
            raise RenderTimeout(f"render took longer than {self.timeout:g} s")

    def _recover_later(self, chromium: Chromium, tab: Tab) -> asyncio.Task[None]:
        """`_recover` in the background (`__aexit__` cancels it: the browser closes)."""
        task = self._track(self._recover(chromium, tab))
        self._recovering.add(task)
        task.add_done_callback(self._recovering.discard)
        return task

    async def _recover(self, chromium: Chromium, tab: Tab) -> None:
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

    async def _relaunch(self, stale: Chromium) -> None:
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

    def _close_if_idle(self, chromium: Chromium) -> None:
        """Close a replaced browser once the last render on it has finished."""
        if chromium.retired and chromium.in_flight == 0 and not chromium.closing:
            chromium.closing = True
            self._track(chromium.close())

    async def _launch(self) -> Chromium:
        """Start a browser. A caller cancelled meanwhile does not stop the launch halfway,
        which would orphan the Chromium process; the browser is closed once up instead."""
        assert self._door is not None, "the pool's proxy door opens before any browser"
        launch = self._track(
            Chromium.launch(
                self.executable,
                self.pages,
                self.proxy,
                self._door,
                self.fonts_dir,
                chromium_uid=self.chromium_uid,
                nice=self.chromium_nice,
            )
        )
        try:
            return await asyncio.shield(launch)
        except asyncio.CancelledError:
            launch.add_done_callback(self._close_unwanted)
            raise

    def _close_unwanted(self, launch: asyncio.Task[Chromium]) -> None:
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

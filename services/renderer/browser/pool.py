"""`BrowserPool`: HTML or a URL in, PDF or image bytes out, on Chromium tabs.

Every render gets a tab of its own, in a browser context of its own with its own proxy
door and its own record of what the page did (`renderer/evidence`); after the render the
record is sealed, the context closed with every target in it, and only then the next
tab made, in the background, so that nothing of one job is there for the next. Tabs
beyond `pages` are kept ready (`SPARE_TABS`), so a render does not wait for a context to
be made (what the context costs: docs/benchmarks.md). A browser that crashed,
disconnected or rendered `recycle_after` documents is replaced by a fresh one while
renders still running on the old one finish there; how a render's end is told apart
(its own error, a timeout, a crash, the browser gone) is `outcome`'s.

Size: one class, `BrowserPool`, whose renders, tab renewal and browser relaunching share the
current browser, its page slots and its relaunch lock; how a render ends is already
`outcome`'s.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import Coroutine
from types import TracebackType
from typing import Any, Self, TypeVar

from services.core.log.pagesecrets import PageSecrets
from services.core.model.errors import (
    BrowserError,
    OutputTooLarge,
    PressroomError,
    RenderTimeout,
)
from services.core.model.options import check_header_footer
from services.core.model.outputs import CONTENT_TYPES, is_image
from services.core.model.pageoptions import PageOptions
from services.core.runtime import metrics
from services.core.runtime.settings import Settings
from services.renderer.browser import pagerequests
from services.renderer.browser.diagnosis import PageReport, diagnose
from services.renderer.browser.documents import PDF, Html, RenderResult, Source
from services.renderer.browser.limits import Limits, check_template_sizes
from services.renderer.browser.outcome import outcome
from services.renderer.browser.pagerequests import check_page_errors, check_resource_status
from services.renderer.browser.params import (
    Emulation,
    count_pages,
    emulation_for,
    needs_frames,
)
from services.renderer.browser.process import Chromium
from services.renderer.browser.tab import Tab, produce
from services.renderer.egress import Egress
from services.renderer.jobfiles import JobFiles
from services.renderer.proxy import Door, EgressProxy
from services.renderer.render import set_metadata

log = logging.getLogger(__name__)

T = TypeVar("T")

PRINT_RESERVE = 1.0
"""Seconds of the render time limit a `wait_for` leaves for printing (at most a quarter)."""

SPARE_TABS = 1
"""New tabs a browser keeps beyond its `pages`: a render takes one while the tabs of the
renders before it are still being renewed, so no job waits for a context to be made. The
making of a tab is mostly waiting (for a renderer process to start, on cores busy with
other renders), so more of them under way at once keep the renders fed when the machine
is busy; each idle tab holds a renderer process of its own (a few MB of its own memory)."""


EXIT_CLOSE = 0.5
"""Seconds the browser gets to close when the pool closes, before it is killed. At a
renderer's stop its jobs have been handed back, so nothing on it is of use; but a page
still printing holds the disposal of its context (longer on a loaded machine, with a
context per tab and the renewals of the cancelled renders' tabs under way), and the
whole close must fit in the stop margin (`runtime.STOP_MARGIN`) with NATS's."""


def _queue(chromium: Chromium, made: asyncio.Task[Tab]) -> None:
    """Queue the tab `made` for a caller that gave up waiting for it."""
    if not made.cancelled() and made.exception() is None:
        chromium.idle.put_nowait(made.result())


class BrowserPool:
    """Chromium tabs behind `render()`, `pages` renders at a time; use as an async context
    manager.

    Every render gets a tab of its own, in a browser context of its own, made before it
    was asked for and thrown away with every target in it after the render; the next tab
    is made in the background once that context is gone (module docstring).

    `timeout` bounds the work on a tab (navigation, load, waiting, printing), not the wait
    for a free tab: a render queued behind others is not stuck. The `max_*` limits bound
    what a document may be (`limits.Limits`), each checked as early as it can be. After
    `recycle_after` renders the browser is replaced, so a slow leak in Chromium cannot
    grow forever. When this process is root, Chromium runs as `chromium_uid` (user and
    group), at niceness `chromium_nice`.
    """

    def __init__(
        self,
        executable: str,
        *,
        pages: int,
        timeout: float,
        max_output_bytes: int,
        recycle_after: int = 1000,
        max_pages: int = Limits.pages,
        max_dom_nodes: int = Limits.dom_nodes,
        max_header_bytes: int = Limits.header_bytes,
        max_toc_entries: int = Limits.toc_entries,
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
        self.max_dom_nodes = max_dom_nodes
        self.max_header_bytes = max_header_bytes
        self.max_toc_entries = max_toc_entries
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
        self._slots = asyncio.Semaphore(pages)
        self._relaunching = asyncio.Lock()
        self._background: set[asyncio.Task[Any]] = set()
        self._recovering: set[asyncio.Task[None]] = set()

    @property
    def limits(self) -> Limits:
        """What a document may be, as this pool's `max_*` attributes say now."""
        return Limits(
            output_bytes=self.max_output_bytes,
            pages=self.max_pages,
            dom_nodes=self.max_dom_nodes,
            header_bytes=self.max_header_bytes,
            toc_entries=self.max_toc_entries,
        )

    async def __aenter__(self) -> Self:
        self._door = await self.proxy.open_door()  # no job's: refuses everything
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
            await chromium.close(EXIT_CLOSE)
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
        self,
        source: Source,
        options: PageOptions,
        report: PageReport | None = None,
        files: JobFiles | None = None,
        secrets: PageSecrets | None = None,
    ) -> RenderResult:
        """Render `source` (`Html` or `Url`) on a pooled tab as `options.output` says.

        `report`, when given, is filled with what the page did (console, errors, requests,
        pending `wait_for`, a screenshot) if the render fails on the tab, or if
        `options.diagnostics` asks for it on success.

        Raises `RenderTimeout` after `timeout` s, `PageCrashed` if the page crashed its
        tab, `BrowserError` if Chromium crashed or the tab broke (the browser is
        relaunched when it is the browser that broke), a `LimitExceeded` over one of the
        `max_*` limits, `WaitTimeout` when `wait_for` never came true, `RequestError` when
        an option does not fit the document (`page_ranges` past its end, an invalid
        selector, a header that loads a stylesheet), and `SourceError`/`SourceUnreachable`
        when a URL fails for good or for now.

        With `files` (the job's, `renderer/jobfiles`), an `Html` document is loaded at
        `jobfiles.DOCUMENT` and its relative names are served from them; `AssetMissing`
        if the page asked for one the job does not carry.
        """
        check_template_sizes(options, self.limits)  # before a tab is taken for it
        if files is not None:
            options = await files.inlined(options)  # headers and footers load nothing
        check_header_footer(options, files=False)  # nothing left to fetch: it would crash
        async with self._slots:
            chromium = await self._current()
            chromium.in_flight += 1
            try:
                data, refused = await self._render(
                    chromium, source, options, report, files, secrets
                )
            finally:
                chromium.in_flight -= 1
                self._close_if_idle(chromium)
        if is_image(options.output):
            result = RenderResult(data, 1, CONTENT_TYPES[options.output])
        else:
            result = await self._finish_pdf(data, options)
        return self._checked(dataclasses.replace(result, refused=refused))

    async def _finish_pdf(self, pdf: bytes, options: PageOptions) -> RenderResult:
        """Count the pages (`max_pages` held while printing), then write the metadata if
        asked."""
        pages = count_pages(pdf)
        if options.metadata is not None:
            # pypdf is CPU work: off the loop, so heartbeats keep going.
            pdf = await asyncio.to_thread(set_metadata, pdf, options.metadata)
        return RenderResult(pdf, pages, PDF)

    def _checked(self, result: RenderResult) -> RenderResult:
        if len(result.data) > self.max_output_bytes:
            raise OutputTooLarge(
                f"{result.extension.upper()} is {len(result.data)} bytes, "
                f"over the limit of {self.max_output_bytes} (PRESSROOM_MAX_OUTPUT_BYTES)"
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
        self,
        chromium: Chromium,
        source: Source,
        options: PageOptions,
        report: PageReport | None,
        files: JobFiles | None,
        secrets: PageSecrets | None = None,
    ) -> tuple[bytes, tuple[dict[str, str], ...]]:
        """The document's bytes and the requests refused while making it, on a tab made for
        this render alone; `report` is filled from the render's sealed evidence when the
        render failed or `options.diagnostics` asks. The tab is renewed afterwards, in
        the background, however the render ended."""
        emulation = emulation_for(options, source)  # once: `auto` script reads the HTML
        framed = needs_frames(options, emulation)
        tab = await self._take(chromium, framed)
        if files is not None and isinstance(source, Html):
            files.serve(source.text)
            tab.gate.files = files  # the tab is this job's alone
        try:
            await pagerequests.apply(tab, options, secrets)
            data = await self._produce(chromium, tab, source, options, emulation, report)
        except (RenderTimeout, BrowserError):
            # The page may still be busy (a loop, a hung renderer): its context is closed
            # before the caller goes on, so it takes no core from the next render.
            await asyncio.shield(self._retire(chromium, tab, framed))
            raise
        except BaseException:
            self._retire(chromium, tab, framed)
            raise
        self._retire(chromium, tab, framed)
        return data, tuple(tab.evidence.refused.facts())

    def _retire(self, chromium: Chromium, tab: Tab, framed: bool) -> asyncio.Task[None]:
        """Seal the evidence of `tab`'s job (what its page does from now on is nobody's)
        and renew the tab in the background."""
        tab.evidence.seal()
        return self._renew_later(chromium, tab, framed)

    async def _take(self, chromium: Chromium, framed: bool) -> Tab:
        """A new tab of kind `framed` (see `Chromium.take`), marked used: its job's alone."""
        tab = await chromium.take(framed)
        if framed and not tab.framed:
            tab = await self._drawing(chromium, tab)
        tab.used = True
        return tab

    async def _drawing(self, chromium: Chromium, tab: Tab) -> Tab:
        """A drawing tab made in place of `tab`, an unused frameless one, for a render that
        needs frames. In a task of its own: a caller cancelled meanwhile leaves the new
        tab in the queue, and one that fails leaves the browser being relaunched."""
        task = self._track(chromium.remake(tab, framed=True))
        try:
            return await asyncio.shield(task)
        except asyncio.CancelledError:
            task.add_done_callback(lambda done: _queue(chromium, done))
            raise
        except BrowserError as exc:
            self._track(self._relaunch_after(chromium, exc))
            raise

    async def _produce(
        self,
        chromium: Chromium,
        tab: Tab,
        source: Source,
        options: PageOptions,
        emulation: Emulation,
        report: PageReport | None,
    ) -> bytes:
        chromium.renders += 1
        deadline = time.monotonic() + self.timeout - min(PRINT_RESERVE, self.timeout / 4)
        task = chromium.spawn(produce(tab, source, options, deadline, self.limits, emulation))
        try:
            await outcome(chromium, task, tab, options, self.timeout)
            if tab.gate.files is not None:
                tab.gate.files.check()  # a file the page asked for and did not get
            if options.fail_on_page_errors:
                check_page_errors(tab.evidence.page.errors)
            if (listed := options.fail_on_resource_status) is not None:
                ignored = options.ignore_resource_status_hosts or ()
                check_resource_status(tab.evidence.page.resources(), listed, ignored)
        except PressroomError:
            if report is not None:
                await self._diagnose(chromium, tab, report)
            raise
        if report is not None and options.diagnostics:
            await self._diagnose(chromium, tab, report)
        data: bytes = task.result()
        return data

    @staticmethod
    async def _diagnose(chromium: Chromium, tab: Tab, report: PageReport) -> None:
        """Fill `report` from the render's evidence, sealed first: nothing the page does
        while it is captured is added. The screenshot only from a tab that draws (a
        static PDF's tab draws nothing to capture: `needs_frames`) and whose page and
        browser live."""
        tab.evidence.seal()
        capture = tab.framed and chromium.alive and not tab.crashed.done()
        try:
            await diagnose(tab, report, capture=capture)
        except Exception:  # a diagnosis must never change how the render ends
            log.exception("cannot make a diagnosis of the render")

    def _renew_later(self, chromium: Chromium, tab: Tab, framed: bool) -> asyncio.Task[None]:
        """`_renew` in the background (`__aexit__` cancels it: the browser closes)."""
        task = self._track(self._renew(chromium, tab, framed))
        self._recovering.add(task)
        task.add_done_callback(self._recovering.discard)
        return task

    async def _renew(self, chromium: Chromium, tab: Tab, framed: bool) -> None:
        """After a render: the tab's context closed, then a new tab of kind `framed` (the
        kind the job needed: the next one is likely alike) if the browser is fine, else a
        new browser.

        Runs as a task of its own (`_track`), so a caller cancelled meanwhile cannot leave
        the tab queue one tab short.
        """
        if not chromium.alive:
            tab.used = True
            chromium.idle.put_nowait(tab)
            await self._relaunch_after(chromium, None)
            return
        try:
            await chromium.renew(tab, framed)
        except BrowserError as exc:
            await self._relaunch_after(chromium, exc)

    async def _relaunch_after(self, chromium: Chromium, failure: BrowserError | None) -> None:
        """`_relaunch`, after a tab could not be made (`failure`) or the browser died."""
        if failure is not None:
            log.warning("cannot make a Chromium tab (%s); relaunching", failure)
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
                self.pages + SPARE_TABS,
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

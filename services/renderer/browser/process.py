"""`Chromium`: one running browser process with its DevTools connection, its folder and
its idle tabs, each a target in a browser context of its own, attached as a flat session
(`launch` starts the process). A tab serves one job: `renew` closes its context with
every target in it, then makes the next tab.

What needs care: a context whose page is still loading holds Chromium's exit after
`Browser.close` until it is killed: the contexts go first (`close`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import shutil
import subprocess
from collections.abc import Coroutine
from typing import Any

from services.core.model.errors import BrowserError
from services.renderer.browser.cdp import ConnectionLost, Session
from services.renderer.browser.interception import guard
from services.renderer.browser.launch import Browser, launch_browser
from services.renderer.browser.tab import Tab
from services.renderer.browser.tasks import describe, finished_within
from services.renderer.egress import RequestFilter
from services.renderer.evidence import Evidence, Refusal, clip
from services.renderer.proxy import BYPASS_NOTHING, Door, EgressProxy

log = logging.getLogger(__name__)

CLOSE_GRACE = 5.0
"""Seconds the browser gets to close before it is killed."""

KILLED_WAIT = 0.5
"""Seconds a killed browser gets to be gone before closing goes on without it."""

REAP_POLL = 0.02
"""Seconds between two looks at whether the browser process has exited."""

OPEN_GRACE = 20.0
"""Seconds a new tab (its browser context, renderer process and proxy door) gets to open,
and an old one to be closed, before the browser is judged broken. Quick on an idle
machine, but a renderer starting beside busy browsers on a loaded small machine can take
seconds, and so can a context's disposal: the grace is for that load, not the idle case."""


class Chromium:
    """One Chromium process, its folder (profile included) and its queue of idle tabs.

    Every tab in the queue is new (never `used`), except after a failure: the queue
    always accounts for every tab, so a tab that could not be renewed goes back as it is
    and a render that takes it fails at once (`BrowserError`) instead of waiting on a
    browser that can no longer make one.
    """

    def __init__(self, browser: Browser, proxy: EgressProxy) -> None:
        self.process = browser.process
        self.connection = browser.connection
        self.folder = browser.folder
        self.proxy = proxy
        self.egress = proxy.egress
        # Every tab by its browser context id, so a window opened inside one is caught,
        # and by its target id, so a crash reaches it.
        self._tabs: dict[str, Tab] = {}
        self._targets: dict[str, Tab] = {}
        self.idle: asyncio.Queue[Tab] = asyncio.Queue()
        self.renders = 0
        self.in_flight = 0
        self.retired = False
        self.closing = False
        # Done once the DevTools connection dropped: the browser exited or crashed.
        self.gone = self.connection.closed
        self.foreground = asyncio.Lock()
        self._tasks: set[asyncio.Task[Any]] = set()
        self._disposals: set[asyncio.Task[None]] = set()  # contexts being thrown away
        root = self.connection.browser
        root.on("Target.targetCreated", self._on_target)
        root.on("Target.targetCrashed", self._on_crash)

    @classmethod
    async def launch(
        cls,
        executable: str,
        pages: int,
        proxy: EgressProxy,
        door: Door,
        fonts_dir: str = "",
        *,
        chromium_uid: int,
        nice: int = 0,
    ) -> Chromium:
        """Start Chromium with `pages` idle tabs; `BrowserError` if it cannot start.

        Everything Chromium fetches goes through `proxy`: each tab's context through a
        door of its own, the rest (the default context) through `door`. With `fonts_dir`,
        the fonts in that folder are usable from documents by family name. When this
        process is root, Chromium runs as `chromium_uid` (user and group); it runs at
        niceness `nice`.
        """
        browser = await launch_browser(
            executable, door.url, fonts_dir, chromium_uid=chromium_uid, nice=nice
        )
        chromium = cls(browser, proxy)
        await chromium._open_tabs(pages)
        return chromium

    async def _open_tabs(self, pages: int) -> None:
        # At once: each tab waits mostly on Chromium starting a renderer for its context.
        opened = [self.spawn(self.run(self.open_tab(), OPEN_GRACE)) for _ in range(pages)]
        try:
            await asyncio.gather(*opened)
            for task in opened:
                self.idle.put_nowait(task.result())
        except BaseException:
            await self.close()
            raise

    @property
    def alive(self) -> bool:
        return not self.gone.done() and self.process.poll() is None

    @property
    def obituary(self) -> str:
        code = self.process.poll()
        return "Chromium disconnected" + (f" (exit code {code})" if code is not None else "")

    @property
    def pid(self) -> int:
        return int(self.process.pid)

    def idle_tabs(self) -> tuple[Tab, ...]:
        """The tabs in the idle queue now, in the order renders will take them."""
        # Taken out and put back in order, at once: asyncio.Queue has no public way to
        # look at its items, and nothing runs on the loop in between.
        tabs = tuple(self.idle.get_nowait() for _ in range(self.idle.qsize()))
        for tab in tabs:
            self.idle.put_nowait(tab)
        return tabs

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
        """Await `work` for at most `seconds`, in a task of this browser's.

        Raises `BrowserError` on timeout or on any error of the work itself.
        """
        task = self.spawn(work)
        if not await finished_within(task, seconds):
            task.cancel()
            raise BrowserError(f"Chromium did not answer within {seconds:g} s")
        if (exc := task.exception()) is not None:
            raise exc if isinstance(exc, BrowserError) else BrowserError(describe(exc)) from exc
        return task.result()

    async def open_tab(self, framed: bool = False) -> Tab:
        """A new tab in a new browser context behind a new door of the egress proxy, that
        filters its requests and never blocks on a dialog or crash, with the `Evidence`
        its job's page will write (bound to the door, the filter and the session before
        any of them exists).

        Unless `framed`, the tab draws no display frames: its target is created under
        DevTools' control of begin-frames (headless shell), and none is ever sent. Layout
        and printing work as ever; animation frames, observers and screenshots do not, so
        only jobs that `needs_frames` says can do without run on such a tab."""
        evidence = Evidence()
        door = await self.proxy.open_door(evidence)
        context_id = ""
        root = self.connection.browser
        try:
            reply = await root.send(
                "Target.createBrowserContext",
                {"proxyServer": door.url, "proxyBypassList": BYPASS_NOTHING},
            )
            context_id = str(reply["browserContextId"])
            params: dict[str, Any] = {"url": "about:blank", "browserContextId": context_id}
            if not framed:
                params["enableBeginFrameControl"] = True
            made = await root.send("Target.createTarget", params)
            target_id = str(made["targetId"])
            attached = await root.send(
                "Target.attachToTarget", {"targetId": target_id, "flatten": True}
            )
            session = self.connection.session(str(attached["sessionId"]))
            gate = RequestFilter(self.egress, target_id, evidence)
            tab = await self._wire(session, target_id, context_id, door, gate, framed)
        except BaseException:
            await door.close()
            if context_id:
                self.spawn(self._dispose_context(context_id))
            raise
        self._tabs[context_id] = tab
        self._targets[target_id] = tab
        return tab

    async def _wire(
        self,
        session: Session,
        target_id: str,
        context_id: str,
        door: Door,
        gate: RequestFilter,
        framed: bool,
    ) -> Tab:
        """What a tab needs on its session: the request filter (its door reports to the
        same evidence), dialogs dismissed, crashes noticed, the domains its renders use."""
        crashed: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        tab = Tab(
            session,
            target_id,
            gate,
            crashed,
            self.foreground,
            context_id=context_id,
            door=door,
            framed=framed,
        )
        session.on("Inspector.targetCrashed", lambda _: self._crashed(tab))
        session.on(
            "Page.javascriptDialogOpening",
            lambda _: self.spawn(session.send("Page.handleJavaScriptDialog", {"accept": False})),
        )
        # Together: one round trip while the tab's renderer process starts.
        await asyncio.gather(guard(session, gate, self.spawn, tab.children), tab.enable())
        return tab

    def _crashed(self, tab: Tab) -> None:
        if not tab.crashed.done():  # told twice: by the target and by the browser
            log.warning("Chromium tab crashed (out of memory, or a renderer fault)")
            tab.crashed.set_result(None)

    def _on_crash(self, params: dict[str, Any]) -> None:
        tab = self._targets.get(str(params.get("targetId", "")))
        if tab is not None:
            self._crashed(tab)

    async def renew(self, tab: Tab, framed: bool) -> None:
        """`remake` `tab`, and queue the new tab."""
        self.idle.put_nowait(await self.remake(tab, framed))

    async def remake(self, tab: Tab, framed: bool) -> Tab:
        """Close `tab`'s context with every target in it, then make a new tab of kind
        `framed`: one job's context is gone before the next one's exists.

        On failure the old tab goes back to the queue (see the class docstring) and
        `BrowserError` is raised: the browser itself is then in doubt.
        """
        tab.used = True  # whatever happens next, it serves no job again
        try:
            await self.run(self.dispose(tab), OPEN_GRACE)
            made: Tab = await self.run(self.open_tab(framed), OPEN_GRACE)
        except BaseException:
            self.idle.put_nowait(tab)
            raise
        return made

    async def take(self, framed: bool) -> Tab:
        """An idle tab for a job that needs display frames (`framed`) or not: one of that
        kind if one is idle, else the first one (a static job prints as well on a drawing
        tab; a job that needs frames has a frameless one remade: `BrowserPool`).
        `BrowserError`, with the tab back in the queue, when the tab could not be renewed
        after its job (the browser is then being relaunched)."""
        tab = await self.idle.get()
        if tab.framed != framed:
            tab = self._idle_of_kind(tab, framed)
        if tab.used:
            self.idle.put_nowait(tab)
            raise BrowserError("Chromium could not open a new tab; the browser is relaunched")
        return tab

    def _idle_of_kind(self, taken: Tab, framed: bool) -> Tab:
        """An idle tab of kind `framed` in place of `taken` (the queue's first) if one is
        queued, else `taken`; the queue keeps its order otherwise."""
        others = [self.idle.get_nowait() for _ in range(self.idle.qsize())]
        match = next((other for other in others if other.framed == framed), None)
        if match is not None:
            others.remove(match)
            others.insert(0, taken)
        for other in others:
            self.idle.put_nowait(other)
        return taken if match is None else match

    def _dispose_later(self, tab: Tab) -> None:
        task = self.spawn(self.dispose(tab))
        self._disposals.add(task)
        task.add_done_callback(self._disposals.discard)

    async def dispose(self, tab: Tab) -> None:
        """Close `tab`'s door with every connection still open through it, and its context
        with every target in it (windows it opened, frames, workers). What the page still
        sends meanwhile reaches its job's sealed evidence (dropped and counted); the
        session handlers go once the context is gone."""
        tab.used = True
        try:
            if tab.door is not None:
                await tab.door.close()
            if tab.context_id:
                await self._dispose_context(tab.context_id)
        finally:
            self._tabs.pop(tab.context_id, None)
            self._targets.pop(tab.target_id, None)
            tab.session.forget()
            for child in tab.children:
                self.connection.forget(child)

    async def _dispose_context(self, context_id: str) -> None:
        await self.connection.browser.send(
            "Target.disposeBrowserContext", {"browserContextId": context_id}
        )

    def _on_target(self, params: dict[str, Any]) -> None:
        """A window opened inside a tab's context (the popup blocker let it through): close
        it and record it as refused, on the job of that context (and of it alone)."""
        info = params.get("targetInfo") or {}
        tab = self._tabs.get(str(info.get("browserContextId", "")))
        if tab is None or info.get("type") != "page" or info.get("targetId") == tab.target_id:
            return
        url = str(info.get("url", ""))
        tab.evidence.refuse(Refusal(clip(url), "a page may not open other windows"), "window")
        log.info("closed a window a page opened: %s", clip(url))
        close = {"targetId": info["targetId"]}
        self.spawn(self.connection.browser.send("Target.closeTarget", close))

    async def close(self, grace: float = CLOSE_GRACE) -> None:
        """Close the browser, kill it if not gone after `grace` s, remove its folder."""
        loop = asyncio.get_running_loop()
        started = loop.time()
        deadline = started + grace
        # A context whose page is still loading holds Chromium's exit after Browser.close
        # until it is killed: the contexts (and doors) go first, which takes milliseconds
        # (longer with a page still busy printing, on a loaded machine: then the kill).
        await finished_within(self.spawn(self._dispose_all()), grace / 2)
        with contextlib.suppress(ConnectionLost):  # it may be gone already
            await finished_within(
                self.spawn(self.connection.browser.send("Browser.close")),
                max(0.0, deadline - loop.time()),
            )
        await _reap(self.process, max(0.0, deadline - loop.time()))
        self.connection.close()
        await self._end_tasks()
        log.info("Chromium (pid %d) closed in %.2f s", self.pid, loop.time() - started)
        shutil.rmtree(self.folder, ignore_errors=True)

    async def _dispose_all(self) -> None:
        """Every tab's context thrown away, including those being thrown away already."""
        for tab in list(self._tabs.values()):
            self._dispose_later(tab)
        await asyncio.gather(*self._disposals, return_exceptions=True)

    async def _end_tasks(self) -> None:
        # The connection is closed by now, which failed every pending command, so those
        # tasks end within a few loop turns; whatever is left is cancelled.
        if not self._tasks:
            return
        _, pending = await asyncio.wait(set(self._tasks), timeout=0.1)
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)


async def _reap(process: subprocess.Popen[bytes], grace: float) -> None:
    """Wait up to `grace` seconds for Chromium to exit, then SIGKILL it and wait up to
    `KILLED_WAIT` more.

    Its helper processes (zygotes, renderers, GPU, network) exit by themselves once the
    browser process is gone.
    """
    if await _exited(process, grace):
        return
    log.warning("Chromium (pid %d) did not exit in time; killing it", process.pid)
    process.kill()
    if not await _exited(process, KILLED_WAIT):
        log.warning("Chromium (pid %d) killed but not gone yet; not waiting", process.pid)


async def _exited(process: subprocess.Popen[bytes], seconds: float) -> bool:
    """Whether `process` exits within `seconds`, asked on the loop every `REAP_POLL` s.

    Not a blocking wait in a thread (the default executor's few threads may be busy with
    work a stop left behind): a stopping renderer's wait for its killed browser, made so,
    outlasted the stop margin on a loaded machine.
    """
    deadline = asyncio.get_running_loop().time() + seconds
    while process.poll() is None:
        if asyncio.get_running_loop().time() >= deadline:
            return False
        await asyncio.sleep(REAP_POLL)
    return True

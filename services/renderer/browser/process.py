"""Launching Chromium, and `Chromium`: one browser process with its DevTools connection,
its profile directory and its idle tabs.

Chromium starts with `CHROMIUM_ARGS` through a launcher (`_LAUNCHER`) that makes it die
with the renderer and, when the renderer is root, run as an unprivileged user
(`privileges`), with its own sandbox where user namespaces allow it, with none of the
renderer's secrets in its environment (`chromium_env`). The DevTools protocol runs over
two pipes (`cdp`), so Chromium opens no port; each tab is a target in a browser context
of its own, attached as a flat session.

What needs care:

- The kernel clears a process's parent-death signal when it changes user, so the launcher
  asks for it only after the change.
- Chromium's user must own nothing that root runs or writes: a browser taken over by a
  page could replace the next browser's launcher or plant a symlink where root writes.
  So each browser gets a folder of its own in which `fonts.conf` and `chromium.log` stay
  the renderer's and only the `profile` folder is Chromium's. Root still kills Chromium
  and removes the folder.
- A context whose page is still loading holds Chromium's exit after `Browser.close` until
  it is killed: the contexts go first (`close`).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Coroutine, Sequence
from dataclasses import dataclass
from typing import Any
from xml.sax.saxutils import escape as xml_escape

from services.core.errors import BrowserError
from services.renderer.browser.cdp import Connection, ConnectionLost, Session
from services.renderer.browser.interception import guard
from services.renderer.browser.privileges import DROP_TO_UID, confine, readable_by
from services.renderer.browser.tab import Tab
from services.renderer.browser.tasks import describe, finished_within
from services.renderer.egress import Refusal, RequestFilter, clip
from services.renderer.proxy import BYPASS_NOTHING, Door, EgressProxy

log = logging.getLogger(__name__)

CHROMIUM_ARGS = [
    "--headless",
    # No `--no-sandbox`: Chromium's own sandbox stays on wherever it can work; where it
    # cannot, `Confinement.args` adds the flag at launch (see `privileges`). Its popup
    # blocker stays on (a page's `window.open` or form to `_blank` opens no window), and
    # so does site isolation (a cross-site frame gets a renderer process of its own).
    "--disable-gpu",
    "--disable-dev-shm-usage",
    # Without these Chromium keeps trying to reach Google's servers.
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-client-side-phishing-detection",
    "--safebrowsing-disable-auto-update",
    "--disable-default-apps",
    "--disable-extensions",
    "--metrics-recording-only",
    "--no-first-run",
    "--password-store=basic",
    "--use-mock-keychain",
    "--disable-breakpad",
    "--disable-hang-monitor",
    "--disable-prompt-on-repost",
    "--mute-audio",
    "--hide-scrollbars",
    "--font-render-hinting=none",
    # Headless tabs past the first count as hidden and their renderers get background
    # priority; with every tab printing, that cost throughput (docs/benchmarks.md).
    "--disable-renderer-backgrounding",
    "--disable-backgrounding-occluded-windows",
    "--disable-background-timer-throttling",
    # A page that eats memory dies at 512 MB of JS heap (its tab crashes and is replaced)
    # instead of growing to V8's default of several GB beside the other tabs.
    "--js-flags=--max-old-space-size=512",
    # Chromium 156 gives every browser context its windows' omnibox popups, WebUI pages
    # preloaded in renderer processes of their own (three per context seen): nothing a
    # headless tab uses, costing each new context CPU and memory.
    "--disable-features=WebUIOmniboxPopup,WebUIOmniboxAimPopup,WebUIOmniboxFullPopup,"
    "PreloadTopChromeWebUI",
]
"""Chromium's flags, besides the profile, the proxy and the DevTools pipe."""

PREFERENCES = {"webrtc": {"ip_handling_policy": "disable_non_proxied_udp"}}
"""The profile's preferences (every browser context inherits them): WebRTC may use TCP
through the proxy only, never UDP (STUN, TURN, peer traffic) that the egress proxy would
not see. (`--force-webrtc-ip-handling-policy` on the command line did not do it.)"""


def _write_preferences(profile: str, uid: int | None) -> None:
    """`PREFERENCES` in the profile's `Default` folder, owned by `uid` (when given), whose
    Chromium writes its own preferences there."""
    folder = os.path.join(profile, "Default")
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, "Preferences")
    with open(path, "w", encoding="utf-8") as file:
        json.dump(PREFERENCES, file)
    if uid is not None:
        os.chown(folder, uid, uid)
        os.chown(path, uid, uid)


CLOSE_GRACE = 5.0
"""Seconds a tab or the browser gets to close before it is dropped or killed."""

OPEN_GRACE = 20.0
"""Seconds a new tab (its browser context, renderer process and proxy door) gets to open
before the browser is judged broken. Milliseconds on an idle machine, but a renderer
starting beside busy browsers on a loaded 2-core machine took over 5 s, and at start-up
that failure stops the renderer."""

START_GRACE = 30.0
"""Seconds Chromium gets to answer its first DevTools command after it was started."""

_LAUNCHER = (
    """import os, sys
nice = int(sys.argv[2])  # lower priority only: raising it would need root
if nice > os.getpriority(os.PRIO_PROCESS, 0):
    os.setpriority(os.PRIO_PROCESS, 0, nice)
try:  # in a session of its own, the session's autogroup is what the scheduler weighs
    with open("/proc/self/autogroup", "w") as autogroup:  # before a change of user makes
        autogroup.write(str(nice))  # /proc/self root's
except OSError:
    pass  # no autogroups (a kernel without them, or turned off)
"""
    + DROP_TO_UID
    + """# The DevTools pipes on fds 3 (commands in) and 4 (messages out), as Chromium expects:
# copied out of the way first, so that neither lands on the other.
given = [int(fd) for fd in sys.argv[3:5]]
spare = [fd for fd in range(100, 104) if fd not in given][:2]
for fd, copy in zip(given, spare):
    os.dup2(fd, copy)
for copy, fd in zip(spare, (3, 4)):
    os.dup2(copy, fd)
    os.close(copy)
ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
if os.getppid() == 1:
    sys.exit(1)  # the renderer is already gone
os.execv(sys.argv[5], sys.argv[5:])
"""
)
"""Run by `python -c` between the fork and Chromium: changes user when asked, puts the
DevTools pipes where Chromium reads and writes them, then asks the kernel to SIGKILL
Chromium when the renderer process dies, however it dies (a SIGKILLed renderer would
otherwise leave a ~1 GB browser behind). The parent-death signal comes after the change
of user, which would clear it. Chromium runs at a lower CPU priority (`nice`) than the
services, so that a busy browser does not make the gateway's accepts and the pipeline's
bookkeeping wait for a core. Its arguments: uid (-1: stay), niceness, the two pipe ends,
Chromium's executable and flags."""

LOG_NAME = "chromium.log"
"""Chromium's stdout and stderr, in the browser's folder: the tail explains a failed start."""


@dataclass
class Browser:
    """A started Chromium: its process and DevTools connection."""

    process: subprocess.Popen[bytes]
    connection: Connection
    folder: str

    def log_tail(self, lines: int = 5) -> str:
        """The last lines Chromium wrote, for an error message."""
        try:
            with open(os.path.join(self.folder, LOG_NAME), "rb") as file:
                text = file.read()[-4096:].decode(errors="replace")
        except OSError:
            return ""
        return " | ".join(line for line in text.strip().splitlines()[-lines:] if line)


def _spawn(
    executable: str,
    args: Sequence[str],
    env: dict[str, str],
    uid: int | None,
    folder: str,
    nice: int,
) -> tuple[subprocess.Popen[bytes], int, int]:
    """Fork the launcher for `executable`; the process and this side's pipe ends (read
    Chromium's messages, write commands)."""
    commands_in, commands_out = os.pipe()  # Chromium reads commands_in (its fd 3)
    messages_in, messages_out = os.pipe()  # Chromium writes messages_out (its fd 4)
    try:
        with open(os.path.join(folder, LOG_NAME), "wb") as output:
            process = subprocess.Popen(
                [sys.executable, "-I", "-S", "-c", _LAUNCHER, str(-1 if uid is None else uid),
                 str(nice), str(commands_in), str(messages_out), executable, *args,
                 "--remote-debugging-pipe"],
                pass_fds=(commands_in, messages_out), env=env, stdin=subprocess.DEVNULL,
                stdout=output, stderr=output,
                start_new_session=True,  # a terminal's Ctrl-C is the renderer's to handle
            )  # fmt: skip
    except OSError as exc:
        for fd in (commands_out, messages_in):
            os.close(fd)
        raise BrowserError(f"cannot start Chromium ({executable}): {describe(exc)}") from exc
    finally:
        os.close(commands_in)
        os.close(messages_out)
    return process, messages_in, commands_out


async def start_browser(
    executable: str,
    args: Sequence[str],
    *,
    env: dict[str, str],
    uid: int | None,
    folder: str,
    nice: int = 0,
) -> Browser:
    """Start `executable` with `args` and the DevTools pipe, as `uid` (None: as this
    process) at niceness `nice` (never above this process's priority), logging into
    `folder`; return once it answers. `BrowserError` if it cannot start, with what it
    said."""
    process, reads, writes = _spawn(executable, args, env, uid, folder, nice)
    browser = Browser(process, await Connection.open(reads, writes), folder)
    try:
        await asyncio.wait_for(
            browser.connection.browser.send("Target.setDiscoverTargets", {"discover": True}),
            START_GRACE,
        )
    except (BrowserError, TimeoutError) as exc:
        await _end(browser)
        said = browser.log_tail()
        raise BrowserError(
            f"cannot start Chromium ({executable}): {describe(exc)}" + (f": {said}" if said else "")
        ) from exc
    return browser


async def _end(browser: Browser) -> None:
    browser.connection.close()
    with contextlib.suppress(ProcessLookupError):
        browser.process.kill()
    await asyncio.to_thread(browser.process.wait)


def _make_folder(uid: int | None) -> tuple[str, str]:
    """A new folder for one browser, and the `profile` folder in it, owned by `uid` (when
    given) and by nobody else: the rest of the folder stays the renderer's."""
    folder = tempfile.mkdtemp(prefix="pressroom-chromium-")
    profile = os.path.join(folder, "profile")
    os.mkdir(profile, 0o700)
    if uid is not None:
        os.chmod(folder, 0o711)  # Chromium's user may go through it, not list or change it
        os.chown(profile, uid, uid)
    return folder, profile


_FONTS_CONF = """<?xml version="1.0"?>
<!DOCTYPE fontconfig SYSTEM "fonts.dtd">
<fontconfig>
  <include ignore_missing="yes">/etc/fonts/fonts.conf</include>
  <dir>{fonts}</dir>
  <cachedir>{cache}</cachedir>
</fontconfig>
"""


def _check_fonts_dir(fonts_dir: str, uid: int | None) -> None:
    """Warn when Chromium's user cannot read `fonts_dir`: its fonts would silently be
    missing from documents."""
    if fonts_dir and uid is not None and not readable_by(fonts_dir, uid):
        log.warning(
            "PRESSROOM_FONTS_DIR=%s cannot be read by uid %d, the user Chromium runs as: "
            "documents will not find its fonts; make the folder readable by that user, "
            "and the folders above it searchable",
            fonts_dir,
            uid,
        )


_CHROMIUM_ENV = ("PATH", "LANG", "LANGUAGE", "TZ", "TMPDIR")
"""What Chromium is given of the renderer's environment (and `LC_*`): nothing else, so
the URL-signing key, webhook and S3 secrets and the database URL stay out of reach of a
page that takes over a Chromium process."""


def chromium_env(fonts_dir: str, profile: str, conf_dir: str) -> dict[str, str]:
    """Chromium's environment: the locale, `PATH` and `TMPDIR` of the renderer, `HOME` in
    the profile, and with `fonts_dir` a fontconfig file (written in `conf_dir`) that adds
    that folder to the system's fonts (Chromium finds fonts through fontconfig on Linux)."""
    env = {
        name: value
        for name, value in os.environ.items()
        if name in _CHROMIUM_ENV or name.startswith("LC_")
    }
    env.setdefault("PATH", os.defpath)
    env["HOME"] = profile
    if fonts_dir:
        conf = os.path.join(conf_dir, "fonts.conf")
        with open(conf, "w", encoding="utf-8") as file:
            file.write(
                _FONTS_CONF.format(
                    fonts=xml_escape(os.path.abspath(fonts_dir)),
                    cache=xml_escape(os.path.join(profile, "fontcache")),
                )
            )
        os.chmod(conf, 0o644)  # whatever the umask: Chromium may run as another user
        env["FONTCONFIG_FILE"] = conf
    return env


class Chromium:
    """One Chromium process, its folder (profile included) and its queue of idle tabs.

    The queue always accounts for every tab: a render takes one and puts back either the
    same tab, a replacement or, when the browser is broken, the broken tab, so that a
    render waiting for a tab is never left waiting on a browser that can no longer return
    one (it gets the broken tab, fails at once and raises `BrowserError`).
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
        confinement = await asyncio.to_thread(confine, chromium_uid)  # a child process, once
        _check_fonts_dir(fonts_dir, confinement.uid)
        folder, profile = _make_folder(confinement.uid)
        _write_preferences(profile, confinement.uid)
        args = [
            *CHROMIUM_ARGS,
            *confinement.args,
            f"--user-data-dir={profile}",
            f"--proxy-server={door.url}",
            f"--proxy-bypass-list={BYPASS_NOTHING}",
            "about:blank",  # the first window's page: not the new-tab page
        ]
        env = chromium_env(fonts_dir, profile, folder)
        try:
            browser = await start_browser(
                executable, args, env=env, uid=confinement.uid, folder=folder, nice=nice
            )
        except BaseException:
            shutil.rmtree(folder, ignore_errors=True)
            raise
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
        # asyncio.Queue has no public way to look at its items without taking them.
        return tuple(self.idle._queue)  # type: ignore[attr-defined]

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

    async def open_tab(self) -> Tab:
        """A new tab in a new browser context behind a new door of the egress proxy, that
        filters its requests and never blocks on a dialog or crash."""
        door = await self.proxy.open_door()
        context_id = ""
        root = self.connection.browser
        try:
            reply = await root.send(
                "Target.createBrowserContext",
                {"proxyServer": door.url, "proxyBypassList": BYPASS_NOTHING},
            )
            context_id = str(reply["browserContextId"])
            made = await root.send(
                "Target.createTarget", {"url": "about:blank", "browserContextId": context_id}
            )
            target_id = str(made["targetId"])
            attached = await root.send(
                "Target.attachToTarget", {"targetId": target_id, "flatten": True}
            )
            session = self.connection.session(str(attached["sessionId"]))
            tab = await self._wire(session, target_id, context_id, door)
        except BaseException:
            await door.close()
            if context_id:
                self.spawn(self._dispose_context(context_id))
            raise
        self._tabs[context_id] = tab
        self._targets[target_id] = tab
        return tab

    async def _wire(self, session: Session, target_id: str, context_id: str, door: Door) -> Tab:
        """What a tab needs on its session: the request filter (its door reports to the
        same filter), dialogs dismissed, crashes noticed, the domains its renders use."""
        crashed: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        gate = RequestFilter(self.egress, main_frame_id=target_id)
        door.gate = gate
        tab = Tab(
            session, target_id, gate, crashed, self.foreground, context_id=context_id, door=door
        )
        session.on("Inspector.targetCrashed", lambda _: self._crashed(tab))
        session.on(
            "Page.javascriptDialogOpening",
            lambda _: self.spawn(session.send("Page.handleJavaScriptDialog", {"accept": False})),
        )
        await guard(session, gate, self.spawn)
        await tab.enable()
        return tab

    def _crashed(self, tab: Tab) -> None:
        log.warning("Chromium tab crashed (out of memory, or a renderer fault)")
        if not tab.crashed.done():
            tab.crashed.set_result(None)

    def _on_crash(self, params: dict[str, Any]) -> None:
        tab = self._targets.get(str(params.get("targetId", "")))
        if tab is not None:
            self._crashed(tab)

    async def replace_tab(self, tab: Tab) -> None:
        """Throw `tab` away with its context (it may be stuck, or hold a job's state) and
        queue a new tab in its place.

        On failure the old tab goes back to the queue (see the class docstring) and
        `BrowserError` is raised: the browser itself is then in doubt.
        """
        try:
            self._dispose_later(tab)  # a hung renderer may never confirm; don't wait
            self.idle.put_nowait(await self.run(self.open_tab(), OPEN_GRACE))
        except BrowserError:
            self.idle.put_nowait(tab)
            raise

    def _dispose_later(self, tab: Tab) -> None:
        task = self.spawn(self.dispose(tab))
        self._disposals.add(task)
        task.add_done_callback(self._disposals.discard)

    async def dispose(self, tab: Tab) -> None:
        """Close `tab`'s context with every target in it (windows it opened, workers), and
        its door with every connection still open through it."""
        self._tabs.pop(tab.context_id, None)
        self._targets.pop(tab.target_id, None)
        tab.session.forget()
        if tab.door is not None:
            await tab.door.close()
        if tab.context_id:
            await self._dispose_context(tab.context_id)

    async def _dispose_context(self, context_id: str) -> None:
        await self.connection.browser.send(
            "Target.disposeBrowserContext", {"browserContextId": context_id}
        )

    def _on_target(self, params: dict[str, Any]) -> None:
        """A window opened inside a tab's context (the popup blocker let it through): close
        it, record it as refused, and have the context thrown away after the job."""
        info = params.get("targetInfo") or {}
        tab = self._tabs.get(str(info.get("browserContextId", "")))
        if tab is None or info.get("type") != "page" or info.get("targetId") == tab.target_id:
            return
        url = str(info.get("url", ""))
        tab.gate.touched_network = True
        tab.gate.refused.add(Refusal(clip(url), "a page may not open other windows"))
        log.info("closed a window a page opened: %s", clip(url))
        close = {"targetId": info["targetId"]}
        self.spawn(self.connection.browser.send("Target.closeTarget", close))

    async def close(self) -> None:
        """Close the browser, kill it if not gone after `CLOSE_GRACE` s, remove its folder."""
        loop = asyncio.get_running_loop()
        started = loop.time()
        deadline = started + CLOSE_GRACE
        # A context whose page is still loading holds Chromium's exit after Browser.close
        # until it is killed: the contexts (and doors) go first, which takes milliseconds.
        await finished_within(self.spawn(self._dispose_all()), CLOSE_GRACE / 2)
        with contextlib.suppress(ConnectionLost):  # it may be gone already
            await finished_within(
                self.spawn(self.connection.browser.send("Browser.close")), CLOSE_GRACE / 2
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

"""A page in real Chromium for tests, driven over the DevTools pipe with the renderer's own
CDP client (`services/renderer/browser/cdp.py`): no pyppeteer, no websocket, no port.

    async with open_page(chromium, width=390, height=844) as page:
        await page.goto(f"{url}/console")
        await page.until("document.querySelector('main h1')", "the first view")
        await page.click("#sign-out")

What it offers is what a person does and sees: open a URL, type, press Enter, click where
an element is (a real mouse event, so a download starts as from a hand), read the page
with JavaScript, take a screenshot; and what a test needs around it: requests failed for
a while (`Fetch`, as a network that went away), downloads saved to a folder with the URL
each came from.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import os
import signal
import tempfile
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from services.renderer.browser.cdp import Connection, Session
from tests.conftest import eventually

FLAGS = (
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--hide-scrollbars", "--remote-debugging-pipe",
)  # fmt: skip
"""Chromium as the notes on this machine say it runs here (root, no network)."""


def _spawn(executable: str, profile: str) -> tuple[int, int, int]:
    """Start Chromium with its DevTools pipe on fds 3 (commands) and 4 (messages): its
    pid, and this side's ends (read messages, write commands)."""
    commands_in, commands_out = os.pipe()
    messages_in, messages_out = os.pipe()
    devnull = os.open(os.devnull, os.O_RDWR)
    actions = [
        (os.POSIX_SPAWN_DUP2, commands_in, 3),
        (os.POSIX_SPAWN_DUP2, messages_out, 4),
        (os.POSIX_SPAWN_DUP2, devnull, 1),
        (os.POSIX_SPAWN_DUP2, devnull, 2),
    ]
    argv = [executable, *FLAGS, f"--user-data-dir={profile}", "about:blank"]
    try:
        pid = os.posix_spawn(
            executable, argv, dict(os.environ), file_actions=actions, setpgroup=0
        )  # a group of its own: its helpers end with it (`_end`)
    finally:
        for fd in (commands_in, messages_out, devnull):
            os.close(fd)
    return pid, messages_in, commands_out


@dataclass
class Download:
    url: str
    path: Path
    state: str = "inProgress"  # then completed or canceled


@dataclass
class Page:
    """One tab; `session` is its flat DevTools session."""

    session: Session
    browser: Session
    downloads_dir: Path
    downloads: dict[str, Download] = field(default_factory=dict)
    blocked: set[str] = field(default_factory=set)
    log: list[str] = field(default_factory=list)

    async def goto(self, url: str) -> None:
        loaded = self.session.expect("Page.loadEventFired")
        await self.session.send("Page.navigate", {"url": url})
        await asyncio.wait_for(loaded, 30)

    async def js(self, expression: str) -> Any:
        """The value of a JavaScript expression (a promise is awaited); an exception in the
        page fails the test with its text."""
        answer = await self.session.send(
            "Runtime.evaluate",
            {"expression": expression, "awaitPromise": True, "returnByValue": True},
        )
        if "exceptionDetails" in answer:
            details = answer["exceptionDetails"]
            raise AssertionError(f"{expression}: {details.get('exception', details)}")
        return answer["result"].get("value")

    async def until(self, expression: str, what: str, timeout: float = 30) -> Any:
        """Poll an expression until it is truthy; its value (an element found is True)."""
        wrapped = f"(() => {{ const v = ({expression}); return v instanceof Node || v }})()"
        return await eventually(lambda: self.js(wrapped), timeout, what)

    async def type(self, selector: str, text: str) -> None:
        """Focus a field and type `text` into it, as a keyboard would."""
        await self.js(f"document.querySelector({json.dumps(selector)}).focus()")
        await self.session.send("Input.insertText", {"text": text})

    async def press_enter(self) -> None:
        key = {"key": "Enter", "code": "Enter", "windowsVirtualKeyCode": 13, "text": "\r"}
        await self.session.send("Input.dispatchKeyEvent", {"type": "keyDown", **key})
        await self.session.send("Input.dispatchKeyEvent", {"type": "keyUp", **key})

    async def click(self, selector: str) -> None:
        """A mouse click in the middle of the element, scrolled into view first."""
        box = await self.js(
            f"(() => {{ const e = document.querySelector({json.dumps(selector)});"
            " e.scrollIntoView({block: 'center'}); const r = e.getBoundingClientRect();"
            " return [r.x + r.width / 2, r.y + r.height / 2]; })()"
        )
        at = {"x": box[0], "y": box[1], "button": "left", "clickCount": 1}
        await self.session.send("Input.dispatchMouseEvent", {"type": "mousePressed", **at})
        await self.session.send("Input.dispatchMouseEvent", {"type": "mouseReleased", **at})

    async def screenshot(self, path: Path) -> None:
        shot = await self.session.send("Page.captureScreenshot", {"format": "png"})
        path.write_bytes(base64.b64decode(shot["data"]))

    async def block(self, pattern: str) -> None:
        """Fail every request whose URL matches `pattern` (`*` wildcards) as a refused
        connection, until `unblock`: the page sees a gateway that went away."""
        self.blocked.add(pattern)
        await self._intercept()

    async def unblock(self) -> None:
        self.blocked.clear()
        await self.session.send("Fetch.disable")

    async def _intercept(self) -> None:
        patterns = [{"urlPattern": p, "requestStage": "Request"} for p in self.blocked]
        await self.session.send("Fetch.enable", {"patterns": patterns})

    def _paused(self, params: dict[str, Any]) -> None:
        reason = {"requestId": params["requestId"], "errorReason": "ConnectionRefused"}
        asyncio.get_running_loop().create_task(self._fail(reason))

    async def _fail(self, reason: dict[str, Any]) -> None:
        with contextlib.suppress(Exception):  # the request may have gone with its page
            await self.session.send("Fetch.failRequest", reason)

    def _download_begins(self, params: dict[str, Any]) -> None:
        path = self.downloads_dir / params["guid"]
        self.downloads[params["guid"]] = Download(params["url"], path)

    def _download_moves(self, params: dict[str, Any]) -> None:
        found = self.downloads.get(params["guid"])
        if found is not None and params["state"] != "inProgress":
            found.state = params["state"]


async def _open_tab(connection: Connection, folder: Path, width: int, height: int) -> Page:
    browser = connection.browser
    target = await browser.send("Target.createTarget", {"url": "about:blank"})
    attached = await browser.send(
        "Target.attachToTarget", {"targetId": target["targetId"], "flatten": True}
    )
    page = Page(connection.session(attached["sessionId"]), browser, folder / "downloads")
    page.downloads_dir.mkdir()
    session = page.session
    session.on("Fetch.requestPaused", page._paused)
    session.on("Runtime.consoleAPICalled", lambda p: page.log.append(json.dumps(p["args"])))
    session.on("Runtime.exceptionThrown", lambda p: page.log.append(json.dumps(p)))
    browser.on("Browser.downloadWillBegin", page._download_begins)
    browser.on("Browser.downloadProgress", page._download_moves)
    for domain in ("Page", "Runtime"):
        await session.send(f"{domain}.enable")
    metrics = {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": width < 600}
    await session.send("Emulation.setDeviceMetricsOverride", metrics)
    await browser.send(
        "Browser.setDownloadBehavior",
        {"behavior": "allowAndName", "downloadPath": str(page.downloads_dir),
         "eventsEnabled": True},
    )  # fmt: skip
    return page


@contextlib.asynccontextmanager
async def open_page(executable: str, width: int = 1440, height: int = 900) -> AsyncIterator[Page]:
    """A fresh Chromium with one tab of `width` by `height` CSS px (a phone's metrics under
    600 px); closed, and its process reaped, on the way out. What the page logged is
    printed when the test fails."""
    with tempfile.TemporaryDirectory(prefix="faces-") as tmp:
        folder = Path(tmp)
        pid, read_fd, write_fd = _spawn(executable, str(folder / "profile"))
        connection = await Connection.open(read_fd, write_fd)
        page = None
        try:
            page = await _open_tab(connection, folder, width, height)
            yield page
        finally:
            if page is not None and page.log:
                print("page log:", *page.log[-50:], sep="\n  ")
            await _end(connection, pid)


async def _end(connection: Connection, pid: int) -> None:
    """Ask Chromium to close (it stops its helpers and lets go of its profile), give it
    10 s, then kill its whole process group; reap it either way."""
    with contextlib.suppress(Exception):
        await asyncio.wait_for(connection.browser.send("Browser.close"), 5)
    connection.close()
    reaped = asyncio.ensure_future(asyncio.to_thread(os.waitpid, pid, 0))
    try:
        await asyncio.wait_for(asyncio.shield(reaped), 10)
    except TimeoutError:
        pass  # killed below
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGKILL)  # helpers left behind, or a browser that hung
        await reaped

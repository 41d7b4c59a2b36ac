"""The egress policy in front of a real Chromium, wired as the renderer wires it.

Each test launches Chromium with the renderer's flags (and its DevTools pipe) and gives a
tab (the renderer's `Tab`) a `RequestFilter`, wired by the renderer's own `guard`:
`Fetch.enable` on the tab's CDP session, plus auto-attach to its out-of-process iframes
and workers, each of which gets `Fetch.enable` too. A local aiohttp server on 127.0.0.1
serves pages, images and redirects and records every request.

A "public" host is simulated: `public.test` and `other.test` resolve, for the policy, to
public addresses (a fake resolver), while Chromium maps every `*.test` name to 127.0.0.1
(`--host-resolver-rules`), so its requests reach the local server.

Chromium 156 blocks, by itself, requests from an insecure public context (our about:blank
documents) to loopback and private addresses (Local Network Access). To prove that it is
our filter that refuses, most pages here are served by `public.test` itself (a loopback
page asking for loopback is not blocked by Chromium), each refusal test has a control in
which private networks are allowed and the same request does reach the server, and every
refusal is asserted in the tab's `Evidence`, which only our filter writes.

Verifies: a loopback image is refused and never requested (and loads when private networks
are allowed); the same holds on the template path (about:blank + document.write); each
redirect hop is judged again, so a public URL redirecting to loopback or to the metadata
address is refused at that hop; a refused navigation of a `url` job fails the navigation
and is the log's `navigation`; requests of cross-site iframes and dedicated workers (made
from a blob or from the page's own script; each also fetches a public address, which
arrives, so the refusal is not a worker that never ran) are filtered too, and so are
service workers' where the browser gives the test's http page a secure context (the full
Chromium; the headless shell ignores the flag that grants it). WebSockets are never
paused by `Fetch`: the egress proxy refuses them (tests/integration/test_hostile_pages.py,
on the production pool).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import os
from collections.abc import AsyncIterator, Callable, Coroutine, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from services.core.runtime.settings import Settings
from services.renderer.browser import CHROMIUM_ARGS
from services.renderer.browser.interception import guard
from services.renderer.browser.launch import start_browser
from services.renderer.browser.tab import NavigationFailed, Tab, navigate
from services.renderer.egress import Egress, RequestFilter
from services.renderer.evidence import Evidence
from tests.conftest import eventually

CHROMIUM = Settings().chromium_path()  # the headless shell where installed, as deployed
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
)
PUBLIC_NAMES = {"public.test": ["93.184.216.34"], "other.test": ["93.184.216.35"]}
METADATA = "http://169.254.169.254/latest/meta-data/"

# What the renderer does for a template: about:blank, then the HTML written into it.
WRITE_HTML = """async (html) => {
  document.open(); document.write(html); document.close();
  if (document.readyState !== "complete") {
    await new Promise((resolve) => window.addEventListener("load", resolve, { once: true }));
  }
}"""

pytestmark = pytest.mark.chromium


# --- a local server -----------------------------------------------------------------------


@dataclass
class Site:
    """The local server: `pages` by path, PNGs for `*.png`, redirects under `/to/`."""

    port: int = 0
    hits: list[str] = field(default_factory=list)
    pages: dict[str, str] = field(default_factory=dict)

    def url(self, path: str, host: str = "127.0.0.1") -> str:
        return f"http://{host}:{self.port}{path}"

    async def handle(self, request: web.Request) -> web.StreamResponse:
        self.hits.append(request.path)
        path = request.path
        if path == "/ws":
            socket = web.WebSocketResponse()
            await socket.prepare(request)
            await socket.close()
            return socket
        if path.startswith("/to/"):
            raise web.HTTPFound(self.redirect_target(path.removeprefix("/to/")))
        if path.endswith(".png"):
            return web.Response(body=PNG, content_type="image/png")
        if path.endswith(".js"):
            return web.Response(text=self.pages[path], content_type="text/javascript")
        if path in self.pages:
            return web.Response(text=self.pages[path], content_type="text/html")
        return web.Response(status=404)

    def redirect_target(self, name: str) -> str:
        return {
            "secret.png": self.url("/secret.png"),
            "secret": self.url("/secret"),
            "metadata": METADATA,
        }[name]


@pytest.fixture
async def site() -> AsyncIterator[Site]:
    site = Site()
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", site.handle)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    tcp = web.TCPSite(runner, "127.0.0.1", 0)
    await tcp.start()
    site.port = runner.addresses[0][1]
    yield site
    await runner.cleanup()


# --- Chromium and the wiring the renderer uses --------------------------------------------


def fake_dns(table: dict[str, list[str]]) -> Callable[[str], Coroutine[Any, Any, Sequence[str]]]:
    async def resolve(host: str) -> Sequence[str]:
        if host not in table:
            raise OSError(f"{host} is not in the test's DNS")
        return table[host]

    return resolve


class Browser:
    """A Chromium with the renderer's flags; its CDP handlers run as tasks kept here."""

    def __init__(self, site: Site, folder: Path) -> None:
        self.site = site
        self.folder = folder
        self.tasks: set[asyncio.Task[Any]] = set()
        self.chromium: Any = None

    async def start(self) -> None:
        profile = self.folder / "profile"
        profile.mkdir()
        args = [
            *CHROMIUM_ARGS,
            "--no-sandbox",  # as root: this test does not change user as the renderer does
            "--host-resolver-rules=MAP *.test 127.0.0.1",
            # Service workers need a secure context; this makes the simulated public
            # host one (in production such a page would be served over https).
            f"--unsafely-treat-insecure-origin-as-secure={self.site.url('', 'public.test')}",
            f"--user-data-dir={profile}",
            "about:blank",
        ]
        self.chromium = await start_browser(
            CHROMIUM, args, env=dict(os.environ), uid=None, folder=str(self.folder)
        )

    def spawn(self, work: Coroutine[Any, Any, Any]) -> asyncio.Task[Any]:
        task = asyncio.ensure_future(work)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)
        return task

    async def tab(self, *, allow_private: bool) -> tuple[Tab, RequestFilter]:
        """A new tab whose every request passes a `RequestFilter`, and that filter."""
        root = self.chromium.connection.browser
        target_id = (await root.send("Target.createTarget", {"url": "about:blank"}))["targetId"]
        attached = await root.send(
            "Target.attachToTarget", {"targetId": target_id, "flatten": True}
        )
        session = self.chromium.connection.session(attached["sessionId"])
        gate = RequestFilter(
            Egress(allow_private=allow_private, resolve=fake_dns(PUBLIC_NAMES)),
            main_frame_id=target_id,  # Chromium's main frame id is the target id
            evidence=Evidence(),
        )
        crashed: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        tab = Tab(session, target_id, gate, crashed, asyncio.Lock())
        await guard(session, gate, self.spawn, tab.children)
        await tab.enable()
        return tab, gate

    async def close(self) -> None:
        with contextlib.suppress(Exception):
            await self.chromium.connection.browser.send("Browser.close")
        await asyncio.to_thread(self.chromium.process.wait, 10)
        self.chromium.connection.close()
        await asyncio.gather(*self.tasks, return_exceptions=True)


@pytest.fixture
async def browser(site: Site, tmp_path: Path) -> AsyncIterator[Browser]:
    browser = Browser(site, tmp_path)
    await browser.start()
    yield browser
    await browser.close()


async def evaluate(tab: Tab, function: str, *args: Any) -> Any:
    """The value of the (async) JS `function` called with `args` on the tab's page."""
    call = f"({function})({', '.join(json.dumps(arg) for arg in args)})"
    reply = await tab.send(
        "Runtime.evaluate", {"expression": call, "awaitPromise": True, "returnByValue": True}
    )
    assert "exceptionDetails" not in reply, reply
    return reply["result"].get("value")


def refused_urls(gate: RequestFilter) -> list[str]:
    return [refusal.url for refusal in gate.evidence.refused.refusals]


async def image_widths(page: Tab) -> dict[str, int]:
    """Each `<img id>`'s naturalWidth once every image settled (0: not loaded)."""
    return dict(
        await evaluate(
            page,
            """async () => {
              const images = [...document.images];
              await Promise.all(images.map((i) => i.decode().catch(() => null)));
              return images.map((i) => [i.id, i.naturalWidth]);
            }""",
        )
    )


async def open_public_page(site: Site, page: Tab, body: str) -> None:
    site.pages["/page.html"] = body
    await navigate(page, site.url("/page.html", "public.test"))


# --- subresources -------------------------------------------------------------------------


@pytest.mark.parametrize("allow_private", [True, False])
async def test_a_loopback_image_is_requested_only_when_private_networks_are_allowed(
    site: Site, browser: Browser, allow_private: bool
) -> None:
    """With private networks allowed the image loads, so nothing but our filter stops it."""
    page, gate = await browser.tab(allow_private=allow_private)
    await open_public_page(site, page, f'<img id="a" src="{site.url("/a.png")}">')
    assert await image_widths(page) == {"a": 1 if allow_private else 0}
    assert ("/a.png" in site.hits) is allow_private
    assert refused_urls(gate) == ([] if allow_private else [site.url("/a.png")])


async def test_a_template_cannot_load_a_loopback_image(site: Site, browser: Browser) -> None:
    """The renderer's own path: about:blank, then the template's HTML written into it."""
    page, gate = await browser.tab(allow_private=False)
    refused = gate.evidence.refused
    await navigate(page, "about:blank")
    await evaluate(page, WRITE_HTML, f'<img id="a" src="{site.url("/a.png")}"><p>text</p>')
    assert await image_widths(page) == {"a": 0}
    assert [r.url for r in refused.refusals] == [site.url("/a.png")]
    assert "127.0.0.1" in refused.refusals[0].reason
    assert refused.navigation is None
    assert "/a.png" not in site.hits


@pytest.mark.parametrize("allow_private", [True, False])
async def test_each_redirect_hop_is_judged_again(
    site: Site, browser: Browser, allow_private: bool
) -> None:
    """public.test passes the check; its 302 to 127.0.0.1 is a new paused request, refused."""
    page, gate = await browser.tab(allow_private=allow_private)
    hop = site.url("/to/secret.png", "public.test")
    await open_public_page(site, page, f'<img id="a" src="{hop}">')
    assert await image_widths(page) == {"a": 1 if allow_private else 0}
    assert "/to/secret.png" in site.hits  # the first hop was allowed
    assert ("/secret.png" in site.hits) is allow_private
    assert refused_urls(gate) == ([] if allow_private else [site.url("/secret.png")])


async def test_a_redirect_to_the_metadata_address_is_refused(site: Site, browser: Browser) -> None:
    page, gate = await browser.tab(allow_private=False)
    hop = site.url("/to/metadata", "public.test")
    await open_public_page(site, page, f'<img id="a" src="{hop}">')
    assert await image_widths(page) == {"a": 0}
    assert refused_urls(gate) == [METADATA]
    assert "169.254.169.254" in gate.evidence.refused.refusals[0].reason


# --- the document of a url job ------------------------------------------------------------


async def test_a_url_job_redirected_to_loopback_fails_its_navigation(
    site: Site, browser: Browser
) -> None:
    page, gate = await browser.tab(allow_private=False)
    refused = gate.evidence.refused
    with pytest.raises(NavigationFailed, match="ERR_BLOCKED_BY_CLIENT"):
        await navigate(page, site.url("/to/secret", "public.test"))
    assert refused.navigation is not None
    assert refused.navigation.url == site.url("/secret")
    assert not refused.navigation.transient
    assert "/to/secret" in site.hits
    assert "/secret" not in site.hits


async def test_a_url_job_on_a_loopback_address_fails_before_any_request(
    site: Site, browser: Browser
) -> None:
    page, gate = await browser.tab(allow_private=False)
    refused = gate.evidence.refused
    with pytest.raises(NavigationFailed, match="ERR_BLOCKED_BY_CLIENT"):
        await navigate(page, site.url("/page.html"))
    assert refused.navigation is not None
    assert refused.navigation.url == site.url("/page.html")
    assert site.hits == []


# --- requests from other targets: iframes, workers ----------------------------------------


async def test_a_cross_site_iframe_cannot_load_loopback_resources(
    site: Site, browser: Browser
) -> None:
    """other.test is another site: its iframe runs out of process, on a target of its own."""
    site.pages["/frame.html"] = f'<img src="{site.url("/from-frame.png")}">'
    page, gate = await browser.tab(allow_private=False)
    await open_public_page(site, page, f'<iframe src="{site.url("/frame.html", "other.test")}">')
    await eventually(lambda: site.url("/from-frame.png") in refused_urls(gate), 10, "refused")
    assert "/frame.html" in site.hits
    assert "/from-frame.png" not in site.hits
    assert gate.evidence.refused.navigation is None


def worker_script(name: str, site: Site) -> str:
    """A worker's script: it fetches a loopback address, then, whatever came of that, an
    allowed (public) one."""
    refused = site.url(f"/from-{name}")
    allowed = site.url(f"/allowed-from-{name}", "public.test")
    return f"fetch({refused!r}).catch(() => 0).then(() => fetch({allowed!r}))"


WORKERS = ("blob-worker", "script-worker")


@pytest.mark.parametrize("allow_private", [False, True])
async def test_workers_cannot_fetch_loopback_addresses(
    site: Site, browser: Browser, allow_private: bool
) -> None:
    """Dedicated workers, one made from a blob and one from a script of the page's origin,
    each fetch a loopback address and then a public one. Refused: the loopback fetches
    never reach the server, while the public ones do (the workers ran and could fetch);
    the control allows private networks, and the same loopback fetches arrive."""
    site.pages["/worker.js"] = worker_script("script-worker", site)
    page, gate = await browser.tab(allow_private=allow_private)
    blob = worker_script("blob-worker", site)
    await open_public_page(
        site,
        page,
        f"""<script>
        new Worker(URL.createObjectURL(new Blob([{blob!r}], {{type: "text/javascript"}})));
        new Worker("/worker.js");
        </script>""",
    )
    allowed = {f"/allowed-from-{name}" for name in WORKERS}
    await eventually(lambda: allowed <= set(site.hits), 10, "the workers' public fetches")
    assert "/worker.js" in site.hits
    loopback = {f"/from-{name}" for name in WORKERS}
    if allow_private:
        assert loopback <= set(site.hits)
        assert refused_urls(gate) == []
    else:
        assert not loopback & set(site.hits), site.hits
        assert set(refused_urls(gate)) == {site.url(path) for path in loopback}


@pytest.mark.skipif(
    "headless-shell" in CHROMIUM,
    reason="the headless shell does not honour --unsafely-treat-insecure-origin-as-secure: "
    "the test's http page is no secure context and has no navigator.serviceWorker",
)
async def test_a_service_worker_cannot_fetch_loopback_addresses(
    site: Site, browser: Browser
) -> None:
    site.pages["/sw.js"] = (
        "self.addEventListener('install', (e) => e.waitUntil("
        f"fetch('{site.url('/from-service-worker')}').catch(() => 0)));"
    )
    page, gate = await browser.tab(allow_private=False)
    await open_public_page(
        site, page, '<script>navigator.serviceWorker.register("/sw.js");</script>'
    )
    wanted = site.url("/from-service-worker")
    await eventually(lambda: wanted in refused_urls(gate), 10, "refused")
    assert "/sw.js" in site.hits
    assert "/from-service-worker" not in site.hits

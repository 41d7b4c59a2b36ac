"""Hostile documents against the production browser pool: every way out of the page that
the CDP request filter alone never saw, and state left behind for the next job.

A loopback canary (a raw TCP server) counts every connection it accepts, requests or not.
Each attack runs as a job on a `BrowserPool` as the renderer builds it (egress proxy, a
browser context per tab, popup blocker, site isolation); afterwards the canary must have
seen nothing, the job must have ended as documented (a PDF without the resource, the
refusal among its facts), and the next job on the same pool must render as usual.

State isolation is shown with a site on loopback (private networks allowed, as a
deployment that renders its own intranet pages would): what one job stores (cookies from
a response and from script, localStorage, the HTTP cache) is not there for the next.
"""

from __future__ import annotations

import asyncio
import io
import itertools
import socket
from collections.abc import AsyncIterator, Sequence
from typing import Any

import pytest
import pytest_asyncio
from aiohttp import web
from pypdf import PdfReader

from services.core.model.pageoptions import PageOptions, WaitFor
from services.core.runtime.settings import Settings
from services.renderer.browser import BrowserPool, Html, RenderResult, Url
from services.renderer.egress import Egress
from tests.conftest import eventually, serving


async def targets(pool: BrowserPool) -> list[dict[str, Any]]:
    """Every target of the pool's browser (`Target.getTargets`)."""
    assert pool.chromium is not None
    found = await pool.chromium.connection.browser.send("Target.getTargets")
    return list(found["targetInfos"])


pytestmark = [pytest.mark.chromium, pytest.mark.asyncio(loop_scope="module")]

CHROMIUM = Settings().chromium_path()  # the headless shell where installed, as deployed
SCRIPTED = PageOptions(javascript=True)
SETTLE = "<script>setTimeout(() => { window.settled = true }, 800)</script>"
SETTLED = PageOptions(javascript=True, wait_for=WaitFor(expression="window.settled === true"))


class Canary:
    """A raw TCP server on loopback that counts the connections it accepts."""

    def __init__(self) -> None:
        self.accepted = 0
        self.port = 0
        self.server: asyncio.Server | None = None

    async def start(self) -> None:
        async def accept(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            self.accepted += 1
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\nsecret")
            writer.close()

        self.server = await asyncio.start_server(accept, "127.0.0.1", 0)
        self.port = self.server.sockets[0].getsockname()[1]


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def canary() -> AsyncIterator[Canary]:
    canary = Canary()
    await canary.start()
    yield canary
    assert canary.server is not None
    canary.server.close()


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def shared() -> AsyncIterator[BrowserPool]:
    async with BrowserPool(CHROMIUM, pages=2, timeout=15.0, max_output_bytes=50_000_000) as pool:
        yield pool


@pytest_asyncio.fixture(loop_scope="module")
async def pool(shared: BrowserPool) -> AsyncIterator[BrowserPool]:
    yield shared
    await shared.settle()  # contexts thrown away after the test's jobs are replaced


def text_of(result: RenderResult) -> str:
    return "\n".join(page.extract_text() for page in PdfReader(io.BytesIO(result.data)).pages)


async def next_job_is_fine(pool: BrowserPool) -> None:
    results = await asyncio.gather(
        *(pool.render(Html(f"<p>next {i}</p>"), PageOptions()) for i in range(3))
    )
    assert [text_of(r).strip() for r in results] == ["next 0", "next 1", "next 2"]


# Each attack: a document that tries to reach the canary (at {loopback}, a URL prefix such
# as http://127.0.0.1:PORT) by a route the CDP filter never sees, then says it is done.
ATTACKS = {
    "popup": "<script>window.open('{loopback}/popup')</script>",
    "form_to_blank": (
        "<form id=f method=post target=_blank action='{loopback}/form'>"
        "<input name=a value=b></form><script>f.submit()</script>"
    ),
    "websocket": (
        "<p id=r>waiting</p><script>const s = new WebSocket('{ws}/ws');"
        "s.onopen = () => r.textContent = 'open'; s.onerror = () => r.textContent = 'error';"
        "</script>"
    ),
    "preconnect": (
        "<link rel=preconnect href='{loopback}'><link rel=dns-prefetch href='{loopback}'>"
    ),
    "speculation_prefetch": (
        '<script type=speculationrules>{{"prefetch": [{{"source": "list", '
        '"urls": ["{loopback}/prefetch"]}}]}}</script>'
    ),
    "shared_worker": (
        "<script>try {{ new SharedWorker(URL.createObjectURL(new Blob("
        "[\"fetch('{loopback}/shared')\"], {{type: 'text/javascript'}}))) }} catch (e) {{}}"
        "</script>"
    ),
    "dedicated_worker": (
        "<script>new Worker(URL.createObjectURL(new Blob("
        "[\"fetch('{loopback}/worker')\"], {{type: 'text/javascript'}})))</script>"
    ),
    "fetch_spellings": (
        "<script>for (const u of ['{loopback}/a', 'http://localhost:{port}/b', "
        "'http://[::ffff:127.0.0.1]:{port}/c', 'http://0x7f.1:{port}/d', "
        "'http://2130706433:{port}/e']) fetch(u).catch(() => 0)</script>"
    ),
    "beacon_and_eventsource": (
        "<script>navigator.sendBeacon('{loopback}/beacon', 'x');"
        "new EventSource('{loopback}/events');</script>"
    ),
    "image": "<img src='{loopback}/img.png'>",
}


REACHES = {
    "beacon_and_eventsource": 2,
    "dedicated_worker": 1,
    "fetch_spellings": 5,
    "image": 1,
    "websocket": 1,
}
"""The attacks that do reach the canary when the egress policy allows it (`open_pool`),
and how many connections at least each makes then (every spelling of loopback is one).
The others never reach it from a template even then, so no control shows them: a popup or
a form posted to a new window is stopped by the popup blocker first
(`test_a_popup_leaves_no_window_behind`); Chromium makes no preconnect, speculative
prefetch or shared worker for the template's opaque-origin document."""


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def open_pool() -> AsyncIterator[BrowserPool]:
    """The production pool with private networks allowed: the control, where the egress
    policy lets the same page reach the loopback canary."""
    async with BrowserPool(
        CHROMIUM, pages=2, timeout=15.0, max_output_bytes=50_000_000, allow_private_networks=True
    ) as pool:
        yield pool


@pytest.mark.parametrize("attack", sorted(ATTACKS))
async def test_the_canary_sees_nothing(
    pool: BrowserPool, open_pool: BrowserPool, canary: Canary, attack: str
) -> None:
    loopback = f"http://127.0.0.1:{canary.port}"
    html = ATTACKS[attack].format(
        loopback=loopback, ws=f"ws://127.0.0.1:{canary.port}", port=canary.port
    )
    # A moment for what the page starts after `load` (a popup, a socket, a beacon).
    page = f"<p>attack {attack}</p>{html}{SETTLE}"
    if attack in REACHES:
        # The control: where the policy allows loopback, the same page reaches the canary,
        # so its absence below is the policy's doing, not an attack that never ran.
        start = canary.accepted
        await open_pool.render(Html(page), SETTLED)
        await eventually(
            lambda: canary.accepted - start >= REACHES[attack], 10, f"{attack} allowed"
        )
        await open_pool.settle()  # its context gone: nothing of it reaches the canary later
    before = canary.accepted
    result = await pool.render(Html(page), SETTLED)
    assert f"attack {attack}" in text_of(result)
    assert canary.accepted == before, f"{attack} reached the loopback canary"
    await next_job_is_fine(pool)
    assert canary.accepted == before


async def test_webrtc_sends_no_udp(pool: BrowserPool) -> None:
    """STUN and TURN to a loopback UDP canary: not a datagram arrives."""
    datagrams: list[bytes] = []

    class Counter(asyncio.DatagramProtocol):
        def datagram_received(self, data: bytes, addr: tuple[str | Any, int]) -> None:
            datagrams.append(data)

    loop = asyncio.get_running_loop()
    transport, _ = await loop.create_datagram_endpoint(Counter, local_addr=("127.0.0.1", 0))
    port = transport.get_extra_info("sockname")[1]
    try:
        servers = (
            f"[{{urls: 'stun:127.0.0.1:{port}'}}, "
            f"{{urls: 'turn:127.0.0.1:{port}', username: 'u', credential: 'p'}}]"
        )
        html = (
            "<p>webrtc</p><script>const pc = new RTCPeerConnection({iceServers: "
            + servers
            + "}); pc.createDataChannel('x');"
            "pc.createOffer().then((offer) => pc.setLocalDescription(offer));</script>"
        )
        result = await pool.render(Html(html + SETTLE), SETTLED)
        assert "webrtc" in text_of(result)
        assert datagrams == []
    finally:
        transport.close()


async def test_a_refused_websocket_is_on_the_job(pool: BrowserPool, canary: Canary) -> None:
    html = ATTACKS["websocket"].format(ws=f"ws://127.0.0.1:{canary.port}")
    result = await pool.render(Html(html + SETTLE), SETTLED)
    assert "error" in text_of(result)
    assert any(f"127.0.0.1:{canary.port}" in refusal["url"] for refusal in result.refused)


async def test_a_popup_leaves_no_window_behind(pool: BrowserPool, canary: Canary) -> None:
    html = ATTACKS["popup"].format(loopback=f"http://127.0.0.1:{canary.port}")
    await pool.render(Html(html), SCRIPTED)
    await pool.settle()
    urls = [target["url"] for target in await targets(pool) if target["type"] == "page"]
    assert not any(str(canary.port) in url for url in urls), urls


async def test_a_window_that_gets_past_the_popup_blocker_is_closed(pool: BrowserPool) -> None:
    """The popup blocker stops the windows above before they exist; this one is made the
    way a window that got past it would appear (a new page target in a tab's context):
    it is closed and recorded as refused, in the evidence of that context's job."""
    assert pool.chromium is not None
    browser = pool.chromium.connection.browser
    tab = pool.chromium.idle_tabs()[0]

    async def windows_in_context() -> list[Any]:
        return [
            target
            for target in await targets(pool)
            if target["type"] == "page" and target.get("browserContextId") == tab.context_id
        ]

    await browser.send(
        "Target.createTarget", {"url": "about:blank", "browserContextId": tab.context_id}
    )

    def refused() -> bool:
        return any("other windows" in r["reason"] for r in tab.evidence.refused.facts())

    async def one_window() -> bool:
        return len(await windows_in_context()) == 1

    await eventually(refused, 10, "the extra window refused")
    await eventually(one_window, 10, "the extra window closed")


async def test_a_url_job_to_loopback_fails_without_a_connection(
    pool: BrowserPool, canary: Canary
) -> None:
    before = canary.accepted
    with pytest.raises(Exception, match="url refused"):
        await pool.render(Url(f"http://127.0.0.1:{canary.port}/"), PageOptions())
    assert canary.accepted == before
    await next_job_is_fine(pool)


async def test_a_name_that_rebinds_to_loopback_never_reaches_it(canary: Canary) -> None:
    """Chromium resolves nothing itself (every request goes to the proxy by name), and the
    proxy connects only to addresses it judged: a name whose answers alternate between a
    public address and loopback (a rebinding attacker's DNS) never reaches loopback,
    however often the page asks."""
    answers = itertools.cycle([["93.184.216.34"], ["127.0.0.1"]])

    async def rebinding(host: str) -> Sequence[str]:
        if host != "rebind.test":
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return next(answers)

    # No caching: every look-up gets the next answer, as the attacker wants.
    egress = Egress(allow_private=False, resolve=rebinding, ttl=0)
    async with BrowserPool(
        CHROMIUM, pages=1, timeout=15.0, max_output_bytes=50_000_000, egress=egress
    ) as pool:
        fetches = "".join(
            f"fetch('http://rebind.test:{canary.port}/{i}').catch(() => 0);" for i in range(8)
        )
        image = f"<img src='http://rebind.test:{canary.port}/img'>"
        html = f"<p>rebinding</p>{image}<script>{fetches}</script>"
        before = canary.accepted
        result = await pool.render(Html(html + SETTLE), SETTLED)
        assert "rebinding" in text_of(result)
        assert canary.accepted == before
        assert any("rebind.test" in refusal["url"] for refusal in result.refused)


# --- state left behind ---------------------------------------------------------------------


STYLED = (
    "<link rel=stylesheet href=/cached.css><p>styled</p><script>window.onload = () =>"
    " fetch('/cached.css').then(() => { window.settled = true })</script>"
)
"""A page that uses its stylesheet (max-age=3600) twice: linked, then fetched once loaded."""


class StatefulSite:
    """Pages that store state (`/store`) and show what they find (`/show`), on loopback."""

    def __init__(self) -> None:
        self.cookies_seen: list[str] = []
        self.paths: list[str] = []  # every request's path, in order
        self.base = ""  # its URL, once served

    async def handle(self, request: web.Request) -> web.Response:
        self.cookies_seen.append(request.headers.get("Cookie", ""))
        self.paths.append(request.path)
        show = (
            "<p id=r></p><script>r.textContent = 'cookie=' + (document.cookie || 'none') +"
            " ' storage=' + (localStorage.getItem('k') || 'none')</script>"
        )
        if request.path == "/store":
            response = web.Response(
                text="<script>document.cookie = 'script=1'; localStorage.setItem('k', 'v')"
                f"</script>{show}",
                content_type="text/html",
            )
            response.set_cookie("server", "1")
            return response
        if request.path == "/styled":
            return web.Response(text=STYLED, content_type="text/html")
        if request.path == "/cached.css":
            return web.Response(
                text="p { color: red }",
                content_type="text/css",
                headers={"Cache-Control": "max-age=3600"},
            )
        return web.Response(text=show, content_type="text/html")


@pytest_asyncio.fixture(loop_scope="module")
async def stateful() -> AsyncIterator[StatefulSite]:
    site = StatefulSite()
    app = web.Application()
    app.router.add_get("/{tail:.*}", site.handle)
    async with serving(app) as base:
        site.base = base
        yield site


async def test_cookies_and_storage_of_one_job_are_gone_for_the_next(
    stateful: StatefulSite,
) -> None:
    async with BrowserPool(
        CHROMIUM, pages=1, timeout=15.0, max_output_bytes=50_000_000, allow_private_networks=True
    ) as pool:
        base = stateful.base
        stored = await pool.render(Url(f"{base}/store"), SCRIPTED)
        # The control: within the job, what it stored is there.
        assert "cookie=server=1; script=1 storage=v" in text_of(stored)
        shown = await pool.render(Url(f"{base}/show"), SCRIPTED)
        assert "cookie=none storage=none" in text_of(shown)
        assert stateful.cookies_seen[-1] == ""  # nor sent to the server by the next job


async def test_the_http_cache_of_one_job_is_gone_for_the_next(stateful: StatefulSite) -> None:
    async with BrowserPool(
        CHROMIUM, pages=1, timeout=15.0, max_output_bytes=50_000_000, allow_private_networks=True
    ) as pool:

        def stylesheet_requests() -> int:
            return stateful.paths.count("/cached.css")

        first = await pool.render(Url(f"{stateful.base}/styled"), SETTLED)
        assert "styled" in text_of(first)
        # The control: within one job, the second use of the stylesheet came from the
        # cache (one request for two uses), so a cache that survived would be seen.
        assert stylesheet_requests() == 1
        await pool.settle()
        second = await pool.render(Url(f"{stateful.base}/styled"), SETTLED)
        assert "styled" in text_of(second)
        # The next job found no copy: it asked the server again, once.
        assert stylesheet_requests() == 2


async def test_script_in_a_template_can_store_nothing_for_the_next_job() -> None:
    """A template's document has an opaque origin (written into about:blank): script can
    neither set a cookie nor use localStorage, so no state survives without the network
    (and a tab that went to the network gets a new context anyway)."""
    async with BrowserPool(CHROMIUM, pages=1, timeout=15.0, max_output_bytes=50_000_000) as pool:
        store = (
            "<p id=r></p><script>window.leak = 'x'; const said = [];"
            "try { document.cookie = 'a=1'; said.push('cookie set') }"
            " catch (e) { said.push('cookie ' + e.name) }"
            "try { localStorage.setItem('k', 'v'); said.push('storage set') }"
            " catch (e) { said.push('storage ' + e.name) }"
            "r.textContent = said.join(', ')</script>"
        )
        first = await pool.render(Html(store), SCRIPTED)
        assert text_of(first).strip() == "cookie SecurityError, storage SecurityError"
        show = "<p id=r></p><script>r.textContent = 'leak=' + (window.leak || 'none')</script>"
        second = await pool.render(Html(show), SCRIPTED)
        assert text_of(second).strip() == "leak=none"

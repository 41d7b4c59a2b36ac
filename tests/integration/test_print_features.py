"""Issue 4's print features against a real Chromium, one test per feature.

One module-scoped `BrowserPool` (two tabs) serves every test, and a small aiohttp server on
loopback plays the web for URL sources and network waits. Limits are lowered on the shared
pool for the tests that need it (`limits`) instead of starting another browser.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import re
import struct
import time
from collections.abc import AsyncIterator, Iterator

import pytest
import pytest_asyncio
from aiohttp import web
from pypdf import PdfReader

from services.core.model.errors import (
    OutputTooLarge,
    RequestError,
    SourceError,
    SourceUnreachable,
    WaitTimeout,
)
from services.core.model.pageoptions import Margin, Metadata, PageOptions, WaitFor
from services.renderer.browser import PNG, BrowserPool, Html, RenderResult, Url
from tests.conftest import free_port, serving
from tests.integration.test_browser import CHROMIUM, text_of

pytestmark = pytest.mark.asyncio(loop_scope="module")

MM = 72 / 25.4  # PDF points per millimetre
LATE = "<p id=out></p><script>setTimeout(() => { out.textContent = 'late content' }, 300)</script>"


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def pool() -> AsyncIterator[BrowserPool]:
    async with BrowserPool(
        CHROMIUM,
        pages=2,
        timeout=10.0,
        max_output_bytes=50_000_000,
        allow_private_networks=True,  # its pages load from a server on loopback
    ) as pool:
        yield pool


async def _busy(request: web.Request) -> web.Response:
    return web.Response(status=503)


async def _broken(request: web.Request) -> web.Response:
    return web.Response(status=500, text="<h1>server fell over</h1>", content_type="text/html")


_PAGES = {
    "/page": "<title>Served</title><h1>served over http</h1>",
}


async def _page(request: web.Request) -> web.Response:
    return web.Response(text=_PAGES[request.path], content_type="text/html")


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def site() -> AsyncIterator[str]:
    """A loopback web server: /page, 404, 503 (no body) and 500 (a page of its own)."""
    app = web.Application()
    app.router.add_get("/page", _page)
    app.router.add_get("/busy", _busy)
    app.router.add_get("/broken", _broken)
    runner = web.AppRunner(app)
    await runner.setup()
    server = web.TCPSite(runner, "127.0.0.1", 0)
    await server.start()
    port = runner.addresses[0][1]
    yield f"http://127.0.0.1:{port}"
    await runner.cleanup()


@contextlib.contextmanager
def limits(pool: BrowserPool, **values: float) -> Iterator[None]:
    """Lower the shared pool's limits (`timeout`, `max_pages`) for one test."""
    saved = {name: getattr(pool, name) for name in values}
    for name, value in values.items():
        setattr(pool, name, value)
    try:
        yield
    finally:
        for name, value in saved.items():
            setattr(pool, name, value)


def boxes(result: RenderResult) -> list[tuple[float, float]]:
    """Width and height in points of every page."""
    pages = PdfReader(io.BytesIO(result.data)).pages
    return [(float(p.mediabox.width), float(p.mediabox.height)) for p in pages]


def paragraphs(count: int) -> str:
    return "".join(f"<p>paragraph {i}</p>" for i in range(count))


# --- paper ---------------------------------------------------------------------------------


async def test_format_landscape_and_custom_paper_size(pool: BrowserPool) -> None:
    letter = await pool.render(Html("<p>x</p>"), PageOptions(format="Tabloid", landscape=True))
    assert boxes(letter)[0] == pytest.approx((17 * 72, 11 * 72), abs=1)
    custom = await pool.render(Html("<p>x</p>"), PageOptions(width="100mm", height="6in"))
    assert boxes(custom)[0] == pytest.approx((100 * MM, 6 * 72), abs=1)


async def test_prefer_css_page_size_takes_the_size_from_the_page(pool: BrowserPool) -> None:
    html = "<style>@page { size: 100mm 50mm }</style><p>css size</p>"
    css = await pool.render(Html(html), PageOptions(prefer_css_page_size=True))
    assert boxes(css)[0] == pytest.approx((100 * MM, 50 * MM), abs=1)
    ours = await pool.render(Html(html), PageOptions())  # A4, turned the way the CSS size is
    assert sorted(boxes(ours)[0]) == pytest.approx((210 * MM, 297 * MM), abs=1)


async def test_page_ranges_print_only_those_pages(pool: BrowserPool) -> None:
    html = paragraphs(300)  # about six A4 pages
    result = await pool.render(Html(html), PageOptions(page_ranges="1-2, 4"))
    assert result.pages == 3
    assert "paragraph 0" in text_of(result.data)
    with pytest.raises(RequestError, match="exceeds page count") as caught:
        await pool.render(Html(html), PageOptions(page_ranges="90-95"))
    assert caught.value.field == "options.page_ranges"


async def test_footer_shows_page_number_and_total_and_header_alone_is_clean(
    pool: BrowserPool,
) -> None:
    footer = (
        "<style>.f { font-size: 10px; width: 100%; text-align: center }</style>"
        "<div class=f>page <span class=pageNumber></span> of <span class=totalPages></span></div>"
    )
    room = Margin(top="15mm", bottom="15mm")
    result = await pool.render(
        Html(paragraphs(120)), PageOptions(footer_template=footer, margin=room)
    )
    assert result.pages >= 2
    texts = [page.extract_text() for page in PdfReader(io.BytesIO(result.data)).pages]
    assert f"page 2 of {result.pages}" in texts[1]
    header = "<div style='font-size:10px'>Acme header</div>"
    alone = await pool.render(Html("<p>body</p>"), PageOptions(header_template=header, margin=room))
    text = text_of(alone.data)
    assert "Acme header" in text
    assert "about:blank" not in text  # Chromium's default footer would print the URL


# --- waiting -------------------------------------------------------------------------------


async def printed_without_and_with_waiting(
    pool: BrowserPool, script: str, answer: str, wait: WaitFor
) -> tuple[str, str]:
    """The text of a page printed without waiting and with `wait`. The page runs `script`,
    which fetches `/late`; the answer (`answer`) is held until the test lets it go, so a
    print that does not wait cannot have it, however slow the print. The waiting render
    must still be pending a second after the page asked: no fixed delay stands in for
    the wait. Each render's page asks at its own address (`?run=`), so the one that does
    not wait may print, and lose its tab, before its request arrives, or never send it."""
    asked: asyncio.Queue[None] = asyncio.Queue()  # the waiting render's page asked
    release = asyncio.Event()

    async def late(request: web.Request) -> web.Response:
        if request.query.get("run") == "wait":
            asked.put_nowait(None)
        await release.wait()
        return web.Response(text=answer)

    async def page(request: web.Request) -> web.Response:
        own = script.replace("/late", f"/late?run={request.query['run']}")
        html = f"<p id=out>waiting</p><script>{own}</script>"
        return web.Response(text=html, content_type="text/html")

    app = web.Application()
    app.router.add_get("/page", page)
    app.router.add_get("/late", late)
    async with serving(app) as base:
        try:
            plain = await pool.render(Url(f"{base}/page?run=plain"), PageOptions())
            waiting = asyncio.create_task(
                pool.render(Url(f"{base}/page?run=wait"), PageOptions(wait_for=wait))
            )
            await asyncio.wait_for(asked.get(), 10)  # it did ask: the wait means something
            done, _ = await asyncio.wait({waiting}, timeout=1.0)
            assert not done
            release.set()
            waited = await waiting
        finally:
            release.set()
    return text_of(plain.data), text_of(waited.data)


async def test_wait_for_selector_prints_late_content(pool: BrowserPool) -> None:
    script = "fetch('/late').then(r => r.text()).then(t => { out.innerHTML = `<b>${t}</b>` })"
    wait = WaitFor(selector="#out b", timeout=10)
    plain, waited = await printed_without_and_with_waiting(pool, script, "late content", wait)
    assert "late content" not in plain
    assert "late content" in waited


async def test_wait_for_expression_and_a_deterministic_wait_timeout(pool: BrowserPool) -> None:
    ready = PageOptions(wait_for=WaitFor(expression="out.textContent.includes('late')"))
    assert "late content" in text_of((await pool.render(Html(LATE), ready)).data)
    never = PageOptions(wait_for=WaitFor(expression="window.chart.done", timeout=0.5))
    started = time.monotonic()
    with pytest.raises(WaitTimeout, match=r"was never truthy within 0\.\d s \(last error: TypeE"):
        await pool.render(Html("<p>no chart</p>"), never)
    assert time.monotonic() - started < 3


async def test_wait_timeout_is_capped_by_the_render_timeout(pool: BrowserPool) -> None:
    """A wait longer than the render limit still ends as WaitTimeout (not RenderTimeout),
    leaving time to print; an invalid selector fails at once naming the option.

    The wait ends at the render limit less the print reserve (5 s of 6), minus however
    long the page took to load: on a loaded machine that is seconds, so the message's
    figure is checked against the cap, not read to the digit."""
    options = PageOptions(wait_for=WaitFor(selector="#never", timeout=60))
    with limits(pool, timeout=6.0), pytest.raises(WaitTimeout) as waited:
        await pool.render(Html("<p>x</p>"), options)
    found = re.search(r"matched nothing within (\d+\.\d) s", waited.value.message)
    assert found is not None, waited.value.message
    assert 0.0 <= float(found.group(1)) <= 5.0, waited.value.message
    bad = PageOptions(wait_for=WaitFor(selector="##"))
    with pytest.raises(RequestError, match="not a valid selector") as caught:
        await pool.render(Html("<p>x</p>"), bad)
    assert caught.value.field == "options.wait_for.selector"


async def test_wait_for_network_idle_waits_for_requests_after_load(pool: BrowserPool) -> None:
    """The page fetches after `load`: only a wait for the network prints the answer."""
    script = (
        "addEventListener('load', () => fetch('/late')"
        ".then(r => r.text()).then(t => { out.textContent = t }))"
    )
    wait = WaitFor(network_idle=True, timeout=10)
    plain, waited = await printed_without_and_with_waiting(pool, script, "slow answer", wait)
    assert "slow answer" not in plain
    assert "slow answer" in waited


# --- media, metadata, tagging ---------------------------------------------------------------


async def test_emulate_media_screen_uses_screen_styles(pool: BrowserPool) -> None:
    html = (
        "<style>@media print { .s { display: none } } @media screen { .p { display: none } }"
        "</style><p class=s>screen only</p><p class=p>print only</p>"
    )
    printed = text_of((await pool.render(Html(html), PageOptions())).data)
    assert "print only" in printed and "screen only" not in printed
    screen = text_of((await pool.render(Html(html), PageOptions(emulate_media="screen"))).data)
    assert "screen only" in screen and "print only" not in screen


async def test_metadata_is_written_and_tagging_is_a_choice(pool: BrowserPool) -> None:
    meta = Metadata(title="Invoice 7", author="Acme GmbH", subject="Order", keywords="a, b")
    html = "<title>Page title</title><h1>Ä title</h1>"
    result = await pool.render(Html(html), PageOptions(metadata=meta))
    reader = PdfReader(io.BytesIO(result.data))
    info = reader.metadata
    assert info is not None
    assert (info.title, info.author, info.subject) == ("Invoice 7", "Acme GmbH", "Order")
    assert info["/Keywords"] == "a, b" and info["/Producer"].startswith("Skia")
    assert result.pages == len(reader.pages) == 1
    assert "/StructTreeRoot" in reader.trailer["/Root"]  # tagged by default
    plain = await pool.render(Html(html), PageOptions(tagged=False))
    assert "/StructTreeRoot" not in PdfReader(io.BytesIO(plain.data)).trailer["/Root"]
    assert PdfReader(io.BytesIO(plain.data)).metadata.title == "Page title"


# --- outputs -------------------------------------------------------------------------------


def png_size(data: bytes) -> tuple[int, int]:
    assert data.startswith(b"\x89PNG\r\n\x1a\n")
    width, height = struct.unpack(">II", data[16:24])  # the IHDR chunk comes first
    return width, height


@pytest.mark.parametrize(
    ("style", "words"),
    [
        ("width: 30000px; height: 10px", "30000 px wide, over the PNG limit of 16384 px"),
        ("width: 9000px; height: 9000px", "over the PNG limit of 64 megapixels"),
        # 800 by 40,000 px is 31 megapixels: only the height is over a limit.
        ("width: 10px; height: 40000px", "page is 40000 px tall, over the PNG limit of 32768 px"),
    ],
)
async def test_a_png_too_large_is_refused_before_it_is_captured(
    pool: BrowserPool, style: str, words: str
) -> None:
    html = f"<style>body {{ margin: 0 }} div {{ {style} }}</style><div>big</div>"
    started = time.monotonic()
    with pytest.raises(OutputTooLarge, match=words) as caught:
        await pool.render(Html(html), PageOptions(output="png"))
    assert time.monotonic() - started < 5  # no bitmap was painted first
    assert caught.value.kind == "output_too_large"  # the job's error.type


async def test_a_receipt_too_long_is_refused_before_it_is_printed(pool: BrowserPool) -> None:
    """20,000 CSS px of content at scale 1 is 5292 mm of paper, over Chromium's 200 in."""
    html = "<style>body { margin: 0 } div { height: 20000px }</style><div>long receipt</div>"
    started = time.monotonic()
    with pytest.raises(OutputTooLarge) as caught:
        await pool.render(Html(html), PageOptions(receipt_width=80))
    assert time.monotonic() - started < 5
    assert (caught.value.kind, caught.value.message) == (
        "output_too_large",
        "receipt is 5292 mm long, over the PDF page limit of 5080 mm",
    )


async def test_png_output_is_a_full_page_screenshot(pool: BrowserPool) -> None:
    html = "<style>body { margin: 0 } div { height: 1500px }</style><div>tall</div>"
    options = PageOptions(output="png", width="400px", scale=2)
    result = await pool.render(Html(html), options)
    assert result.content_type == PNG and result.extension == "png" and result.pages == 1
    assert png_size(result.data) == (800, 3000)
    # The next job on the tab is laid out at the default 800 px again, not 400.
    probe = "<p id=w></p><script>w.textContent = 'width ' + innerWidth</script>"
    after = await asyncio.gather(*(pool.render(Html(probe), PageOptions()) for _ in range(2)))
    assert all("width 800" in text_of(r.data) for r in after)


async def test_receipt_is_one_page_as_tall_as_its_content(pool: BrowserPool) -> None:
    def receipt(lines: int) -> str:
        rows = "".join(f"<div>item {i} ........ {i * 1.5:.2f}</div>" for i in range(lines))
        return f"<style>body {{ font: 12px monospace; margin: 2mm }}</style>{rows}"

    options = PageOptions(receipt_width=80)
    short, long = [await pool.render(Html(receipt(n)), options) for n in (40, 80)]
    assert short.pages == long.pages == 1
    (width, height), (_, taller) = boxes(short)[0], boxes(long)[0]
    assert width == pytest.approx(80 * MM, abs=1)
    assert height == pytest.approx(40 * 14 * 0.75 + 4 * MM, rel=0.1)  # ~14 px a line
    assert taller == pytest.approx(2 * height - 4 * MM, rel=0.05)
    assert "item 39" in text_of(short.data)


# --- sources and scripts --------------------------------------------------------------------


async def test_url_source_is_loaded_and_its_failures_are_classified(
    pool: BrowserPool, site: str
) -> None:
    result = await pool.render(Url(f"{site}/page"), PageOptions())
    assert "served over http" in text_of(result.data)
    with pytest.raises(SourceError, match="HTTP 404"):
        await pool.render(Url(f"{site}/nothing"), PageOptions())
    with pytest.raises(SourceUnreachable, match="HTTP 503"):
        await pool.render(Url(f"{site}/busy"), PageOptions())
    port = free_port()
    with pytest.raises(
        SourceUnreachable, match=f"cannot connect to 127.0.0.1:{port}: connection refused"
    ):
        await pool.render(Url(f"http://127.0.0.1:{port}/"), PageOptions())
    with pytest.raises(SourceError, match="ERR_UNSAFE_PORT"):  # Chromium never loads it
        await pool.render(Url("http://127.0.0.1:1/"), PageOptions())


async def test_fail_on_status_says_which_document_statuses_fail_the_job(
    pool: BrowserPool, site: str
) -> None:
    """A listed status fails (a 5xx as unreachable, retried; a 2xx too); one not listed
    is printed, an empty body as a blank page. A server that never answered (the egress
    proxy's 502) fails whatever the list."""
    none = PageOptions(fail_on_status=[])
    assert "404: Not Found" in text_of((await pool.render(Url(f"{site}/nothing"), none)).data)
    printed = await pool.render(Url(f"{site}/broken"), PageOptions(fail_on_status=[499]))
    assert "server fell over" in text_of(printed.data)
    with pytest.raises(SourceUnreachable, match=r"HTTP 500: .*\(fail_on_status\)"):
        await pool.render(Url(f"{site}/broken"), PageOptions(fail_on_status=[599]))
    with pytest.raises(SourceError, match=r"HTTP 200: .*\(fail_on_status\)"):
        await pool.render(Url(f"{site}/page"), PageOptions(fail_on_status=[200]))
    with pytest.raises(SourceError, match="HTTP 404"):
        await pool.render(Url(f"{site}/nothing"), PageOptions(fail_on_status=[404]))
    blank = await pool.render(Url(f"{site}/busy"), none)  # no body: the empty page it is
    assert blank.pages == 1 and not text_of(blank.data).strip()
    port = free_port()
    with pytest.raises(
        SourceUnreachable, match=f"cannot connect to 127.0.0.1:{port}: connection refused"
    ):
        await pool.render(Url(f"http://127.0.0.1:{port}/"), none)


async def test_javascript_off_for_one_job_and_back_on_for_the_next(pool: BrowserPool) -> None:
    html = "<p id=out>static</p><script>out.textContent = 'scripted'</script>"
    off = PageOptions(javascript=False, wait_for=WaitFor(selector="#out"))
    for result in await asyncio.gather(*(pool.render(Html(html), off) for _ in range(2))):
        assert "static" in text_of(result.data) and "scripted" not in text_of(result.data)
    for result in await asyncio.gather(*(pool.render(Html(html), PageOptions()) for _ in range(2))):
        assert "scripted" in text_of(result.data)


# --- limits --------------------------------------------------------------------------------


async def test_a_pdf_over_max_pages_is_refused(pool: BrowserPool) -> None:
    with limits(pool, max_pages=2), pytest.raises(OutputTooLarge, match="over the limit of 2"):
        await pool.render(Html(paragraphs(300)), PageOptions())
    assert (await pool.render(Html(paragraphs(300)), PageOptions(page_ranges="1-2"))).pages == 2

"""Documents that can never fit fail once, early, with their own error type; and what a
page does after its render ended is recorded nowhere.

Against the production `BrowserPool` (and, last, the whole stack): a document of
thousands of pages, of too many nodes (written by the parser or by its script), a
table of contents of too many headings, a header too large or one that loads a
stylesheet, each fails with its own `kind` and a message naming the setting that raises
the limit, in a fraction of the render time limit: without the guard each would print
until the limit ran out and be retried as a timeout.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import time
from collections.abc import AsyncIterator, Iterator, Sequence
from typing import Any

import pytest
import pytest_asyncio
from prometheus_client import REGISTRY

from services.core.model.errors import (
    DomTooLarge,
    HeaderTooLarge,
    PageCrashed,
    RequestError,
    TocTooLarge,
    TooManyPrintedPages,
)
from services.core.model.pageoptions import Margin, PageOptions, WaitFor
from services.core.runtime.settings import Settings
from services.renderer.browser import BrowserPool, Html
from services.renderer.browser.diagnosis import PageReport
from services.renderer.egress import Egress
from tests.conftest import Stack, Tenant, eventually
from tests.integration.test_print_features import limits

pytestmark = [pytest.mark.chromium, pytest.mark.asyncio(loop_scope="module")]

CHROMIUM = Settings().chromium_path()
TIMEOUT = 30.0
"""The pool's render time limit: each doomed document must fail in a fraction of it."""
PROMPT = TIMEOUT / 3

BREAKS_3000 = "<div style='break-after: page'>p</div>" * 3_000  # 3,000 pages, short on screen
TALL_10000 = '<div style="height: 11230000px">tall</div>'  # 10,000 A4 pages at 1,123 px
SPANS = "<span>x </span>" * 40_000  # 80,003 nodes (spans and their text): over 50,000
HEADINGS = "<nav data-toc></nav>" + "".join(f"<h2>Part {i}</h2>" for i in range(5_000))
BIG_HEADER = "<div>" + "<span>x</span>" * 22_000 + "</div>"  # ~300 KB
MANY_PAGES = "".join(f"<div style='break-after: page'>page {i}</div>" for i in range(20))
# `@import` spelt with a CSS escape: past the check of the text, the tab still crashes.
ESCAPED_IMPORT = "<style>@\\69mport url(http://127.0.0.1:9/x.css);</style><span>h</span>"


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def shared() -> AsyncIterator[BrowserPool]:
    async with BrowserPool(CHROMIUM, pages=2, timeout=TIMEOUT, max_output_bytes=10**8) as pool:
        yield pool


@pytest_asyncio.fixture(loop_scope="module")
async def pool(shared: BrowserPool) -> AsyncIterator[BrowserPool]:
    yield shared
    await shared.settle()


@contextlib.contextmanager
def within(seconds: float) -> Iterator[None]:
    started = time.monotonic()
    yield
    assert time.monotonic() - started < seconds, f"took over {seconds:g} s"


async def test_thousands_of_pages_stop_printing_at_the_limit_plus_one(pool: BrowserPool) -> None:
    """Chromium is asked for the first 501 pages only: the 3,000-page document fails
    without the rest being drawn, with or without page ranges of the job's own — within
    twice what printing 501 of its pages takes, measured just before on the same pool
    (a bound that moves with the machine's load; drawing all 3,000 takes about six times
    as long)."""
    started = time.monotonic()
    with limits(pool, max_pages=600):
        printed = await pool.render(Html(BREAKS_3000), PageOptions(page_ranges="1-501"))
    assert printed.pages == 501
    bound = 2 * (time.monotonic() - started) + 1
    for ranges in (None, "2-"):
        with within(bound), pytest.raises(TooManyPrintedPages) as caught:
            await pool.render(Html(BREAKS_3000), PageOptions(page_ranges=ranges))
        assert caught.value.kind == "too_many_pages"
        assert caught.value.message == (
            "the PDF has more than 500 pages, over the limit of 500 (PRESSROOM_MAX_PAGES); "
            "printing stopped at page 501"
        )


async def test_a_document_long_on_screen_fails_before_a_page_is_drawn(pool: BrowserPool) -> None:
    """A document taller on screen than half the limit's pages is first asked for its
    page past the limit alone: with a limit of 5,000 pages, the 10,000-page document
    fails in the time Chromium takes to paginate it (drawing 5,001 pages took 39 s)."""
    with (
        limits(pool, max_pages=5_000),
        within(PROMPT),
        pytest.raises(TooManyPrintedPages) as caught,
    ):
        await pool.render(Html(TALL_10000), PageOptions())
    assert "more than 5,000 pages" in caught.value.message
    long_enough = "<div style='height: 6000000px'>tall</div>"  # 5,343 pages: not over
    with limits(pool, max_pages=6_000):
        assert (await pool.render(Html(long_enough), PageOptions(page_ranges="1-2"))).pages == 2


async def test_a_document_of_too_many_nodes_fails_once_it_is_loaded(pool: BrowserPool) -> None:
    with within(PROMPT), pytest.raises(DomTooLarge) as caught:
        await pool.render(Html(SPANS), PageOptions())
    assert caught.value.kind == "dom_too_large"
    assert caught.value.message == (
        "the document has 80,003 nodes, over the limit of 50,000 "
        "(PRESSROOM_MAX_DOM_NODES); split it into smaller documents"
    )


async def test_nodes_a_script_or_a_frame_adds_count_too(pool: BrowserPool) -> None:
    """Written after `load` by the page's script (counted again after its wait), or
    inside a frame of the document (counted with it)."""
    script = (
        "<script>setTimeout(() => { const many = []; for (let i = 0; i < 60000; i++)"
        " many.push(document.createElement('i')); document.body.append(...many);"
        " window.ready = true; }, 50)</script>"
    )
    ready = PageOptions(wait_for=WaitFor(expression="window.ready === true"))
    with within(PROMPT), pytest.raises(DomTooLarge, match="60,0"):
        await pool.render(Html(script), ready)
    framed = f'<iframe srcdoc="{SPANS}"></iframe>'
    loaded = "document.querySelector('iframe').contentDocument.body?.childElementCount >= 40000"
    with within(PROMPT), pytest.raises(DomTooLarge, match="80,0"):
        await pool.render(Html(framed), PageOptions(wait_for=WaitFor(expression=loaded)))


async def test_a_table_of_contents_of_too_many_headings_fails_before_it_is_written(
    pool: BrowserPool,
) -> None:
    with within(PROMPT), pytest.raises(TocTooLarge) as caught:
        await pool.render(Html(HEADINGS), PageOptions(toc=True))
    assert caught.value.kind == "toc_too_large"
    assert caught.value.field == "options.toc"
    assert "5,000 headings, over the limit of 2,000 entries (PRESSROOM_MAX_TOC_ENTRIES)" in (
        caught.value.message
    )


async def test_a_header_over_the_limit_fails_before_a_tab_is_taken(pool: BrowserPool) -> None:
    assert pool.chromium is not None
    renders = pool.chromium.renders
    options = PageOptions(header_template=BIG_HEADER, margin=Margin(top="20mm"))
    with within(1.0), pytest.raises(HeaderTooLarge) as caught:
        await pool.render(Html(MANY_PAGES), options)
    assert caught.value.kind == "header_too_large"
    assert caught.value.field == "options.header_template"
    assert "over the limit of 65,536 (PRESSROOM_MAX_HEADER_BYTES" in caught.value.message
    assert pool.chromium.renders == renders  # no tab was taken for it


async def test_a_header_that_loads_a_stylesheet_is_refused_and_its_crash_is_the_pages(
    pool: BrowserPool,
) -> None:
    """`@import` by URL is refused before printing (a 400 at the gateway); spelt so that
    the check misses it, the tab crashes as it prints, and that is the page's crash
    (`page_crashed`, which fails the job on its second attempt), not Chromium's."""
    plain = PageOptions(header_template="<style>@import url(http://x.test/a.css)</style>h")
    with pytest.raises(RequestError) as refused:
        await pool.render(Html("<p>x</p>"), plain)
    assert refused.value.field == "options.header_template"
    with within(PROMPT), pytest.raises(PageCrashed) as crashed:
        await pool.render(Html("<p>x</p>"), PageOptions(header_template=ESCAPED_IMPORT))
    assert crashed.value.kind == "page_crashed"
    assert "header or footer" in crashed.value.message


def late_evidence() -> float:
    sources = ("request", "console", "filter", "proxy", "connection", "window")
    values = [
        REGISTRY.get_sample_value("pressroom_late_evidence_total", {"source": s}) for s in sources
    ]
    return sum(value or 0.0 for value in values)


async def test_a_refusal_decided_after_its_render_is_recorded_nowhere() -> None:
    """A page asks, after `load`, for a name whose look-up the test holds back; its
    render ends meanwhile, and the next render starts on the only page slot. When the
    look-up is let go, the refusal is recorded nowhere: neither on the next render (its
    result and diagnosis hold none of it) nor on the first, whose evidence was read; it is
    dropped and counted."""
    release = asyncio.Event()

    async def held(host: str) -> Sequence[str]:
        await release.wait()
        return ["127.0.0.1"]  # refused: loopback

    first = (
        "<p>first</p><script>addEventListener('load', () => {"
        " new Image().src = 'http://late-marker.test/pixel.png';"
        " setTimeout(() => { window.ready = true }, 100) })</script>"
    )
    ready = PageOptions(wait_for=WaitFor(expression="window.ready === true"))
    second = (
        "<p>second</p><script>console.log('second job');"
        " setTimeout(() => { window.ready = true }, 500)</script>"
    )
    egress = Egress(allow_private=False, resolve=held, timeout=4 * TIMEOUT)
    async with BrowserPool(
        CHROMIUM, pages=1, timeout=TIMEOUT, max_output_bytes=10**8, egress=egress
    ) as pool:
        before = late_evidence()
        done = await pool.render(Html(first), ready)
        assert done.refused == ()  # its look-up had not ended: nothing refused yet
        report = PageReport()
        later = asyncio.ensure_future(
            pool.render(
                Html(second), PageOptions(wait_for=ready.wait_for, diagnostics=True), report
            )
        )
        await eventually(lambda: pool.chromium and pool.chromium.in_flight, 10, "started")
        release.set()
        result = await later
        await pool.settle()
    assert "late-marker" not in repr(result.refused)
    assert "late-marker" not in repr(dataclasses.asdict(report))
    assert [line.text for line in report.console] == ["second job"]
    assert late_evidence() > before


async def test_a_page_off_the_network_leaves_nothing_for_the_next_render() -> None:
    """A page that stays off the network (console lines and `file:` images only, which
    Chromium blocks itself) and keeps logging after its render: before issue 29 its tab
    served the next job, whose diagnosis then held its lines. Each render's diagnosis
    holds its own lines and refusals only."""
    chatty = (
        "<p>first</p><script>let n = 0; setInterval(() => { n += 1;"
        " console.log('late-marker ' + n); new Image().src = 'file:///late-marker/' + n;"
        " }, 1); setTimeout(() => { window.ready = true }, 100)</script>"
    )
    first = PageOptions(wait_for=WaitFor(expression="window.ready === true"))
    probe = "<p>second</p><script>console.log('second job')</script>"
    async with BrowserPool(CHROMIUM, pages=1, timeout=TIMEOUT, max_output_bytes=10**8) as pool:
        for _ in range(5):
            await pool.render(Html(chatty), first)
            report = PageReport()
            result = await pool.render(Html(probe), PageOptions(diagnostics=True), report)
            assert "late-marker" not in repr(result.refused)
            assert "late-marker" not in repr(dataclasses.asdict(report))
            assert [line.text for line in report.console] == ["second job"]


async def ended(stack: Stack, tenant: Tenant, job_id: str, timeout: float) -> dict[str, Any]:
    """`job_id`'s status once terminal, read as its owner."""

    async def terminal() -> dict[str, Any] | None:
        async with tenant.http.get(f"{stack.url}/jobs/{job_id}") as response:
            job: dict[str, Any] = await response.json()
        return job if job["status"] in {"done", "failed", "cancelled"} else None

    found: dict[str, Any] = await eventually(terminal, timeout, f"job {job_id} ended")
    return found


async def test_doomed_documents_fail_on_their_first_attempt_and_hold_no_one_else(
    settings: Settings,
) -> None:
    """On the stack: each doomed job of one tenant fails at once (one attempt, no
    `retrying`) with its own error type; a page crashing its tab in its header fails on
    its second; another tenant's invoice submitted behind them is done within one render
    time limit; a header that loads a stylesheet is a 400 at the door."""
    stack = Stack(dataclasses.replace(settings, render_timeout=TIMEOUT, retry_base=0.2))
    await stack.start()
    try:
        doomed, other = await stack.new_tenant(), await stack.new_tenant()
        bodies = {
            "too_many_pages": {"html": TALL_10000},
            "dom_too_large": {"html": SPANS},
            "toc_too_large": {"html": HEADINGS, "options": {"toc": True}},
            "header_too_large": {
                "html": MANY_PAGES,
                "options": {"header_template": BIG_HEADER, "margin": {"top": "20mm"}},
            },
            "page_crashed": {"html": "<p>x</p>", "options": {"header_template": ESCAPED_IMPORT}},
        }
        ids = {}
        for kind, body in bodies.items():
            async with doomed.http.post(f"{stack.url}/jobs", json=body) as response:
                assert response.status == 202, await response.text()
                ids[kind] = (await response.json())["id"]
        started = time.monotonic()
        async with other.http.post(f"{stack.url}/jobs", json={"html": "<h1>Invoice</h1>"}) as r:
            invoice = (await r.json())["id"]
        assert (await ended(stack, other, invoice, TIMEOUT))["status"] == "done"
        assert time.monotonic() - started < TIMEOUT
        for kind, job_id in ids.items():
            job = await ended(stack, doomed, job_id, 4 * TIMEOUT)
            assert (job["status"], job["error"]["type"]) == ("failed", kind), job
            async with doomed.http.get(f"{stack.url}/jobs/{job_id}/events") as response:
                names = [event["type"] for event in (await response.json())["events"]]
            expected = 2 if kind == "page_crashed" else 1
            assert job["attempts"] == expected, (kind, job)
            assert names.count("retrying") == expected - 1, (kind, names)
        bad = {"html": "<p>x</p>", "options": {"header_template": "<link rel=stylesheet "
               "href='http://x.test/a.css'>"}}  # fmt: skip
        async with doomed.http.post(f"{stack.url}/jobs", json=bad) as response:
            problem = await response.json()
        assert response.status == 400
        assert problem["error"]["field"] == "options.header_template"
    finally:
        await stack.close()


async def test_a_document_whose_printing_times_out_twice_fails_on_its_second_attempt(
    settings: Settings,
) -> None:
    """A document that loads but cannot be printed within the render time limit (120,000
    nodes in a tagged PDF, the node limit raised): the first timeout while printing
    is retried, the second fails the job (`timeout`, 2 attempts of 5), instead of holding
    a page for five time limits. A timeout before printing is retried as before."""
    stack = Stack(
        dataclasses.replace(settings, render_timeout=5.0, max_dom_nodes=1_000_000, retry_base=0.2)
    )
    await stack.start()
    try:
        slow = await stack.submit({"html": "<span>x </span>" * 60_000})  # 120,003 nodes
        job = await stack.finished(slow["id"], timeout=120)
        async with stack.client.get(f"{stack.url}/jobs/{slow['id']}/events") as response:
            timeline = (await response.json())["events"]
    finally:
        await stack.close()
    assert (job["status"], job["error"]["type"], job["attempts"]) == ("failed", "timeout", 2)
    assert job["error"]["message"].startswith("printing did not end within the render time")
    assert job["error"]["message"].endswith("on two attempts in a row")
    (retried,) = [event for event in timeline if event["type"] == "retrying"]
    assert retried["error"]["message"].startswith("printing did not end")

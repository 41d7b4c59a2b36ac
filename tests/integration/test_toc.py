"""`toc` against a real Chromium: the numbers `pdftotext` reads on the table of contents
are the pages the outline (read with pypdf, neither of which wrote the file) opens; and
through the whole stack, a 400 and a failed job naming `options.toc`."""

from __future__ import annotations

import io
import re
import subprocess
from collections.abc import AsyncIterator

import pytest
import pytest_asyncio
from pypdf import PdfReader

from services.core.model.errors import RequestError
from services.core.model.pageoptions import PageOptions
from services.renderer.browser import BrowserPool, Html
from tests.conftest import Stack
from tests.integration.test_browser import CHROMIUM
from tests.integration.test_outline import bookmarks

BREAK = "<div style='break-after: page'></div>"
# One entry a line, its number after " p. "; `pdftotext -layout` keeps each line whole.
STYLE = "<style>[data-toc-page]::before { content: ' p. ' } ol { list-style: none }</style>"
FOUR_PAGES = (
    f"<title>Report</title>{STYLE}<nav data-toc><h2>Contents</h2></nav>"
    f"<h1>Alpha</h1><p>one</p>{BREAK}<h1 id='beta'>Beta</h1>{BREAK}"
    f"<h2>Beta two</h2>{BREAK}<h1>Gamma</h1><p>four</p>"
)
OPTIONS = PageOptions(toc=True, outline=True)


@pytest_asyncio.fixture(loop_scope="module")
async def pool() -> AsyncIterator[BrowserPool]:
    async with BrowserPool(CHROMIUM, pages=1, timeout=20.0, max_output_bytes=50_000_000) as pool:
        yield pool


def page_text(pdf: bytes, page: int) -> str:
    """`pdftotext -layout` of one page (from 1)."""
    found = subprocess.run(
        ["pdftotext", "-layout", "-f", str(page), "-l", str(page), "-", "-"],
        input=pdf,
        capture_output=True,
        check=True,
    )
    return found.stdout.decode()


def listed(text: str) -> dict[str, int]:
    """Title → number of each `<title> p. <n>` line."""
    return {m[1]: int(m[2]) for m in re.finditer(r"^\s*(\S.*?)\s+p\. (\d+)\s*$", text, re.M)}


def outline_pages(pdf: bytes) -> dict[str, int]:
    """Title → page (from 1) the outline opens."""
    reader = PdfReader(io.BytesIO(pdf))
    return {title: page + 1 for _, title, page in bookmarks(reader)}


@pytest.mark.asyncio(loop_scope="module")
async def test_the_toc_on_page_one_shows_the_page_the_outline_opens_for_each_heading(
    pool: BrowserPool,
) -> None:
    pdf = (await pool.render(Html(FOUR_PAGES), OPTIONS)).data
    expected = {"Alpha": 1, "Beta": 2, "Beta two": 3, "Gamma": 4}
    assert {t: p for t, p in outline_pages(pdf).items() if t != "Contents"} == expected
    assert listed(page_text(pdf, 1)) == expected  # "Contents" is in the nav: not listed


@pytest.mark.asyncio(loop_scope="module")
async def test_a_toc_that_grows_past_its_page_still_ends_with_the_right_numbers(
    pool: BrowserPool,
) -> None:
    # Unnumbered, the entries fit on page 1; numbered, each takes two lines (the number is
    # a block, empty until filled), which pushes every heading one page on: the first
    # numbers are wrong, and only a second numbered print is right.
    style = "<style>[data-toc-page] { display: block } h2 { margin: 0 }</style>"
    headings = "".join(f"<h2>Part {n}</h2><p>text</p>{BREAK}" for n in range(1, 41))
    html = f"{style}<nav data-toc></nav>{headings}"
    pdf = (await pool.render(Html(html), OPTIONS)).data
    opened = outline_pages(pdf)
    assert opened == {f"Part {n}": n + 1 for n in range(1, 41)}  # the first print said n
    numbers = re.findall(r"Part (\d+)\s+(\d+)", page_text(pdf, 1) + page_text(pdf, 2))
    assert {f"Part {part}": int(page) for part, page in numbers} == opened


@pytest.mark.asyncio(loop_scope="module")
async def test_a_heading_with_markup_or_odd_ids_is_listed_as_its_text(pool: BrowserPool) -> None:
    html = (
        f"{STYLE}<nav data-toc></nav><h1 id='café menü'>Costs &amp; <em>fees</em> &lt;b&gt;</h1>"
        f"{BREAK}<h1 id='twice'>Twice A</h1>"
        f"{BREAK}<h2 id='twice'>Twice B</h2>"
    )
    pdf = (await pool.render(Html(html), PageOptions(toc=True, javascript=False))).data
    text = page_text(pdf, 1)
    assert listed(text) == {"Costs & fees <b>": 1, "Twice A": 2, "Twice B": 3}, text


@pytest.mark.asyncio(loop_scope="module")
async def test_a_document_without_a_toc_nav_fails_naming_it(pool: BrowserPool) -> None:
    with pytest.raises(RequestError) as raised:
        await pool.render(Html("<h1>No table</h1>"), OPTIONS)
    assert raised.value.field == "options.toc"
    assert "<nav data-toc>" in str(raised.value)


async def test_toc_untagged_is_a_400_and_a_toc_job_is_done_through_the_stack(
    stack: Stack,
) -> None:
    body = {"html": FOUR_PAGES, "options": {"toc": True, "tagged": False}}
    async with stack.client.post(f"{stack.url}/jobs", json=body) as response:
        assert response.status == 400, await response.text()
        error = (await response.json())["error"]
    assert (error["type"], error["field"]) == ("validation", "options.toc")
    done = await stack.submit({"html": FOUR_PAGES, "options": {"toc": True}})
    missing = await stack.submit({"html": "<h1>x</h1>", "options": {"toc": True}})
    job = await stack.finished(done["id"])
    async with stack.client.get(job["url"]) as response:
        pdf = await response.read()
    assert listed(page_text(pdf, 1))["Gamma"] == 4
    failed = (await stack.finished(missing["id"]))["error"]
    assert failed["type"] == "validation" and "data-toc" in failed["message"], failed


HIDDEN = (
    f"{STYLE}<style>.gone {{ display: none }} .ghost {{ visibility: hidden }}"
    " @media print { .screen-only { display: none } }</style><nav data-toc></nav>"
    "<h1>Shown</h1><h2 style='display: none'>Display none</h2>"
    "<h2 style='visibility: hidden'>Visibility hidden</h2>"
    "<div class=gone><h2>Inside a hidden parent</h2></div>"
    "<div class=ghost><h2>Inside an invisible parent</h2></div>"
    "<h2 hidden>Hidden attribute</h2><h2 class=screen-only>Screen only</h2>"
    "<div style='content-visibility: hidden'><h2>Content hidden</h2></div>"
    "<div class=ghost><h2 style='visibility: visible'>Shown again</h2></div>"
    f"{BREAK}<h1>Last</h1>"
)
"""Headings hidden in each way a reader cannot see, and two that show."""


@pytest.mark.asyncio(loop_scope="module")
async def test_hidden_headings_are_kept_out_of_the_toc_and_the_outline(pool: BrowserPool) -> None:
    pdf = (await pool.render(Html(HIDDEN), OPTIONS)).data
    shown = {"Shown": 1, "Shown again": 1, "Last": 2}
    text = page_text(pdf, 1)
    assert listed(text) == shown, text
    assert outline_pages(pdf) == shown
    # Screen media printed: the heading only print hides is shown, and listed.
    screen = PageOptions(toc=True, outline=True, emulate_media="screen")
    pdf = (await pool.render(Html(HIDDEN), screen)).data
    assert listed(page_text(pdf, 1)) == {**shown, "Screen only": 1}

"""`outline` and the tagged structure against a real Chromium, read back with pypdf (a
library that did not write the file)."""

from __future__ import annotations

import io
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio
from pypdf import PdfReader

from services.core.model.pageoptions import Metadata, PageOptions
from services.renderer.browser import BrowserPool, Html
from tests.integration.test_browser import CHROMIUM

pytestmark = pytest.mark.asyncio(loop_scope="module")

BREAK = "<div style='break-after: page'></div>"
REPORT = (
    "<html lang='de'><title>Bericht</title>"
    "<h1>Eins</h1><p>a</p><h2>Eins A</h2>" + BREAK + "<h2>Eins B</h2><h3>Tief</h3>"
    "<h1>Zwei</h1>" + BREAK + "<h1 style='display:none'>versteckt</h1><h4>Vier</h4>"
)


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def pool() -> AsyncIterator[BrowserPool]:
    async with BrowserPool(CHROMIUM, pages=1, timeout=20.0, max_output_bytes=50_000_000) as pool:
        yield pool


def bookmarks(reader: PdfReader) -> list[tuple[int, str, int]]:
    """The outline as (depth, title, zero-based page), depth first."""
    found: list[tuple[int, str, int]] = []

    def walk(items: list[Any], depth: int) -> None:
        for item in items:
            if isinstance(item, list):
                walk(item, depth + 1)
            else:
                found.append((depth, item.title, reader.get_destination_page_number(item)))

    walk(reader.outline, 0)
    return found


async def test_outline_nests_the_visible_headings_and_opens_their_pages(
    pool: BrowserPool,
) -> None:
    result = await pool.render(Html(REPORT), PageOptions(outline=True))
    reader = PdfReader(io.BytesIO(result.data))
    assert bookmarks(reader) == [
        (0, "Eins", 0),
        (1, "Eins A", 0),
        (1, "Eins B", 1),
        (2, "Tief", 1),
        (0, "Zwei", 1),
        (1, "Vier", 2),  # an h4 under an h1: one level down, not three
    ]


async def test_a_tagged_pdf_carries_its_structure_language_and_title(pool: BrowserPool) -> None:
    options = PageOptions(outline=True, metadata=Metadata(title="Quarterly report"))
    reader = PdfReader(io.BytesIO((await pool.render(Html(REPORT), options)).data))
    root = reader.trailer["/Root"]
    assert bool(root["/MarkInfo"]["/Marked"])
    assert "/StructTreeRoot" in root
    assert root["/Lang"] == "de"
    assert bool(root["/ViewerPreferences"]["/DisplayDocTitle"])
    assert reader.metadata is not None and reader.metadata.title == "Quarterly report"


async def test_without_the_option_there_is_no_outline(pool: BrowserPool) -> None:
    reader = PdfReader(io.BytesIO((await pool.render(Html(REPORT), PageOptions())).data))
    assert "/Outlines" not in reader.trailer["/Root"]
    assert reader.metadata is not None and reader.metadata.title == "Bericht"

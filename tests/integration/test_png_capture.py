"""What a PNG captures: the page as tall as its content, or one element's box.

Against real Chromium through the renderer's pool (one module-scoped pool of two tabs),
and through the whole stack for how a `selector` reaches the job: refused at the gateway
for a PDF, a failed job naming it when it matches nothing, the element's PNG otherwise.
Sizes are read from the PNG's header and its pixels with Pillow, which did not write it.
"""

from __future__ import annotations

import io
from collections.abc import AsyncIterator

import pytest
import pytest_asyncio
from PIL import Image

from services.core.model.errors import OutputTooLarge, RequestError
from services.core.model.pageoptions import PageOptions
from services.renderer.browser import BrowserPool, Html
from tests.conftest import Stack
from tests.integration.test_browser import CHROMIUM

on_the_pool = pytest.mark.asyncio(loop_scope="module")  # the pool's loop

CHART = "<style>body { margin: 0 } div { height: 250px; background: #08c }</style><div></div>"
LABELS = (
    "<!doctype html><style>body { margin: 8px; font: 16px sans-serif }"
    " h1 { margin: 0; height: {h1}; font-size: 20px } .other { height: 50px; background: #0c0 }"
    " #label { width: 300px; height: 120px; background: #c00; margin: 37px 0 0 21px }"
    "</style><h1>Shipping</h1><div class=other></div><div id=label></div>"
    "<div class=other></div><p>More text below the label.</p>"
)
"""A 300 by 120 px label between other boxes, at whole CSS px when `{h1}` is."""


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def pool() -> AsyncIterator[BrowserPool]:
    async with BrowserPool(CHROMIUM, pages=2, timeout=15.0, max_output_bytes=50_000_000) as pool:
        yield pool


async def png(pool: BrowserPool, html: str, **options: object) -> Image.Image:
    result = await pool.render(Html(html), PageOptions(output="png", **options))  # type: ignore[arg-type]
    return Image.open(io.BytesIO(result.data)).convert("RGB")


@on_the_pool
async def test_a_png_is_as_tall_as_its_content_not_the_viewport(pool: BrowserPool) -> None:
    """250 px of chart at width 480 and scale 2 was 1,200 px tall (the 600 px viewport)."""
    image = await png(pool, CHART, width="480px", scale=2)
    assert image.size == (960, 500)
    assert image.getpixel((480, 499)) == (0, 0x88, 0xCC)  # the chart reaches the last row


@on_the_pool
async def test_content_outside_the_flow_still_counts_and_vh_keeps_the_viewport(
    pool: BrowserPool,
) -> None:
    # An absolutely placed badge ends below the (empty) flow of the document.
    badge = "<style>body { margin: 0 }</style><b style='position: absolute; top: 300px'>x</b>"
    assert (await png(pool, badge)).size[1] >= 300
    # A page sized by the viewport keeps the viewport's height (600 CSS px).
    full = "<style>body { margin: 0 } div { height: 100vh; background: #eee }</style><div></div>"
    assert (await png(pool, full)).size == (800, 600)
    # Taller than the viewport: the whole content, as before.
    tall = "<style>body { margin: 0 } div { height: 1500px }</style><div></div>"
    assert (await png(pool, tall, scale=2)).size == (1600, 3000)


@on_the_pool
async def test_selector_captures_that_element_alone(pool: BrowserPool) -> None:
    image = await png(pool, LABELS.replace("{h1}", "40px"), selector="#label", scale=2)
    assert image.size == (600, 240)
    colours = {colour for _, colour in image.getcolors(maxcolors=600 * 240) or []}
    assert colours == {(0xCC, 0, 0)}, colours  # nothing of its neighbours
    # At a fractional position (a row of its edge may blend with the neighbour's) the
    # PNG still has the element's size.
    for scale in (1, 1.5, 3):
        shifted = await png(
            pool, LABELS.replace("{h1}", "40.4375px"), selector="#label", scale=scale
        )
        assert shifted.size == (round(300 * scale), round(120 * scale))


@on_the_pool
@pytest.mark.parametrize(
    ("selector", "words"),
    [
        ("#missing", "options.selector '#missing' matched nothing"),
        ("div[", "options.selector 'div[' is invalid: SyntaxError"),
        ("head", "options.selector 'head' matched an element with no box"),
    ],
)
async def test_a_selector_that_cannot_be_captured_fails_naming_it(
    pool: BrowserPool, selector: str, words: str
) -> None:
    with pytest.raises(RequestError) as caught:
        await png(pool, LABELS.replace("{h1}", "40px"), selector=selector)
    assert caught.value.message.startswith(words), caught.value.message
    assert (caught.value.kind, caught.value.field) == ("validation", "options.selector")


@on_the_pool
async def test_an_element_too_large_is_refused_before_it_is_captured(pool: BrowserPool) -> None:
    html = "<div id=big style='width: 100px; height: 20000px'></div>"
    with pytest.raises(OutputTooLarge, match="40000 px tall"):
        await png(pool, html, selector="#big", scale=2)


async def test_selector_through_the_stack(stack: Stack) -> None:
    labels = LABELS.replace("{h1}", "40px")
    async with stack.client.post(
        f"{stack.url}/jobs", json={"html": labels, "options": {"selector": "#label"}}
    ) as response:
        refused = await response.json()
    assert response.status == 400 and refused["error"]["field"] == "options.selector", refused
    png_options = {"output": "png", "scale": 2}
    missing = await stack.submit({"html": labels, "options": {**png_options, "selector": "#nope"}})
    label = await stack.submit({"html": labels, "options": {**png_options, "selector": "#label"}})
    failed = await stack.finished(missing["id"])
    assert (failed["status"], failed["attempts"], failed["error"]["type"]) == (
        "failed",
        1,
        "validation",
    )
    assert "options.selector '#nope' matched nothing" in failed["error"]["message"]
    done = await stack.finished(label["id"])
    async with stack.client.get(done["url"]) as response:
        assert Image.open(io.BytesIO(await response.read())).size == (600, 240)

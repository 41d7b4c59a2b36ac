"""Screenshots as PNG, JPEG and WebP: quality, a transparent background, the device scale
factor, the viewport's size and an element's box.

Against real Chromium through the renderer's pool (one module-scoped pool of two tabs),
and through the whole stack for what a client sees: the content type and file name of
the download, a 400 naming the option for an encoding that cannot be, a failed job naming
a selector that matches nothing. Every image is decoded by Pillow (which did not write it):
its format, size, mode and pixels.
"""

from __future__ import annotations

import io
from collections.abc import AsyncIterator

import pytest
import pytest_asyncio
from PIL import Image

from services.core.model.errors import OutputTooLarge
from services.core.model.pageoptions import PageOptions
from services.renderer.browser import BrowserPool, Html
from tests.conftest import Stack
from tests.integration.test_browser import CHROMIUM

on_the_pool = pytest.mark.asyncio(loop_scope="module")  # the pool's loop

CARD = (
    "<!doctype html><style>html, body { margin: 0 }"
    " #card { width: 200px; height: 100px; margin: 20px; background: rgb(0, 102, 204) }"
    " #photo { width: 300px; height: 150px;"
    "  background: repeating-linear-gradient(45deg, #d40 0 3px, #fe0 3px 7px, #06c 7px 11px) }"
    "</style><div id=card></div><div id=photo></div>"
)
"""A flat blue card 20 px from the top left corner, and a busy striped photo under it,
on a page that paints no background of its own."""

FORMATS = {"png": "PNG", "jpeg": "JPEG", "webp": "WEBP"}


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def pool() -> AsyncIterator[BrowserPool]:
    async with BrowserPool(CHROMIUM, pages=2, timeout=15.0, max_output_bytes=50_000_000) as pool:
        yield pool


async def capture(pool: BrowserPool, html: str, **options: object) -> tuple[bytes, Image.Image]:
    result = await pool.render(Html(html), PageOptions(**options))  # type: ignore[arg-type]
    return result.data, Image.open(io.BytesIO(result.data))


def near(colour: object, expected: tuple[int, int, int]) -> bool:
    """Whether `colour` is `expected` but for what lossy encoding moves (a few levels)."""
    assert isinstance(colour, tuple | list)
    return sum(abs(a - b) for a, b in zip(colour, expected, strict=True)) <= 12


@on_the_pool
@pytest.mark.parametrize("output", ["png", "jpeg", "webp"])
async def test_each_format_is_that_format_with_the_pages_pixels(
    pool: BrowserPool, output: str
) -> None:
    result = await pool.render(Html(CARD), PageOptions(output=output, width="400px"))
    image = Image.open(io.BytesIO(result.data))
    assert image.format == FORMATS[output]
    assert (result.content_type, result.extension) == (
        Image.MIME[FORMATS[output]],
        {"jpeg": "jpg"}.get(output, output),
    )
    assert image.size == (400, 290)  # 20 + 100 + 20 + 150: the content, not the viewport
    assert near(image.convert("RGB").getpixel((120, 70)), (0, 102, 204))  # the card


@on_the_pool
@pytest.mark.parametrize("output", ["jpeg", "webp"])
async def test_quality_trades_bytes_for_fidelity(pool: BrowserPool, output: str) -> None:
    low, rough = await capture(pool, CARD, output=output, quality=5, selector="#photo")
    high, fine = await capture(pool, CARD, output=output, quality=95, selector="#photo")
    reference = (await capture(pool, CARD, output="png", selector="#photo"))[1].convert("RGB")
    assert len(low) * 2 < len(high), (len(low), len(high))

    def error(image: Image.Image) -> float:
        pairs = zip(
            image.convert("RGB").get_flattened_data(), reference.get_flattened_data(), strict=True
        )
        return sum(abs(a - b) for one, other in pairs for a, b in zip(one, other, strict=True))

    assert (
        error(fine) < error(rough) * 0.8
    )  # thin colour stripes: chroma is subsampled at any quality


@on_the_pool
@pytest.mark.parametrize("output", ["png", "webp"])
async def test_omit_background_leaves_unpainted_pixels_transparent(
    pool: BrowserPool, output: str
) -> None:
    _, clear = await capture(pool, CARD, output=output, width="400px", omit_background=True)
    assert clear.mode == "RGBA"
    assert clear.getpixel((5, 5))[3] == 0  # the page paints nothing there
    *card, alpha = clear.getpixel((120, 70))
    assert alpha == 255 and near(card, (0, 102, 204))  # the card stays opaque
    _, white = await capture(pool, CARD, output=output, width="400px")
    assert white.convert("RGBA").getpixel((5, 5)) == (255, 255, 255, 255)
    # The next job on the same tabs gets the default white again.
    _, after = await capture(pool, CARD, output="png", width="400px")
    assert after.convert("RGBA").getpixel((5, 5)) == (255, 255, 255, 255)


@on_the_pool
@pytest.mark.parametrize("scale", [1, 2, 3])
async def test_the_device_scale_factor_multiplies_every_side(pool: BrowserPool, scale: int) -> None:
    _, card = await capture(pool, CARD, output="jpeg", selector="#card", scale=scale)
    assert card.size == (200 * scale, 100 * scale)
    _, page = await capture(pool, CARD, output="webp", width="400px", scale=scale)
    assert page.size == (400 * scale, 290 * scale)


@on_the_pool
async def test_height_makes_the_image_the_viewport(pool: BrowserPool) -> None:
    full = "<style>body { margin: 0 } div { height: 100vh; background: #0a0 }</style><div></div>"
    _, image = await capture(pool, full, output="png", width="320px", height="240px", scale=2)
    assert image.size == (640, 480)
    assert set(image.convert("RGB").get_flattened_data()) == {
        (0, 0xAA, 0)
    }  # 100vh is that viewport
    tall = "<style>body { margin: 0 }</style><div style='height: 3000px'>top</div>"
    _, top = await capture(pool, tall, output="jpeg", width="300px", height="200px")
    assert top.size == (300, 200)  # the page's top, not its 3000 px


@on_the_pool
async def test_a_webp_over_the_formats_own_limit_is_refused_before_capture(
    pool: BrowserPool,
) -> None:
    html = "<div id=big style='width: 100px; height: 9000px'></div>"
    with pytest.raises(OutputTooLarge, match="over the WEBP limit of 16383 px"):
        await capture(pool, html, output="webp", selector="#big", scale=2)
    _, png = await capture(pool, html, output="png", selector="#big", scale=2)
    assert png.size == (200, 18000)


async def test_images_through_the_stack(stack: Stack) -> None:
    bodies = {
        "jpeg": {"output": "jpeg", "quality": 70, "selector": "#card", "scale": 2},
        "webp": {"output": "webp", "omit_background": True, "width": "400px"},
    }
    jobs = {name: await stack.submit({"html": CARD, "options": o}) for name, o in bodies.items()}
    missing = await stack.submit({"html": CARD, "options": {"output": "jpeg", "selector": "#x"}})
    for name, (kind, extension, size) in {
        "jpeg": ("image/jpeg", ".jpg", (400, 200)),
        "webp": ("image/webp", ".webp", (400, 290)),
    }.items():
        done = await stack.finished(jobs[name]["id"])
        assert done["status"] == "done", done
        async with stack.client.get(done["url"]) as response:
            assert response.status == 200
            assert response.headers["Content-Type"] == kind
            assert extension in response.headers["Content-Disposition"]
            image = Image.open(io.BytesIO(await response.read()))
        assert (image.format, image.size) == (FORMATS[name], size)
    failed = await stack.finished(missing["id"])
    assert (failed["status"], failed["error"]["type"]) == ("failed", "validation")
    assert "options.selector '#x' matched nothing" in failed["error"]["message"]

    for options, field in (
        ({"output": "jpeg", "omit_background": True}, "options.omit_background"),
        ({"output": "png", "quality": 50}, "options.quality"),
        ({"output": "webp", "quality": 101}, "options.quality"),
        ({"output": "webp", "scale": 4}, "options.scale"),
        ({"output": "jpeg", "height": "5000px"}, "options.height"),
        ({"output": "gif"}, "options.output"),
    ):
        async with stack.client.post(
            f"{stack.url}/jobs", json={"html": CARD, "options": options}
        ) as response:
            refused = await response.json()
        assert response.status == 400 and refused["error"]["field"] == field, refused

"""Frameless tabs: a static PDF is printed on a tab that never draws display frames
(`needs_frames`, `Chromium.open_tab`), and prints what a drawing tab prints; script and
screenshots get tabs that draw.

Against real Chromiums (the renderer's, and the full one where installed) and a real HTTP
server for the documents' images and fonts.
"""

from __future__ import annotations

import asyncio
import io
import shutil
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from PIL import Image
from pypdf import PdfReader

from services.core.model.pageoptions import PageOptions, WaitFor
from services.core.runtime.settings import Settings
from services.renderer.browser import BrowserPool, Html
from services.renderer.browser import pool as pool_module
from tests.conftest import serving

SHELL = Settings().chromium_path()
FULL = shutil.which("chromium")
"""The full Chromium (new headless) accepts frameless tabs too, though they save it
nothing (docs/benchmarks.md): a deployment that runs it must print the same."""
FONT = Path("/usr/share/fonts/truetype/dejavu/DejaVuSerif-Bold.ttf")
STATIC = PageOptions()  # no script in the documents below: printed on a frameless tab
DRAWN = PageOptions(javascript=True)  # the same documents on a tab that draws
# A drawing tab loads a lazy image once a frame finds it near the viewport (the shell),
# or only when printing starts, too late for the print (the full Chromium): the reference
# asks for it at once and waits until it is in.
ALL_IN = (
    "(() => { const lazy = document.querySelector('img[src$=\"lazy.png\"]');"
    " lazy.loading = 'eager'; return lazy.complete && lazy.naturalWidth > 0; })()"
)
SETTLED_DRAWN = PageOptions(javascript=True, wait_for=WaitFor(expression=ALL_IN))
SLOW = 0.5
"""Seconds the server takes to answer each request."""


@pytest.fixture(
    params=[
        pytest.param(SHELL, id="default"),
        pytest.param(
            FULL,
            id="full-chromium",
            marks=pytest.mark.skipif(FULL in (None, SHELL), reason="no other Chromium"),
        ),
    ]
)
def binary(request: pytest.FixtureRequest) -> str:
    """The renderer's Chromium, then the full one where it is another binary."""
    return str(request.param)


def pool_of(chromium: str, pages: int) -> BrowserPool:
    return BrowserPool(
        chromium,
        pages=pages,
        timeout=15.0,
        max_output_bytes=50_000_000,
        allow_private_networks=True,  # the test's server is on loopback
    )


def png(color: str) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (40, 40), color).save(out, "PNG")
    return out.getvalue()


@pytest.fixture
async def assets() -> AsyncIterator[tuple[str, list[str]]]:
    """A slow server of two images and a web font (CORS open, as fonts from another
    origin need); its base URL and the paths asked for, in order."""
    asked: list[str] = []
    files = {"/lazy.png": png("red"), "/back.png": png("blue"), "/serif.ttf": FONT.read_bytes()}

    async def serve(request: web.Request) -> web.Response:
        asked.append(request.path)
        await asyncio.sleep(SLOW)  # a far server: only what is waited for gets in
        return web.Response(body=files[request.path], headers={"Access-Control-Allow-Origin": "*"})

    app = web.Application()
    app.router.add_get("/{name}", serve)
    async with serving(app) as url:
        yield url, asked


def document(url: str) -> str:
    """What only layout or a screen's viewport would fetch: a web font, a CSS background
    image, and a lazy image far below the first screen."""
    return f"""<style>
      @font-face {{ font-family: "Served Serif"; src: url({url}/serif.ttf); }}
      h1 {{ font-family: "Served Serif"; }}
      .back {{ width: 40px; height: 40px; background: url({url}/back.png) no-repeat; }}
    </style>
    <h1>Quarterly statement</h1><div class="back"></div>
    <div style="height: 3000px"></div>
    <img loading="lazy" src="{url}/lazy.png" width="40" height="40">"""


def images_and_fonts(pdf: bytes) -> tuple[int, set[str]]:
    """How many image XObjects the PDF draws (in patterns and forms too), and the base
    names of its fonts."""
    images, fonts = 0, set()

    def walk(resources: Any) -> None:
        nonlocal images
        resources = resources.get_object() if resources is not None else {}
        for font in (resources.get("/Font") or {}).values():
            fonts.add(str(font.get_object().get("/BaseFont", "")).split("+")[-1])
        for group in ("/XObject", "/Pattern"):
            for item in (resources.get(group) or {}).values():
                item = item.get_object()
                if item.get("/Subtype") == "/Image":
                    images += 1
                elif "/Resources" in item:
                    walk(item["/Resources"])

    for page in PdfReader(io.BytesIO(pdf)).pages:
        walk(page.get("/Resources"))
    return images, fonts


async def test_a_static_pdf_has_its_font_background_and_lazy_image_as_a_drawn_one(
    binary: str, assets: tuple[str, list[str]]
) -> None:
    """A frameless tab lays nothing out until asked, and has no viewport that a lazy image
    could enter: the load itself lays out and loads lazy content, so the static PDF gets
    the web font, the CSS image and the image 3000 px down, like the drawn one."""
    url, asked = assets
    async with pool_of(binary, pages=1) as pool:
        assert pool.chromium is not None
        static = await pool.render(Html(document(url)), STATIC)
        await pool.settle()  # a new tab of the kind the job needed replaces its tab
        spares = [False] * pool_module.SPARE_TABS
        assert [tab.framed for tab in pool.chromium.idle_tabs()] == [*spares, False]
        static_asked = sorted(asked)
        asked.clear()
        # Without its wait, the reference printed without its lazy image in 1 render of 6.
        drawn = await pool.render(Html(document(url)), SETTLED_DRAWN)
        await pool.settle()
        assert sorted(tab.framed for tab in pool.chromium.idle_tabs()) == [*spares, True]
    assert static_asked == sorted(asked) == ["/back.png", "/lazy.png", "/serif.ttf"]
    assert static.pages == drawn.pages == 3
    images, fonts = images_and_fonts(static.data)
    assert images == 2, "the CSS image and the lazy one"
    assert "DejaVuSerif-Bold" in fonts
    assert images_and_fonts(drawn.data) == (images, fonts)


# A script's work in an animation frame, and an observer's: what a tab that never draws
# would never run.
FRAMES = """<p id="raf">waiting</p><p id="seen">unseen</p><div id="box">box</div>
<script>
  requestAnimationFrame(() => { document.getElementById("raf").textContent = "frame ran"; });
  new ResizeObserver(() => { document.getElementById("seen").textContent = "observed"; })
    .observe(document.getElementById("box"));
</script>"""
DONE = "['frame ran', 'observed'].every((text) => document.body.innerText.includes(text))"


async def test_script_and_screenshots_get_a_tab_that_draws_and_the_kinds_share_the_pool(
    binary: str,
) -> None:
    """Script runs animation frames and observers; a PNG is captured; then a static PDF
    takes the frameless tab that is idle, and the pool keeps its number of tabs."""
    waits = PageOptions(wait_for=WaitFor(expression=DONE, timeout=3))
    async with pool_of(binary, pages=2) as pool:
        assert pool.chromium is not None

        async def kinds() -> list[bool]:
            await pool.settle()
            assert pool.chromium is not None
            return sorted(tab.framed for tab in pool.chromium.idle_tabs())

        tabs = 2 + pool_module.SPARE_TABS  # the pages and the spares
        frameless = [False] * (tabs - 1)
        assert await kinds() == [False] * tabs
        scripted = await pool.render(Html(FRAMES), waits)
        text = "".join(page.extract_text() for page in PdfReader(io.BytesIO(scripted.data)).pages)
        assert "frame ran" in text and "observed" in text
        assert await kinds() == [*frameless, True], "a frameless tab was remade drawing"
        shot = await pool.render(Html("<p>picture</p>"), PageOptions(output="png"))
        assert shot.data.startswith(b"\x89PNG")
        assert await kinds() == [*frameless, True], "the drawing tab served the PNG"
        static = await pool.render(Html("<p>static</p>"), STATIC)
        assert static.pages == 1
        assert await kinds() == [*frameless, True], "a frameless tab served the PDF"
        await pool.render(Html("<p>static</p>"), STATIC)
        await pool.render(Html("<p>picture</p>"), PageOptions(output="png"))
        assert len(await kinds()) == tabs


async def test_a_static_job_prints_on_a_drawing_tab_when_no_frameless_one_is_idle(
    binary: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A static job does not wait for, nor make, a frameless tab: with only a drawing tab
    idle it prints on it as it is (one tab made after it, none before), and its tab is
    remade frameless for the static jobs likely to follow."""
    monkeypatch.setattr(pool_module, "SPARE_TABS", 0)  # one tab: no frameless spare
    async with pool_of(binary, pages=1) as pool:
        assert pool.chromium is not None
        await pool.render(Html("<p>script</p>"), DRAWN)
        await pool.settle()
        assert [tab.framed for tab in pool.chromium.idle_tabs()] == [True]
        made: list[bool] = []
        open_tab = pool.chromium.open_tab

        async def counted(framed: bool = False) -> Any:
            made.append(framed)
            return await open_tab(framed)

        monkeypatch.setattr(pool.chromium, "open_tab", counted)
        result = await pool.render(Html("<p>static</p>"), STATIC)
        assert result.pages == 1
        await pool.settle()
        assert made == [False]
        assert [tab.framed for tab in pool.chromium.idle_tabs()] == [False]

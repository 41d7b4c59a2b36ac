"""Header and footer templates with the job's stylesheets: Chromium prints them without
loading anything, so the renderer writes the stylesheets they link into them (as a
`<style>`, every `url()` in it a `data:` URL). Proved by the PDF's text: a rule of the
stylesheet applied, its image drawn. Web fonts are not used there by Chromium, not even
as `data:` URLs: a header that declares one is refused, at the door and at the renderer.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from services.core.model.errors import AssetMissing, RequestError
from services.core.model.pageoptions import Margin, PageOptions
from services.core.objectstore.storage import LocalStorage
from services.renderer.browser import BrowserPool, Html
from services.renderer.jobfiles import FileCache, JobFiles
from tests.conftest import Stack
from tests.integration.test_job_files import (
    brand_font,
    images,
    png,
    pool,
    poppler,
    storage,
    stored,
)

__all__ = ["pool", "storage"]  # fixtures

HEAD_CSS = (
    b'@font-face { font-family: "Brand Test Sans"; src: url(../fonts/brand.woff) }\n'
    b".brand { font-size: 12px } .brand::before { content: url('../img/band.png') }\n"
    b".brand::after { content: ' (styled)' } .gone { display: none }"
)


async def test_a_header_uses_the_stylesheet_it_links_among_the_jobs_files(
    pool: BrowserPool, storage: LocalStorage, tmp_path: Path
) -> None:
    refs = await stored(storage, "t1", **{
        "fonts/brand.woff": brand_font(), "css/head.css": HEAD_CSS, "img/band.png": png(30, 6),
    })  # fmt: skip
    files = JobFiles(FileCache(storage, 10**7), "t1", refs)
    options = PageOptions(
        header_template=(
            '<link rel="stylesheet" href="css/head.css">'
            '<span class="brand">Branded header <span class="gone">HIDDEN</span></span>'
        ),
        margin=Margin(top="2cm"),
    )
    result = await pool.render(Html("<p>Body</p>"), options, None, files)
    text = poppler("pdftotext", result.data, tmp_path)
    assert "Branded header (styled)" in text and "HIDDEN" not in text
    assert (30, 6) in images(result.data, tmp_path)  # its url() resolved against css/
    assert files.missing == []  # the dropped @font-face asked for nothing


async def test_a_stylesheet_a_header_links_must_be_among_the_jobs_files(
    pool: BrowserPool, storage: LocalStorage
) -> None:
    refs = await stored(storage, "t1", **{"brand.woff": brand_font()})
    files = JobFiles(FileCache(storage, 10**7), "t1", refs)
    options = PageOptions(
        header_template='<link rel="stylesheet" href="absent.css"><span>x</span>',
        margin=Margin(top="2cm"),
    )
    with pytest.raises(AssetMissing, match=r"absent\.css"):
        await pool.render(Html("<p>x</p>"), options, None, files)
    with pytest.raises(RequestError, match="without the network"):  # a job without files
        await pool.render(Html("<p>x</p>"), options, None, None)


async def test_a_header_declaring_a_web_font_is_a_400_naming_it(stack: Stack) -> None:
    footer = '<style>@font-face { font-family: F; src: url("data:font/woff;base64,AA") }</style>'
    body = {"html": "<p>x</p>", "options": {"footer_template": footer}}
    async with stack.client.post(f"{stack.url}/jobs", json=body) as response:
        problem = await response.json()
    assert response.status == 400, problem
    assert problem["error"]["field"] == "options.footer_template"
    assert "@font-face" in problem["error"]["message"]
    linked = {
        "html": "<p>x</p>",
        "options": {"header_template": '<link rel=stylesheet href="a.css">'},
    }
    async with stack.client.post(f"{stack.url}/jobs", json=linked) as response:
        assert response.status == 202, await response.text()  # a.css may be a job's file

"""Files from the Python client and the CLI, against the real stack.

Verifies: `Client.submit(files=…)` takes paths, open files and a mapping of names to
bytes, and the page gets them by name (the PDF read back with poppler); `store_assets`,
`assets()`, `asset_versions` and `delete_asset` with `AsyncClient`; a template stored with
files, and its next version keeping them (`keep_files`); an unknown stored asset raises
`Invalid` naming the field; `pressroom render --asset` sends files (named by base name, or
`NAME=FILE`) and `--stored-asset` names one.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from pressroom.client import AsyncClient, Client, Invalid
from tests.conftest import Stack
from tests.integration.test_cli import flags, pressroom
from tests.integration.test_job_files import brand_font, images, png, poppler

PAGE = (
    '<link rel="stylesheet" href="style.css"><p>Hello <span class="gone">HIDDEN</span></p>'
    '<img src="img/logo.png">'
)
STYLE = b"@font-face { font-family: Brand; src: url(brand.woff) } p { font-family: Brand }"


def write_files(folder: Path) -> None:
    (folder / "img").mkdir()
    (folder / "img" / "logo.png").write_bytes(png(40, 20))
    (folder / "style.css").write_bytes(STYLE + b" .gone { display: none }")
    (folder / "brand.woff").write_bytes(brand_font())
    (folder / "page.html").write_text(PAGE)


def sync_render(stack: Stack, folder: Path) -> bytes:
    with Client(stack.url, stack.tenant.key) as client, (folder / "brand.woff").open("rb") as font:
        files = {"img/logo.png": folder / "img" / "logo.png", "brand.woff": font}
        files["style.css"] = (folder / "style.css").read_bytes()
        job = client.wait(client.submit(html=PAGE, files=files).id, timeout=60)
        assert job.status == "done", job
        client.download(job, folder / "sync.pdf")
        path_named = client.submit(html='<img src="logo.png">', files=[folder / "img" / "logo.png"])
        assert client.wait(path_named.id, timeout=60).status == "done"
    return (folder / "sync.pdf").read_bytes()


async def test_the_client_sends_paths_open_files_and_bytes(stack: Stack, tmp_path: Path) -> None:
    write_files(tmp_path)
    pdf = await asyncio.to_thread(sync_render, stack, tmp_path)
    assert "BrandTestSans" in poppler("pdffonts", pdf, tmp_path)
    assert images(pdf, tmp_path) == [(40, 20)]
    assert "HIDDEN" not in poppler("pdftotext", pdf, tmp_path)


async def test_the_async_client_stores_lists_uses_and_deletes_assets(
    stack: Stack, tmp_path: Path
) -> None:
    write_files(tmp_path)
    async with AsyncClient(stack.url, stack.tenant.key) as client:
        stored = await client.store_assets({"fonts/brand.woff": tmp_path / "brand.woff"})
        assert [(a.name, a.version, a.new) for a in stored] == [("fonts/brand.woff", 1, True)]
        listed = [a async for a in client.assets()]
        assert [(a.name, a.versions) for a in listed] == [("fonts/brand.woff", 1)]
        assert [v.version for v in await client.asset_versions("fonts/brand.woff")] == [1]

        template = await client.create_template(
            "branded",
            '<p style="font-family: Brand">{{ text }}</p>'
            "<style>@font-face { font-family: Brand; src: url(fonts/brand.woff) }</style>",
            assets=["fonts/brand.woff"],
        )
        shown = await client.template(template.id)
        assert [f.name for f in shown.files] == ["fonts/brand.woff"]
        job = await client.submit(template_id=template.id, data={"text": "Hi"})
        job = await client.wait(job.id, timeout=60)
        assert job.status == "done", job
        await client.download(job, tmp_path / "t.pdf")
        assert "BrandTestSans" in poppler("pdffonts", (tmp_path / "t.pdf").read_bytes(), tmp_path)
        kept = await client.create_template("branded", "<p>v2</p>", keep_files={"version": 1})
        assert kept.version == 2
        assert [f.digest for f in (await client.template(template.id)).files] == [
            shown.files[0].digest
        ]  # version 2 keeps version 1's file, by reference

        with pytest.raises(Invalid) as raised:
            await client.submit(html="<p>", assets=["absent.png"])
        assert raised.value.field == "assets[0]" and raised.value.type == "asset_missing"
        assert await client.delete_asset("fonts/brand.woff") == 1
        assert [a async for a in client.assets()] == []


async def test_render_sends_assets_from_the_command_line(stack: Stack, tmp_path: Path) -> None:
    write_files(tmp_path)
    async with AsyncClient(stack.url, stack.tenant.key) as client:
        await client.store_assets([tmp_path / "style.css"])
    status, _, err = await pressroom(
        tmp_path, "render", "--html", "page.html", "-o", "page.pdf",
        "--asset", "img/logo.png=img/logo.png", "--asset", "brand.woff",
        "--stored-asset", "style.css", *flags(stack),
    )  # fmt: skip
    assert status == 0, err
    pdf = (tmp_path / "page.pdf").read_bytes()
    assert images(pdf, tmp_path) == [(40, 20)]
    assert "BrandTestSans" in poppler("pdffonts", pdf, tmp_path)
    status, _, err = await pressroom(
        tmp_path, "render", "--html", "page.html", "--asset", "nope.png", *flags(stack)
    )
    assert status == 2 and "nope.png" in err

"""A job's files served to its page by request interception (`renderer/jobfiles`).

Real Chromium and real (local) storage: files stored with `store_file`, the page loaded
at the job's made-up origin, its relative names fulfilled from storage. What the PDF
holds is read back with poppler (`pdffonts`, `pdfimages`, `pdftotext`): the image is
drawn, the web font embedded, the stylesheet applied.
"""

from __future__ import annotations

import io
import struct
import subprocess
import unicodedata
import zlib
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from fontTools.ttLib import TTFont
from prometheus_client import REGISTRY

from services.core.model.errors import AssetMissing
from services.core.model.files import FileRef, blob_key
from services.core.model.pageoptions import Margin, PageOptions
from services.core.objectstore.filestore import store_file
from services.core.objectstore.storage import LocalStorage
from services.renderer.browser import BrowserPool, Html
from services.renderer.jobfiles import FileCache, JobFiles

DEJAVU = Path("/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf")


def png(width: int, height: int, rgb: tuple[int, int, int] = (200, 30, 30)) -> bytes:
    raw = b"".join(b"\x00" + bytes(rgb) * width for _ in range(height))

    def chunk(kind: bytes, data: bytes) -> bytes:
        crc = zlib.crc32(kind + data) & 0xFFFFFFFF
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", crc)

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(raw))
        + chunk(b"IEND", b"")
    )  # fmt: skip


def brand_font() -> bytes:
    """DejaVu Sans renamed "Brand Test Sans", as WOFF: a font this machine has nowhere
    else, so finding it embedded proves the page loaded it from the job's files."""
    font = TTFont(DEJAVU)
    for record in font["name"].names:
        if record.nameID in (1, 4, 16):
            record.string = "Brand Test Sans"
        elif record.nameID == 6:
            record.string = "BrandTestSans"
    font.flavor = "woff"
    out = io.BytesIO()
    font.save(out)
    return out.getvalue()


def poppler(tool: str, pdf: bytes, tmp_path: Path) -> str:
    path = tmp_path / f"{tool}.pdf"
    path.write_bytes(pdf)
    args = [tool, str(path)] + (["-"] if tool == "pdftotext" else [])
    if tool == "pdfimages":
        args.insert(1, "-list")
    return subprocess.run(args, capture_output=True, text=True, check=True).stdout


def images(pdf: bytes, tmp_path: Path) -> list[tuple[int, int]]:
    lines = poppler("pdfimages", pdf, tmp_path).splitlines()[2:]
    return [(int(line.split()[3]), int(line.split()[4])) for line in lines]


def served(source: str) -> float:
    """`pressroom_job_files_served_total` of `source` so far."""
    value = REGISTRY.get_sample_value("pressroom_job_files_served_total", {"source": source})
    return value or 0.0


@pytest.fixture
def storage(tmp_path: Path) -> LocalStorage:
    return LocalStorage(str(tmp_path / "files"), "http://pressroom.test", "secret")


@pytest.fixture
async def pool(chromium: str) -> AsyncIterator[BrowserPool]:
    async with BrowserPool(chromium, pages=1, timeout=20, max_output_bytes=10**8) as pool:
        yield pool


async def stored(storage: LocalStorage, tenant: str, **named: bytes) -> list[FileRef]:
    return [await store_file(storage, tenant, name, data) for name, data in named.items()]


async def test_an_image_a_stylesheet_and_a_font_are_used_by_their_relative_names(
    pool: BrowserPool, storage: LocalStorage, tmp_path: Path
) -> None:
    refs = await stored(storage, "t1", **{
        "img/logo.png": png(40, 20),
        "fonts/brand.woff": brand_font(),
        "style.css": b"@font-face { font-family: Brand; src: url(fonts/brand.woff) }\n"
                     b"p { font-family: Brand } .gone { display: none }",
    })  # fmt: skip
    html = (
        '<link rel="stylesheet" href="style.css"><p>Hello <span class="gone">HIDDEN</span>'
        '</p><img src="img/logo.png">'
    )
    files = JobFiles(FileCache(storage, 10**7), "t1", refs)
    result = await pool.render(Html(html), PageOptions(), None, files)
    assert "BrandTestSans" in poppler("pdffonts", result.data, tmp_path)
    assert images(result.data, tmp_path) == [(40, 20)]
    text = poppler("pdftotext", result.data, tmp_path)
    assert "Hello" in text and "HIDDEN" not in text
    assert result.refused == ()


async def test_a_name_the_job_does_not_carry_fails_it_naming_the_file(
    pool: BrowserPool, storage: LocalStorage
) -> None:
    refs = await stored(storage, "t1", **{"logo.png": png(4, 4)})
    files = JobFiles(FileCache(storage, 10**7), "t1", refs)
    html = '<img src="logo.png"><img src="fonts/missing.png">'
    with pytest.raises(AssetMissing, match=r"'fonts/missing\.png'.*'logo\.png'"):
        await pool.render(Html(html), PageOptions(), None, files)


async def test_a_header_and_footer_get_their_images_from_the_jobs_files(
    pool: BrowserPool, storage: LocalStorage, tmp_path: Path
) -> None:
    refs = await stored(storage, "t1", **{"logo.png": png(60, 30), "body.png": png(8, 8)})
    files = JobFiles(FileCache(storage, 10**7), "t1", refs)
    options = PageOptions(
        header_template='<img src="logo.png" style="height: 20px">',
        footer_template="<span style=\"background: url('logo.png')\">x</span>",
        margin=Margin(top="2cm", bottom="2cm"),
    )
    result = await pool.render(Html('<img src="body.png">'), options, None, files)
    assert (60, 30) in images(result.data, tmp_path)
    missing = PageOptions(header_template='<img src="absent.png">', margin=Margin(top="2cm"))
    with pytest.raises(AssetMissing, match="absent"):
        await pool.render(Html("<p>x</p>"), missing, None, files)


async def test_another_tenants_digest_is_not_served_even_from_the_cache(
    pool: BrowserPool, storage: LocalStorage
) -> None:
    refs = await stored(storage, "t1", **{"logo.png": png(4, 4)})
    cache = FileCache(storage, 10**7)
    await pool.render(
        Html('<img src="logo.png">'), PageOptions(), None, JobFiles(cache, "t1", refs)
    )
    assert cache.size == len(png(4, 4))  # t1's bytes are in memory now
    with pytest.raises(AssetMissing, match="no longer stored"):
        await pool.render(
            Html('<img src="logo.png">'), PageOptions(), None, JobFiles(cache, "t2", refs)
        )


async def test_files_are_read_once_then_served_from_memory_within_its_budget(
    pool: BrowserPool, storage: LocalStorage, tmp_path: Path
) -> None:
    data = png(16, 16)
    refs = await stored(storage, "t1", **{"logo.png": data})
    kept, too_small = FileCache(storage, 10**6), FileCache(storage, len(data) - 1)
    for cache in (kept, too_small):
        await pool.render(
            Html('<img src="logo.png">'), PageOptions(), None, JobFiles(cache, "t1", refs)
        )
    (tmp_path / "files" / blob_key("t1", refs[0].digest)).unlink()
    page = Html('<img src="logo.png">')
    result = await pool.render(page, PageOptions(), None, JobFiles(kept, "t1", refs))
    assert images(result.data, tmp_path) == [(16, 16)]
    with pytest.raises(AssetMissing):
        await pool.render(page, PageOptions(), None, JobFiles(too_small, "t1", refs))


async def test_names_are_matched_percent_decoded_and_in_nfc(
    pool: BrowserPool, storage: LocalStorage, tmp_path: Path
) -> None:
    refs = await stored(storage, "t1", **{"my logo.png": png(5, 5), "café.png": png(6, 6)})
    files = JobFiles(FileCache(storage, 10**7), "t1", refs)
    decomposed = unicodedata.normalize("NFD", "café.png")
    html = f'<img src="my%20logo.png"><img src="{decomposed}">'
    result = await pool.render(Html(html), PageOptions(), None, files)
    assert sorted(images(result.data, tmp_path)) == [(5, 5), (6, 6)]


async def test_everything_else_keeps_the_sandbox_rules_and_is_refused_with_its_reason(
    pool: BrowserPool, storage: LocalStorage
) -> None:
    refs = await stored(storage, "t1", **{"logo.png": png(4, 4)})
    files = JobFiles(FileCache(storage, 10**7), "t1", refs)
    html = '<img src="logo.png"><img src="http://127.0.0.1:9/x.png"><img src="file:///etc/passwd">'
    result = await pool.render(Html(html), PageOptions(), None, files)
    reasons = {refusal["url"]: refusal["reason"] for refusal in result.refused}
    assert "loopback" in reasons["http://127.0.0.1:9/x.png"]
    assert "scheme file" in reasons["file:///etc/passwd"]


async def test_an_svg_with_a_script_drawn_as_an_image_runs_nothing(
    pool: BrowserPool, storage: LocalStorage, tmp_path: Path
) -> None:
    # Were its script run, it would ask for `leak.png`, which the job lacks: the job
    # would fail. As an image, an SVG runs no script.
    svg = (
        b'<svg xmlns="http://www.w3.org/2000/svg" width="10" height="10">'
        b"<script>fetch('leak.png'); new Image().src = 'leak.png'</script>"
        b'<rect width="10" height="10" fill="red"/></svg>'
    )
    refs = await stored(storage, "t1", **{"x.svg": svg})
    files = JobFiles(FileCache(storage, 10**7), "t1", refs)
    options = PageOptions(javascript=True)
    result = await pool.render(Html('<img src="x.svg">'), options, None, files)
    assert result.pages == 1 and result.refused == ()


async def test_a_page_climbing_out_of_its_files_finds_nothing_and_fails(
    pool: BrowserPool, storage: LocalStorage
) -> None:
    # Names are looked up among the job's files, never joined to a storage path: a climb,
    # an encoded climb, or another tenant's key spelled as a path are names it lacks.
    refs = await stored(storage, "t1", **{"logo.png": png(4, 4)})
    await stored(storage, "t2", **{"secret.png": png(5, 5)})
    files = JobFiles(FileCache(storage, 10**7), "t1", refs)
    html = (
        '<img src="logo.png"><img src="/%2e%2e/%2e%2e/t2/secret.png">'
        f'<img src="../../files/t2/sha256/{refs[0].digest}">'
    )
    with pytest.raises(AssetMissing) as raised:
        await pool.render(Html(html), PageOptions(), None, files)
    assert "'t2/secret.png' (and 1 more)" in str(raised.value)  # the URL resolved the dots


async def test_a_screenshot_draws_the_jobs_image(pool: BrowserPool, storage: LocalStorage) -> None:
    from PIL import Image

    refs = await stored(storage, "t1", **{"logo.png": png(60, 30, (10, 200, 10))})
    files = JobFiles(FileCache(storage, 10**7), "t1", refs)
    page = Html('<body style="margin: 0"><img src="logo.png"></body>')
    result = await pool.render(page, PageOptions(output="png"), None, files)
    image = Image.open(io.BytesIO(result.data)).convert("RGB")
    assert image.getpixel((5, 5)) == (10, 200, 10) and image.getpixel((100, 5)) == (255, 255, 255)

"""`watermark` and `stamp`: through the real stack, then read back by tools that did not
write the file: `pdftotext` finds each mark on the pages asked for and only there, the
rendered pixels (`pdftoppm`) show the stamp over the content and the watermark under it,
and `pdffonts` shows the mark's font embedded."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pikepdf

from tests.conftest import Stack

BREAK = "<div style='break-after: page'></div>"
# Three pages, each black over its top half: a mark placed there shows only if drawn over.
BLACK = "<div style='background:#000;height:140mm'></div>"
DOCUMENT = BREAK.join(f"<p>page {n}</p>{BLACK}" for n in (1, 2, 3))
RED = (192, 0, 0)


async def marked(stack: Stack, tmp_path: Path, **marks: Any) -> Path:
    return await stack.rendered({"html": DOCUMENT, "options": marks}, tmp_path)


def tool(command: list[str]) -> bytes:
    """What a poppler tool prints (a short, local run: no need to leave the loop)."""
    return subprocess.run(command, capture_output=True, check=True).stdout


def page_text(pdf: Path, page: int) -> str:
    """The page's text with every space and line break taken out (turned text comes out
    of pdftotext letter by letter)."""
    out = tool(["pdftotext", "-f", str(page), "-l", str(page), str(pdf), "-"])
    return "".join(out.decode().split())


def row(pdf: Path, page: int, y: float) -> list[tuple[int, ...]]:
    """The colours across the page at `y` (a fraction of its height from the top),
    rendered at 20 dpi."""
    ppm = tool(["pdftoppm", "-f", str(page), "-l", str(page), "-r", "20", str(pdf)])
    magic, width, height, _, pixels = ppm.split(maxsplit=4)
    assert magic == b"P6"
    start = 3 * int(width) * int(y * int(height))
    line = pixels[start : start + 3 * int(width)]
    return [tuple(line[i : i + 3]) for i in range(0, len(line), 3)]


def reddish(colours: list[tuple[int, ...]]) -> int:
    """How many of `colours` are a clear red (the marks' colour)."""
    return sum(1 for r, g, b in colours if r > 120 and g < 80 and b < 80)


async def test_watermark_text_is_on_the_pages_asked_and_under_the_content(
    stack: Stack, tmp_path: Path
) -> None:
    pdf = await marked(
        stack,
        tmp_path,
        watermark={
            "text": "CONFIDENTIAL",
            "pages": "1, 3",
            "rotation": 0,
            "position": "top",
            "opacity": 1,
            "color": "#c00000",
            "size": 0.8,
        },
    )
    assert [("CONFIDENTIAL" in page_text(pdf, n)) for n in (1, 2, 3)] == [True, False, True]
    assert reddish(row(pdf, 1, 0.07)) == 0  # the black block hides it
    fonts = tool(["pdffonts", str(pdf)]).decode()
    assert all(" yes " in line for line in fonts.splitlines()[2:]), fonts  # all embedded


async def test_stamp_is_drawn_over_the_content_on_every_page(stack: Stack, tmp_path: Path) -> None:
    pdf = await marked(
        stack,
        tmp_path,
        stamp={"text": "PAID", "position": "top", "size": 0.8},
        watermark={"text": "DRAFT"},
    )
    for page in (1, 2, 3):
        assert "PAID" in page_text(pdf, page) and "DRAFT" in page_text(pdf, page)
        assert reddish(row(pdf, page, 0.15)) > 10
    with pikepdf.open(pdf) as document:
        contents = document.pages[0].obj.Contents
        drawn = [bytes(stream.read_bytes()) for stream in contents]
    marks = [i for i, stream in enumerate(drawn) if b"/Watermark" in stream]
    text = [i for i, stream in enumerate(drawn) if b"TJ" in stream or b"Tj" in stream]
    assert len(marks) == 2 and text
    assert marks[0] < min(text) and max(text) < marks[1]  # watermark under, stamp over


async def test_an_image_stamp_is_placed_and_a_bad_mark_is_a_400_naming_its_field(
    stack: Stack, tmp_path: Path
) -> None:
    pdf = await marked(stack, tmp_path, stamp={"image": RED_PNG, "position": "top", "size": 0.5})
    assert reddish(row(pdf, 2, 0.1)) > 10
    for mark, field in (
        ({"text": "x", "image": RED_PNG}, "options.stamp"),
        ({"text": "x", "opacity": 1.5}, "options.stamp.opacity"),
        ({"text": "x", "position": "middle"}, "options.stamp.position"),
        ({"text": "x", "pages": "3-1"}, "options.stamp.pages"),
        ({"image": "data:image/gif;base64,R0lGOD=="}, "options.stamp.image"),
        ({"text": "x", "font": "Comic"}, "options.stamp.font"),
    ):
        async with stack.client.post(
            f"{stack.url}/jobs", json={"html": "<p>x</p>", "options": {"stamp": mark}}
        ) as response:
            assert response.status == 400
            assert (await response.json())["error"]["field"] == field


# A 4 x 2 px PNG of pure #c00000, made for this test.
RED_PNG = (
    "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAQAAAACCAIAAADwyuo0AAAAEElEQVR4nGM4wMAARwzIHAB"
    "UGgYBp6bhOgAAAABJRU5ErkJggg=="
)

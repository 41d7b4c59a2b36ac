"""Every common script prints as text with a real font, not as empty boxes ("tofu").

A receipt holding Latin, Greek, Cyrillic, Chinese, Japanese, Korean, Arabic and Hebrew
(right to left), Devanagari and an emoji is printed by the renderer's pool in real
Chromium, with and without a `PRESSROOM_FONTS_DIR` (whose fontconfig file must still
include the system's fonts). What the checks read, with tools that did not write the file:

- `pdffonts`: every font in the PDF is embedded;
- `pdftotext`: every word comes back as text, the emoji too (poppler maps the colour
  emoji's Type 3 glyph back to U+1F642 through its ToUnicode map);
- pypdf's text visitor: which font drew each word, so that the CJK words are drawn by
  Noto Sans CJK, Devanagari by Noto Sans Devanagari and the emoji by Noto Color Emoji,
  and no glyph is `.notdef` (a box; its ToUnicode entry is U+0000). Chromium embeds the
  CFF-based CJK font and the bitmap emoji font as Type 3 fonts, which `pdffonts` lists
  without a name: their names are read from their font descriptors.
"""

from __future__ import annotations

import io
import os
import subprocess
import tempfile
import unicodedata
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pypdf
import pytest

from services.core.model.pageoptions import PageOptions
from services.renderer.browser import BrowserPool, Html

WORDS = {
    "Grüße": ("LiberationSans", "DejaVuSans", "NotoSans-"),
    "Ελληνικά": ("LiberationSans", "DejaVuSans", "NotoSans-"),
    "Кириллица": ("LiberationSans", "DejaVuSans", "NotoSans-"),
    "谢谢": ("NotoSansCJK",),
    "日本語": ("NotoSansCJK",),
    "한국어": ("NotoSansCJK",),
    "مرحبا": ("DejaVuSans", "NotoSansArabic", "NotoNaskhArabic"),
    "שלום": ("DejaVuSans", "NotoSansHebrew"),
    "नमस्ते": ("NotoSansDevanagari",),
    "🙂": ("NotoColorEmoji",),
}
"""Each word of the receipt, and the fonts that may draw it (by PostScript name)."""

RECEIPT = (
    "<meta charset=utf-8><style>body { font: 14px sans-serif; margin: 2mm }</style>"
    f"<p>{' '.join(WORDS)}</p>"
)


@pytest.fixture(params=["system fonts", "with PRESSROOM_FONTS_DIR"])
def fonts_dir(request: pytest.FixtureRequest) -> Iterator[str]:
    if request.param == "system fonts":
        yield ""
        return
    # Outside tmp_path, which only root may enter: Chromium may run as another user.
    with tempfile.TemporaryDirectory(prefix="pressroom-test-scripts-") as folder:
        os.chmod(folder, 0o755)
        yield folder


async def render(chromium: str, fonts_dir: str, options: PageOptions) -> bytes:
    async with BrowserPool(
        chromium, pages=1, timeout=30, max_output_bytes=10**8, fonts_dir=fonts_dir
    ) as pool:
        return (await pool.render(Html(RECEIPT), options)).data


def pdffonts(path: Path) -> list[list[str]]:
    """`pdffonts`' rows, each split in columns (a Type 3 font's name is `[none]`)."""
    out = subprocess.run(["pdffonts", str(path)], capture_output=True, text=True, check=True)
    return [line.split() for line in out.stdout.splitlines()[2:]]


def pdftotext(path: Path) -> str:
    out = subprocess.run(["pdftotext", str(path), "-"], capture_output=True, text=True, check=True)
    return out.stdout


def text_by_font(pdf: bytes) -> dict[str, str]:
    """The text each font drew, NFKC-normalised (pypdf gives Arabic in its presentation
    forms and some CJK ideographs as their radicals), keyed by the font's PostScript name
    without its subset tag."""
    drawn: dict[str, list[str]] = {}

    def visit(text: str, cm: Any, tm: Any, font: Any, size: Any) -> None:
        if text.strip() and font is not None:
            drawn.setdefault(font_name(font), []).append(text)

    pypdf.PdfReader(io.BytesIO(pdf)).pages[0].extract_text(visitor_text=visit)
    return {name: unicodedata.normalize("NFKC", "".join(texts)) for name, texts in drawn.items()}


def font_name(font: Any) -> str:
    # A Type 3 font has no /BaseFont; Skia names it in its font descriptor.
    name = font.get("/BaseFont") or font["/FontDescriptor"].get_object()["/FontName"]
    return str(name).lstrip("/").split("+")[-1]


async def test_every_script_prints_as_text_with_a_real_font(
    chromium: str, fonts_dir: str, tmp_path: Path
) -> None:
    pdf = await render(chromium, fonts_dir, PageOptions(receipt_width=120))
    path = tmp_path / "receipt.pdf"
    path.write_bytes(pdf)
    rows = pdffonts(path)
    assert rows and all(row[-5] == "yes" for row in rows), rows  # the `emb` column
    text = pdftotext(path)
    assert [word for word in WORDS if word not in text] == [], text
    drawn = text_by_font(pdf)
    assert not any("\x00" in text for text in drawn.values()), drawn  # no .notdef box
    for word, fonts in WORDS.items():
        by = [name for name, text in drawn.items() if word in text]
        assert by and all(name.startswith(fonts) for name in by), (word, by, drawn)

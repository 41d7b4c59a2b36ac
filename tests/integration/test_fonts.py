"""PRESSROOM_FONTS_DIR: fonts in a folder are usable from templates by family name.

Verifies, with a font that exists nowhere else on the machine (DejaVu Sans renamed to
"Pressroom Test Sans" with fontTools), that a document asking for that family gets it
embedded in the PDF when the folder is configured, and falls back when it is not.
"""

from __future__ import annotations

import io
import os
import tempfile
from pathlib import Path

import pypdf
from fontTools.ttLib import TTFont

from services.core.model.pageoptions import PageOptions
from services.renderer.browser import BrowserPool, Html

DEJAVU = Path("/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf")
HTML = "<p style=\"font-family: 'Pressroom Test Sans'\">Hello fonts</p>"


def make_font(folder: Path) -> None:
    font = TTFont(DEJAVU)
    for record in font["name"].names:
        if record.nameID in (1, 4, 16):
            record.string = "Pressroom Test Sans"
        elif record.nameID == 6:
            record.string = "PressroomTestSans"
    folder.mkdir()
    font.save(folder / "pressroom-test-sans.ttf")


def font_names(pdf: bytes) -> set[str]:
    names = set()
    for page in pypdf.PdfReader(io.BytesIO(pdf)).pages:
        for font in page["/Resources"]["/Font"].values():
            names.add(str(font.get_object()["/BaseFont"]))
    return names


async def render(chromium: str, fonts_dir: str) -> set[str]:
    async with BrowserPool(
        chromium, pages=1, timeout=20, max_output_bytes=10**8, fonts_dir=fonts_dir
    ) as pool:
        return font_names((await pool.render(Html(HTML), PageOptions())).data)


async def test_fonts_dir_makes_a_family_usable(chromium: str):
    # Not in tmp_path, which only root may enter: a root renderer runs Chromium as
    # another user, who must be able to read the folder (PRESSROOM_CHROMIUM_UID).
    with tempfile.TemporaryDirectory(prefix="pressroom-test-fonts-") as tmp:
        os.chmod(tmp, 0o755)
        make_font(Path(tmp) / "fonts")
        with_folder = await render(chromium, str(Path(tmp) / "fonts"))
    without = await render(chromium, "")
    assert any("PressroomTestSans" in name for name in with_folder), with_folder
    assert not any("PressroomTestSans" in name for name in without), without

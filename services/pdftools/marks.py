"""The `watermark` (under the content) and `stamp` (over it) steps, and options.

The mark is a one-page PDF exactly the mark's size: a `pdf` input's first page, or, for
`text` and `image`, a page Chromium printed before the pipeline ran
(`renderer/marks.py`; handed over as a job file, `pipeline.mark_key`): text shaped and
set in an embedded font, as every script and PDF/A need, an image decoded, opacity
applied. This step only places that page, as a form XObject, on the pages asked for:
scaled to `size` of the page's width, turned by `rotation` about its centre and put at
`position`, drawn before the page's content (watermark) or after it (stamp). Both are
marked as pagination artifacts, so assistive technology does not read them as text of
the document.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import pikepdf

from services.core.model.errors import PdfInvalid
from services.core.model.options import page_numbers
from services.core.model.pageoptions import Mark, PageOptions
from services.pdftools.document import open_pdf

KINDS = ("watermark", "stamp")
MARGIN = 0.04
"""Space between a mark placed at an edge and that edge, as a fraction of the page's
shorter side."""


@dataclass(frozen=True)
class Style:
    """A mark's look with every default filled in."""

    opacity: float
    rotation: float
    position: str
    size: float
    color: str


STYLES = {
    "watermark": Style(opacity=0.2, rotation=45.0, position="center", size=0.6, color="gray"),
    "stamp": Style(opacity=1.0, rotation=0.0, position="top-right", size=0.25, color="#c00000"),
}
"""Each kind's defaults: a faint diagonal word across the page; a red label in a corner."""


def style_of(kind: str, mark: Mark) -> Style:
    """`mark`'s look: what it gives, else `kind`'s default."""
    default = STYLES[kind]
    return Style(
        opacity=default.opacity if mark.opacity is None else mark.opacity,
        rotation=default.rotation if mark.rotation is None else mark.rotation,
        position=mark.position or default.position,
        size=default.size if mark.size is None else mark.size,
        color=mark.color or default.color,
    )


def asked(options: PageOptions) -> list[tuple[str, Mark]]:
    """The marks `options` ask for, watermark first."""
    found = ((kind, getattr(options, kind)) for kind in KINDS)
    return [(kind, mark) for kind, mark in found if mark is not None]


def place(document: pikepdf.Pdf, printed: bytes, kind: str, mark: Mark) -> None:
    """The first page of `printed` placed as a `kind` mark on the pages `mark` names."""
    style = style_of(kind, mark)
    with open_pdf(printed, f"the {kind}'s PDF") as source:
        if not source.pages:
            raise PdfInvalid(f"the {kind}'s PDF has no page")
        form = document.copy_foreign(source.pages[0].as_form_xobject())
    for number in page_numbers(mark.pages, len(document.pages)):
        page = document.pages[number - 1]
        name = page.add_resource(form, pikepdf.Name.XObject, prefix="Mark")
        drawing = _drawing(name, _matrix(_box(page.mediabox), _box(form.BBox), style))
        _add(document, page, drawing, under=kind == "watermark")


def _box(array: pikepdf.Object) -> tuple[float, float]:
    """Width and height of a PDF rectangle."""
    x0, y0, x1, y1 = (float(v) for v in array)
    return abs(x1 - x0), abs(y1 - y0)


def _matrix(
    page: tuple[float, float], mark: tuple[float, float], style: Style
) -> tuple[float, ...]:
    """The `cm` that scales the mark to `size` of the page width, turns it about its centre
    and puts its turned bounding box at `position`."""
    (pw, ph), (w, h) = page, mark
    k = style.size * pw / w
    cos, sin = math.cos(math.radians(style.rotation)), math.sin(math.radians(style.rotation))
    box_w, box_h = k * (w * abs(cos) + h * abs(sin)), k * (w * abs(sin) + h * abs(cos))
    cx, cy = _centre(style.position, (pw, ph), (box_w, box_h))
    e = cx - k * (cos * w / 2 - sin * h / 2)
    f = cy - k * (sin * w / 2 + cos * h / 2)
    return (k * cos, k * sin, -k * sin, k * cos, e, f)


def _centre(
    position: str, page: tuple[float, float], box: tuple[float, float]
) -> tuple[float, float]:
    """Where the centre of a `box` at `position` on `page` lies (PDF y runs upwards)."""
    (pw, ph), (bw, bh) = page, box
    margin = MARGIN * min(pw, ph)
    x, y = pw / 2, ph / 2
    if "left" in position:
        x = margin + bw / 2
    elif "right" in position:
        x = pw - margin - bw / 2
    if "top" in position:
        y = ph - margin - bh / 2
    elif "bottom" in position:
        y = margin + bh / 2
    return x, y


def _drawing(name: pikepdf.Name, matrix: tuple[float, ...]) -> bytes:
    numbers = " ".join(f"{v:.4f}" for v in matrix)
    return (
        f"/Artifact <</Type /Pagination /Subtype /Watermark>> BDC\n"
        f"q {numbers} cm {name} Do Q\nEMC\n"
    ).encode()


def _add(document: pikepdf.Pdf, page: pikepdf.Page, drawing: bytes, *, under: bool) -> None:
    """Draw before the page's content, or after it with the content's graphics state
    saved and restored around it (so a content stream that leaves a transform set cannot
    move the stamp)."""
    if under:
        page.contents_add(pikepdf.Stream(document, drawing), prepend=True)
        return
    page.contents_add(pikepdf.Stream(document, b"q\n"), prepend=True)
    page.contents_add(pikepdf.Stream(document, b"Q\n" + drawing))

"""Options as CDP parameters and tab settings: pure code that never touches a browser.

`print_params` makes a job's `Page.printToPDF` parameters, `emulation_for` the
`Emulation` (script, media, viewport) its tab needs; `count_pages` and `check_image_size`
hold the output to its limits. Chromium 156 makes tagged PDFs unless told otherwise (2.4
times the bytes of an untagged invoice), so `tagged` is always sent.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

from services.core.model.errors import OutputTooLarge
from services.core.model.options import CSS_PX_PER_INCH, css_px, inches, paper_inches
from services.core.model.outputs import is_image
from services.core.model.pageoptions import Margin, PageOptions
from services.renderer.browser.documents import Html, Source, Url

# Skia writes one `/Type /Page` dictionary per page, and `/Type /Pages` for the tree.
_PAGE_OBJECT = re.compile(rb"/Type\s*/Page[^s]")

EMPTY_TEMPLATE = "<span></span>"
"""Given for the other template when only a header or only a footer is asked for:
an empty string would make Chromium print its default date, title and URL there."""

MAX_PNG_HEIGHT = 32768
"""Tallest image in device pixels: a full-page bitmap of a taller page costs Chromium
gigabytes, and its time grows with the height."""
MAX_PNG_WIDTH = 16384
"""Widest image in device pixels: a page's content can overflow the viewport sideways, and
the full-page capture would follow it (a 30,000 px wide page was captured whole)."""
MAX_PNG_PIXELS = 64 * 2**20
"""Most device pixels in one image: 256 MB of RGBA bitmap before compression."""
MAX_WEBP_SIDE = 16383
"""The WebP format's own limit on each side, in pixels (its header has 14 bits for each)."""


def count_pages(pdf: bytes) -> int:
    """The number of page objects in `pdf`: a regex, cheap enough for every render."""
    return len(_PAGE_OBJECT.findall(pdf))


def print_params(options: PageOptions) -> dict[str, Any]:
    """`PageOptions` as `Page.printToPDF` parameters (sizes in inches).

    A receipt's `paperHeight` is 0 here; it is measured on the loaded page.
    """
    width, height = paper_inches(options)
    params: dict[str, Any] = {
        "landscape": options.landscape,
        "printBackground": options.print_background,
        "scale": options.scale,
        "paperWidth": width,
        "paperHeight": height,
        "preferCSSPageSize": options.prefer_css_page_size,
        "generateTaggedPDF": options.tagged,
        "generateDocumentOutline": options.outline,
        **_margins(options.margin),
        **_header_footer(options),
    }
    if options.page_ranges is not None:
        params["pageRanges"] = options.page_ranges
    return params


def _margins(margin: Margin | None) -> dict[str, float]:
    # Always sent: Page.printToPDF's own default is 0.4 in on every side.
    margin = margin or Margin()
    return {
        "marginTop": inches(margin.top),
        "marginRight": inches(margin.right),
        "marginBottom": inches(margin.bottom),
        "marginLeft": inches(margin.left),
    }


def _header_footer(options: PageOptions) -> dict[str, Any]:
    header, footer = options.header_template, options.footer_template
    if header is None and footer is None:
        return {"displayHeaderFooter": False}
    return {
        "displayHeaderFooter": True,
        "headerTemplate": header if header is not None else EMPTY_TEMPLATE,
        "footerTemplate": footer if footer is not None else EMPTY_TEMPLATE,
    }


@dataclass(frozen=True)
class Viewport:
    """A tab's layout size in CSS px, and its device pixels per CSS px."""

    width: int
    height: int
    scale: float


# Every new tab gets this viewport (what pyppeteer gave its pages, so documents lay out
# as they did).
DEFAULT_VIEWPORT = Viewport(800, 600, 1.0)


@dataclass(frozen=True)
class Emulation:
    """What a tab pretends to be for one job."""

    javascript: bool = True
    media: str = ""  # "": none, so a PDF is laid out on screen and printed in print media
    viewport: Viewport = DEFAULT_VIEWPORT
    features: tuple[tuple[str, str], ...] = ()  # CSS media features: (name, value)

    def media_params(self, media: str | None = None) -> dict[str, Any]:
        """`Emulation.setEmulatedMedia`'s parameters: the media type (`media`, else this
        emulation's) and the features, given every time (a call without them clears them)."""
        features = [{"name": name, "value": value} for name, value in self.features]
        return {"media": self.media if media is None else media, "features": features}


# Anything through which a document can run script. Without a match, "auto" runs the job
# with scripts disabled, so a miss only means a script that does not run, never one that
# runs: and then the tab's realm stays clean for the next job without a navigation.
# HTML names are ASCII case-insensitive: the document's UTF-8 bytes, ASCII-lowered, are
# searched (bytes searches are several times faster than str ones on text that is not
# all Latin-1, and `bytes.lower` lowers exactly what HTML does). Event handlers are found
# by their literal `on` first, the character before it checked by hand: a regex that
# starts with `\b` cannot skip ahead to its literal (docs/benchmarks.md).
_SCRIPT_MARKERS = tuple(
    marker.encode()
    for marker in ("<script", "<iframe", "<frame", "<object", "<embed", "srcdoc", "javascript:")
)
_EVENT_HANDLER = re.compile(rb"on[a-z]+\s*=")
_WORD = frozenset(b"abcdefghijklmnopqrstuvwxyz0123456789_")


def _might_script(text: str) -> bool:
    lowered = text.encode("utf-8", "surrogatepass").lower()
    if any(marker in lowered for marker in _SCRIPT_MARKERS):
        return True
    for found in _EVENT_HANDLER.finditer(lowered):
        start = found.start()
        if start == 0 or lowered[start - 1] not in _WORD:
            return True
    return False


def javascript_for(options: PageOptions, source: Source | None = None) -> bool:
    """Whether the job runs with script: as asked, else (auto) when it may need it."""
    if options.javascript is not None:
        return options.javascript
    if is_image(options.output) or isinstance(source, Url):
        return True  # an image: Chromium may never paint a page with script disabled
    if options.wait_for and options.wait_for.expression:
        return True
    return isinstance(source, Html) and _might_script(source.text)


def needs_frames(options: PageOptions, emulation: Emulation) -> bool:
    """Whether a job with `options`, emulating `emulation` (`emulation_for`), must run on
    a tab that draws display frames. A PDF of a static document is printed from layout
    alone: on a frameless tab (`Chromium.open_tab`) Chromium never rasterizes the page for
    a screen nobody sees, a large share of its CPU per PDF (docs/benchmarks.md).
    Script (animation frames, observers) and screenshots (an image, a diagnosis) get frames
    as a browser would give them. A wait and a table of contents work through DevTools
    calls, which need none."""
    return emulation.javascript or options.diagnostics


def emulation_for(options: PageOptions, source: Source | None = None) -> Emulation:
    """The tab settings a job needs.

    A plain PDF keeps Chromium's defaults (printing switches to print media by itself). A
    screenshot (an image) is laid out in a viewport `width` by `height` CSS px (800 by 600
    by default) at `scale` device pixels per CSS px. A receipt is
    laid out in the media it is printed in, at the printable width (rounded down, so the
    measured height can only be taller than the printed one) and 1 px high, since
    `scrollHeight` is never less than the viewport's height.
    """
    media = "" if options.emulate_media == "print" else options.emulate_media
    viewport = DEFAULT_VIEWPORT
    if is_image(options.output):
        media = options.emulate_media
        width = round(css_px(options.width)) if options.width else DEFAULT_VIEWPORT.width
        height = round(css_px(options.height)) if options.height else DEFAULT_VIEWPORT.height
        viewport = Viewport(width, max(height, 1), options.scale)
    elif options.receipt_width is not None:
        media = options.emulate_media
        viewport = Viewport(math.floor(_printable_px(options)), 1, 1.0)
    features = tuple((f.name, f.value) for f in options.media_features or ())
    return Emulation(javascript_for(options, source), media, viewport, features)


def _printable_px(options: PageOptions) -> float:
    """The CSS width Chromium lays a page out at: paper minus margins, divided by scale."""
    params = print_params(options)
    printable = params["paperWidth"] - params["marginLeft"] - params["marginRight"]
    return float(printable * CSS_PX_PER_INCH / options.scale)


def check_image_size(width: float, height: float, output: str = "png") -> None:
    """`OutputTooLarge` for a capture of `width` by `height` device pixels over the limits
    (a WebP's own too), before Chromium paints a single one of them."""
    kind = output.upper()
    tallest = min(MAX_PNG_HEIGHT, MAX_WEBP_SIDE) if output == "webp" else MAX_PNG_HEIGHT
    widest = min(MAX_PNG_WIDTH, MAX_WEBP_SIDE) if output == "webp" else MAX_PNG_WIDTH
    if height > tallest:
        raise OutputTooLarge(f"page is {height:.0f} px tall, over the {kind} limit of {tallest} px")
    if width > widest:
        raise OutputTooLarge(f"page is {width:.0f} px wide, over the {kind} limit of {widest} px")
    if width * height > MAX_PNG_PIXELS:
        raise OutputTooLarge(
            f"page is {width:.0f} by {height:.0f} px, over the {kind} limit of "
            f"{MAX_PNG_PIXELS // 2**20} megapixels"
        )

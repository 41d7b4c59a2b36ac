"""How a page is printed: the print options every job and batch carries.

Validated at the gateway (`services/core/options.check_options` holds every rule beyond
the types; `gateway/requests.py` its strict request forms), carried by the events
(`events.JobSubmitted`, `events.BatchSubmitted`), used by the renderer.
"""

from __future__ import annotations

import msgspec


class Margin(msgspec.Struct, omit_defaults=True):
    """Page margins as CSS lengths (`"10mm"`, `"0.5in"`, `"12px"`)."""

    top: str = "0"
    right: str = "0"
    bottom: str = "0"
    left: str = "0"


class WaitFor(msgspec.Struct, omit_defaults=True):
    """What to wait for after `load` before printing: exactly one of the three.

    `timeout` is in seconds; None means as long as the render time limit allows, and a
    larger value is cut to it.
    """

    selector: str | None = None
    expression: str | None = None
    network_idle: bool = False
    timeout: float | None = None


class Metadata(msgspec.Struct, omit_defaults=True):
    """The PDF's document information (`/Title`, `/Author`, `/Subject`, `/Keywords`)."""

    title: str | None = None
    author: str | None = None
    subject: str | None = None
    keywords: str | None = None


class FacturX(msgspec.Struct, omit_defaults=True):
    """`options.facturx`: the invoice's Cross Industry Invoice XML, embedded as
    `factur-x.xml` in a PDF/A-3b, and the Factur-X profile it follows."""

    xml: str
    profile: str = "EN 16931"


class Attachment(msgspec.Struct):
    """A file embedded in the PDF: its name and its content as a base64 data URL (whose
    media type becomes the file's MIME type)."""

    name: str
    content: str


class Encrypt(msgspec.Struct, omit_defaults=True):
    """`options.encrypt`: AES-256 with an owner password (full rights), an optional user
    password (needed to open the file; empty: it opens without one) and what the user
    may do (`finishing/encrypt.PERMISSIONS`; none by default)."""

    owner_password: str
    user_password: str = ""
    permissions: list[str] = msgspec.field(default_factory=list)


class Mark(msgspec.Struct, omit_defaults=True):
    """A `watermark` (under the content) or `stamp` (over it): exactly one of `text` and
    `image` (a PNG or JPEG data URL); what is left out takes the kind's default
    (`renderer/finishing/marks.STYLES`). `rotation` is in degrees, counterclockwise;
    `size` is the mark's width as a fraction of the page's, before rotation; `pages` is a
    page range such as `"1-3, 5"` (default: every page)."""

    text: str | None = None
    image: str | None = None
    opacity: float | None = None
    rotation: float | None = None
    position: str | None = None
    size: float | None = None
    color: str | None = None
    pages: str | None = None


class Sign(msgspec.Struct, omit_defaults=True):
    """`options.sign`: a PAdES signature with the renderer's certificate and key (never
    the request's). Visible: its appearance in `box` ([x1, y1, x2, y2], points from the
    page's lower left corner) on `page` (1-based); invisible: no box, no page."""

    visible: bool = False
    page: int | None = None
    box: list[float] | None = None
    reason: str | None = None
    location: str | None = None


class PageOptions(msgspec.Struct, omit_defaults=True):
    """How the page is printed; validated at the gateway, used by the renderer.

    Inside events these structs ignore fields they do not know, so a renderer older than
    the gateway still renders a job that uses a newer option (without it); the gateway
    refuses unknown fields in requests with its strict subclasses (`gateway/requests.py`).

    `services/core/options.check_options` holds every rule beyond the types (ranges,
    units, known values, combinations); the README's "Print options" table documents them.
    """

    format: str = "A4"
    landscape: bool = False
    margin: Margin | None = None
    print_background: bool = True
    scale: float = 1.0
    header_template: str | None = None
    footer_template: str | None = None
    width: str | None = None
    height: str | None = None
    prefer_css_page_size: bool = False
    page_ranges: str | None = None
    wait_for: WaitFor | None = None
    emulate_media: str = "print"
    metadata: Metadata | None = None
    tagged: bool = True
    output: str = "pdf"
    receipt_width: int | None = None
    javascript: bool | None = None  # None: on only if the document can run script
    selector: str | None = None  # png only: capture the box of the element this matches
    diagnostics: bool = False  # keep a diagnosis of a successful attempt too
    pdfa: str | None = None  # "2b" or "3b": a PDF/A file (renderer/finishing/pdfa.py)
    facturx: FacturX | None = None
    attachments: tuple[Attachment, ...] | None = None
    encrypt: Encrypt | None = None
    outline: bool = False  # bookmarks from h1-h6, written by Chromium (needs `tagged`)
    toc: bool = False  # fill <nav data-toc> with headings and pages (renderer/browser/toc.py)
    watermark: Mark | None = None
    stamp: Mark | None = None
    sign: Sign | None = None  # last: renderer/finishing/sign.py

"""How a page is printed: the print options every job and batch carries.

Validated at the gateway (`services/core/model/options.check_options` holds every rule beyond
the types; `gateway/requests.py` its strict request forms), carried by the events
(`events.JobSubmitted`, `events.BatchSubmitted`), used by the renderer.
"""

from __future__ import annotations

import msgspec


class Margin(msgspec.Struct, omit_defaults=True):
    """Page margins as CSS lengths (`"10mm"`, `"0.5in"`, `"12px"`)."""

    top: str = "0"
    """The top margin, a CSS length (`15mm`, `0.5in`, `12px`; a bare number is px); a header is
    drawn inside it."""
    right: str = "0"
    """The right margin, a CSS length."""
    bottom: str = "0"
    """The bottom margin, a CSS length; a footer is drawn inside it."""
    left: str = "0"
    """The left margin, a CSS length."""


class WaitFor(msgspec.Struct, omit_defaults=True):
    """What to wait for after `load` before printing: exactly one of the three.

    `timeout` is in seconds; None means as long as the render time limit allows, and a
    larger value is cut to it.
    """

    selector: str | None = None
    """Print once an element matches this CSS selector."""
    expression: str | None = None
    """Print once this JavaScript expression is truthy (an expression that throws counts as not yet
    true)."""
    network_idle: bool = False
    """Print once the page has made no request for 0.5 s."""
    timeout: float | None = None
    """Seconds to wait at most (> 0); null: as long as the render time limit allows, and a larger
    value is cut to it."""


class Metadata(msgspec.Struct, omit_defaults=True):
    """The PDF's document information (`/Title`, `/Author`, `/Subject`, `/Keywords`)."""

    title: str | None = None
    """The PDF's `/Title`; without it, the page's `<title>`."""
    author: str | None = None
    """The PDF's `/Author`."""
    subject: str | None = None
    """The PDF's `/Subject`."""
    keywords: str | None = None
    """The PDF's `/Keywords`, as one string."""


class FacturX(msgspec.Struct, omit_defaults=True):
    """`options.facturx`: the invoice's Cross Industry Invoice XML, embedded as
    `factur-x.xml` in a PDF/A-3b, and the Factur-X profile it follows."""

    xml: str
    """The Cross Industry Invoice XML: well-formed, no DOCTYPE, root `rsm:CrossIndustryInvoice`."""
    profile: str = "EN 16931"
    """The Factur-X profile the XML follows."""


class Attachment(msgspec.Struct):
    """A file embedded in the PDF: its name and its content as a base64 data URL (whose
    media type becomes the file's MIME type)."""

    name: str
    """The file's name in the PDF: no path, drive or device name, at most 255 bytes of UTF-8, unique
    ignoring case."""
    content: str
    """The file as a base64 data URL (`data:text/csv;base64,...`), at most 10 MiB decoded; its media
    type becomes the file's MIME type."""


class Encrypt(msgspec.Struct, omit_defaults=True):
    """`options.encrypt`: AES-256 with an owner password (full rights), an optional user
    password (needed to open the file; empty: it opens without one) and what the user
    may do (`finishing/encrypt.PERMISSIONS`; none by default)."""

    owner_password: str
    """The owner password (8 or more characters): every right."""
    user_password: str = ""
    """The password needed to open the file (8 or more characters, not the owner's); empty: it opens
    without one."""
    permissions: list[str] = msgspec.field(default_factory=list)
    """What a user who opens the file with the user password may do (none by default; reading for
    accessibility is always allowed)."""


class Mark(msgspec.Struct, omit_defaults=True):
    """A `watermark` (under the content) or `stamp` (over it): exactly one of `text` and
    `image` (a PNG or JPEG data URL); what is left out takes the kind's default
    (`renderer/finishing/marks.STYLES`). `rotation` is in degrees, counterclockwise;
    `size` is the mark's width as a fraction of the page's, before rotation; `pages` is a
    page range such as `"1-3, 5"` (default: every page)."""

    text: str | None = None
    """The mark's text, 1 to 200 characters (any script); give it or `image`."""
    image: str | None = None
    """The mark as a PNG or JPEG `data:` URL; give it or `text`."""
    opacity: float | None = None
    """From more than 0 to 1 (watermark 0.2, stamp 1 by default)."""
    rotation: float | None = None
    """Degrees counterclockwise, -360 to 360 (watermark 45, stamp 0 by default)."""
    position: str | None = None
    """Where on the page (watermark `center`, stamp `top-right` by default)."""
    size: float | None = None
    """The mark's width as a fraction of the page's, 0.05 to 1, before rotation."""
    color: str | None = None
    """The text's colour: `#rgb`, `#rrggbb` or a CSS colour name (text only)."""
    pages: str | None = None
    """The pages to mark, as `page_ranges` gives them (`1-3, 5`); every page by default."""


class Sign(msgspec.Struct, omit_defaults=True):
    """`options.sign`: a PAdES signature with the renderer's certificate and key (never
    the request's). Visible: its appearance in `box` ([x1, y1, x2, y2], points from the
    page's lower left corner) on `page` (1-based); invisible: no box, no page."""

    visible: bool = False
    """Draw the signature's appearance ("Digitally signed by ...") in `box` on `page`; invisible by
    default."""
    page: int | None = None
    """The page of a visible signature, from 1 (default 1)."""
    box: list[float] | None = None
    """A visible signature's box `[x1, y1, x2, y2]`, in points from the page's lower left corner, at
    least 10 wide and high."""
    reason: str | None = None
    """The signing reason written in the signature, 1 to 200 characters."""
    location: str | None = None
    """The signing location written in the signature, 1 to 200 characters."""


class MediaFeature(msgspec.Struct):
    """A CSS media feature the page sees as given (`prefers-color-scheme: dark`)."""

    name: str
    """The feature's name, one of `options.MEDIA_FEATURES` (`prefers-color-scheme`)."""
    value: str
    """Its value, one the feature takes (`dark`)."""


class PageOptions(msgspec.Struct, omit_defaults=True):
    """How the page is printed; validated at the gateway, used by the renderer.

    Inside events these structs ignore fields they do not know, so a renderer older than
    the gateway still renders a job that uses a newer option (without it); the gateway
    refuses unknown fields in requests with its strict subclasses (`gateway/requests.py`).

    `services/core/model/options.check_options` holds every rule beyond the types (ranges,
    units, known values, combinations); docs/print-options.md's table documents them.
    """

    format: str = "A4"
    """The paper size (ignored with `width` and `height`)."""
    landscape: bool = False
    """Turn the paper."""
    margin: Margin | None = None
    """The page margins; all 0 by default."""
    print_background: bool = True
    """Print background colours and images."""
    scale: float = 1.0
    """PDF: zoom of the content, 0.1 to 2. An image: device pixels per CSS px (the device scale
    factor), 1 to 3."""
    header_template: str | None = None
    """HTML printed at the top of every page; `<span class="pageNumber">`, `totalPages`, `date`,
    `title` and `url` are filled in."""
    footer_template: str | None = None
    """HTML printed at the bottom of every page, like `header_template`."""
    width: str | None = None
    """A custom paper width, a CSS length from 10mm to 200in (with `height`); for an image, the
    viewport width (1 to 4096 px, default 800px)."""
    height: str | None = None
    """A custom paper height, a CSS length (with `width`); for an image, the viewport height (1 to
    4096 px), and the image is then that viewport rather than the whole page."""
    prefer_css_page_size: bool = False
    """A CSS `@page { size }` wins over `format`, `width` and `height`."""
    page_ranges: str | None = None
    """Pages to print, from 1: `1-3, 5, 8-`; all by default."""
    wait_for: WaitFor | None = None
    """What to wait for after `load` before printing: exactly one of `selector`, `expression` and
    `network_idle`."""
    emulate_media: str = "print"
    """Which CSS media rules apply."""
    metadata: Metadata | None = None
    """The PDF's document information."""
    tagged: bool = True
    """A tagged (accessible) PDF; `false` gives smaller files, faster."""
    output: str = "pdf"
    """A PDF, or a screenshot of the whole page: `png`, `jpeg` or `webp`."""
    quality: int | None = None
    """JPEG or WebP only: the compression quality, 0 to 100 (Chromium's default without it)."""
    omit_background: bool = False
    """PNG or WebP only: a transparent background where the page paints none (the default white
    is left out)."""
    receipt_width: int | None = None
    """A thermal receipt this many mm wide: one page exactly as tall as the content."""
    javascript: bool | None = None  # None: on only if the document can run script
    """Run the document's scripts (`true`), none (`false`), or, with null, only when the document
    has a way to run one or the job waits for an expression."""
    selector: str | None = None  # images only: capture the box of the element this matches
    """An image only: capture just the box of the first element this CSS selector matches."""
    diagnostics: bool = False  # keep a diagnosis of a successful attempt too
    """Keep a diagnosis (`GET /jobs/{id}/diagnostics`) of a successful attempt too; a failed attempt
    always keeps one."""
    pdfa: str | None = None  # "2b" or "3b": a PDF/A file (renderer/finishing/pdfa.py)
    """A PDF/A file of this part and level (`3b` with `facturx` or `attachments`)."""
    facturx: FacturX | None = None
    """An e-invoice: the CII XML embedded as `factur-x.xml` in a PDF/A-3b."""
    attachments: tuple[Attachment, ...] | None = None
    """Files embedded in the PDF, at most 20."""
    encrypt: Encrypt | None = None
    """AES-256 encryption with an owner and an optional user password."""
    outline: bool = False  # bookmarks from h1-h6, written by Chromium (needs `tagged`)
    """Bookmarks from the document's headings `h1` to `h6` (needs `tagged`)."""
    toc: bool = False  # fill <nav data-toc> with headings and pages (renderer/browser/toc.py)
    """Fill the document's first `<nav data-toc>` with its headings and the pages they were printed
    on (PDF only, needs `tagged`)."""
    watermark: Mark | None = None
    """A mark drawn under the content of each page."""
    stamp: Mark | None = None
    """A mark drawn over the content of each page."""
    user_agent: str | None = None
    """The `User-Agent` the page's requests send (and `navigator.userAgent`), instead of
    Chromium's."""
    fail_on_page_errors: bool = False
    """Fail the job (`source`) when the page's script throws an uncaught exception, instead of
    keeping it in the diagnosis only."""
    fail_on_status: list[int] | None = None
    """Statuses of the page's own document that fail the job (a `url` source's final answer, after
    redirects); `X99` stands for every status from `X00` to `X99` (`499`: any 4xx); null: every
    4xx and 5xx (the default). A status not listed is printed as the page it is (`[]`: a 404 page is
    printed)."""
    fail_on_resource_status: list[int] | None = None
    """Fail the job (`source`, naming the resource and its status) when a request of the page
    other than its document was answered with one of these HTTP statuses; `X99` stands for every
    status from `X00` to `X99` (`499`: any 4xx)."""
    ignore_resource_status_hosts: list[str] | None = None
    """Hosts whose resources `fail_on_resource_status` does not check: each host name and its
    subdomains (`cdn.example` covers `img.cdn.example`)."""
    media_features: tuple[MediaFeature, ...] | None = None
    """CSS media features the page sees as given (`prefers-color-scheme: dark`), in screenshots
    and print alike."""
    sign: Sign | None = None  # last: renderer/finishing/sign.py
    """A PAdES signature with the renderer's certificate (never the request's)."""

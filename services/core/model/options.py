"""Validation of print options beyond their types (ranges, units, known values), and units.

Shared by the gateway (a 400 naming the option) and the renderer (which converts lengths
with `inches`). Every rule raises `RequestError` whose `field` is the option's dotted path
(`options.page_ranges`, `options.wait_for.timeout`); docs/print-options.md's table
states the same rules for clients.

Size: one check per print option, with the units and helpers it needs beside it (lengths,
page ranges, status patterns, ignored hosts); a split by option would scatter the shared
length and error rules.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable

from services.core.model.errors import RequestError
from services.core.model.finishingoptions import check_finishing
from services.core.model.numbers import bounded_int
from services.core.model.outputs import WITH_ALPHA, WITH_QUALITY, Output, is_image
from services.core.model.pageoptions import Mark, PageOptions
from services.core.model.signoptions import check_sign

MM_PER_INCH = 25.4
CSS_PX_PER_INCH = 96.0  # CSS fixes 1in = 96px, and Chromium prints at that ratio

PAPER_SIZES: dict[str, tuple[float, float]] = {
    "A3": (297 / MM_PER_INCH, 420 / MM_PER_INCH),
    "A4": (210 / MM_PER_INCH, 297 / MM_PER_INCH),
    "A5": (148 / MM_PER_INCH, 210 / MM_PER_INCH),
    "Letter": (8.5, 11.0),
    "Legal": (8.5, 14.0),
    "Tabloid": (11.0, 17.0),
}
"""Portrait width and height of each `format`, in inches."""

PAPER_FORMATS = set(PAPER_SIZES)
RECEIPT_WIDTHS = (58, 80, 90, 120)
"""Thermal paper widths in mm that `receipt_width` accepts."""

MEDIA_TYPES = ("print", "screen")
OUTPUTS = tuple(str(output) for output in Output)

MAX_PAPER_INCHES = 200.0
"""The largest page side PDF readers accept (14,400 pt, Acrobat's limit)."""
MIN_PAPER_INCHES = 10 / MM_PER_INCH
MAX_PNG_WIDTH = 4096
"""Widest (and tallest) image viewport, CSS px: wide enough for any screen layout, small enough
to bound memory."""

# ASCII digits only ([0-9], never \d): Python's \d and float() take other scripts' too.
_LENGTH = re.compile(r"([0-9]+(?:\.[0-9]+)?)(px|in|cm|mm)?")
_PER_INCH = {"in": 1.0, "cm": 2.54, "mm": MM_PER_INCH, "px": CSS_PX_PER_INCH}
_PAGE_RANGE = re.compile(r"([0-9]*)[ \t]*-[ \t]*([0-9]*)|([0-9]+)")
MAX_PAGE_NUMBER = 2**31 - 1
"""Largest page number a page range may name: Chromium reads them as 32-bit integers."""

# Options that only mean something in a PDF: with an image output a value other than the
# default is refused rather than silently ignored.
_PDF_ONLY = (
    "format",
    "landscape",
    "margin",
    "print_background",
    "prefer_css_page_size",
    "page_ranges",
    "header_template",
    "footer_template",
    "metadata",
    "tagged",
    "receipt_width",
    "outline",
    "toc",
    "watermark",
    "stamp",
    "sign",
)
# `receipt_width` decides the paper itself, so these cannot apply alongside it.
_NOT_WITH_RECEIPT = ("width", "height", "landscape", "prefer_css_page_size")
_DEFAULTS = PageOptions()
_SIDES = ("top", "right", "bottom", "left")


def inches(length: str) -> float:
    """A CSS length (`"10mm"`, `"0.5in"`, `"2.1cm"`, `"12px"`, bare = px) in inches.

    Raises `ValueError` for anything else; `check_options` has refused those already.
    """
    match = _LENGTH.fullmatch(length.strip(" \t"))
    if match is None:
        raise ValueError(f"not a length: {length!r}")
    return float(match.group(1)) / _PER_INCH[match.group(2) or "px"]


def css_px(length: str) -> float:
    """A CSS length in CSS pixels (1in = 96px)."""
    return inches(length) * CSS_PX_PER_INCH


def check_options(options: PageOptions) -> None:
    """Raise `RequestError` naming the first option that breaks a rule; else return None."""
    for check in _CHECKS:
        check(options)


def _fail(name: str, rule: str) -> RequestError:
    return RequestError(f"options.{name} {rule}", field=f"options.{name}")


def _one_of(name: str, value: object, allowed: Iterable[object]) -> None:
    allowed = tuple(allowed)
    if value not in allowed:
        raise _fail(name, "must be one of " + ", ".join(str(a) for a in allowed))


def _check_values(options: PageOptions) -> None:
    _one_of("format", options.format, sorted(PAPER_FORMATS))
    _one_of("emulate_media", options.emulate_media, MEDIA_TYPES)
    _one_of("output", options.output, OUTPUTS)
    if options.receipt_width is not None:
        _one_of("receipt_width", options.receipt_width, RECEIPT_WIDTHS)


def _check_scale(options: PageOptions) -> None:
    # In a PDF `scale` zooms the content (Chromium allows 0.1 to 2); in an image it is the
    # device pixel ratio, where below 1 loses detail and above 3 only costs memory.
    low, high = (1.0, 3.0) if is_image(options.output) else (0.1, 2.0)
    if not low <= options.scale <= high:
        raise _fail("scale", f"must be between {low:g} and {high:g} for {options.output} output")


def _length(name: str, value: str) -> float:
    """`value` in inches, or `RequestError` naming `name` if it is not a CSS length."""
    try:
        return inches(value)
    except ValueError:
        raise _fail(name, "must be a length such as 10mm, 0.5in, 2cm or 12px") from None


def _check_margin(options: PageOptions) -> None:
    if options.margin is None:
        return
    sides = {s: _length(f"margin.{s}", getattr(options.margin, s)) for s in _SIDES}
    width, height = paper_inches(options)
    if sides["left"] + sides["right"] >= width:
        raise _fail("margin", "left and right together must be narrower than the paper")
    if height and sides["top"] + sides["bottom"] >= height:
        raise _fail("margin", "top and bottom together must be shorter than the paper")


def paper_inches(options: PageOptions) -> tuple[float, float]:
    """Paper width and height in inches (height 0: a receipt, as tall as its content)."""
    if options.receipt_width is not None:
        return options.receipt_width / MM_PER_INCH, 0.0
    if options.width is not None and options.height is not None:
        return inches(options.width), inches(options.height)
    return PAPER_SIZES.get(options.format, PAPER_SIZES["A4"])


def _check_size(options: PageOptions) -> None:
    if is_image(options.output):
        _check_viewport(options)
        return
    for name in ("width", "height"):
        value = getattr(options, name)
        if value is not None and not MIN_PAPER_INCHES <= _length(name, value) <= MAX_PAPER_INCHES:
            raise _fail(name, "must be between 10mm and 200in")
    if (options.width is None) != (options.height is None):
        missing = "height" if options.height is None else "width"
        raise _fail(missing, "is needed too: width and height replace format together")


def _check_viewport(options: PageOptions) -> None:
    """An image's `width` and `height` are its viewport's, each 1 to `MAX_PNG_WIDTH` px."""
    for name in ("width", "height"):
        value = getattr(options, name)
        if value is None:
            continue
        if not 1 <= _length(name, value) * CSS_PX_PER_INCH <= MAX_PNG_WIDTH:
            raise _fail(
                name, f"must be between 1px and {MAX_PNG_WIDTH}px for {options.output} output"
            )


def _check_image(options: PageOptions) -> None:
    if not is_image(options.output):
        return
    for name in _PDF_ONLY:
        if getattr(options, name) != getattr(_DEFAULTS, name):
            raise _fail(name, f"does not apply to {options.output} output")
    if options.javascript is False:
        # Chromium 156 sometimes never paints a page whose script is disabled, and the
        # screenshot then waits forever (seen in about 1 of 6 renders).
        raise _fail("javascript", f"cannot be false for {options.output} output")


def _check_encoding(options: PageOptions) -> None:
    """`quality` for the lossy images, 0 to 100; `omit_background` for those with alpha."""
    if options.quality is not None:
        if options.output not in WITH_QUALITY:
            raise _fail("quality", f"applies to jpeg and webp output, not {options.output}")
        if not 0 <= options.quality <= 100:
            raise _fail("quality", "must be between 0 and 100")
    if options.omit_background and options.output not in WITH_ALPHA:
        raise _fail(
            "omit_background",
            f"applies to png and webp output (with an alpha channel), not {options.output}",
        )


MAX_SELECTOR = 1000
"""Longest `selector`, in characters: far more than any element needs."""


def _check_selector(options: PageOptions) -> None:
    # Whether Chromium can parse it is only known in the page: an invalid or unmatched
    # selector fails the job there (`validation`, field options.selector).
    if options.selector is None:
        return
    if not is_image(options.output):
        raise _fail("selector", "applies to image output (png, jpeg, webp) only")
    if not options.selector.strip():
        raise _fail("selector", "must not be empty")
    if len(options.selector) > MAX_SELECTOR:
        raise _fail("selector", f"must be at most {MAX_SELECTOR} characters")


def _check_receipt(options: PageOptions) -> None:
    if options.receipt_width is None:
        return
    for name in _NOT_WITH_RECEIPT:
        if getattr(options, name) != getattr(_DEFAULTS, name):
            raise _fail(name, "does not apply to receipts (receipt_width sets the paper)")


def _check_page_ranges(options: PageOptions) -> None:
    """Chromium's syntax: `1-3, 5, 8-` (one-based, inclusive; open ends allowed)."""
    if options.page_ranges is None:
        return
    if not is_page_ranges(options.page_ranges):
        raise _fail(
            "page_ranges", "must be pages and ranges such as '1-3, 5, 8-' (from 1, start <= end)"
        )


def _page_range(text: str) -> tuple[int, int | None] | None:
    """The first and last page (None: to the end) of one part of a page range such as
    `3`, `2-5`, `-4` or `7-`; None if it is not one. Page numbers are ASCII digits from 1
    to `MAX_PAGE_NUMBER`, parsed with a bound on their length."""
    match = _PAGE_RANGE.fullmatch(text.strip(" \t"))
    if match is None:
        return None
    start, end, single = match.groups()
    if single is not None:
        page = bounded_int(single, 1, MAX_PAGE_NUMBER)
        return None if page is None else (page, page)
    if not start and not end:
        return None
    first = bounded_int(start, 1, MAX_PAGE_NUMBER) if start else 1  # "-3" is 1-3
    last = bounded_int(end, 1, MAX_PAGE_NUMBER) if end else None  # "3-" runs to the end
    if first is None or (end and (last is None or last < first)):
        return None
    return first, last


def is_page_ranges(text: str) -> bool:
    """Whether `text` is a comma-separated list of page ranges (`_page_range`)."""
    return all(_page_range(part) is not None for part in text.split(","))


def page_intervals(ranges: str) -> list[tuple[int, int | None]]:
    """The first and last page (None: to the end) of each part of `ranges`, in the order
    given; a part that is no page range is left out (the gateway refused any such:
    `is_page_ranges`)."""
    return [span for part in ranges.split(",") if (span := _page_range(part)) is not None]


def page_numbers(ranges: str | None, count: int) -> list[int]:
    """The pages (from 1, ascending, each once) of a `count`-page document that `ranges`
    (checked by `is_page_ranges`) names; None names them all, pages past the end none."""
    if ranges is None:
        return list(range(1, count + 1))
    chosen: set[int] = set()
    for first, last in page_intervals(ranges):
        chosen.update(range(first, min(count if last is None else last, count) + 1))
    return sorted(chosen)


def _check_wait_for(options: PageOptions) -> None:
    wait = options.wait_for
    if wait is None:
        return
    given = [name for name in ("selector", "expression") if getattr(wait, name) is not None]
    if wait.network_idle:
        given.append("network_idle")
    if len(given) != 1:
        raise _fail("wait_for", "needs exactly one of selector, expression or network_idle")
    for name in given[:1]:
        if name != "network_idle" and not str(getattr(wait, name)).strip():
            raise _fail(f"wait_for.{name}", "must not be empty")
    if wait.timeout is not None and not (math.isfinite(wait.timeout) and wait.timeout > 0):
        raise _fail("wait_for.timeout", "must be a positive number of seconds")
    if wait.expression is not None and options.javascript is False:
        raise _fail("wait_for.expression", "needs javascript (options.javascript is false)")


MAX_USER_AGENT = 500
"""Longest `user_agent`, in characters: real browsers' are under 300."""


def _check_user_agent(options: PageOptions) -> None:
    agent = options.user_agent
    if agent is None:
        return
    if not (0 < len(agent) <= MAX_USER_AGENT and agent.isascii() and agent.isprintable()):
        raise _fail("user_agent", f"must be 1 to {MAX_USER_AGENT} printable ASCII characters")


def status_matches(status: int, listed: Iterable[int]) -> bool:
    """Whether HTTP `status` is one of `listed`, where `X99` stands for every status from
    `X00` to `X99` (Gotenberg's convention: `499` is any 4xx)."""
    return any(
        status == code or (code % 100 == 99 and code // 100 == status // 100) for code in listed
    )


MAX_STATUS_CODES = 100
"""Longest `fail_on_status` or `fail_on_resource_status` list (there are 500 statuses, and `X99`
spans a class)."""


def _check_statuses(options: PageOptions) -> None:
    for name in ("fail_on_status", "fail_on_resource_status"):
        codes = getattr(options, name)
        if codes is None:
            continue
        if len(codes) > MAX_STATUS_CODES:
            raise _fail(name, f"takes at most {MAX_STATUS_CODES} statuses")
        for code in codes:
            if isinstance(code, bool) or not 100 <= code <= 599:
                raise _fail(
                    name, f"must list HTTP statuses from 100 to 599 (499: any 4xx), not {code!r}"
                )


_HOST = re.compile(
    r"(?=.{1,253}$)[a-z0-9](?:[a-z0-9-]*[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9-]*[a-z0-9])?)*"
)


def _check_ignored_hosts(options: PageOptions) -> None:
    hosts = options.ignore_resource_status_hosts
    if hosts is None:
        return
    if options.fail_on_resource_status is None:
        raise _fail("ignore_resource_status_hosts", "needs fail_on_resource_status")
    if len(hosts) > MAX_STATUS_CODES:
        raise _fail("ignore_resource_status_hosts", f"takes at most {MAX_STATUS_CODES} hosts")
    for host in hosts:
        if not _HOST.fullmatch(host):
            raise _fail(
                "ignore_resource_status_hosts",
                f"must list lower-case host names (cdn.example), not {host[:60]!r}",
            )


def host_is_ignored(host: str, ignored: Iterable[str]) -> bool:
    """Whether `host` is one of `ignored` or a subdomain of one."""
    return any(host == name or host.endswith("." + name) for name in ignored)


MEDIA_FEATURES: dict[str, tuple[str, ...]] = {
    "prefers-color-scheme": ("light", "dark"),
    "prefers-reduced-motion": ("no-preference", "reduce"),
    "prefers-reduced-transparency": ("no-preference", "reduce"),
    "prefers-reduced-data": ("no-preference", "reduce"),
    "prefers-contrast": ("no-preference", "more", "less", "custom"),
    "forced-colors": ("none", "active"),
    "color-gamut": ("srgb", "p3", "rec2020"),
}
"""The CSS media features Chromium's `Emulation.setEmulatedMedia` emulates, with their
values: any other name or value is refused rather than silently ignored by Chromium."""


def _check_media_features(options: PageOptions) -> None:
    features = options.media_features
    if features is None:
        return
    seen: set[str] = set()
    for index, feature in enumerate(features):
        where = f"media_features[{index}]"
        _one_of(f"{where}.name", feature.name, MEDIA_FEATURES)
        _one_of(f"{where}.value", feature.value, MEDIA_FEATURES[feature.name])
        if feature.name in seen:
            raise _fail(f"{where}.name", f"gives {feature.name} twice")
        seen.add(feature.name)


def _check_outline(options: PageOptions) -> None:
    # Chromium builds the outline from the tagged structure: untagged, it writes none.
    if options.outline and not options.tagged:
        raise _fail("outline", "needs tagged (Chromium reads headings from the tags)")


def _check_toc(options: PageOptions) -> None:
    # Like the outline, a table of contents is navigation for every reader: in a tagged
    # file its entries are Link elements assistive technology can follow.
    if options.toc and not options.tagged:
        raise _fail("toc", "needs tagged (its entries are links in the tagged structure)")
    # Its numbers are the document's pages; a file of some of them would contradict them.
    if options.toc and options.page_ranges is not None:
        raise _fail("toc", "does not apply with page_ranges (its numbers count every page)")


MARK_POSITIONS = (
    "center",
    "top",
    "bottom",
    "left",
    "right",
    "top-left",
    "top-right",
    "bottom-left",
    "bottom-right",
)
"""Where a watermark or stamp may sit on its page."""
MAX_MARK_TEXT = 200
"""Longest mark text, in characters: a line of it at 72 px stays within a PDF page side."""
# Matched whole (`fullmatch`): `$` alone would let a newline at the end through.
_IMAGE_URL = re.compile(r"data:image/(png|jpeg);base64,[A-Za-z0-9+/]+={0,2}")
_COLOR = re.compile(r"#[0-9a-fA-F]{3}(?:[0-9a-fA-F]{3})?|[a-zA-Z]{3,20}")


def _check_marks(options: PageOptions) -> None:
    for name in ("watermark", "stamp"):
        mark = getattr(options, name)
        if mark is not None:
            _check_mark_source(name, mark)
            _check_mark_style(name, mark)


def _check_mark_source(name: str, mark: Mark) -> None:
    if (mark.text is None) == (mark.image is None):
        raise _fail(name, "needs exactly one of text or image")
    if mark.text is not None and not 0 < len(mark.text.strip()) <= MAX_MARK_TEXT:
        raise _fail(f"{name}.text", f"must be 1 to {MAX_MARK_TEXT} characters")
    if mark.image is not None and not _IMAGE_URL.fullmatch(mark.image):
        raise _fail(
            f"{name}.image", "must be a data URL of a PNG or JPEG (data:image/png;base64,…)"
        )


def _check_mark_style(name: str, mark: Mark) -> None:
    if mark.opacity is not None and not 0 < mark.opacity <= 1:
        raise _fail(f"{name}.opacity", "must be more than 0 and at most 1")
    if mark.rotation is not None and not -360 <= mark.rotation <= 360:
        raise _fail(f"{name}.rotation", "must be degrees between -360 and 360")
    if mark.size is not None and not 0.05 <= mark.size <= 1:
        raise _fail(f"{name}.size", "must be between 0.05 and 1 (a fraction of the page width)")
    if mark.position is not None:
        _one_of(f"{name}.position", mark.position, MARK_POSITIONS)
    if mark.color is not None and not _COLOR.fullmatch(mark.color):
        raise _fail(f"{name}.color", "must be #rgb, #rrggbb or a CSS colour name")
    if mark.pages is not None and not is_page_ranges(mark.pages):
        raise _fail(f"{name}.pages", "must be pages and ranges such as '1-3, 5, 8-'")


# What makes Chromium fetch a stylesheet or a font for a header or footer template, which
# it cannot do there: the tab crashes as the first page is printed (Chromium 156, each
# seen to). An image or a background by URL merely stays out, and a `data:` URL works.
# Web fonts are not used there at all, not even from a `data:` URL (Chromium 156 prints
# the header in a fallback font; the same font loaded by the page does not help):
# `@font-face` is refused rather than silently lost.
_FONT_FACE = re.compile(r"@font-face\b", re.IGNORECASE)
# A refused URL is any but `data:`; or, where the job's files may yet be written in
# (`renderer/jobfiles.JobFiles.inlined`), one with a scheme or a host. `@import` always.
_IMPORT = r"""@import\s*(?:url\(\s*["']?|["'])\s*(?!data:)[^\s"')]"""
_LINKED = r"""<link\b[^>]*\bhref\s*=\s*["']?\s*"""
_ANY_URL = r"""(?!data:)[^\s"')>]"""
_ELSEWHERE = r"""(?!data:)(?:[a-z][a-z0-9+.-]*:|//|\\)"""
_TEMPLATE_FETCHES = re.compile(f"{_IMPORT}|{_LINKED}{_ANY_URL}", re.IGNORECASE)
_TEMPLATE_FETCHES_ELSEWHERE = re.compile(f"{_IMPORT}|{_LINKED}{_ELSEWHERE}", re.IGNORECASE)


def check_header_footer(options: PageOptions, files: bool = True) -> None:
    """`header_template` and `footer_template` declare no `@font-face`, load no
    stylesheet by URL, and `@import` nothing; with `files`, a relative name may be one of
    the job's files (written in by the renderer, which checks again, `files` False, once
    it has)."""
    fetches = _TEMPLATE_FETCHES_ELSEWHERE if files else _TEMPLATE_FETCHES
    for name in ("header_template", "footer_template"):
        template = getattr(options, name)
        if template is not None and _FONT_FACE.search(template):
            raise _fail(
                name,
                "cannot use @font-face: Chromium prints a header or footer without web "
                "fonts (not even data: URLs); name a font installed on the renderer "
                "(PRESSROOM_FONTS_DIR) by its family",
            )
        if template is not None and (found := fetches.search(template)):
            raise _fail(
                name,
                f"cannot load a stylesheet by URL ({found.group(0)[:60]!r}): a header "
                "or footer is printed without the network; link one of the job's files "
                "(<link rel=stylesheet href=style.css>) or put the CSS in a <style> "
                "element; @import is not followed",
            )


_CHECKS: tuple[Callable[[PageOptions], None], ...] = (
    _check_values,
    _check_image,
    _check_encoding,
    _check_selector,
    check_finishing,  # pdfa, facturx, attachments, encrypt
    _check_receipt,
    _check_scale,
    _check_size,
    _check_margin,
    _check_page_ranges,
    _check_wait_for,
    _check_user_agent,
    _check_statuses,
    _check_ignored_hosts,
    _check_media_features,
    _check_outline,
    _check_toc,
    check_header_footer,
    _check_marks,
    check_sign,
)
"""In order: known values first, since later rules depend on `output` and the paper."""

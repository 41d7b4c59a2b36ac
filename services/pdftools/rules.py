"""The rules of a pipeline beyond its types: `check_steps` raises `RequestError` naming
the first step (`steps[2].angle`) that breaks one. The gateway runs it on a request (a
400 before anything is stored); the worker runs it again on what the log carries.

What each rule protects:
- a step's own values (a rotation of 90, 180 or 270; exactly one way to split; page
  ranges that parse; a known PDF/A level and Factur-X profile; ISO dates; files that
  are inputs of the job);
- the order: nothing changes a document after `sign` (it would break the signature),
  nor after `pdfa` or `facturx` but `sign` (the PDF/A file was checked as written);
- combinations PDF/A forbids: encryption, and embedded files below PDF/A-3.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable, Collection, Sequence

from services.core.model.errors import RequestError
from services.core.model.finishingoptions import FACTURX_PROFILES, check_finishing
from services.core.model.options import is_page_ranges
from services.core.model.pageoptions import Encrypt as EncryptOptions
from services.core.model.pageoptions import PageOptions
from services.core.model.signoptions import check_sign
from services.pdftools import identity
from services.pdftools.pdfa import LEVELS
from services.pdftools.steps import (
    CHANGES_NOTHING,
    Attach,
    Bookmark,
    Encrypt,
    FacturX,
    Metadata,
    PdfA,
    Rotate,
    Sign,
    Split,
    Stamp,
    Step,
    Watermark,
    WriteBookmarks,
    kind_of,
    name_of,
)

MAX_STEPS = 50
ANGLES = (90, 180, 270)
MAX_EVERY = 100_000


def _fail(index: int, name: str, rule: str) -> RequestError:
    where = f"steps[{index}]" + (f".{name}" if name else "")
    return RequestError(f"{where} {rule}", field=where)


def check_steps(steps: Sequence[Step], files: Collection[str] = ()) -> None:
    """Raise `RequestError` naming the first step that breaks a rule; `files` are the
    names of the job's other inputs, which `attach` and marks may read."""
    if not steps:
        raise RequestError("steps must hold at least one step", field="steps")
    if len(steps) > MAX_STEPS:
        raise RequestError(f"steps may hold at most {MAX_STEPS} steps", field="steps")
    for index, step in enumerate(steps):
        check = _CHECKS.get(kind_of(step))
        if check is not None:
            check(index, step, files)
    _check_order(steps)


def _rotate(index: int, step: Step, files: Collection[str]) -> None:
    assert isinstance(step, Rotate)
    if step.angle not in ANGLES:
        raise _fail(index, "angle", "must be 90, 180 or 270 (clockwise)")
    _ranges(index, "pages", step.pages)


def _ranges(index: int, name: str, ranges: str | None) -> None:
    if ranges is not None and not is_page_ranges(ranges):
        raise _fail(index, name, "must be pages and ranges such as '1-3, 5, 8-' (from 1)")


def _split(index: int, step: Step, files: Collection[str]) -> None:
    assert isinstance(step, Split)
    ways = [step.ranges is not None, step.every is not None, step.outline]
    if sum(ways) != 1:
        raise _fail(index, "", "needs exactly one of ranges, every or outline: true")
    if step.every is not None and not 1 <= step.every <= MAX_EVERY:
        raise _fail(index, "every", f"must be a number of pages from 1 to {MAX_EVERY}")
    for number, ranges in enumerate(step.ranges or ()):
        _ranges(index, f"ranges[{number}]", ranges)


TRAPPED = ("True", "False", "Unknown")
"""The values of a document's `/Trapped` (ISO 32000-1, 14.3.3)."""
VERSIONS = ("1.4", "1.5", "1.6", "1.7", "2.0")
"""PDF versions a `metadata` step may state (Chromium writes 1.4)."""


def _metadata(index: int, step: Step, files: Collection[str]) -> None:
    assert isinstance(step, Metadata)
    for name in ("created", "modified"):
        value = getattr(step, name)
        try:
            if value is not None:
                datetime.datetime.fromisoformat(value)
        except ValueError:
            raise _fail(index, name, "must be an ISO 8601 date and time") from None
    if step.trapped is not None and step.trapped not in TRAPPED:
        raise _fail(index, "trapped", "must be one of " + ", ".join(TRAPPED))
    if step.version is not None and step.version not in VERSIONS:
        raise _fail(index, "version", "must be one of " + ", ".join(VERSIONS))


def _pdfa(index: int, step: Step, files: Collection[str]) -> None:
    assert isinstance(step, PdfA)
    if step.level not in LEVELS:
        raise _fail(index, "level", "must be one of " + ", ".join(LEVELS))


def _facturx(index: int, step: Step, files: Collection[str]) -> None:
    assert isinstance(step, FacturX)
    if step.profile is not None and step.profile not in FACTURX_PROFILES:
        raise _fail(index, "profile", "must be one of " + ", ".join(FACTURX_PROFILES))


def _attach(index: int, step: Step, files: Collection[str]) -> None:
    assert isinstance(step, Attach)
    if not step.files:
        raise _fail(index, "files", "must name at least one file")
    for number, file in enumerate(step.files):
        if file.source not in files:
            raise _fail(index, f"files[{number}].source", "must name one of the job's files")


def _mark(index: int, step: Step, files: Collection[str]) -> None:
    assert isinstance(step, Watermark | Stamp)
    given = [name for name in ("text", "image", "pdf") if getattr(step, name) is not None]
    if len(given) != 1:
        raise _fail(index, "", "needs exactly one of text, image or pdf")
    if step.pdf is not None and step.pdf not in files:
        raise _fail(index, "pdf", "must name one of the job's files")
    _ranges(index, "pages", step.pages)


MAX_BOOKMARKS = 10_000
"""Entries one `write_bookmarks` may write, all levels counted."""
MAX_BOOKMARK_DEPTH = 32
MAX_TITLE = 1000


def _bookmarks(index: int, step: Step, files: Collection[str]) -> None:
    assert isinstance(step, WriteBookmarks)
    seen = 0
    level: list[tuple[str, list[Bookmark], int]] = [("bookmarks", step.bookmarks, 1)]
    while level:
        where, marks, depth = level.pop()
        if depth > MAX_BOOKMARK_DEPTH:
            raise _fail(index, where, f"nests deeper than {MAX_BOOKMARK_DEPTH} levels")
        for number, mark in enumerate(marks):
            seen += 1
            if seen > MAX_BOOKMARKS:
                raise _fail(index, "bookmarks", f"has more than {MAX_BOOKMARKS} entries")
            if mark.page < 1:
                raise _fail(index, f"{where}[{number}].page", "must be a page number from 1")
            if not 0 < len(mark.title) <= MAX_TITLE:
                raise _fail(index, f"{where}[{number}].title", f"must be 1 to {MAX_TITLE} "
                            "characters")  # fmt: skip
            level.append((f"{where}[{number}].children", mark.children, depth + 1))


def _options(index: int, step: Step, files: Collection[str]) -> None:
    """`encrypt` and `sign` obey the rules of their finishing options."""
    options = PageOptions(
        encrypt=step if isinstance(step, EncryptOptions) else None,
        sign=step if isinstance(step, Sign) else None,
    )
    try:
        check_finishing(options)
        check_sign(options)
    except RequestError as exc:
        field = (exc.field or "").removeprefix("options.encrypt").removeprefix("options.sign")
        rule = exc.message.split(" ", 1)[-1]
        raise _fail(index, field.lstrip("."), rule) from None
    if isinstance(step, Sign) and step.identity is not None:
        try:
            identity.checked(step.identity)
        except RequestError as exc:
            raise _fail(index, "identity", exc.message) from None


_CHECKS: dict[type[Step], Callable[[int, Step, Collection[str]], None]] = {
    WriteBookmarks: _bookmarks,
    Rotate: _rotate,
    Split: _split,
    Metadata: _metadata,
    PdfA: _pdfa,
    FacturX: _facturx,
    Attach: _attach,
    Watermark: _mark,
    Stamp: _mark,
    Encrypt: _options,
    Sign: _options,
}


def _check_order(steps: Sequence[Step]) -> None:
    sealed = ""  # the step after which documents may only be signed or looked at
    for index, step in enumerate(steps):
        if isinstance(step, CHANGES_NOTHING):
            continue
        if sealed == "sign" or (sealed and not isinstance(step, Sign)):
            raise _fail(index, "", f"cannot follow {sealed}: it would change the checked file")
        if isinstance(step, Encrypt) and any(isinstance(s, PdfA | FacturX) for s in steps):
            raise _fail(index, "", "cannot be used with pdfa or facturx (PDF/A forbids it)")
        if (
            isinstance(step, Sign)
            and step.visible
            and any(isinstance(s, PdfA | FacturX) for s in steps)
        ):
            raise _fail(index, "visible", "cannot be true with pdfa or facturx (its font is "
                        "not embedded)")  # fmt: skip
        if isinstance(step, PdfA | FacturX | Sign):
            sealed = name_of(step)

"""Gotenberg's PDF engine forms (`/forms/pdfengines/*`, 8.x; `/forms/pdf/*`, 9.x), mapped
onto a Pressroom PDF-tools job: `{"pdf": {"inputs": [{"file": …}], "steps": [...]}}`,
checked by the same `parse_job` as `POST /jobs`. Inputs are the form's PDFs, in file-name
order as Gotenberg merges them; one output answers as a PDF, several as a ZIP.

The same post-processing fields follow each route's own step, in Gotenberg's order:
`splitMode`, `pdfa`/`pdfua`, `metadata`, `flatten`, passwords (`encrypt`)."""

from __future__ import annotations

import re
import secrets
from collections.abc import Callable
from typing import Any

from services.core.model.errors import RequestError
from services.core.model.files import sniff
from services.core.model.finishingoptions import PERMISSIONS
from services.gateway.gotenberg.chromium import (
    KNOWN_METADATA,
    METADATA_KEYS,
    MORE_METADATA,
    Mapped,
    metadata_value,
    refuse,
)
from services.gateway.gotenberg.forms import Form

PDFA_LEVELS = {"PDF/A-1b": "1b", "PDF/A-2b": "2b", "PDF/A-3b": "3b"}

_SPAN = re.compile(r"\s*([0-9]+)\s*(?:-\s*([0-9]+))?\s*")


def inputs(form: Form, mapped: Mapped) -> list[str]:
    """The form's PDFs as the job's inputs, in file-name order (the other parts are files
    of the job, which steps read by name)."""
    names = sorted(u.filename for u in form.files if u.part not in ("embeds", "facturxXml"))
    pdfs = [n for n in names if n.lower().endswith(".pdf")]
    if not pdfs:
        raise RequestError("the form has no PDF file", field="files")
    mapped.files = [u for u in form.files]
    mapped.body["pdf"] = {"inputs": [{"file": name} for name in pdfs], "steps": []}
    mapped.origin["pdf.inputs"] = "files"
    mapped.origin["pdf.steps"] = "files"
    return pdfs


def add_step(mapped: Mapped, step: dict[str, Any], source: str) -> None:
    steps: list[dict[str, Any]] = mapped.body["pdf"]["steps"]
    mapped.origin[f"pdf.steps[{len(steps)}]"] = source
    steps.append(step)


def split(form: Form, mapped: Mapped, *, required: bool) -> None:
    """`splitMode` `intervals` (every `splitSpan` pages) or `pages` (the pages of
    `splitSpan`, one file each, or one file with `splitUnify`)."""
    mode = form.text("splitMode")
    span = form.text("splitSpan")
    unify = form.flag("splitUnify", False)
    if mode is None:
        if required:
            raise RequestError("form field 'splitMode' is required", field="splitMode")
        return
    if span is None:
        raise RequestError("form field 'splitSpan' is required with splitMode", field="splitSpan")
    if mode == "intervals":
        if not span.strip().isdigit() or int(span) < 1:
            raise RequestError(
                "form field 'splitSpan' must be a number of pages", field="splitSpan"
            )
        add_step(mapped, {"step": "split", "every": int(span)}, "splitSpan")
    elif mode == "pages":
        ranges = [span] if unify else span_pages(span)
        add_step(mapped, {"step": "split", "ranges": ranges}, "splitSpan")
    else:
        raise RequestError("form field 'splitMode' must be intervals or pages", field="splitMode")


def span_pages(span: str) -> list[str]:
    """Each page of a span such as `1-3,5` as its own range; an open range (`4-`) stays
    whole (its pages are known only when the document is read)."""
    pages: list[str] = []
    for piece in span.split(","):
        found = _SPAN.fullmatch(piece)
        if found is None:
            pages.append(piece.strip())
            continue
        first, last = int(found[1]), int(found[2] or found[1])
        pages.extend(str(n) for n in range(first, min(last, first + 999) + 1))
    return pages


def archival(form: Form, mapped: Mapped) -> None:
    pdfa = form.text("pdfa")
    if pdfa is not None:
        if pdfa not in PDFA_LEVELS:
            raise refuse("pdfa", f"Pressroom writes {', '.join(PDFA_LEVELS)}, not {pdfa!r}")
        add_step(mapped, {"step": "pdfa", "level": PDFA_LEVELS[pdfa]}, "pdfa")
    if form.flag("pdfua", False):
        add_step(mapped, {"step": "pdfua"}, "pdfua")


def metadata(form: Form, mapped: Mapped, *, required: bool = False) -> None:
    given = form.json("metadata")
    if given is None:
        if required:
            raise RequestError("form field 'metadata' is required", field="metadata")
        return
    if not isinstance(given, dict):
        raise RequestError("form field 'metadata' must be a JSON object", field="metadata")
    step: dict[str, Any] = {"step": "metadata"}
    for key, value in given.items():
        target = METADATA_KEYS.get(key) or MORE_METADATA.get(key)
        if target is None:
            raise refuse(f"metadata.{key}", KNOWN_METADATA)
        step[target] = metadata_value(key, value)
    add_step(mapped, step, "metadata")


def finishing(form: Form, mapped: Mapped) -> None:
    """`flatten`, then the passwords."""
    if form.flag("flatten", False):
        add_step(mapped, {"step": "flatten"}, "flatten")
    user, owner = form.text("userPassword"), form.text("ownerPassword")
    if user is None and owner is None:
        return
    # as on the Chromium routes: every permission, a random owner password if none
    step: dict[str, Any] = {
        "step": "encrypt",
        "owner_password": owner or secrets.token_urlsafe(24),
        "permissions": list(PERMISSIONS),
    }
    if user is not None:
        step["user_password"] = user
    add_step(mapped, step, "userPassword" if user is not None else "ownerPassword")


def _route(build: Callable[[Form, Mapped], None], *, post: bool = True) -> Callable[[Form], Mapped]:
    def mapping(form: Form) -> Mapped:
        mapped = Mapped(body={}, files=[], report=build in (_read_metadata, _read_bookmarks))
        mapped.bookmarks = build is _read_bookmarks
        inputs(form, mapped)
        build(form, mapped)
        if post:
            split(form, mapped, required=False)
            archival(form, mapped)
            metadata(form, mapped)
            finishing(form, mapped)
        unknown = form.unknown()
        if unknown:
            raise refuse(unknown[0], "Pressroom does not know this field")
        if not mapped.body["pdf"]["steps"]:
            raise RequestError("the form asks for nothing to do", field="files")
        return mapped

    return mapping


def _merge(form: Form, mapped: Mapped) -> None:
    add_step(mapped, {"step": "merge", "outline": False}, "files")


def _split(form: Form, mapped: Mapped) -> None:
    split(form, mapped, required=True)


def _flatten(form: Form, mapped: Mapped) -> None:
    add_step(mapped, {"step": "flatten"}, "files")


def _convert(form: Form, mapped: Mapped) -> None:
    if form.text("pdfa") is None and not form.flag("pdfua", False):
        raise RequestError("form field 'pdfa' or 'pdfua' is required", field="pdfa")


def _write_metadata(form: Form, mapped: Mapped) -> None:
    metadata(form, mapped, required=True)


def _read_metadata(form: Form, mapped: Mapped) -> None:
    add_step(mapped, {"step": "read_metadata"}, "files")
    add_step(mapped, {"step": "validate"}, "files")


def _read_bookmarks(form: Form, mapped: Mapped) -> None:
    add_step(mapped, {"step": "read_bookmarks"}, "files")


def _write_bookmarks(form: Form, mapped: Mapped) -> None:
    """`bookmarks`: a list written into every PDF, or an object of file names to lists
    (the PDFs it does not name keep their outline), as Gotenberg takes them."""
    given = form.json("bookmarks")
    if isinstance(given, list):
        add_step(mapped, {"step": "write_bookmarks", "bookmarks": given}, "bookmarks")
    elif isinstance(given, dict) and all(isinstance(v, list) for v in given.values()):
        for name, marks in given.items():
            step = {"step": "write_bookmarks", "bookmarks": marks, "document": name}
            add_step(mapped, step, "bookmarks")
    else:
        raise RequestError("form field 'bookmarks' must be a JSON list of bookmarks or an "
                           "object of file names to lists", field="bookmarks")  # fmt: skip


def _encrypt(form: Form, mapped: Mapped) -> None:
    if form.text("userPassword") is None and form.text("ownerPassword") is None:
        raise RequestError("form field 'userPassword' is required", field="userPassword")
    finishing(form, mapped)


def _rotate(form: Form, mapped: Mapped) -> None:
    angle = form.integer("rotateAngle", 0, -270, 270)
    if angle % 90 or angle == 0:
        raise RequestError("form field 'rotateAngle' must be 90, 180 or 270", field="rotateAngle")
    step: dict[str, Any] = {"step": "rotate", "angle": angle % 360}
    pages = form.text("rotatePages")
    if pages is not None:
        step["pages"] = pages
    add_step(mapped, step, "rotateAngle")


def _mark(kind: str) -> Callable[[Form, Mapped], None]:
    def build(form: Form, mapped: Mapped) -> None:
        source = form.text(f"{kind}Source") or "text"
        expression = form.text(f"{kind}Expression")
        if source != "text":
            raise refuse(f"{kind}Source", "the compatible routes take text marks")
        if expression is None:
            raise RequestError(f"form field '{kind}Expression' is required",
                               field=f"{kind}Expression")  # fmt: skip
        step: dict[str, Any] = {"step": kind, "text": expression}
        pages = form.text(f"{kind}Pages")
        if pages is not None:
            step["pages"] = pages
        if form.json(f"{kind}Options"):
            raise refuse(f"{kind}Options", "Pressroom's marks take their own style")
        add_step(mapped, step, f"{kind}Expression")

    return build


def _embed(form: Form, mapped: Mapped) -> None:
    """The `embeds` parts attached to each PDF (as files of the job: the step reads
    them by name)."""
    attached = [
        {"name": u.filename, "source": u.filename, "mime": sniff(u.data, u.filename)}
        for u in form.files
        if u.part == "embeds"
    ]
    if not attached:
        raise RequestError("the form has no embeds file", field="embeds")
    add_step(mapped, {"step": "attach", "files": attached}, "embeds")


FACTURX_LEVELS = ("MINIMUM", "BASIC WL", "BASIC", "EN 16931", "EXTENDED")
"""Gotenberg's `facturxConformanceLevel` values Pressroom embeds (its XRECHNUNG is not a
Factur-X profile the XSDs Pressroom checks against know)."""


def _facturx(form: Form, mapped: Mapped) -> None:
    """`facturxXml` (a file part) at `facturxConformanceLevel`: a `facturx` step, which
    makes each PDF a PDF/A-3b (`pdfa` may say so; another part is a 400, as in
    Gotenberg)."""
    xml = [u for u in form.files if u.part == "facturxXml"]
    level = form.text("facturxConformanceLevel")
    if not xml or not level:
        missing = "facturxXml" if not xml else "facturxConformanceLevel"
        raise RequestError("form fields 'facturxConformanceLevel' and 'facturxXml' are both "
                           "required", field=missing)  # fmt: skip
    if level not in FACTURX_LEVELS:
        raise refuse("facturxConformanceLevel", f"Pressroom embeds {', '.join(FACTURX_LEVELS)}")
    kind = form.text("facturxDocumentType") or "INVOICE"
    if kind != "INVOICE":
        raise refuse("facturxDocumentType", "Pressroom embeds invoices (INVOICE) only")
    if (form.text("facturxVersion") or "1.0") != "1.0":
        raise refuse("facturxVersion", "Pressroom writes Factur-X 1.0")
    pdfa = form.text("pdfa")
    if pdfa not in (None, "PDF/A-3b"):
        raise refuse("pdfa", "Factur-X needs PDF/A-3 (PDF/A-3b)")
    text = xml[0].data.decode("utf-8", errors="replace")
    add_step(mapped, {"step": "facturx", "xml": text, "profile": level}, "facturxXml")


def _optimise(form: Form, mapped: Mapped) -> None:
    add_step(mapped, {"step": "optimise"}, "files")


BUILDERS: dict[str, Callable[[Form, Mapped], None]] = {
    "merge": _merge,
    "split": _split,
    "flatten": _flatten,
    "encrypt": _encrypt,
    "optimize": _optimise,
    "rotate": _rotate,
    "watermark": _mark("watermark"),
    "stamp": _mark("stamp"),
}
"""The step each route adds, by route name: Gotenberg 9's stages (`pipe`) reuse them."""

ROUTES: dict[str, Callable[[Form], Mapped]] = {
    "merge": _route(_merge),
    "split": _route(_split, post=False),
    "flatten": _route(_flatten, post=False),
    "convert": _route(_convert),
    "metadata/write": _route(_write_metadata, post=False),
    "metadata/read": _route(_read_metadata, post=False),
    "bookmarks/read": _route(_read_bookmarks, post=False),
    "bookmarks/write": _route(_write_bookmarks, post=False),
    "encrypt": _route(_encrypt, post=False),
    "embed": _route(_embed),
    "optimize": _route(_optimise),
    "factur-x": _route(_facturx, post=False),
    "rotate": _route(_rotate),
    "watermark": _route(_mark("watermark")),
    "stamp": _route(_mark("stamp")),
}
"""Each PDF engine route (after `/forms/pdfengines/` or `/forms/pdf/`) and its mapping.
`metadata/read` and `bookmarks/read` answer JSON from the job's report
(`routes.answer`)."""

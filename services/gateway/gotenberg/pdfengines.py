"""Gotenberg's PDF engine forms (`/forms/pdfengines/*`, 8.x; `/forms/pdf/*`, 9.x), mapped
onto a Pressroom PDF-tools job: `{"pdf": {"inputs": [{"file": …}], "steps": [...]}}`,
checked by the same `parse_job` as `POST /jobs`. Inputs are the form's PDFs, in file-name
order as Gotenberg merges them; one output answers as a PDF, several as a ZIP.

Post-processing fields follow each route's own step, in Gotenberg's order as far as
Pressroom's pipeline allows it (nothing may change a document after `pdfa` or `facturx`
but `sign`, so those come last before the passwords): on merge and split (`FULL`) marks,
rotation, `flatten`, bookmarks (merge), `metadata`, `embeds`, `pdfua`, `pdfa` or
Factur-X, passwords; on the other routes that take them (`BASIC`) `splitMode`,
`flatten`, `metadata`, `pdfua`, `pdfa`, passwords. A file part Gotenberg reads by its
part's name (`SPECIAL_PARTS`) that the route does not use is a `400` naming it.

Size: one mapping per PDF-engine route and per post-processing field, each adding steps to
the one PDF-tools job in the order above; a split by route would scatter the post-processing
fields that several routes share.
"""

from __future__ import annotations

import json
import re
import secrets
from collections.abc import Callable
from typing import Any

from services.core.model.errors import RequestError
from services.core.model.files import sniff
from services.gateway.gotenberg.chromium import (
    KNOWN_METADATA,
    METADATA_KEYS,
    MORE_METADATA,
    Mapped,
    metadata_value,
    permissions,
    refuse,
)
from services.gateway.gotenberg.forms import Form

PDFA_LEVELS = {"PDF/A-1b": "1b", "PDF/A-2b": "2b", "PDF/A-3b": "3b"}

_SPAN = re.compile(r"\s*([0-9]+)\s*(?:-\s*([0-9]+))?\s*")

SPECIAL_PARTS = ("embeds", "facturxXml", "watermark", "stamp")
"""File parts Gotenberg reads by their part's name, never as input PDFs."""
RELATIONSHIPS = ("Data", "Source", "Alternative", "Supplement", "Unspecified")
"""The `relationship` values of `embedsMetadata` (PDF/A-3's /AFRelationship)."""
_MIME = re.compile(r"[A-Za-z0-9!#$&^_.+-]+/[A-Za-z0-9!#$&^_.+-]+")


def inputs(form: Form, mapped: Mapped) -> list[str]:
    """The form's PDFs as the job's inputs, in file-name order (the other parts are files
    of the job, which steps read by name)."""
    names = sorted(u.filename for u in form.files if u.part not in SPECIAL_PARTS)
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
    """`pdfua`, then `pdfa` (nothing may change a PDF/A file after it is written)."""
    if form.flag("pdfua", False):
        add_step(mapped, {"step": "pdfua"}, "pdfua")
    pdfa = form.text("pdfa")
    if pdfa is not None:
        if pdfa not in PDFA_LEVELS:
            raise refuse("pdfa", f"Pressroom writes {', '.join(PDFA_LEVELS)}, not {pdfa!r}")
        add_step(mapped, {"step": "pdfa", "level": PDFA_LEVELS[pdfa]}, "pdfa")


def archival_or_facturx(form: Form, mapped: Mapped) -> None:
    """Factur-X when its fields are given (its step writes the PDF/A-3b), else `pdfa`."""
    given = form.text("facturxConformanceLevel") or any(u.part == "facturxXml" for u in form.files)
    if not given:
        archival(form, mapped)
        return
    if form.flag("pdfua", False):
        add_step(mapped, {"step": "pdfua"}, "pdfua")
    _facturx(form, mapped)


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


def flatten(form: Form, mapped: Mapped) -> None:
    if form.flag("flatten", False):
        add_step(mapped, {"step": "flatten"}, "flatten")


def passwords(form: Form, mapped: Mapped) -> None:
    """`userPassword`, `ownerPassword` and the `allow…` permissions (each true by
    default; a restriction without a password is a `400` naming it, as in Gotenberg).
    As on the Chromium routes, a random owner password is made if none is given."""
    user, owner = form.text("userPassword"), form.text("ownerPassword")
    granted = permissions(form, protected=user is not None or owner is not None)
    if user is None and owner is None:
        return
    step: dict[str, Any] = {
        "step": "encrypt",
        "owner_password": owner or secrets.token_urlsafe(24),
        "permissions": granted,
    }
    if user is not None:
        step["user_password"] = user
    add_step(mapped, step, "userPassword" if user is not None else "ownerPassword")


def marks(form: Form, mapped: Mapped) -> None:
    """A watermark, then a stamp, when their fields are given."""
    for kind in ("watermark", "stamp"):
        if any(form.texts(f"{kind}Source")) or any(form.texts(f"{kind}Expression")):
            _mark(kind)(form, mapped)


def rotation(form: Form, mapped: Mapped) -> None:
    if form.text("rotateAngle") is not None:
        _rotate(form, mapped)


def images(form: Form, mapped: Mapped) -> None:
    """`optimizeImages` and `imageQuality` (8.36): Pressroom does not re-encode images."""
    if form.flag("optimizeImages", False):
        raise refuse("optimizeImages", NO_IMAGE_ENCODING)
    if form.text("imageQuality") is not None:
        raise refuse("imageQuality", NO_IMAGE_ENCODING)


NO_IMAGE_ENCODING = (
    "Pressroom's optimise step rewrites a PDF's structure and never re-encodes its "
    "images at a lower quality"
)


def merged_bookmarks(form: Form, mapped: Mapped) -> None:
    """`bookmarks` (a list) written into the merged PDF; `autoIndexBookmarks` and
    `titleBookmarks`, which build the outline from each input's own, are refused."""
    if form.flag("autoIndexBookmarks", False):
        raise refuse("autoIndexBookmarks", "Pressroom's merge keeps an input's outline only "
                     "under an entry named by its file name, never alone")  # fmt: skip
    if form.flag("titleBookmarks", False):
        raise refuse("titleBookmarks", "Pressroom's merge names an input's entry by its file "
                     "name, not by the Title of its metadata")  # fmt: skip
    given = form.json("bookmarks")
    if given is None:
        return
    if not isinstance(given, list):
        raise refuse("bookmarks", "on merge Pressroom writes a list into the merged PDF; "
                     "bookmarks by file name need each input's page offset")  # fmt: skip
    add_step(mapped, {"step": "write_bookmarks", "bookmarks": given}, "bookmarks")


def attach(form: Form, mapped: Mapped) -> None:
    """The `embeds` parts attached to each PDF (as files of the job: the step reads
    them by name), each with its `embedsMetadata` (`mimeType`, `relationship`)."""
    embeds = [u for u in form.files if u.part == "embeds"]
    described = _embeds_metadata(form, {u.filename for u in embeds})
    if not embeds:
        return
    form.used.add("embeds")
    attached = []
    for upload in embeds:
        given = described.get(upload.filename, {})
        entry = {
            "name": upload.filename,
            "source": upload.filename,
            "mime": given.get("mimeType") or sniff(upload.data, upload.filename),
        }
        if "relationship" in given:
            entry["relationship"] = given["relationship"]
        attached.append(entry)
    add_step(mapped, {"step": "attach", "files": attached}, "embeds")


def _embeds_metadata(form: Form, names: set[str]) -> dict[str, dict[str, str]]:
    """`embedsMetadata` (8.31): a JSON object of embedded file names to `mimeType` and
    `relationship`. A name that is no `embeds` part, another key or value: `400`."""
    given = form.json("embedsMetadata")
    if given is None:
        return {}
    if not isinstance(given, dict) or not all(isinstance(v, dict) for v in given.values()):
        raise RequestError("form field 'embedsMetadata' must be a JSON object of file names "
                           "to objects", field="embedsMetadata")  # fmt: skip
    for name, facts in given.items():
        where = f"embedsMetadata.{name}"
        if name not in names:
            raise RequestError(f"{where}: the form has no embeds file {name!r}", field=where)
        for key, value in facts.items():
            if key == "mimeType" and isinstance(value, str) and _MIME.fullmatch(value):
                continue
            if key == "relationship" and value in RELATIONSHIPS:
                continue
            raise RequestError(f"{where}.{key}: Pressroom takes mimeType (a media type) and "
                               f"relationship ({', '.join(RELATIONSHIPS)})",
                               field=f"{where}.{key}")  # fmt: skip
    return given


def _unused_parts(form: Form) -> None:
    for upload in form.files:
        if upload.part in ("watermark", "stamp"):
            raise refuse(upload.part, "the compatible routes take text marks, not image or "
                         "PDF files")  # fmt: skip
        if upload.part in SPECIAL_PARTS and upload.part not in form.used:
            raise refuse(upload.part, "this route does not use it")


Post = Callable[[Form, Mapped], None]


def _split_after(form: Form, mapped: Mapped) -> None:
    split(form, mapped, required=False)


FULL: tuple[Post, ...] = (
    marks, rotation, flatten, images, metadata, attach, archival_or_facturx, passwords
)  # fmt: skip
"""What merge and split take after their own step, in order (merge adds its bookmarks
before `metadata`)."""
BASIC: tuple[Post, ...] = (_split_after, flatten, metadata, archival, passwords)
"""What the other routes that post-process take after their own step, in order."""
EMBED: tuple[Post, ...] = (_split_after, flatten, metadata, archival_or_facturx, passwords)
"""The embed route's: Factur-X too, as Gotenberg's."""


def _route(
    build: Callable[[Form, Mapped], None], post: tuple[Post, ...] = ()
) -> Callable[[Form], Mapped]:
    def mapping(form: Form) -> Mapped:
        mapped = Mapped(body={}, files=[], report=build in (_read_metadata, _read_bookmarks))
        mapped.bookmarks = build is _read_bookmarks
        inputs(form, mapped)
        build(form, mapped)
        for then in post:
            then(form, mapped)
        unknown = form.unknown()
        if unknown:
            raise refuse(unknown[0], "Pressroom does not know this field")
        _unused_parts(form)
        if not mapped.body["pdf"]["steps"]:
            raise RequestError("the form asks for nothing to do", field="files")
        return mapped

    return mapping


def _merge(form: Form, mapped: Mapped) -> None:
    add_step(mapped, {"step": "merge", "outline": False}, "files")
    split(form, mapped, required=False)  # more than Gotenberg's merge takes


def _merge_post(form: Form, mapped: Mapped) -> None:
    """Merge's own post-processing: `FULL`, with its bookmarks before `metadata`."""
    for then in FULL:
        if then is metadata:
            merged_bookmarks(form, mapped)
        then(form, mapped)


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
    passwords(form, mapped)


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
    """One `kind` step per `…Source` value (one if none, its source `text`), each taking
    the `…Expression`, `…Pages` and `…Options` values of its place, as Gotenberg 8.36
    reads these repeated fields; a field given more often than `…Source` is a `400`."""

    def build(form: Form, mapped: Mapped) -> None:
        given = {part: form.texts(f"{kind}{part}") for part in ("Expression", "Pages", "Options")}
        sources = form.texts(f"{kind}Source")
        count = max(len(sources), 1)
        for part, values in given.items():
            if len(values) > count:
                raise RequestError(f"form field '{kind}{part}' is given more often than "
                                   f"'{kind}Source'", field=f"{kind}{part}")  # fmt: skip
        for index in range(count):
            at = {part: (values[index:] or [""])[0] for part, values in given.items()}
            _one_mark(kind, (sources[index:] or ["text"])[0] or "text", at, mapped)

    return build


def _one_mark(kind: str, source: str, given: dict[str, str], mapped: Mapped) -> None:
    if source != "text":
        raise refuse(f"{kind}Source", "the compatible routes take text marks")
    if not given["Expression"]:
        raise RequestError(f"form field '{kind}Expression' is required",
                           field=f"{kind}Expression")  # fmt: skip
    step: dict[str, Any] = {"step": kind, "text": given["Expression"]}
    if given["Pages"]:
        step["pages"] = given["Pages"]
    if given["Options"]:
        try:
            options = json.loads(given["Options"])
        except (ValueError, RecursionError):
            raise RequestError(f"form field '{kind}Options' is not valid JSON",
                               field=f"{kind}Options") from None  # fmt: skip
        if options:
            raise refuse(f"{kind}Options", "Pressroom's marks take their own style")
    add_step(mapped, step, f"{kind}Expression")


def _embed(form: Form, mapped: Mapped) -> None:
    """`attach`; the form must have an `embeds` part."""
    if not any(u.part == "embeds" for u in form.files):
        raise RequestError("the form has no embeds file", field="embeds")
    attach(form, mapped)


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
    form.used.add("facturxXml")
    add_step(mapped, {"step": "facturx", "xml": text, "profile": level}, "facturxXml")


def _optimise(form: Form, mapped: Mapped) -> None:
    """The route always optimises (Gotenberg reads no `optimizeImages` here); its
    `imageQuality` is refused, as Pressroom does not re-encode images."""
    form.flag("optimizeImages", False)
    if form.text("imageQuality") is not None:
        raise refuse("imageQuality", NO_IMAGE_ENCODING)
    add_step(mapped, {"step": "optimise"}, "files")


ROUTES: dict[str, Callable[[Form], Mapped]] = {
    "merge": _route(_merge, (_merge_post,)),
    "split": _route(_split, FULL),
    "flatten": _route(_flatten),
    "convert": _route(_convert, BASIC),
    "metadata/write": _route(_write_metadata),
    "metadata/read": _route(_read_metadata),
    "bookmarks/read": _route(_read_bookmarks),
    "bookmarks/write": _route(_write_bookmarks),
    "encrypt": _route(_encrypt),
    "embed": _route(_embed, EMBED),
    "optimize": _route(_optimise, BASIC),
    "factur-x": _route(_facturx),
    "rotate": _route(_rotate, BASIC),
    "watermark": _route(_mark("watermark"), BASIC),
    "stamp": _route(_mark("stamp"), BASIC),
}
"""Each PDF engine route (after `/forms/pdfengines/` or `/forms/pdf/`) and its mapping.
`metadata/read` and `bookmarks/read` answer JSON from the job's report
(`routes.answer`)."""

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

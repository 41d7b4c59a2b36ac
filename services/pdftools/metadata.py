"""Document metadata: the Info dictionary and the XMP packet, kept saying the same.

PDF/A (and every reader that prefers XMP) needs the two to agree on the properties they
share: title, author, subject, keywords, producer, creator tool and the two dates
(pikepdf's `PdfMetadata.DOCINFO_MAPPING`). `sync` makes the XMP follow the Info before
every write (a step that changed the Info never leaves them apart); `apply` writes both
through pikepdf's metadata API; `read` reports them and where they differ.
"""

from __future__ import annotations

import datetime
from typing import Any

import pikepdf
from pikepdf.models.metadata import PdfMetadata, decode_pdf_date

from services.pdftools.report import MetadataFacts
from services.pdftools.steps import Metadata

_MAPPING = PdfMetadata.DOCINFO_MAPPING
_FIELDS = {
    "title": "dc:title",
    "author": "dc:creator",
    "subject": "dc:description",
    "keywords": "pdf:Keywords",
    "creator": "xmp:CreatorTool",
    "producer": "pdf:Producer",
    "created": "xmp:CreateDate",
    "modified": "xmp:ModifyDate",
}
"""Each field of the `metadata` step and the XMP property it sets (the Info follows)."""


def _comparable(value: Any) -> Any:
    if isinstance(value, list | tuple | set):
        return "; ".join(str(item) for item in value)
    text = str(value)
    try:
        when = datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return text
    return when if when.tzinfo else when.replace(tzinfo=datetime.UTC)


def _info_value(name: str, value: pikepdf.Object) -> Any:
    text = str(value)
    if name in ("/CreationDate", "/ModDate"):
        try:
            return _comparable(decode_pdf_date(text).isoformat())
        except ValueError:
            return text
    return text


def differences(pdf: pikepdf.Pdf) -> list[str]:
    """Where the Info and the XMP disagree (a property only one has is no conflict)."""
    if "/Metadata" not in pdf.Root:
        return []
    meta = pdf.open_metadata(set_pikepdf_as_editor=False, update_docinfo=False)
    found = []
    for uri, key, name, _ in _MAPPING:
        if name not in pdf.docinfo:
            continue
        prefix = PdfMetadata.REVERSE_NS[uri]
        try:
            xmp = meta[f"{prefix}:{key}"]
        except KeyError:
            continue
        info = _info_value(name, pdf.docinfo[name])
        if _comparable(xmp) != info:
            found.append(f"{name[1:]}: Info says {info!s}, XMP {prefix}:{key} says {xmp!s}")
    return found


def sync(pdf: pikepdf.Pdf) -> None:
    """Make the XMP say what the Info says, if the document has XMP and they differ."""
    if differences(pdf):
        with pdf.open_metadata(set_pikepdf_as_editor=False, update_docinfo=False) as meta:
            meta.load_from_docinfo(pdf.docinfo)


def write(pdf: pikepdf.Pdf, step: Metadata) -> None:
    """Set the fields `step` gives in the XMP and, from it, in the Info (the Info's
    other entries kept: a document without XMP gets one made from its Info first, or
    the Info would be rewritten from the few fields given)."""
    had_xmp = "/Metadata" in pdf.Root
    with pdf.open_metadata(set_pikepdf_as_editor=False, update_docinfo=True) as meta:
        if not had_xmp:
            meta.load_from_docinfo(pdf.docinfo)
        for field, prefixed in _FIELDS.items():
            value = getattr(step, field)
            if value is None:
                continue
            if field == "author":
                meta[prefixed] = [value]
            elif field in ("created", "modified"):
                meta[prefixed] = datetime.datetime.fromisoformat(value).isoformat()
            else:
                meta[prefixed] = value
        _xmp_only(meta, step)
    if step.trapped is not None:
        pdf.docinfo[pikepdf.Name.Trapped] = pikepdf.Name(f"/{step.trapped}")


def _xmp_only(meta: Any, step: Metadata) -> None:
    """The properties the Info has no entry for (or that pikepdf's mapping leaves out)."""
    if step.trapped is not None:  # pikepdf's Info mapping leaves /Trapped out
        meta["pdf:Trapped"] = step.trapped
    if step.rights is not None:
        meta["dc:rights"] = step.rights
    if step.marked is not None:
        meta["xmpRights:Marked"] = "True" if step.marked else "False"


def read(pdf: pikepdf.Pdf, name: str) -> MetadataFacts:
    """The document's Info entries and XMP properties, and whether they agree."""
    info = {
        str(k)[1:]: str(v) for k, v in pdf.docinfo.items() if not isinstance(v, pikepdf.Dictionary)
    }
    xmp: dict[str, str] = {}
    if "/Metadata" in pdf.Root:
        meta = pdf.open_metadata(set_pikepdf_as_editor=False, update_docinfo=False)
        xmp = {str(key): str(_comparable(value)) for key, value in meta.items()}
    found = differences(pdf)
    return MetadataFacts(document=name, info=info, xmp=xmp, consistent=not found, differences=found)

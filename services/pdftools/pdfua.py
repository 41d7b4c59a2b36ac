"""The `pdfua` step: a tagged document identified as PDF/UA-1, with what that
identification promises and the tags alone cannot say: `pdfuaid:part` 1 in the XMP,
/MarkInfo /Marked true, a document language (/Lang), and the title shown in the
window's title bar (/ViewerPreferences /DisplayDocTitle), which needs a title.

Only a document with a structure tree (Chromium's `tagged` output, or any tagged PDF)
can be PDF/UA; the step does not tag, so an untagged one is `PdfUaNotPossible`.
Whether the tags themselves are right (reading order, alternative texts) is the
author's: no tool can decide it alone.
"""

from __future__ import annotations

import pikepdf

from services.core.model.errors import PdfUaNotPossible
from services.pdftools import xmp
from services.pdftools.document import Document
from services.pdftools.steps import PdfUA
from services.pdftools.xmp import Extension

EXTENSION = Extension(
    prefix="pdfuaid",
    schema="PDF/UA Universal Accessibility Schema",
    values={"part": "1"},
    kinds={
        "part": ("Integer", "internal", "Indicates, which part of ISO 14289 standard is followed")
    },
)
"""The PDF/UA identification as a PDF/A file declares it (PDF/A predefines no pdfuaid)."""


def claimed(pdf: pikepdf.Pdf) -> bool:
    """Whether the document's XMP identifies it as PDF/UA."""
    if "/Metadata" not in pdf.Root:
        return False
    meta = pdf.open_metadata(set_pikepdf_as_editor=False, update_docinfo=False)
    return "pdfuaid:part" in meta


def identify(doc: Document, step: PdfUA) -> None:
    pdf = doc.pdf()
    if "/StructTreeRoot" not in pdf.Root:
        raise PdfUaNotPossible(f"{doc.name} is not tagged (no structure tree): PDF/UA needs one")
    if not _title(pdf):
        raise PdfUaNotPossible(f"{doc.name} has no title: set one with a metadata step first")
    if "/Lang" not in pdf.Root:
        if not step.lang:
            raise PdfUaNotPossible(f"{doc.name} declares no language: give the step's lang")
        pdf.Root.Lang = pikepdf.String(step.lang)
    pdf.Root.MarkInfo = pikepdf.Dictionary(Marked=True)
    preferences = pdf.Root.get("/ViewerPreferences")
    if not isinstance(preferences, pikepdf.Dictionary):
        preferences = pdf.Root.ViewerPreferences = pikepdf.Dictionary()
    preferences.DisplayDocTitle = True
    with pdf.open_metadata(set_pikepdf_as_editor=False, update_docinfo=False) as meta:
        meta[f"{{{xmp.NAMESPACES['pdfuaid']}}}part"] = "1"


def _title(pdf: pikepdf.Pdf) -> str:
    title = pdf.docinfo.get("/Title")
    if title is not None and str(title).strip():
        return str(title)
    if "/Metadata" in pdf.Root:
        meta = pdf.open_metadata(set_pikepdf_as_editor=False, update_docinfo=False)
        return str(meta.get("dc:title", "")).strip()
    return ""

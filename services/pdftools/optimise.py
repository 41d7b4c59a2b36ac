"""The `optimise` step: a document written compactly, with what it saved in the report.

qpdf does the work: object streams (the many small dictionaries of a tagged PDF's
structure tree, compressed together), compressed streams, only objects reachable from
the trailer written (unused ones dropped), and, with `remove_unused`, fonts, images and
forms a page's resources list but its content never uses removed
(`remove_unreferenced_resources`); `recompress` re-deflates streams already deflated.
A tagged document's structure tree is slimmed first (`structure.slim`: wrappers without
meaning lifted, defaults left out), which is most of what object streams cannot shrink.
"""

from __future__ import annotations

from services.pdftools import structure
from services.pdftools.document import COMPACT, Document
from services.pdftools.steps import Optimise


def optimise(doc: Document, step: Optimise) -> list[str]:
    before = len(doc.data())
    pdf = doc.pdf()
    notes = []
    if step.remove_unused:
        pdf.remove_unreferenced_resources()
    if not doc.pdfa:  # PDF/A pins its own settings (object streams, except in PDF/A-1)
        doc.save_kwargs = {**COMPACT, "recompress_flate": step.recompress}
        lifted = structure.slim(pdf)  # a checked PDF/A file's structure stays as checked
        if lifted:
            notes.append(f"{doc.name}: {lifted} structure elements without meaning lifted")
    after = len(doc.data())
    written = f"{doc.name}: {before} bytes written as {after} ({after / max(before, 1):.0%})"
    return [written, *notes]

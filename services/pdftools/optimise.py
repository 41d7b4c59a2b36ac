"""The `optimise` step: a document written compactly, with what it saved in the report.

qpdf does the work: object streams (the many small dictionaries of a tagged PDF's
structure tree, compressed together), compressed streams, only objects reachable from
the trailer written (unused ones dropped), and, with `remove_unused`, fonts, images and
forms a page's resources list but its content never uses removed
(`remove_unreferenced_resources`); `recompress` re-deflates streams already deflated.
"""

from __future__ import annotations

from services.pdftools.document import COMPACT, Document
from services.pdftools.steps import Optimise


def optimise(doc: Document, step: Optimise) -> list[str]:
    before = len(doc.data())
    pdf = doc.pdf()
    if step.remove_unused:
        pdf.remove_unreferenced_resources()
    if not doc.pdfa:  # PDF/A pins its own settings (object streams, except in PDF/A-1)
        doc.save_kwargs = {**COMPACT, "recompress_flate": step.recompress}
    after = len(doc.data())
    return [f"{doc.name}: {before} bytes written as {after} ({after / max(before, 1):.0%})"]

"""The `attach` step (and `options.attachments`): files embedded in the PDF (its
EmbeddedFiles name tree), each with its MIME type and its /AFRelationship. In a PDF/A-3
file each is also listed in the catalog's /AF array (`pdfa.py` has pikepdf add it)."""

from __future__ import annotations

from collections.abc import Mapping

import pikepdf

from services.core.errors import FinishingError
from services.pdftools import xmp
from services.pdftools.document import Document
from services.pdftools.steps import Attach


def attach(doc: Document, step: Attach, files: Mapping[str, bytes]) -> None:
    """Embed each file of `step`, read from the job's other inputs (`files`)."""
    pdf = doc.pdf()
    for index, file in enumerate(step.files):
        if file.source not in files:  # `rules.check_steps` names it at the gateway
            raise FinishingError(f"files[{index}].source {file.source!r} is not an input")
        embed(pdf, file.name, files[file.source], file.mime, file.relationship)


def embed(doc: pikepdf.Pdf, name: str, data: bytes, mime: str, relationship: str) -> None:
    """`data` embedded in `doc` as `name`, with its MIME type and its /AFRelationship."""
    now = xmp.pdf_date()
    spec = pikepdf.AttachedFileSpec(
        doc,
        data,
        filename=name,
        mime_type=mime,
        mod_date=now,
        relationship=pikepdf.Name("/" + relationship),
    )
    doc.attachments[name] = spec

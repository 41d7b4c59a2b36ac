"""The `attach` step (and `options.attachments`): files embedded in the PDF (its
EmbeddedFiles name tree), each with its MIME type and its /AFRelationship. In a PDF/A-3
file each is also listed in the catalog's /AF array (`pdfa.py` has pikepdf add it).

Every embedded file's name is made safe (`core/model/filenames.safe_name`: a reader saves it
under that name) and unique in the PDF ignoring case; rendering's mapping keeps
`factur-x.xml` for the invoice (`renderer/finishing.steps_of`)."""

from __future__ import annotations

from collections.abc import Mapping

import pikepdf

from services.core.model import filenames
from services.core.model.errors import FinishingError
from services.pdftools import xmp
from services.pdftools.document import Document
from services.pdftools.steps import Attach


def attach(doc: Document, step: Attach, files: Mapping[str, bytes]) -> None:
    """Embed each file of `step`, read from the job's other inputs (`files`), under a
    name unique among the document's embedded files."""
    pdf = doc.pdf()
    names = filenames.Unique(pdf.attachments)
    for index, file in enumerate(step.files):
        if file.source not in files:  # `rules.check_steps` names it at the gateway
            raise FinishingError(f"files[{index}].source {file.source!r} is not an input")
        name = names.take(file.name, fallback="attachment")
        embed(pdf, name, files[file.source], file.mime, file.relationship)


def embed(doc: pikepdf.Pdf, name: str, data: bytes, mime: str, relationship: str) -> None:
    """`data` embedded in `doc` as `name` (made safe), with its MIME type and its
    /AFRelationship."""
    name = filenames.safe_name(name, fallback="attachment")
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

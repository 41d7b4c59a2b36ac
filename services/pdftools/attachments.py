"""`options.attachments`: files embedded in the PDF (its EmbeddedFiles name tree), each
with the MIME type of its data URL. In a PDF/A-3 file each is also listed in the
catalog's /AF array with the relationship /Unspecified (`pdfa.py` writes that array)."""

from __future__ import annotations

import io

import pikepdf

from services.core.errors import FinishingError
from services.core.finishingoptions import data_url
from services.core.pageoptions import PageOptions
from services.pdftools import xmp
from services.pdftools.context import Context


def applies(options: PageOptions) -> bool:
    return bool(options.attachments)


def apply(pdf: bytes, options: PageOptions, context: Context) -> bytes:
    with pikepdf.open(io.BytesIO(pdf)) as doc:
        for index, attachment in enumerate(options.attachments or ()):
            decoded = data_url(attachment.content)
            if decoded is None:  # the gateway refuses these; an old one may not have
                raise FinishingError(f"options.attachments[{index}].content is not a data URL")
            embed(doc, attachment.name, decoded[1], decoded[0], "Unspecified")
        return saved(doc)


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


def saved(doc: pikepdf.Pdf) -> bytes:
    """`doc` written out (object streams, so the added structures cost little)."""
    out = io.BytesIO()
    doc.save(out, object_stream_mode=pikepdf.ObjectStreamMode.generate)
    return out.getvalue()

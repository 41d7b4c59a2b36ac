"""`options.attachments`: files embedded in the PDF (its EmbeddedFiles name tree), each
with the MIME type of its data URL. In a PDF/A-3 file each is also listed in the
catalog's /AF array with the relationship /Unspecified (`pdfa.py` writes that array).

Every embedded file's name is made safe (`core/filenames.safe_name`: a reader saves it
under that name) and unique in the PDF ignoring case, `factur-x.xml` kept for the
invoice: the gateway refuses names that would change, so this only matters for events
from before that rule."""

from __future__ import annotations

import io

import pikepdf

from services.core import filenames
from services.core.errors import FinishingError
from services.core.finishingoptions import FACTURX_FILE, data_url
from services.core.pageoptions import PageOptions
from services.renderer.finishing import xmp
from services.renderer.finishing.context import Context


def applies(options: PageOptions) -> bool:
    return bool(options.attachments)


def apply(pdf: bytes, options: PageOptions, context: Context) -> bytes:
    names = filenames.Unique([FACTURX_FILE] if options.facturx is not None else [])
    with pikepdf.open(io.BytesIO(pdf)) as doc:
        for index, attachment in enumerate(options.attachments or ()):
            decoded = data_url(attachment.content)
            if decoded is None:  # the gateway refuses these; an old one may not have
                raise FinishingError(f"options.attachments[{index}].content is not a data URL")
            name = names.take(attachment.name, fallback="attachment")
            embed(doc, name, decoded[1], decoded[0], "Unspecified")
        return saved(doc)


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


def saved(doc: pikepdf.Pdf) -> bytes:
    """`doc` written out (object streams, so the added structures cost little)."""
    out = io.BytesIO()
    doc.save(out, object_stream_mode=pikepdf.ObjectStreamMode.generate)
    return out.getvalue()

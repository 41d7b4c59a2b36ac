"""`options.sign`: a PAdES signature (ETSI.CAdES.detached, baseline B-B; B-T with a
timestamp) with the renderer's certificate and key, appended as an incremental update,
so it is the last step: any later change would break it.

An encrypted file (`encrypt` runs before) is signed with its owner password, which the
job's options hold; the signature's value is not encrypted, as PDF requires. Without a
configured key (`PRESSROOM_SIGNING_*`) the job fails at once (`SigningNotConfigured`);
a timestamp server that fails makes the attempt transient (`TimestampUnavailable`).
"""

from __future__ import annotations

import io

from pyhanko.pdf_utils.incremental_writer import IncrementalPdfFileWriter
from pyhanko.sign import fields, signers
from pyhanko.sign.timestamps import HTTPTimeStamper, TimeStamper
from pyhanko.sign.timestamps.common_utils import TimestampRequestError
from pyhanko.stamp import TextStampStyle

from services.core.errors import RequestError, SigningNotConfigured, TimestampUnavailable
from services.core.pageoptions import PageOptions, Sign
from services.pdftools.context import Context
from services.pdftools.signer import SigningKey, pyhanko_signer

FIELD = "Signature1"
TSA_TIMEOUT = 10  # seconds, of the finishing time limit (PRESSROOM_FINISHING_TIMEOUT)
STAMP = TextStampStyle(stamp_text="Digitally signed by %(signer)s\nDate: %(ts)s", border_width=1)
"""A visible signature's appearance."""
NOT_CONFIGURED = (
    "options.sign needs a signing certificate and key on the renderer: set "
    "PRESSROOM_SIGNING_CERT and PRESSROOM_SIGNING_KEY (PEM files; "
    "PRESSROOM_SIGNING_KEY_PASSWORD for an encrypted key)"
)


def applies(options: PageOptions) -> bool:
    return options.sign is not None


def apply(pdf: bytes, options: PageOptions, context: Context) -> bytes:
    sign = options.sign
    if sign is None:
        return pdf
    if context.signing is None:
        raise SigningNotConfigured(NOT_CONFIGURED, field="options.sign")
    writer = IncrementalPdfFileWriter(io.BytesIO(pdf))
    if options.encrypt is not None:
        writer.encrypt(options.encrypt.owner_password)  # type: ignore[no-untyped-call]
    signer = signers.PdfSigner(
        _metadata(sign),
        pyhanko_signer(context.signing),
        timestamper=_timestamper(context.signing),
        new_field_spec=_field(writer, sign),
        stamp_style=STAMP,
    )
    try:
        signed: io.BytesIO = signer.sign_pdf(writer)
    except TimestampRequestError as exc:
        raise TimestampUnavailable(f"the timestamp server failed: {exc}") from None
    return signed.getvalue()


def _metadata(sign: Sign) -> signers.PdfSignatureMetadata:
    return signers.PdfSignatureMetadata(
        field_name=FIELD,
        reason=sign.reason,
        location=sign.location,
        subfilter=fields.SigSeedSubFilter.PADES,
        md_algorithm="sha256",
    )


def _timestamper(identity: SigningKey) -> TimeStamper | None:
    # Operator configuration, reached directly: not a page's request, so the egress
    # policy (which guards what documents fetch) does not apply to it.
    return HTTPTimeStamper(identity.tsa_url, timeout=TSA_TIMEOUT) if identity.tsa_url else None


def _field(writer: IncrementalPdfFileWriter, sign: Sign) -> fields.SigFieldSpec:
    if not sign.visible or sign.box is None:
        return fields.SigFieldSpec(FIELD)  # no box: an invisible signature
    page = sign.page or 1
    count = int(writer.root["/Pages"]["/Count"])
    if page > count:
        raise RequestError(
            f"options.sign.page is {page} but the document has {count} pages",
            field="options.sign.page",
        )
    x1, y1, x2, y2 = (round(value) for value in sign.box)
    return fields.SigFieldSpec(FIELD, on_page=page - 1, box=(x1, y1, x2, y2))

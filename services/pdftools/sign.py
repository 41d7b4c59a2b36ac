"""The `sign` step (and `options.sign`): a PAdES signature (ETSI.CAdES.detached,
baseline B-B; B-T with a timestamp) with the service's certificate and key, appended as
an incremental update, so it is the last step that changes a document: any later change
would break it. A document signed before keeps its signatures (a new field is added).

An encrypted file (`encrypt` runs before) is signed with its owner password, which the
job's options hold; the signature's value is not encrypted, as PDF requires.

pyHanko rewrites the XMP when it signs: its `pdf:Producer` becomes pyHanko's name while
the Info's Producer would get it appended, and a PDF/A validator then finds the two
apart. The Info's Producer is set to pyHanko's name in the same update first, so both
say it (the last writer of the file); the namespace prefixes survive the rewrite because
`xmp` registered them. Without a
configured key (`PRESSROOM_SIGNING_*`) the job fails at once (`SigningNotConfigured`);
a timestamp server that fails makes the attempt transient (`TimestampUnavailable`).
"""

from __future__ import annotations

import io

from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import rsa
from pyhanko.pdf_utils import generic
from pyhanko.pdf_utils.incremental_writer import IncrementalPdfFileWriter
from pyhanko.pdf_utils.metadata.model import VENDOR
from pyhanko.sign import fields, signers
from pyhanko.sign.timestamps import HTTPTimeStamper, TimeStamper
from pyhanko.sign.timestamps.common_utils import TimestampRequestError
from pyhanko.stamp import TextStampStyle

from services.core.model.errors import (
    PdfaNotPossible,
    RequestError,
    SigningNotConfigured,
    TimestampUnavailable,
)
from services.core.model.pageoptions import Sign
from services.pdftools import steps, xmp  # noqa: F401  (registers the XMP prefixes pyHanko writes)
from services.pdftools.document import Document
from services.pdftools.signer import SigningKey, pyhanko_signer

TSA_TIMEOUT = 10  # seconds, of the finishing time limit (PRESSROOM_FINISHING_TIMEOUT)
STAMP = TextStampStyle(stamp_text="Digitally signed by %(signer)s\nDate: %(ts)s", border_width=1)
"""A visible signature's appearance."""
NOT_CONFIGURED = (
    "signing needs a signing certificate and key on the renderer: set "
    "PRESSROOM_SIGNING_CERT and PRESSROOM_SIGNING_KEY (PEM files; "
    "PRESSROOM_SIGNING_KEY_PASSWORD for an encrypted key)"
)


def apply(doc: Document, sign: Sign, signing: SigningKey | None, field: str) -> None:
    """Sign `doc` with `signing` (`field` names the step or option in errors)."""
    if signing is None:
        raise SigningNotConfigured(NOT_CONFIGURED, field=field)
    if doc.pdfa and not _keeps_pdf_1(signing):
        raise PdfaNotPossible(
            f"{doc.name} is PDF/A-{doc.pdfa}, and a signature with the service's key (not "
            "RSA) makes it PDF 2.0 (ISO/TS 32002), which PDF/A-1, 2 and 3 forbid: sign PDF/A "
            "files with an RSA key (PRESSROOM_SIGNING_KEY)"
        )
    writer = IncrementalPdfFileWriter(io.BytesIO(doc.data()))
    if writer.prev.encrypted:
        writer.encrypt(doc.password)  # type: ignore[no-untyped-call]
    _align_producer(writer)
    name = _free_name(writer)
    signer = signers.PdfSigner(
        _metadata(sign, name),
        pyhanko_signer(signing),
        timestamper=_timestamper(signing),
        new_field_spec=_field(writer, sign, name, field),
        stamp_style=STAMP,
    )
    try:
        signed: io.BytesIO = signer.sign_pdf(writer)
    except TimestampRequestError as exc:
        raise TimestampUnavailable(f"the timestamp server failed: {exc}") from None
    doc.replace(signed.getvalue(), signed=True)


def _keeps_pdf_1(signing: SigningKey) -> bool:
    """Whether pyHanko signs with this key within PDF 1.7: RSA does; ECDSA and EdDSA
    need PDF 2.0's ISO/TS 32002 extension, and pyHanko raises the version for them."""
    key = x509.load_der_x509_certificate(signing.certificate).public_key()
    return isinstance(key, rsa.RSAPublicKey)


def _align_producer(writer: IncrementalPdfFileWriter) -> None:
    """Info's Producer as pyHanko will write the XMP's (see the module docstring)."""
    if "/Metadata" not in writer.root or "/Info" not in writer.trailer:
        return  # no XMP: pyHanko appends its name to the Info's Producer alone
    info = writer.trailer["/Info"]
    info["/Producer"] = generic.TextStringObject(VENDOR)
    writer.update_container(info)


def _free_name(writer: IncrementalPdfFileWriter) -> str:
    """`Signature1`, or the first `SignatureN` no field of the document has."""
    taken = {name for name, _, _ in fields.enumerate_sig_fields(writer.prev)}
    return next(f"Signature{n}" for n in range(1, len(taken) + 2) if f"Signature{n}" not in taken)


def _metadata(sign: Sign, name: str) -> signers.PdfSignatureMetadata:
    own = sign if isinstance(sign, steps.Sign) else None  # the step's contact and name
    return signers.PdfSignatureMetadata(
        field_name=name,
        reason=sign.reason,
        location=sign.location,
        contact_info=own.contact if own else None,
        name=own.signer_name if own else None,
        subfilter=fields.SigSeedSubFilter.PADES,
        md_algorithm="sha256",
    )


def _timestamper(identity: SigningKey) -> TimeStamper | None:
    # Operator configuration, reached directly: not a page's request, so the egress
    # policy (which guards what documents fetch) does not apply to it.
    return HTTPTimeStamper(identity.tsa_url, timeout=TSA_TIMEOUT) if identity.tsa_url else None


def _field(
    writer: IncrementalPdfFileWriter, sign: Sign, name: str, field: str
) -> fields.SigFieldSpec:
    if not sign.visible or sign.box is None:
        return fields.SigFieldSpec(name)  # no box: an invisible signature
    page = sign.page or 1
    count = int(writer.root["/Pages"]["/Count"])
    if page > count:
        raise RequestError(
            f"{field}.page is {page} but the document has {count} pages", field=f"{field}.page"
        )
    x1, y1, x2, y2 = (round(value) for value in sign.box)
    return fields.SigFieldSpec(name, on_page=page - 1, box=(x1, y1, x2, y2))

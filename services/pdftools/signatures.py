"""The signatures a PDF holds, as pyHanko's validation sees them: each one's field and
signer, whether the signed bytes are intact and the signature cryptographically valid,
and what it covers (the whole file, or a revision that later updates followed).

Trust is not judged (no trust roots are configured for uploaded files): `valid` means
the signature matches its certificate and the bytes, not that the certificate is one to
believe. Diff analysis (what later revisions changed) is left out: it costs a full parse
of every revision for a verdict the coverage already hints at.
"""

from __future__ import annotations

import io

from pyhanko.pdf_utils.misc import PdfError
from pyhanko.pdf_utils.reader import PdfFileReader
from pyhanko.sign.validation import validate_pdf_signature
from pyhanko.sign.validation.errors import SignatureValidationError
from pyhanko.sign.validation.pdf_embedded import EmbeddedPdfSignature
from pyhanko.sign.validation.status import SignatureCoverageLevel
from pyhanko_certvalidator import ValidationContext

from services.pdftools.report import SignatureFacts

_UNTRUSTED = ValidationContext(trust_roots=[], allow_fetching=False)
"""No trust roots, no network: the cryptographic verdict only (never the system's list)."""


def found(data: bytes, password: str = "") -> list[SignatureFacts]:
    """Each signature of the PDF `data` with pyHanko's verdict (empty: none)."""
    try:
        reader = PdfFileReader(io.BytesIO(data), strict=False)
        if reader.encrypted:
            reader.decrypt(password)
        embedded = list(reader.embedded_signatures)
    except (PdfError, ValueError, KeyError) as exc:
        return [_unreadable(f"the signatures cannot be read: {exc}")]
    return [_facts(signature) for signature in embedded]


def _facts(signature: EmbeddedPdfSignature) -> SignatureFacts:
    signer = _signer(signature)
    try:
        status = validate_pdf_signature(signature, _UNTRUSTED, skip_diff=True)
    except (SignatureValidationError, PdfError, ValueError) as exc:
        return SignatureFacts(
            field=signature.field_name,
            signer=signer,
            intact=False,
            valid=False,
            coverage="unknown",
            whole_file=False,
            problem=str(exc),
        )
    coverage = status.coverage
    return SignatureFacts(
        field=signature.field_name,
        signer=signer,
        intact=status.intact,
        valid=status.valid,
        coverage=coverage.name.lower() if coverage is not None else "unknown",
        whole_file=coverage == SignatureCoverageLevel.ENTIRE_FILE,
    )


def _signer(signature: EmbeddedPdfSignature) -> str:
    try:
        return str(signature.signer_cert.subject.human_friendly)
    except (ValueError, KeyError, AttributeError):
        return "unknown"


def _unreadable(problem: str) -> SignatureFacts:
    return SignatureFacts(
        field="", signer="", intact=False, valid=False, coverage="unknown", whole_file=False,
        problem=problem,
    )  # fmt: skip

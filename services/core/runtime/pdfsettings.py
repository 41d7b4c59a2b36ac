"""Settings of the PDF steps: finishing (PDF/A, encryption, compaction), the PDF tools'
limits, validation and signing.

A base of `Settings` (its fields are `Settings`' fields, read the same way from
`PRESSROOM_*` variables), kept apart so the PDF steps' limits are read in one place.
"""

from __future__ import annotations

from dataclasses import dataclass

from services.core.runtime.settingvalues import float_in, http_url, int_in, var


@dataclass(frozen=True)
class PdfSettings:
    """What the PDF steps may use and where their keys and profiles are."""

    finishing_memory: int = var(
        "PRESSROOM_FINISHING_MEMORY",
        1024 * 2**20,
        int_in(64 * 2**20, 64 * 2**30),
        "renderer: memory limit of a finishing worker process (PDF/A, encryption…), bytes",
    )
    finishing_timeout: float = var(
        "PRESSROOM_FINISHING_TIMEOUT",
        30.0,
        float_in(0.1, 600),
        "renderer: time limit of one document's finishing steps, s",
    )
    icc_profile: str = var(
        "PRESSROOM_ICC_PROFILE",
        "/usr/share/color/icc/sRGB.icc",
        doc="renderer: the sRGB ICC profile of PDF/A output intents (Debian: icc-profiles-free)",
    )
    pdf_max_input_bytes: int = var(
        "PRESSROOM_PDF_MAX_INPUT_BYTES",
        256 * 2**20,
        int_in(1024, 2**34),
        "PDF tools: most bytes of PDFs and files one job may read",
    )
    pdf_max_pages: int = var(
        "PRESSROOM_PDF_MAX_PAGES",
        5000,
        int_in(1, 1_000_000),
        "PDF tools: most pages one job's input PDFs may have together",
    )
    pdf_max_outputs: int = var(
        "PRESSROOM_PDF_MAX_OUTPUTS",
        1000,
        int_in(1, 100_000),
        "PDF tools: most documents one job may write (split)",
    )
    validate_max_bytes: int = var(
        "PRESSROOM_VALIDATE_MAX_BYTES",
        64 * 2**20,
        int_in(1024, 2**31),
        "gateway: largest PDF POST /validate takes, bytes",
    )
    validate_workers: int = var(
        "PRESSROOM_VALIDATE_WORKERS",
        1,
        int_in(1, 64),
        "gateway: worker processes that validate PDFs (POST /validate), shared fairly",
    )
    compact_pdf_bytes: int = var(
        "PRESSROOM_COMPACT_PDF_BYTES",
        256 * 2**10,
        int_in(0, 2**31),
        "renderer: an untagged PDF over this size is rewritten compactly (0: every; tagged: all)",
    )
    signing_cert: str = var(
        "PRESSROOM_SIGNING_CERT",
        "",
        doc="renderer: PEM file of the certificate `options.sign` signs with (empty: no signing)",
    )
    signing_key: str = var(
        "PRESSROOM_SIGNING_KEY", "", doc="renderer: PEM file of that certificate's private key"
    )
    signing_key_password: str = var(
        "PRESSROOM_SIGNING_KEY_PASSWORD", "", doc="renderer: the password of an encrypted key"
    )
    signing_chain: str = var(
        "PRESSROOM_SIGNING_CHAIN",
        "",
        doc="renderer: PEM file of the intermediate certificates embedded in signatures",
    )
    signing_tsa_url: str = var(
        "PRESSROOM_SIGNING_TSA_URL",
        "",
        http_url,
        "renderer: RFC 3161 timestamp server each signature gets a timestamp from (operator "
        "config: not subject to the page egress policy); empty: none",
    )

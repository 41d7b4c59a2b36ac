"""What a pipeline reports beside its documents: a msgspec struct, stored as JSON.

`Report` lists each step run (with what it did to which document), the facts
`read_metadata` read, the verdicts `validate` gave, and the pages processed (the
metering unit: every page of every input, once).
"""

from __future__ import annotations

import enum

import msgspec


class Status(enum.StrEnum):
    """A check's outcome: it holds, it does not, or it does not apply to this document."""

    PASSED = "passed"
    FAILED = "failed"
    NOT_APPLICABLE = "not_applicable"


class Check(msgspec.Struct, omit_defaults=True):
    """One structural check, named as the README's validation table names it."""

    name: str
    status: Status
    reason: str = ""


class Encryption(msgspec.Struct, omit_defaults=True):
    """How a document is encrypted: the filter, its revision, key bits and method."""

    filter: str
    revision: int
    bits: int
    method: str
    needs_user_password: bool


class FacturXFacts(msgspec.Struct, omit_defaults=True):
    """The embedded Factur-X invoice: its XMP conformance level, the XML's own profile
    (from its GuidelineSpecifiedDocumentContextParameter) and the XSD verdict."""

    file_name: str
    declared_profile: str | None = None
    xml_profile: str | None = None
    xsd_valid: bool = False
    problem: str = ""


class SignatureFacts(msgspec.Struct, omit_defaults=True):
    """One signature as pyHanko's validation sees it (trust is not judged: no roots)."""

    field: str
    signer: str
    intact: bool
    valid: bool
    coverage: str
    whole_file: bool
    problem: str = ""


class Validation(msgspec.Struct, omit_defaults=True):
    """What a document claims (PDF version, PDF/A part and conformance, PDF/UA, Factur-X,
    signatures, encryption) and the checks that say whether it holds."""

    document: str
    version: str
    pages: int
    encryption: Encryption | None = None
    pdfa: str | None = None  # "2B": the part and conformance the XMP claims
    pdfua: str | None = None  # "1": the pdfuaid part the XMP claims
    tagged: bool = False
    facturx: FacturXFacts | None = None
    signatures: list[SignatureFacts] = msgspec.field(default_factory=list)
    checks: list[Check] = msgspec.field(default_factory=list)


class MetadataFacts(msgspec.Struct, omit_defaults=True):
    """A document's metadata: the Info dictionary and the XMP properties, as strings."""

    document: str
    info: dict[str, str]
    xmp: dict[str, str]
    consistent: bool
    differences: list[str] = msgspec.field(default_factory=list)


class StepRecord(msgspec.Struct, omit_defaults=True):
    """A step run: its name and index, the documents it made, what it noted, its time."""

    step: str
    index: int
    documents: list[str]
    milliseconds: float
    notes: list[str] = msgspec.field(default_factory=list)


class Output(msgspec.Struct):
    """A document written at the end of the pipeline."""

    name: str
    pages: int
    bytes: int


class Report(msgspec.Struct, omit_defaults=True):
    """The whole pipeline's report (the JSON a PDF-tool job stores beside its files)."""

    pages_processed: int = 0
    steps: list[StepRecord] = msgspec.field(default_factory=list)
    outputs: list[Output] = msgspec.field(default_factory=list)
    metadata: list[MetadataFacts] = msgspec.field(default_factory=list)
    validations: list[Validation] = msgspec.field(default_factory=list)
    warnings: list[str] = msgspec.field(default_factory=list)

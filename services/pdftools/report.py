"""What a pipeline reports beside its documents: a msgspec struct, stored as JSON.

`Report` lists each step run (with what it did to which document), the facts
`read_metadata` read, the verdicts `validate` gave, and the pages processed (the
metering unit: every page of every input, once).
"""

from __future__ import annotations

import enum

import msgspec

from services.pdftools.steps import Bookmark


class Status(enum.StrEnum):
    """A check's outcome: it holds, it does not, or it does not apply to this document."""

    PASSED = "passed"
    FAILED = "failed"
    NOT_APPLICABLE = "not_applicable"


class Check(msgspec.Struct, omit_defaults=True):
    """One structural check, named as docs/pdf-tools.md's validation table names it."""

    name: str
    """The check, as docs/pdf-tools.md's validation table names it."""
    status: Status
    """`passed`, `failed` or `not_applicable`."""
    reason: str = ""
    """Why it failed or does not apply."""


class Encryption(msgspec.Struct, omit_defaults=True):
    """How a document is encrypted: the filter, its revision, key bits and method."""

    filter: str
    """The security handler (`Standard`)."""
    revision: int
    """Its revision."""
    bits: int
    """Key length in bits."""
    method: str
    """The stream cipher (`AESv3`, `RC4`…)."""
    needs_user_password: bool
    """Whether opening it needs a password."""


class FacturXFacts(msgspec.Struct, omit_defaults=True):
    """The embedded Factur-X invoice: its XMP conformance level, the XML's own profile
    (from its GuidelineSpecifiedDocumentContextParameter) and the XSD verdict."""

    file_name: str
    """The embedded invoice's file name."""
    declared_profile: str | None = None
    """The conformance level the XMP declares."""
    xml_profile: str | None = None
    """The profile the XML names as its guideline."""
    xsd_valid: bool = False
    """Whether the XML is valid against its profile's XSD."""
    problem: str = ""
    """What is wrong with it, if anything."""


class SignatureFacts(msgspec.Struct, omit_defaults=True):
    """One signature as pyHanko's validation sees it (trust is not judged: no roots)."""

    field: str
    """The signature field's name."""
    signer: str
    """Who signed (the certificate's subject)."""
    intact: bool
    """Whether the signed bytes are unchanged."""
    valid: bool
    """Whether the signature verifies (trust not judged)."""
    coverage: str
    """What the signature covers."""
    whole_file: bool
    """Whether it covers the whole file."""
    problem: str = ""
    """What is wrong with it, if anything."""


class Validation(msgspec.Struct, omit_defaults=True):
    """What a document claims (PDF version, PDF/A part and conformance, PDF/UA, Factur-X,
    signatures, encryption) and the checks that say whether it holds."""

    document: str
    """The document's file name."""
    version: str
    """Its PDF version."""
    pages: int
    """Its pages."""
    encryption: Encryption | None = None
    """How it is encrypted; null if it is not."""
    pdfa: str | None = None  # "2B": the part and conformance the XMP claims
    """The PDF/A part and conformance its XMP claims (`2B`)."""
    pdfua: str | None = None  # "1": the pdfuaid part the XMP claims
    """The PDF/UA part its XMP claims (`1`)."""
    tagged: bool = False
    """Whether it is a tagged PDF."""
    facturx: FacturXFacts | None = None
    """Its embedded Factur-X invoice, if any."""
    signatures: list[SignatureFacts] = msgspec.field(default_factory=list)
    """Its signatures."""
    checks: list[Check] = msgspec.field(default_factory=list)
    """The structural checks and their verdicts."""


class MetadataFacts(msgspec.Struct, omit_defaults=True):
    """A document's metadata: the Info dictionary and the XMP properties, as strings."""

    document: str
    """The document's file name."""
    info: dict[str, str]
    """The Info dictionary's entries."""
    xmp: dict[str, str]
    """The XMP properties."""
    consistent: bool
    """Whether Info and XMP agree."""
    differences: list[str] = msgspec.field(default_factory=list)
    """Where they disagree."""


class BookmarkFacts(msgspec.Struct, omit_defaults=True):
    """A document's outline, as `read_bookmarks` read it."""

    document: str
    """The document's file name."""
    bookmarks: list[Bookmark]
    """Its top-level entries, each with its children."""


class StepRecord(msgspec.Struct, omit_defaults=True):
    """A step run: its name and index, the documents it made, what it noted, its time."""

    step: str
    """The step's name."""
    index: int
    """Its place in `steps`, from 0."""
    documents: list[str]
    """The documents it left."""
    milliseconds: float
    """How long it took."""
    notes: list[str] = msgspec.field(default_factory=list)
    """What it noted doing."""


class Output(msgspec.Struct):
    """A document written at the end of the pipeline."""

    name: str
    """The document's file name."""
    pages: int
    """Its pages."""
    bytes: int
    """Its size."""


class Report(msgspec.Struct, omit_defaults=True):
    """The whole pipeline's report (the JSON a PDF-tool job stores beside its files)."""

    pages_processed: int = 0
    """Every page of every input, once: what usage counts."""
    steps: list[StepRecord] = msgspec.field(default_factory=list)
    """Each step run, in order."""
    outputs: list[Output] = msgspec.field(default_factory=list)
    """The documents written."""
    metadata: list[MetadataFacts] = msgspec.field(default_factory=list)
    """What `read_metadata` read."""
    validations: list[Validation] = msgspec.field(default_factory=list)
    """What `validate` found."""
    bookmarks: list[BookmarkFacts] = msgspec.field(default_factory=list)
    """What `read_bookmarks` read."""
    warnings: list[str] = msgspec.field(default_factory=list)
    """Repairs and other things worth knowing."""

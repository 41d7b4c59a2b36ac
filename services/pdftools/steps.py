"""The steps of a PDF pipeline: one msgspec struct each, a tagged union on `"step"`.

A pipeline is a list of steps run in order over the documents flowing through it: most
steps change each document in turn; `merge` makes one of many and `split` many of one.
Rendering's finishing options are the same steps (`renderer/finishing` maps them).

These structs tolerate unknown fields, as events must (an older worker still runs a step
a newer gateway added a field to); requests use the strict forms in `requests.py`.
Fields that name files (`pdf`, `files[].source`) are keys of the job's other inputs,
which the caller hands to `pipeline.run` as bytes: the log carries references, the
worker gets bytes. Rules beyond the types are in `rules.check_steps`.
"""

from __future__ import annotations

import msgspec

from services.core.model.pageoptions import Encrypt as EncryptOptions
from services.core.model.pageoptions import Mark
from services.core.model.pageoptions import Sign as SignOptions


class Step(msgspec.Struct, tag_field="step", omit_defaults=True, kw_only=True):
    """What every step is: its name is its tag (`{"step": "rotate", …}`)."""


class Merge(Step, tag="merge"):
    """All documents, in order, as one; each input gets an outline entry named by its
    file name, with its own outline kept under it (`outline: false`: no entries)."""

    outline: bool = True
    """An outline entry per input, named by its file name, its own outline under it."""
    name: str = "merged.pdf"
    """The merged document's file name."""


class Split(Step, tag="split"):
    """Each document as several: exactly one of `ranges` (one output per page range,
    such as `["1-3", "4-", "5, 7"]`), `every` (N pages each) or `outline` (one per
    top-level outline entry, named by its title)."""

    ranges: list[str] | None = None
    """One output per page range (`"1-3"`, `"4-"`, `"5, 7"`)."""
    every: int | None = None
    """One output per this many pages."""
    outline: bool = False
    """One output per top-level outline entry, named by its title."""


class Rotate(Step, tag="rotate"):
    """Turn pages clockwise by `angle` (90, 180 or 270): all, or those of `pages`."""

    angle: int
    """Degrees clockwise: 90, 180 or 270."""
    pages: str | None = None
    """The pages to turn, such as `"1-3, 5"` (default: all)."""


class Flatten(Step, tag="flatten"):
    """Form fields and annotations drawn into the page content (appearances generated
    for fields that lack them): no longer editable, printed as shown."""


class Metadata(Step, tag="metadata"):
    """Set the document information and its XMP together (left out: kept). Dates are
    ISO 8601 (`2026-12-03T10:00:00+01:00`)."""

    title: str | None = None
    """The document's title."""
    author: str | None = None
    """Its author."""
    subject: str | None = None
    """Its subject."""
    keywords: str | None = None
    """Its keywords."""
    creator: str | None = None
    """The application that made the original."""
    producer: str | None = None
    """The application that wrote the PDF."""
    created: str | None = None
    """When it was created (ISO 8601)."""
    modified: str | None = None
    """When it was last changed (ISO 8601)."""
    trapped: str | None = None
    """Whether it was trapped for print: `True`, `False` or `Unknown` (Info `/Trapped`,
    XMP `pdf:Trapped`)."""
    rights: str | None = None
    """The copyright notice (XMP `dc:rights`)."""
    marked: bool | None = None
    """Whether the document is rights-managed (XMP `xmpRights:Marked`)."""
    version: str | None = None
    """The lowest PDF version the file's header states (`1.4` to `2.0`); a later version
    the file already states or needs is kept."""


class ReadMetadata(Step, tag="read_metadata"):
    """Report each document's Info and XMP facts (the documents are unchanged)."""


class PdfA(Step, tag="pdfa"):
    """Make each document PDF/A at `level` (`1b`, `2b` or `3b`), or fail naming why not."""

    level: str = "2b"
    """`1b`, `2b` or `3b`."""


class PdfUA(Step, tag="pdfua"):
    """Identify tagged documents as PDF/UA-1 (XMP pdfuaid, /MarkInfo, /Lang,
    /DisplayDocTitle); `lang` is used when the document declares none."""

    lang: str | None = None
    """The language to declare when the document declares none (`en`, `fr-CA`)."""


class Encrypt(EncryptOptions, Step, tag="encrypt"):
    """AES-256 with an owner password, an optional user password and the permissions
    granted (`finishingoptions.PERMISSIONS`)."""


class AttachedFile(msgspec.Struct, omit_defaults=True):
    """A file to embed: its `name` in the PDF, the job input it is read from (`source`),
    its MIME type and its PDF/A-3 relationship to the document."""

    name: str
    """The file's name inside the PDF."""
    source: str
    """Which of the job's files to embed (its name)."""
    mime: str = "application/octet-stream"
    """Its media type."""
    relationship: str = "Unspecified"
    """Its PDF/A-3 relationship to the document (`Data`, `Source`, `Alternative`,
    `Supplement`, `Unspecified`)."""


class Attach(Step, tag="attach"):
    """Embed `files` (listed in the catalog's /AF in a PDF/A-3)."""

    files: list[AttachedFile]
    """The files to embed."""


class FacturX(Step, tag="facturx"):
    """Embed a Factur-X invoice XML (checked against the Factur-X XSD of its profile)
    as `factur-x.xml`; `profile`, when given, must be the XML's own. Make the document
    PDF/A-3b with a `pdfa` step after this one (or use `pdfa` 3b before it)."""

    xml: str
    """The invoice's CII XML."""
    profile: str | None = None
    """The Factur-X profile it must be (default: the XML's own)."""


class Watermark(Mark, Step, tag="watermark"):
    """A mark under each page's content: `text`, `image` (a data URL) or `pdf` (the job
    input whose first page is the mark), with the kind's style defaults
    (`marks.STYLES`)."""

    pdf: str | None = None
    """One of the job's files (a PDF) whose first page is the mark."""


class Stamp(Mark, Step, tag="stamp"):
    """A mark over each page's content, as `watermark` is under it."""

    pdf: str | None = None
    """One of the job's files (a PDF) whose first page is the mark."""


class Sign(SignOptions, Step, tag="sign"):
    """A PAdES signature with the service's signing key, or the job's own `identity`
    (`pdftools/identity`: Gotenberg's sign route); the last step that changes a document,
    since any later change would break it."""

    identity: str | None = None
    """The job's own certificate and key (`identity.carried`), sealed with the server key
    on the log and in PostgreSQL (`pdfwork.SECRET_FIELDS`); none: the service's key."""
    contact: str | None = None
    """How to reach the signer, written in the signature, 1 to 200 characters."""
    signer_name: str | None = None
    """The signer's name written in the signature, 1 to 200 characters."""


class Optimise(Step, tag="optimise"):
    """Write compactly: object streams and compressed structure, unreferenced objects
    dropped, unused page resources removed; `recompress` also re-deflates streams
    already compressed (slower, a little smaller)."""

    recompress: bool = False
    """Re-deflate streams already compressed too (slower, a little smaller)."""
    remove_unused: bool = True
    """Drop page resources nothing uses."""


class Bookmark(msgspec.Struct, omit_defaults=True):
    """An outline entry: its title, the page it goes to (from 1) and its children."""

    title: str
    """What the reader shows."""
    page: int
    """The page it goes to, from 1 (0 when read: no page of the document)."""
    children: list[Bookmark] = msgspec.field(default_factory=list)
    """The entries under it."""


class ReadBookmarks(Step, tag="read_bookmarks"):
    """Report each document's outline as a tree of bookmarks (the documents are
    unchanged)."""


class WriteBookmarks(Step, tag="write_bookmarks"):
    """Replace the outline of each document (only `document`, when given) with
    `bookmarks`; an entry past the last page is left out, with a note."""

    bookmarks: list[Bookmark]
    """The new outline."""
    document: str | None = None
    """Only the document of this file name (default: every one)."""


class Validate(Step, tag="validate"):
    """Report what each document claims and whether it holds (`report.Validation`)."""


AnyStep = (
    Merge
    | Split
    | Rotate
    | Flatten
    | Metadata
    | ReadMetadata
    | PdfA
    | PdfUA
    | Encrypt
    | Attach
    | FacturX
    | Watermark
    | Stamp
    | Sign
    | Optimise
    | Validate
    | ReadBookmarks
    | WriteBookmarks
)
"""Every step, as events decode them."""

CHANGES_NOTHING = (ReadMetadata, Validate, ReadBookmarks)
"""Steps that only report: allowed after `sign`, and in pipelines on signed inputs."""


def kind_of(step: Step) -> type[Step]:
    """The step's class in this module (a request's strict subclass is its base's kind)."""
    return next(c for c in type(step).__mro__ if c.__module__ == __name__ and c is not Step)


def name_of(step: Step) -> str:
    """A step's tag, as requests and reports spell it."""
    return str(step.__struct_config__.tag)

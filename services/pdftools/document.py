"""`Document`: one PDF flowing through a pipeline, and the one place PDFs are opened and
written, so every library failure on a hostile input becomes the same clear error.

A document is either open (a `pikepdf.Pdf`, which steps change) or bytes (as last
written, or as given): `pdf()` opens it for a change, `view()` for a look that changes
nothing, `data()` writes it when something changed. Writing keeps Info and XMP equal
(`metadata.sync`), uses object streams and compressed structure (PDF/A-1 excepted: PDF
1.4 has neither), and applies the encryption an `encrypt` step asked for.

qpdf's decoding limits (`guard`) are set in each worker process before any PDF is
opened: a flate, PNG-predictor, RunLength, TIFF or JPEG stream that would decode past
`DECODE_LIMIT` raises instead of eating the worker's memory.
"""

from __future__ import annotations

import io
import re
from typing import Any

import pikepdf
import pikepdf.settings

from services.core.model.errors import PdfEncrypted, PdfInvalid
from services.pdftools import metadata

DECODE_LIMIT = 256 * 2**20
"""Most bytes one stream may decode to (qpdf's per-filter memory limits)."""
MAX_CONTAINER = 1_000_000
"""Most items in one array or dictionary qpdf will parse (qpdf's default is 2^32)."""
COMPACT: dict[str, Any] = {
    "object_stream_mode": pikepdf.ObjectStreamMode.generate,
    "compress_streams": True,
}
"""How documents are written unless a step pins other settings (`pdfa`): object
streams and compressed structure (a tagged Chromium PDF shrinks several-fold)."""


_STREAM = re.compile(r"stream <_io\.BytesIO object at 0x[0-9a-f]+>:? ?")


def described(problem: object, name: str) -> str:
    """qpdf's message about a document read from memory, naming the document instead."""
    return _STREAM.sub("", str(problem)).strip() or f"{name} is damaged"


def guard() -> None:
    """Set qpdf's limits in this process (idempotent, cheap: once per pipeline)."""
    pikepdf.settings.set_qpdf_limits(
        flate_max_memory=DECODE_LIMIT,
        png_max_memory=DECODE_LIMIT,
        run_length_max_memory=DECODE_LIMIT,
        tiff_max_memory=DECODE_LIMIT,
        dct_max_memory=DECODE_LIMIT,
        parser_max_container_size=MAX_CONTAINER,
    )


def open_pdf(data: bytes, name: str, password: str = "") -> pikepdf.Pdf:
    """`data` opened (qpdf repairs what it can); `PdfEncrypted` without the right
    password, `PdfInvalid` for what cannot be read at all."""
    try:
        return pikepdf.open(io.BytesIO(data), password=password)
    except pikepdf.PasswordError:
        given = "the password given is wrong" if password else "give its password"
        raise PdfEncrypted(f"{name} is encrypted: {given}") from None
    except (pikepdf.PdfError, ValueError, RecursionError) as exc:
        raise PdfInvalid(f"{name} is not a PDF that can be read: {described(exc, name)}") from None


class Document:
    """A PDF in a pipeline: its file name, its content and how it is to be written."""

    def __init__(self, name: str, data: bytes, password: str = "", pages: int = 0) -> None:
        self.name = name
        self.password = password  # opens `data` (an input's, or the owner's once written)
        self.pages = pages
        self.encryption: pikepdf.Encryption | None = None
        self.save_kwargs: dict[str, Any] = dict(COMPACT)  # `pdfa` pins its own
        self.pdfa = ""  # the PDF/A level the document was made and checked at
        self.signed = False  # a signature covers `data`: nothing may change it now
        self._data: bytes | None = data
        self._pdf: pikepdf.Pdf | None = None
        self._changed = False
        self._sources: list[Document] = []

    @classmethod
    def made(cls, name: str, pdf: pikepdf.Pdf, sources: list[Document]) -> Document:
        """A document a step made (`merge`, `split`) of pages of `sources`, which stay
        open until it is written (qpdf copies their streams' data only then)."""
        document = cls(name, b"", pages=len(pdf.pages))
        document._data, document._pdf, document._changed = None, pdf, True
        document._sources = sources
        return document

    def view(self) -> pikepdf.Pdf:
        """The document open, to read: nothing is written for it."""
        if self._pdf is None:
            self._pdf = open_pdf(self._data or b"", self.name, self.password)
        return self._pdf

    def pdf(self) -> pikepdf.Pdf:
        """The document open, to change: it is written again at the end."""
        if self.signed:
            raise RuntimeError(f"{self.name} is signed: no step may change it")  # rules.py
        pdf = self.view()
        self._changed = True
        return pdf

    def data(self) -> bytes:
        """The document's bytes, written first if a step changed it."""
        if self._changed and self._pdf is not None:
            self._data = self._written(self._pdf)
            self._changed, self._sources = False, []
            if self.encryption is not None:
                self.password = self.encryption.owner
        self.close()
        return self._data or b""

    def replace(self, data: bytes, *, signed: bool = False) -> None:
        """New bytes for the document (`sign`'s incremental update)."""
        self.close()
        self._data, self._changed, self.signed = data, False, signed or self.signed

    def close(self) -> None:
        """Let go of the open document (kept while it has changes to write)."""
        if self._pdf is not None and not self._changed:
            self._pdf.close()
            self._pdf = None

    def _written(self, pdf: pikepdf.Pdf) -> bytes:
        metadata.sync(pdf)
        out = io.BytesIO()
        pdf.save(out, **{**self.save_kwargs, "encryption": self.encryption or False})
        self.pages = len(pdf.pages)
        return out.getvalue()

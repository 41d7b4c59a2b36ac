"""Merging: PDFs joined into one, written out as they come.

A PDF ends with a cross-reference table that gives every object's byte offset, so a
writer that numbers the objects itself needs nothing of a document once its objects are
out: `Merger.add` copies one document's pages, and every object they reach, under new
numbers, and keeps only each object's offset and each page's number (8 bytes each).
`Merger.end` then writes the page tree, the catalog, the table and the trailer. Memory is
one document plus those two tables, whatever the number of documents.

What a page keeps: its contents, resources (fonts, images), annotations, and the
attributes it inherited from its page tree, made its own. What is left behind is the
source's catalog and page tree, and so its outline, structure tree, form and metadata.
A link to another page of the same document points to that page's copy; a link by name
(`/Dest (name)`, whose target the source's catalog holds) is turned into a link to the
page the name points to, or dropped if the name leads nowhere.

Two ways to copy a document, with the same result: as bytes (`ByteCopy`, in
`services/conductor/pdfbytes.py`), which a plain document such as Chromium's takes, and
parsed by pypdf and written again (`PypdfCopy`, in `services/conductor/pdfcopy.py`) for
everything the byte copy refuses, at a much higher CPU cost (it builds every object in Python).

Why this copier and not pikepdf, which the PDF tools use: qpdf keeps part of every merged
document in memory until it writes the output, so a batch's merge grows with its size,
where this one holds one document at a time. The same-run comparison (peak memory and CPU
of both, 2,000 invoices), how to reproduce it, and the pikepdf merger that was built and
reverted are in docs/design-batches.md (slice 4) and docs/benchmarks.md (`bench/batch_run.py`).
"""

from __future__ import annotations

import io
from array import array
from collections.abc import Iterator

import pypdf

from services.conductor.pdfbytes import RAW_ERRORS, ByteCopy
from services.conductor.pdfcopy import READ_ERRORS, PypdfCopy
from services.conductor.pdfshared import PAGES, NotMergeable

__all__ = ["Merger", "NotMergeable"]

HEADER = b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n"
ENTRIES_PER_CHUNK = 4096  # cross-reference lines per chunk of `end`: 80 KiB


class Merger:
    """One merged PDF, written in pieces: `start`, then `add` per document, then `end`.
    Each returns the bytes that come next in the file."""

    def __init__(self) -> None:
        self.offsets = array("q", [0])  # object n at offsets[n - 1]; the page tree's is set last
        self.pages = array("q")
        self.size = 0
        self.copied_as_bytes = 0  # documents the byte reader copied (the rest, pypdf)

    def start(self) -> bytes:
        self.size = len(HEADER)
        return HEADER

    def add(self, document: bytes) -> bytes:
        """The objects of `document`'s pages, numbered after those already written.
        Raises `NotMergeable`, and then changes nothing."""
        first = len(self.offsets) + 1
        copy: ByteCopy | PypdfCopy
        try:
            copy = ByteCopy(document, first, at=self.size)
            data = copy.run()
            self.copied_as_bytes += 1
        except RAW_ERRORS:
            copy = PypdfCopy(first, at=self.size)
            data = _parsed(copy, document)
        self.offsets.extend(copy.offsets[n] for n in range(copy.first, copy.next))
        self.pages.extend(copy.pages)
        self.size += len(data)
        return data

    def end(self) -> Iterator[bytes]:
        """The page tree, the catalog, the cross-reference table and the trailer."""
        self.offsets[PAGES - 1] = self.size
        yield self._tail(b"%d 0 obj\n<< /Type /Pages /Count %d /Kids [" % (PAGES, len(self.pages)))
        for start in range(0, len(self.pages), ENTRIES_PER_CHUNK):
            chunk = self.pages[start : start + ENTRIES_PER_CHUNK]
            yield self._tail(b"".join(b"%d 0 R " % number for number in chunk))
        yield self._tail(b"] >>\nendobj\n")
        catalog = len(self.offsets) + 1
        self.offsets.append(self.size)
        yield self._tail(
            b"%d 0 obj\n<< /Type /Catalog /Pages %d 0 R >>\nendobj\n" % (catalog, PAGES)
        )
        table = self.size
        yield self._tail(b"xref\n0 %d\n0000000000 65535 f \n" % (catalog + 1))
        for start in range(0, len(self.offsets), ENTRIES_PER_CHUNK):
            chunk = self.offsets[start : start + ENTRIES_PER_CHUNK]
            yield self._tail(b"".join(b"%010d 00000 n \n" % offset for offset in chunk))
        trailer = b"trailer\n<< /Size %d /Root %d 0 R >>\nstartxref\n%d\n%%%%EOF\n"
        yield self._tail(trailer % (catalog + 1, catalog, table))

    def _tail(self, data: bytes) -> bytes:
        self.size += len(data)
        return data


def _parsed(copy: PypdfCopy, document: bytes) -> bytes:
    try:
        return copy.run(pypdf.PdfReader(io.BytesIO(document)))
    except READ_ERRORS as exc:
        raise NotMergeable(str(exc) or type(exc).__name__) from exc

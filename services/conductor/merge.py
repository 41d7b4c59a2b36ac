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
"""

from __future__ import annotations

import io
from array import array
from collections import deque
from collections.abc import Iterator
from typing import IO, Any

import pypdf
from pypdf.generic import (
    ArrayObject,
    ByteStringObject,
    DictionaryObject,
    IndirectObject,
    NameObject,
    NullObject,
    PdfObject,
    StreamObject,
    TextStringObject,
)

HEADER = b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n"
PAGES = 1  # the page tree's number, taken first so that each page can name its /Parent
ENTRIES_PER_CHUNK = 4096  # cross-reference lines per chunk of `end`: 80 KiB
SOURCE_ROOTS = ("/Catalog", "/Pages")  # never copied: the merged PDF has its own
# What pypdf raises on a file that is not a PDF or a damaged one: its own errors, and
# Python's where a damaged object is not of the kind the reader expects.
READ_ERRORS = (
    pypdf.errors.PyPdfError,
    ValueError,
    LookupError,
    TypeError,
    AttributeError,
    RecursionError,
)

Key = tuple[int, int]


class NotMergeable(Exception):
    """The document could not be read as a PDF (an image, a truncated or encrypted file);
    nothing of it was written."""


class Merger:
    """One merged PDF, written in pieces: `start`, then `add` per document, then `end`.
    Each returns the bytes that come next in the file."""

    def __init__(self) -> None:
        self.offsets = array("q", [0])  # object n at offsets[n - 1]; the page tree's is set last
        self.pages = array("q")
        self.size = 0

    def start(self) -> bytes:
        self.size = len(HEADER)
        return HEADER

    def add(self, document: bytes) -> bytes:
        """The objects of `document`'s pages, numbered after those already written.
        Raises `NotMergeable`, and then changes nothing."""
        copy = _Copy(first=len(self.offsets) + 1, at=self.size)
        try:
            data = copy.run(pypdf.PdfReader(io.BytesIO(document)))
        except READ_ERRORS as exc:
            raise NotMergeable(str(exc) or type(exc).__name__) from exc
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


class _Copy:
    """One document's pages copied: objects numbered from `first`, written at `at` on.

    Objects are numbered as they are found, and every number is written. The pages are
    numbered first, all of them, so that a link from one page to another finds the
    other's number."""

    def __init__(self, first: int, at: int) -> None:
        self.first = first
        self.next = first
        self.at = at
        self.out = io.BytesIO()
        self.offsets: dict[int, int] = {}
        self.pages: list[int] = []
        self.numbers: dict[Key, int] = {}
        self.queue: deque[tuple[int, PdfObject]] = deque()

    def run(self, reader: pypdf.PdfReader) -> bytes:
        if reader.is_encrypted:
            raise NotMergeable("the document is encrypted")
        pages = list(reader.pages)
        for page in pages:
            ref = page.indirect_reference
            number = self._number(_key(ref) if ref is not None else None)
            self.pages.append(number)
        named = _Names(reader)
        for number, page in zip(self.pages, pages, strict=True):
            self.queue.append((number, self._page(page, named)))
        while self.queue:
            number, obj = self.queue.popleft()
            self._object(number, obj)
        return self.out.getvalue()

    def _number(self, key: Key | None) -> int:
        number = self.next
        self.next += 1
        if key is not None:
            self.numbers[key] = number
        return number

    def _page(self, page: DictionaryObject, named: _Names) -> DictionaryObject:
        """The page as it is written: its tree's /Parent, its annotations as `_links`
        leaves them."""
        copy = DictionaryObject({k: v for k, v in page.items() if k not in ("/Parent", "/Annots")})
        copy[NameObject("/Parent")] = _Ref(PAGES)
        annots = _resolved(page.get("/Annots"))
        if isinstance(annots, ArrayObject):
            copy[NameObject("/Annots")] = self._links(annots, named)
        return copy

    def _links(self, annots: ArrayObject, named: _Names) -> ArrayObject:
        """The annotations; a link by name becomes one to its page, or goes."""
        kept = ArrayObject()
        for entry in annots:
            annot = _resolved(entry)
            if not isinstance(annot, DictionaryObject):
                continue
            name = _target_name(annot)
            if name is None:
                kept.append(entry)
                continue
            dest = named.find(name)
            if dest is None or _key_of(dest[0]) not in self.numbers:
                continue
            kept.append(self._enqueue(_linked(annot, dest), _key_of(entry)))
        return kept

    def _enqueue(self, obj: PdfObject, key: Key | None) -> _Ref:
        """`obj` written in place of the source's object `key` (or as a new one)."""
        number = self._number(key)
        self.queue.append((number, obj))
        return _Ref(number)

    def _object(self, number: int, obj: PdfObject) -> None:
        self.offsets[number] = self.at + self.out.tell()
        self.out.write(b"%d 0 obj\n" % number)
        if isinstance(obj, StreamObject):
            self._stream(obj)
        else:
            self._value(obj)
        self.out.write(b"\nendobj\n")

    def _stream(self, stream: StreamObject) -> None:
        """The stream's data as it is (still encoded), its /Length counted again: the
        source's may be an object of its own, not copied."""
        data = stream._data  # the bytes as stored; get_data() would decode them
        entries = [(k, v) for k, v in stream.items() if k != "/Length"]
        self._dictionary(entries, extra=b"/Length %d" % len(data))
        self.out.write(b"\nstream\n")
        self.out.write(data)
        self.out.write(b"\nendstream")

    def _value(self, obj: object) -> None:
        if isinstance(obj, IndirectObject):
            self.out.write(self._reference(obj))
        elif isinstance(obj, DictionaryObject):
            self._dictionary(list(obj.items()))
        elif isinstance(obj, ArrayObject):
            self.out.write(b"[")
            for item in obj:
                self._value(item)
                self.out.write(b" ")
            self.out.write(b"]")
        elif isinstance(obj, PdfObject):
            obj.write_to_stream(self.out)
        else:
            NullObject().write_to_stream(self.out)

    def _dictionary(self, entries: list[tuple[object, object]], extra: bytes = b"") -> None:
        self.out.write(b"<<")
        for key, value in entries:
            self._value(key)
            self.out.write(b" ")
            self._value(value)
            self.out.write(b"\n")
        self.out.write(extra + b">>")

    def _reference(self, ref: IndirectObject) -> bytes:
        """The reference renumbered, its object queued the first time; `null` for what is
        not copied (the source's catalog, page tree, and pages not in its tree)."""
        key = _key(ref)
        number = self.numbers.get(key)
        if number is None:
            target = ref.get_object()
            if target is None or isinstance(target, NullObject) or _left_behind(target):
                return b"null"
            number = self._number(key)
            self.queue.append((number, target))
        return b"%d 0 R" % number


class _Ref(PdfObject):
    """A reference to an object of the output (an `IndirectObject` names the source's)."""

    def __init__(self, number: int) -> None:
        self.number = number

    def write_to_stream(self, stream: IO[Any]) -> None:
        stream.write(b"%d 0 R" % self.number)


class _Names:
    """The source's named destinations, read when a link first needs them."""

    def __init__(self, reader: pypdf.PdfReader) -> None:
        self.reader = reader
        self.table: dict[str, ArrayObject] | None = None

    def find(self, name: str) -> ArrayObject | None:
        if self.table is None:
            found = self.reader.named_destinations
            self.table = {k: d.dest_array for k, d in found.items()}
        return self.table.get(name)


def _key(ref: IndirectObject) -> Key:
    return (ref.idnum, ref.generation)


def _key_of(obj: object) -> Key | None:
    return _key(obj) if isinstance(obj, IndirectObject) else None


def _resolved(obj: object) -> object:
    return obj.get_object() if isinstance(obj, IndirectObject) else obj


def _left_behind(obj: object) -> bool:
    """The source's catalog or page tree, or a page its tree does not hold (whose number
    would have been taken first)."""
    if not isinstance(obj, DictionaryObject):
        return False
    kind = _resolved(obj.get("/Type"))
    return kind in SOURCE_ROOTS or kind == "/Page"


def _target_name(annot: DictionaryObject) -> str | None:
    """The name a link goes to, for a link by name (`/Dest`, or a GoTo action's `/D`)."""
    dest = _resolved(annot.get("/Dest"))
    action = _resolved(annot.get("/A"))
    if dest is None and isinstance(action, DictionaryObject) and action.get("/S") == "/GoTo":
        dest = _resolved(action.get("/D"))
    if isinstance(dest, (NameObject, TextStringObject)):
        return str(dest)
    if isinstance(dest, ByteStringObject):
        return dest.decode("latin-1")
    return None


def _linked(annot: DictionaryObject, dest: ArrayObject) -> DictionaryObject:
    """The link annotation going straight to `dest` (a page and a position)."""
    copy = DictionaryObject({k: v for k, v in annot.items() if k not in ("/Dest", "/A")})
    copy[NameObject("/Dest")] = dest
    return copy

"""The pypdf copy of a document: parsed by pypdf and written again under new numbers.

It takes every document the byte copy (`services/conductor/pdfbytes.py`) refuses, at a much
higher CPU cost (it builds every object in Python where the byte copy moves their
bytes), and gives the same result.
"""

from __future__ import annotations

import copy
import io
import re
from collections import deque
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

from services.conductor.pdfshared import PAGES, Key, NotMergeable

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


class PypdfCopy:
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
        data = _stored_data(stream)
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


_STREAM_HEAD = re.compile(rb"<<\s*/Length (\d+)\s*>>\s*stream\r?\n")


def _stored_data(stream: StreamObject) -> memoryview:
    """The stream's data as the file stores it, still encoded. pypdf has no public
    reader of them (`get_data()` decodes), but its `write_to_stream` writes them as they
    are: here for a copy of the stream whose dictionary is emptied, so that what comes
    before the data is only the `/Length` pypdf counts."""
    shell = copy.copy(stream)
    shell.clear()
    out = io.BytesIO()
    shell.write_to_stream(out)
    written = out.getbuffer()
    head = _STREAM_HEAD.match(written)
    if head is None:
        raise ValueError("pypdf wrote a stream in a form this copy does not know")
    start = head.end()
    return written[start : start + int(head[1])]


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

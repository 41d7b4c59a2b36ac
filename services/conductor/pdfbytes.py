"""The byte copy of a document, and the small PDF reader it needs.

A document with one plain cross-reference table and a page tree (Chromium's, unless it
links within itself) is copied as bytes (`ByteCopy`): the objects its pages reach are read
where the table says they are, their references renumbered in their text (never inside a
string, nor in stream data, which is copied as it is). Everything else (an object or
cross-reference stream, an incremental update, encryption, attributes inherited from the
page tree, links by name, a file that surprises the byte reader in any way) is refused
(`RAW_ERRORS`), and parsed by pypdf and written again (`services/conductor/pdfcopy.py`),
at a much higher CPU cost: pypdf builds every object in Python where the byte copy moves
their bytes (`bench/pdfjobs_e2e.py`, docs/benchmarks.md).
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Iterator

from services.conductor.pdfshared import PAGES, Key

# The byte reader's grammar. A reference or a keyword stands after whitespace or a
# delimiter (not `/`, which would make it part of a name) and before one.
_BEFORE = rb"(?<![^\s\[\]<>(){}])"
_AFTER = rb"(?![^\s\[\]<>(){}/%])"
_REF = rb"(?P<num>\d+)\s+(?P<gen>\d+)\s+R" + _AFTER
# Every alternative starts with a literal, so that the regular expression engine skips
# to the next candidate fast (in long arrays of numbers, such as a font's widths); a
# reference is found by its `R`, and its numbers looked for before it.
TOKEN = re.compile(
    rb"<<|>>|<|\(|%|"
    + rb"|".join(w + _AFTER for w in (rb"/Length", rb"stream", rb"endobj", rb"obj", rb"R"))
)
REF_BEFORE = re.compile(_BEFORE + rb"(?P<num>\d+)\s+(?P<gen>\d+)\s+\Z")
REF_REACH = 64  # how far before its `R` a reference starts, at most (but for odd spacing)
ENDS = (b"stream", b"endobj")
_BEFORE_OK = re.compile(rb"[\s\[\]<>(){}]")  # what may stand before a keyword
# One token of a small object the byte reader reads whole (trailer, catalog, page tree).
PARSED = re.compile(
    rb"(?:\s|%[^\r\n]*)*(?:(?P<ref>" + _REF + rb")|(?P<dictionary><<)|(?P<close>>>)"
    rb"|(?P<array>\[)|(?P<end>\])|(?P<string>\()"
    rb"|(?P<atom>/[^\s\[\]<>(){}/%]*|<[0-9A-Fa-f\s]*>|[^\s\[\]<>(){}/%]+))"
)
CLOSERS = (b">>", b"]")
PAGE = re.compile(rb"\s*<<\s*/Type\s*/Page" + _AFTER)  # as Chromium and pypdf begin a page
BLANK = re.compile(rb"(?:\s|%[^\r\n]*)*")
STRING_PART = re.compile(rb"\\.|[()]", re.S)
LENGTH = re.compile(rb"\s*(?P<num>\d+)(?:\s+(?P<gen>\d+)\s+R)?" + _AFTER)
STARTXREF = re.compile(rb"startxref\s+(\d+)")
XREF = re.compile(rb"xref\s+")
SUBSECTION = re.compile(rb"(\d+)[ \t]+(\d+)\s+")
ENTRY = re.compile(rb"(\d{10}) (\d{5}) ([nf])(?: \r| \n|\r\n)")
ENTRY_SIZE = 20  # every cross-reference entry, its end of line included
TRAILER = re.compile(rb"\s*trailer")
OBJ = re.compile(rb"(\d+)\s+(\d+)\s+obj")
STREAM_START = re.compile(rb"\r?\n")
STREAM_END = re.compile(rb"\s*endstream" + _AFTER)
# A page, page tree or catalog reached other than through the page tree (pypdf's path
# writes `null` for it), and a link by name (which that path resolves): left to pypdf.
LEFT_BEHIND = re.compile(rb"/Type\s*/(?:Page|Pages|Catalog)" + _AFTER)
BY_NAME = re.compile(rb"/D(?:est)?" + _AFTER + rb"\s*(?:\(|/|<(?!<))")
INHERITABLE = {b"/MediaBox", b"/Resources", b"/CropBox", b"/Rotate"}
NULL = 0  # the number of what is written as `null`: the source's catalog


class _Unfit(Exception):
    """The document is not one the byte reader copies: pypdf's path will."""


# What the byte reader raises on a document it cannot copy: its own refusal, and Python's
# where the bytes are not what it expects.
RAW_ERRORS = (_Unfit, ValueError, LookupError, RecursionError)


class ByteCopy:
    """One document's pages copied as bytes: objects numbered from `first`, written at `at`
    on, as `PypdfCopy` does. The source's catalog is written as `null` where an object names
    it, and its page tree nodes as the merged PDF's page tree, so that each page's
    /Parent is right as it stands. Raises `_Unfit` (or Python's errors, `RAW_ERRORS`) on
    what it does not copy, and then has written nothing anyone keeps."""

    def __init__(self, document: bytes, first: int, at: int) -> None:
        self.data = document
        self.first = first
        self.next = first
        self.at = at
        self.out: list[bytes] = []
        self.size = 0
        self.offsets: dict[int, int] = {}
        self.pages: list[int] = []
        self.numbers: dict[Key, int] = {}
        self.queue: deque[tuple[Key, int]] = deque()

    def run(self) -> bytes:
        self.xref = _Xref(self.data)
        trailer = self.xref.trailer
        if b"/Prev" in trailer or b"/Encrypt" in trailer or b"/XRefStm" in trailer:
            raise _Unfit("an incremental update, or encrypted")
        root = _key_value(trailer.get(b"/Root"))
        catalog = self.xref.dictionary(root)
        if b"/Dests" in catalog or self._named(catalog.get(b"/Names")):
            raise _Unfit("named destinations")
        self.numbers[root] = NULL
        for page in list(self._tree(_key_value(catalog.get(b"/Pages")), set())):
            self.pages.append(self._number(page))
        while self.queue:
            self._object(*self.queue.popleft())
        return b"".join(self.out)

    def _named(self, names: object) -> bool:
        if isinstance(names, tuple):
            names = self.xref.dictionary(names)
        return isinstance(names, dict) and b"/Dests" in names

    def _tree(self, key: Key, seen: set[Key]) -> Iterator[Key]:
        """The pages under `key`, in order; its /Pages nodes numbered as the merged tree."""
        if key in seen:
            raise _Unfit("a loop in the page tree")
        seen.add(key)
        if PAGE.match(self.data, self.xref.body(key)):  # a page: no need to read it all
            yield key
            return
        node = self.xref.dictionary(key)
        kind = node.get(b"/Type")
        if kind == b"/Page":
            yield key
            return
        if kind != b"/Pages" or INHERITABLE & node.keys():
            raise _Unfit("a page tree node with inherited attributes, or not a page tree")
        self.numbers[key] = PAGES
        kids = node.get(b"/Kids")
        if not isinstance(kids, list):
            raise _Unfit("/Kids is not an array")
        for kid in kids:
            yield from self._tree(_key_value(kid), seen)

    def _number(self, key: Key) -> int:
        number = self.numbers[key] = self.next
        self.next += 1
        self.queue.append((key, number))
        return number

    def _reference(self, key: Key) -> bytes:
        number = self.numbers.get(key)
        if number is None:
            number = self._number(key)
        return b"null" if number == NULL else b"%d 0 R" % number

    def _object(self, key: Key, number: int) -> None:
        text, keyword, length = self._renumbered(self.xref.body(key))
        is_page = number < self.first + len(self.pages)  # the pages are numbered first
        if not is_page and LEFT_BEHIND.search(text):
            raise _Unfit("a page, page tree or catalog reached outside the page tree")
        if BY_NAME.search(text):
            raise _Unfit("a link by name")
        self.offsets[number] = self.at + self.size
        if keyword[0] == b"stream":
            parts = (b"%d 0 obj " % number, text, b"stream\n", self._stream(keyword, length))
            self._write(*parts, b"\nendstream\nendobj\n")
        else:
            self._write(b"%d 0 obj " % number, text, b"\nendobj\n")

    def _write(self, *parts: bytes) -> None:
        self.out.extend(parts)
        self.size += sum(len(part) for part in parts)

    def _renumbered(self, pos: int) -> tuple[bytes, re.Match[bytes], re.Match[bytes] | None]:
        """The object's text from `pos` to its `stream` or `endobj` keyword, references
        renumbered; that keyword; and the value of its /Length, if any."""
        data = self.data
        parts: list[bytes] = []
        depth, last, length = 0, pos, None
        while (token := TOKEN.search(data, pos)) is not None:
            kind, end = token[0], token.end()
            if kind == b"R" and (ref := _ref_before(data, pos, token.start())) is not None:
                parts += (data[last : ref.start()], self._reference(_key_matched(ref)))
                last = end
            elif kind in ENDS and _BEFORE_OK.match(data, token.start() - 1):
                parts.append(data[last : token.start()])
                return b"".join(parts), token, length
            elif kind == b"/Length" and depth == 1:
                length = LENGTH.match(data, end)
            else:
                depth, end = _passed(kind, data, end, depth)
            pos = end
        raise _Unfit("an object without endobj")

    def _stream(self, keyword: re.Match[bytes], length: re.Match[bytes] | None) -> bytes:
        """The stream's data, as it is stored."""
        if length is None:
            raise _Unfit("a stream without /Length")
        size = int(length["num"])
        if length["gen"] is not None:
            size = int(_bytes_value(self.xref.value(_key_matched(length))))
        start = STREAM_START.match(self.data, keyword.end())
        if start is None or STREAM_END.match(self.data, start.end() + size) is None:
            raise _Unfit("a stream whose /Length is not where it ends")
        return self.data[start.end() : start.end() + size]


class _Xref:
    """A document's one classic cross-reference table, and its trailer."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        found = STARTXREF.match(data, data.rfind(b"startxref"))
        table = XREF.match(data, int(found[1])) if found else None
        if table is None:
            raise _Unfit("no cross-reference table (a stream, or none)")
        self.sections: list[tuple[int, int, int]] = []  # first number, count, entries' offset
        pos = table.end()
        while (section := SUBSECTION.match(data, pos)) is not None:
            first, count = int(section[1]), int(section[2])
            self.sections.append((first, count, section.end()))
            pos = section.end() + count * ENTRY_SIZE
        trailer = TRAILER.match(data, pos)
        self.trailer = _dictionary(_parse(data, trailer.end())[0] if trailer else None)

    def offset(self, key: Key) -> int:
        number, generation = key
        for first, count, at in self.sections:
            if first <= number < first + count:
                at += (number - first) * ENTRY_SIZE
                entry = ENTRY.fullmatch(self.data, at, at + ENTRY_SIZE)
                if entry and entry[3] == b"n" and int(entry[2]) == generation:
                    return int(entry[1])
        raise _Unfit(f"object {number} {generation} is not in the table")

    def body(self, key: Key) -> int:
        """Where object `key`'s value starts."""
        header = OBJ.match(self.data, self.offset(key))
        if header is None or (int(header[1]), int(header[2])) != key:
            raise _Unfit(f"object {key[0]} {key[1]} is not where the table says")
        return header.end()

    def value(self, key: Key) -> object:
        return _parse(self.data, self.body(key))[0]

    def dictionary(self, key: Key) -> dict[bytes, object]:
        return _dictionary(self.value(key))


def _ref_before(data: bytes, floor: int, at: int) -> re.Match[bytes] | None:
    """The reference whose `R` is at `at`, if there is one: its numbers after `floor`."""
    ref = REF_BEFORE.search(data, max(floor, at - REF_REACH), at)
    if ref is None and at - REF_REACH > floor:
        ref = REF_BEFORE.search(data, floor, at)
    return ref


def _passed(kind: bytes, data: bytes, pos: int, depth: int) -> tuple[int, int]:
    """The dictionary depth and position after a token that is not a reference."""
    if kind == b"<<":
        return depth + 1, pos
    if kind == b">>":
        return depth - 1, pos
    if kind == b"(":
        return depth, _string_end(data, pos)
    if kind == b"<":
        return depth, data.index(b">", pos) + 1
    if kind == b"%":
        return depth, _skipped(data, pos - 1)
    if kind == b"obj":
        raise _Unfit("the next object begins before this one's end")
    return depth, pos  # a nested /Length, an `R` or a keyword in a name


def _skipped(data: bytes, pos: int) -> int:
    """Where the whitespace and comments from `pos` on end."""
    blank = BLANK.match(data, pos)
    return blank.end() if blank else pos


def _string_end(data: bytes, pos: int) -> int:
    """Where the literal string whose `(` ends at `pos` ends: after its own `)`, nested
    pairs and escaped parentheses skipped."""
    depth = 1
    for part in STRING_PART.finditer(data, pos):
        depth += {b"(": 1, b")": -1}.get(part[0], 0)
        if depth == 0:
            return part.end()
    raise _Unfit("a string without its end")


def _parse(data: bytes, pos: int) -> tuple[object, int]:
    """The object at `pos` (a dictionary, an array, a reference as a `Key`, anything else
    as its bytes; a string's content is not kept) and where it ends. The end of a
    dictionary or an array comes as `>>` or `]`."""
    token = PARSED.match(data, pos)
    if token is None:
        raise _Unfit(f"nothing readable at byte {pos}")
    kind, end = token.lastgroup, token.end()
    if kind == "dictionary":
        return _parse_dictionary(data, end)
    if kind == "array":
        return _parse_array(data, end)
    if kind == "string":
        return b"()", _string_end(data, end)
    if kind == "ref":
        return _key_matched(token), end
    return token[kind or 0], end


def _parse_dictionary(data: bytes, pos: int) -> tuple[dict[bytes, object], int]:
    entries: dict[bytes, object] = {}
    while (entry := _parse(data, pos))[0] != b">>":
        key, pos = entry
        value, pos = _parse(data, pos)
        if not isinstance(key, bytes) or not key.startswith(b"/") or value in CLOSERS:
            raise _Unfit("a dictionary entry that is not a name and a value")
        entries[key] = value
    return entries, entry[1]


def _parse_array(data: bytes, pos: int) -> tuple[list[object], int]:
    items: list[object] = []
    while (item := _parse(data, pos))[0] != b"]":
        if item[0] == b">>":
            raise _Unfit("an array ended by >>")
        items.append(item[0])
        pos = item[1]
    return items, item[1]


def _key_matched(match: re.Match[bytes]) -> Key:
    return (int(match["num"]), int(match["gen"]))


def _key_value(value: object) -> Key:
    if not isinstance(value, tuple):
        raise _Unfit("a reference expected")
    return value


def _dictionary(value: object) -> dict[bytes, object]:
    if not isinstance(value, dict):
        raise _Unfit("a dictionary expected")
    return value


def _bytes_value(value: object) -> bytes:
    if not isinstance(value, bytes):
        raise _Unfit("a number expected")
    return value

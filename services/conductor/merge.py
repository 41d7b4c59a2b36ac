"""Merging: a batch's PDFs joined into one by qpdf (pikepdf), in a folder on disk, so
memory does not grow with the documents' content.

`Merger.add` takes one document at a time: it is written to the folder and opened from
there (qpdf reads a file's objects when they are used, and a stream's data only when it
writes the stream), checked, and its pages queued. Every `GROUP` documents are merged
into a part file, after which their files are closed and deleted; `end` merges the parts
into the output file. Memory is the pages' dictionaries of one group, then of the parts,
never the documents' content; open files are one group's, then the parts.

What a page keeps: its contents, resources (fonts, images), annotations, and the
attributes it inherited from its page tree, made its own (qpdf does this as it copies a
page). A link to another page of the same document leads to that page's copy; a link by
name (`/Dest (name)`, whose target the source's catalog holds) is made a link to the page
the name points to, or dropped if the name leads nowhere. A document with an outline
gets one entry in the merged outline, named by its file name, with its own outline under
it (pointing at its pages' copies). What is left behind: the documents' structure trees
(their pages' `/StructParents` dropped), forms and metadata.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pikepdf
from pikepdf import Array, Dictionary, Name, OutlineItem, String

from services.pdftools import outlines
from services.pdftools.document import guard

GROUP = 100
"""Documents merged into one part file before their files are closed."""
_MAX_DEPTH = 15  # outline levels copied (pikepdf's default)
_WRITE: dict[str, Any] = {
    "object_stream_mode": pikepdf.ObjectStreamMode.generate,
    "compress_streams": True,
}
"""The merged file: object streams and compressed structure (the parts, read once
again, are written plainly: faster)."""


class NotMergeable(Exception):
    """The document could not be read as a PDF (an image, a truncated or encrypted file),
    or has no page; nothing of it was merged."""


@dataclass
class Entry:
    """An outline entry, kept as plain values until the merged file is written."""

    title: str
    page: int
    children: list[Entry] = field(default_factory=list)


class Merger:
    """One merged PDF of documents given in order (`add`), written to `folder` (`end`)."""

    def __init__(self, folder: Path, group: int = GROUP) -> None:
        guard()  # qpdf's decoding limits: a hostile stream cannot take the memory
        self.folder = folder
        self.group = group
        self.pages = 0
        self.outline: list[Entry] = []
        self._open: list[pikepdf.Pdf] = []  # this group's documents
        self._parts: list[Path] = []
        self._count = 0

    def add(self, document: bytes, name: str) -> int:
        """Queue `document`'s pages after those before; how many. `NotMergeable` if it
        cannot be read, and then nothing of it is kept."""
        path = self.folder / f"in-{self._count}.pdf"
        self._count += 1
        path.write_bytes(document)
        pdf = _opened(path)
        try:
            pages = _prepared(pdf)
            entries = _outline(pdf)
        except (pikepdf.PdfError, pikepdf.ForeignObjectError, RecursionError) as exc:
            pdf.close()
            raise NotMergeable(str(exc) or type(exc).__name__) from None
        finally:
            path.unlink()  # open files stay readable: the name is not needed any more
        if entries:
            self.outline.append(Entry(name, self.pages, entries))
        self.pages += pages
        self._open.append(pdf)
        if len(self._open) >= self.group:
            self._flush()
        return pages

    def end(self) -> Path:
        """The merged file: the parts' pages in order, and the outline."""
        self._flush()
        out = pikepdf.new()
        parts = [pikepdf.open(p, access_mode=pikepdf.AccessMode.stream) for p in self._parts]
        try:
            for part in parts:
                out.pages.extend(part.pages)
            if self.outline:
                with out.open_outline(max_depth=_MAX_DEPTH) as outline:
                    outline.root.extend(_item(entry) for entry in self.outline)
            target = self.folder / "merged.pdf"
            out.save(target, **_WRITE)
        finally:
            for part in parts:
                part.close()
            out.close()
        for path in self._parts:
            path.unlink()
        return target

    def _flush(self) -> None:
        """This group's documents into a part file; their files closed."""
        if not self._open:
            return
        out = pikepdf.new()
        try:
            for pdf in self._open:
                out.pages.extend(pdf.pages)
            for page in out.pages:
                if "/StructParents" in page.obj:  # no structure tree to point into
                    del page.obj["/StructParents"]
            path = self.folder / f"part-{len(self._parts)}.pdf"
            out.save(path)
        finally:
            for pdf in self._open:
                pdf.close()
            self._open.clear()
            out.close()
        self._parts.append(path)


def _opened(path: Path) -> pikepdf.Pdf:
    try:
        return pikepdf.open(path, access_mode=pikepdf.AccessMode.stream)
    except (pikepdf.PdfError, ValueError, RecursionError) as exc:  # PasswordError included
        path.unlink()
        raise NotMergeable(str(exc) or type(exc).__name__) from None


def _prepared(pdf: pikepdf.Pdf) -> int:
    """`pdf`'s page count, its links by name made explicit (or dropped); `NotMergeable`
    for a document without a page."""
    count = len(pdf.pages)
    if count == 0:
        raise NotMergeable("it has no page that can be read")
    for page in pdf.pages:
        annots = page.obj.get("/Annots")
        if isinstance(annots, Array):
            kept = [a for a in annots if _linked(pdf, a)]
            if len(kept) != len(annots):
                page.obj.Annots = Array(kept)
    return count


def _linked(pdf: pikepdf.Pdf, annot: Any) -> bool:
    """Make `annot`'s link by name a link to its page; False if the name leads nowhere."""
    if not isinstance(annot, Dictionary):
        return True
    action = annot.get("/A")
    if isinstance(action, Dictionary) and action.get("/S") == Name.GoTo:
        goal = action.get("/D")
    elif "/Dest" in annot:
        goal = annot.Dest
    else:
        return True
    if not isinstance(goal, String | Name):
        return True
    found = outlines.explicit(pdf, goal)
    if found is None:
        return False
    if "/A" in annot:
        del annot["/A"]
    annot.Dest = found
    return True


def _outline(pdf: pikepdf.Pdf) -> list[Entry]:
    """`pdf`'s outline as entries pointing at its pages' indexes (empty: it has none or
    one that cannot be read)."""
    if "/Outlines" not in pdf.Root:
        return []
    pages = outlines.page_index(pdf)
    try:  # read, not `with`: leaving the block would write the outline back
        outline = pdf.open_outline(max_depth=_MAX_DEPTH)
        return [_entry(item, pdf, pages) for item in outline.root]
    except (pikepdf.OutlineStructureError, pikepdf.PdfError, RecursionError):
        return []


def _entry(item: OutlineItem, pdf: pikepdf.Pdf, pages: outlines.Pages) -> Entry:
    page = outlines.target(item, pdf, pages) or 0
    return Entry(str(item.title), page, [_entry(child, pdf, pages) for child in item.children])


def _item(entry: Entry) -> OutlineItem:
    """A document's entry: at its first page, its own outline under it."""
    item = OutlineItem(entry.title, entry.page)
    item.children.extend(_nested(child, entry.page) for child in entry.children)
    return item


def _nested(entry: Entry, start: int) -> OutlineItem:
    """An entry of a document's own outline, whose pages count from `start`."""
    item = OutlineItem(entry.title, start + entry.page)
    item.children.extend(_nested(child, start) for child in entry.children)
    return item

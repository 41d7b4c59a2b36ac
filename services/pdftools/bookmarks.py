"""A document's bookmarks (its outline) read as, and written from, a tree of
`{title, page, children}` with pages from 1: the shape Gotenberg's bookmark routes use.

Reading follows every kind of destination (`outlines.target`); an entry whose page is
not in the document reads as page 0. Writing replaces the whole outline."""

from __future__ import annotations

import pikepdf

from services.pdftools.document import Document
from services.pdftools.outlines import page_index, target
from services.pdftools.report import BookmarkFacts
from services.pdftools.steps import Bookmark

MAX_DEPTH = 32
"""Deepest outline read: a deeper (or looping) one is cut there."""


def read(doc: Document) -> BookmarkFacts:
    """The document's outline as a tree of bookmarks."""
    pdf = doc.view()
    pages = page_index(pdf)
    with pdf.open_outline() as outline:
        tree = [_read(item, pdf, pages, 0) for item in outline.root]
    return BookmarkFacts(document=doc.name, bookmarks=tree)


def _read(item: pikepdf.OutlineItem, pdf: pikepdf.Pdf, pages: dict[tuple[int, int], int],
          depth: int) -> Bookmark:  # fmt: skip
    index = target(item, pdf, pages)
    children = (
        [] if depth >= MAX_DEPTH else [_read(c, pdf, pages, depth + 1) for c in item.children]
    )
    return Bookmark(title=str(item.title or ""), page=0 if index is None else index + 1,
                    children=children)  # fmt: skip


def write(doc: Document, bookmarks: list[Bookmark]) -> list[str]:
    """Replace the document's outline with `bookmarks`; notes for entries past its last
    page (left out)."""
    pdf = doc.pdf()
    notes: list[str] = []
    with pdf.open_outline() as outline:
        outline.root.clear()
        outline.root.extend(_made(bookmarks, len(pdf.pages), notes))
    return notes


def _made(given: list[Bookmark], count: int, notes: list[str]) -> list[pikepdf.OutlineItem]:
    made = []
    for mark in given:
        if mark.page > count:
            notes.append(f"bookmark {mark.title!r} names page {mark.page} of {count}: left out")
            continue
        item = pikepdf.OutlineItem(mark.title, mark.page - 1)
        item.children.extend(_made(mark.children, count, notes))
        made.append(item)
    return made

"""The `merge` step: every document, in order, as one, with an outline entry per input
named by its file name and that input's own outline kept under its entry.

What does not survive a merge, by design of the step (said in the report): each
input's structure tree (the result is untagged: its pages' /StructParents are
dropped, as no tree is left for them to point into) and its form fields' catalog
entries (flatten forms before merging to keep what they show).
"""

from __future__ import annotations

import pikepdf
from pikepdf import OutlineItem

from services.pdftools import outlines
from services.pdftools.document import Document
from services.pdftools.steps import Merge

_MAX_DEPTH = 15  # outline levels copied (pikepdf's default)


def merge(docs: list[Document], step: Merge) -> tuple[list[Document], list[str]]:
    """The one merged document, and notes for the report."""
    out = pikepdf.new()
    notes: list[str] = []
    with out.open_outline(max_depth=_MAX_DEPTH) as outline:
        for doc in docs:
            source = doc.view()
            start = len(out.pages)
            out.pages.extend(source.pages)
            if step.outline:
                entry = OutlineItem(doc.name, start)
                entry.children.extend(_copied(source, start, doc.name, notes))
                outline.root.append(entry)
    for page in out.pages:
        if "/StructParents" in page.obj:
            del page.obj["/StructParents"]
    if any("/StructTreeRoot" in doc.view().Root for doc in docs):
        notes.append("the inputs' structure trees are not merged: the result is untagged")
    return [Document.made(step.name, out, sources=docs)], notes


def _copied(source: pikepdf.Pdf, start: int, name: str, notes: list[str]) -> list[OutlineItem]:
    """`source`'s outline as new items pointing at its pages' places after `start`."""
    if "/Outlines" not in source.Root:
        return []
    pages = outlines.page_index(source)
    try:  # read, not `with`: leaving the block would write the source's outline back
        outline = source.open_outline(max_depth=_MAX_DEPTH)
        return [_item(item, source, pages, start) for item in outline.root]
    except (pikepdf.OutlineStructureError, pikepdf.PdfError, RecursionError) as exc:
        notes.append(f"{name}'s outline could not be read and was left out: {exc}")
        return []


def _item(item: OutlineItem, source: pikepdf.Pdf, pages: outlines.Pages, start: int) -> OutlineItem:
    """`item` and its children, pointing where they did (else at the input's first page)."""
    copy = OutlineItem(item.title, start + (outlines.target(item, source, pages) or 0))
    copy.children.extend(_item(child, source, pages, start) for child in item.children)
    return copy

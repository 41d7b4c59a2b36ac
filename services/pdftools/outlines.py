"""Where an outline item goes: the page its destination names, whether given as an
explicit destination, a /GoTo action, or a named destination (the catalog's /Dests or
the /Dests name tree). `merge` copies outlines and `split` cuts at their entries."""

from __future__ import annotations

from typing import Any

import pikepdf

Pages = dict[tuple[int, int], int]
"""Each page object's object id and its index in the document."""


def page_index(source: pikepdf.Pdf) -> Pages:
    return {page.obj.objgen: index for index, page in enumerate(source.pages)}


def target(item: pikepdf.OutlineItem, source: pikepdf.Pdf, pages: Pages) -> int | None:
    """The index of the page `item` goes to (None: no page of this document)."""
    goal: Any = item.destination
    if goal is None and item.action is not None and item.action.get("/S") == "/GoTo":
        goal = item.action.get("/D")
    if isinstance(goal, pikepdf.String | pikepdf.Name):
        goal = _named(source, goal)
    if isinstance(goal, pikepdf.Dictionary):
        goal = goal.get("/D")
    if isinstance(goal, pikepdf.Array) and len(goal) > 0:
        page = goal[0]
        if isinstance(page, pikepdf.Dictionary):
            return pages.get(page.objgen)
    return None


def _named(source: pikepdf.Pdf, name: pikepdf.Object) -> pikepdf.Object | None:
    dests = source.Root.get("/Dests")
    if isinstance(dests, pikepdf.Dictionary) and isinstance(name, pikepdf.Name):
        return dests.get(name)
    tree = source.Root.get("/Names", pikepdf.Dictionary()).get("/Dests")
    if tree is None:
        return None
    found: pikepdf.Object | None = pikepdf.NameTree(tree).get(str(name))
    return found

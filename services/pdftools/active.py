"""Active content: JavaScript and launch actions a PDF carries, found where PDF puts
them (the catalog's /OpenAction and /AA, the /JavaScript name tree, pages' /AA,
annotations' /A and /AA, form fields' /AA, outline items' /A), each chain of /Next
actions followed a bounded way.

PDF tools refuse an input with any (`PdfActiveContent`): a document Pressroom writes
never runs a script it was handed. `validate` reports them instead.
"""

from __future__ import annotations

from collections.abc import Iterator

import pikepdf

ACTIVE = frozenset({"/JavaScript", "/Launch"})
_MAX_CHAIN = 64  # /Next actions followed from one place
_MAX_FIELDS = 10_000  # form fields walked
_MAX_DEPTH = 32  # nesting of form fields


def found(pdf: pikepdf.Pdf) -> list[str]:
    """Where `pdf` holds JavaScript or launch actions (empty: nowhere)."""
    return list(_places(pdf))


def _places(pdf: pikepdf.Pdf) -> Iterator[str]:
    root = pdf.Root
    if _active(root.get("/OpenAction")):
        yield "the catalog's /OpenAction"
    if _any_active(root.get("/AA")):
        yield "the catalog's /AA"
    names = root.get("/Names")
    if isinstance(names, pikepdf.Dictionary) and "/JavaScript" in names:
        yield "the document-level /JavaScript name tree"
    for number, page in enumerate(pdf.pages, start=1):
        yield from _page(page.obj, number)
    if _fields_active(root.get("/AcroForm")):
        yield "a form field's /AA"
    if _outline_active(root.get("/Outlines")):
        yield "an outline item's action"


def _page(page: pikepdf.Object, number: int) -> Iterator[str]:
    if _any_active(page.get("/AA")):
        yield f"page {number}'s /AA"
    for annotation in _array(page.get("/Annots")):
        if isinstance(annotation, pikepdf.Dictionary) and (
            _active(annotation.get("/A")) or _any_active(annotation.get("/AA"))
        ):
            yield f"an annotation on page {number}"
            return


def _active(action: pikepdf.Object | None) -> bool:
    """Whether `action`, or one of the actions chained after it, is active."""
    pending = [action]
    for _ in range(_MAX_CHAIN):
        if not pending:
            return False
        current = pending.pop()
        if isinstance(current, pikepdf.Array):
            pending.extend(current)
        elif isinstance(current, pikepdf.Dictionary):
            if current.get("/S") in ACTIVE or "/JS" in current:
                return True
            pending.append(current.get("/Next"))
    return bool(pending)  # a chain longer than any real one: treated as active


def _any_active(triggers: pikepdf.Object | None) -> bool:
    if not isinstance(triggers, pikepdf.Dictionary):
        return False
    return any(_active(action) for action in triggers.values())


def _array(value: pikepdf.Object | None) -> list[pikepdf.Object]:
    return list(value) if isinstance(value, pikepdf.Array) else []


def _fields_active(form: pikepdf.Object | None) -> bool:
    if not isinstance(form, pikepdf.Dictionary):
        return False
    pending = [(field, 0) for field in _array(form.get("/Fields"))]
    for _ in range(_MAX_FIELDS):
        if not pending:
            return False
        field, depth = pending.pop()
        if not isinstance(field, pikepdf.Dictionary):
            continue
        if _any_active(field.get("/AA")) or _active(field.get("/A")):
            return True
        if depth < _MAX_DEPTH:
            pending.extend((kid, depth + 1) for kid in _array(field.get("/Kids")))
    return False


def _outline_active(outlines: pikepdf.Object | None) -> bool:
    """Whether an outline item's action is active: each item visited once, at most
    `_MAX_FIELDS` of them (outlines that loop or are huge end the walk)."""
    pending = [outlines.get("/First")] if isinstance(outlines, pikepdf.Dictionary) else []
    seen: set[tuple[int, int]] = set()
    while pending and len(seen) < _MAX_FIELDS:
        item = pending.pop()
        if not isinstance(item, pikepdf.Dictionary) or item.objgen in seen:
            continue
        seen.add(item.objgen)
        if _active(item.get("/A")):
            return True
        pending += [item.get("/First"), item.get("/Next")]
    return False

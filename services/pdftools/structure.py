"""A tagged document's structure tree written with less: what a reader of the tags
learns stays, what it cannot tell from the rest goes.

Chromium writes one structure element per table cell and, inside most cells, one more
(`/NonStruct`, "no semantics: its content is treated as if it were directly contained by
its parent", ISO 32000-1 14.8.4.2) around the cell's text; every element says
`/Type /StructElem` (optional), and every cell carries attributes at their defaults
(`/RowSpan 1`, `/ColSpan 1`). On a table-heavy document these are most of the file's
bytes even with object streams. `slim`:

- lifts the content of each such `/NonStruct` (no attributes, id, language or
  alternate text of its own) into its parent: marked-content ids stay bare when the
  parent is on the same page, else become `/MCR` references naming their page; child
  elements get the parent as `/P`; the page's entries in the `/ParentTree` that named the
  lifted element name its parent;
- drops `/Type /StructElem` and table attributes at their defaults, and attribute
  dictionaries left with nothing but their owner;
- makes identical attribute dictionaries one shared object (every cell of a column
  names the same header: one dictionary per column instead of one per cell).

Every page's marked content keeps exactly one parent element, so readers (screen
readers, PDF/UA checkers) see the same tree, less the elements without meaning. The tree
is walked without recursion, each element once (a hostile tree may loop).
"""

from __future__ import annotations

from typing import Any

import pikepdf
from pikepdf import Array, Dictionary, Name

_PLAIN = frozenset({"/Type", "/S", "/P", "/K", "/Pg"})
"""The keys of a `/NonStruct` that has nothing of its own."""
_DEFAULTS = (("/RowSpan", 1), ("/ColSpan", 1))
_NONSTRUCT = Name.NonStruct
_STRUCT_ELEM = Name.StructElem
_MARKS = (Name.MCR, Name.OBJR)
MAX_ELEMENTS = 2_000_000
"""Structure elements walked at most (beyond it the tree is left as it is)."""


def slim(pdf: pikepdf.Pdf) -> int:
    """Slim `pdf`'s structure tree in place; how many elements were lifted."""
    root = pdf.Root.get("/StructTreeRoot")
    if not isinstance(root, Dictionary):
        return 0
    for _ in pdf.objects:  # resolved in file order: far faster than one by one, later
        pass
    lifted: dict[tuple[int, int], Dictionary] = {}
    shared: dict[bytes, Dictionary] = {}
    seen: set[tuple[int, int]] = set()
    todo = [k for k in _kids(root) if _is_element(k)]
    while todo and len(seen) < MAX_ELEMENTS:
        element = todo.pop()
        if element.is_indirect:
            if element.objgen in seen:
                continue
            seen.add(element.objgen)
        _trim(element)
        _share(pdf, element, shared)
        kids = _kids(element)
        elements = [k for k in kids if _is_element(k)]
        todo += elements
        if any(k.get("/S") == _NONSTRUCT for k in elements):
            _lift(element, kids, lifted)
    tree = root.get("/ParentTree")
    if lifted and isinstance(tree, Dictionary):
        _repoint(tree, lifted)
    return len(lifted)


def _kids(element: Dictionary) -> list[Any]:
    found = element.get("/K")
    if found is None:
        return []
    return list(found) if isinstance(found, Array) else [found]


def _is_element(value: Any) -> bool:
    return isinstance(value, Dictionary) and "/S" in value and value.get("/Type") not in _MARKS


def _liftable(kid: Any, parent: Dictionary) -> bool:
    return (
        isinstance(kid, Dictionary)
        and kid.get("/S") == _NONSTRUCT
        and kid.is_indirect
        and set(kid.keys()) <= _PLAIN
        and "/K" in kid
        and isinstance(kid.get("/P"), Dictionary)
        and parent.is_indirect
        and kid.P.objgen == parent.objgen
    )


def _lift(parent: Dictionary, kids: list[Any], lifted: dict[tuple[int, int], Dictionary]) -> None:
    """`parent`'s kids with each liftable `/NonStruct` replaced by its own kids."""
    new: list[Any] = []
    for kid in kids:
        if not _liftable(kid, parent):
            new.append(kid)
            continue
        page = kid.get("/Pg")
        if "/Pg" not in parent and page is not None and not any(isinstance(k, int) for k in new):
            parent.Pg = page
        same_page = page is not None and _same(parent.get("/Pg"), page)
        for grandchild in _kids(kid):
            new.append(_moved(grandchild, parent, page, same_page))
        lifted[kid.objgen] = parent
    parent.K = new[0] if len(new) == 1 else Array(new)


def _moved(item: Any, parent: Dictionary, page: Any, same_page: bool) -> Any:
    """A kid of a lifted element, as a kid of `parent`."""
    if isinstance(item, int) and not same_page and page is not None:
        return Dictionary(Type=Name.MCR, Pg=page, MCID=item)
    if _is_element(item):
        item.P = parent
    elif isinstance(item, Dictionary) and "/Pg" not in item and page is not None:
        item.Pg = page  # an /MCR or /OBJR relied on the lifted element's page
    return item


def _same(one: Any, other: Any) -> bool:
    return (
        isinstance(one, Dictionary)
        and isinstance(other, Dictionary)
        and one.is_indirect
        and other.is_indirect
        and one.objgen == other.objgen
    )


def _trim(element: Dictionary) -> None:
    """No `/Type /StructElem`; table attributes at their defaults left out."""
    if "/Type" in element and element.Type == _STRUCT_ELEM:
        del element["/Type"]
    given = element.get("/A")
    if given is None or given.is_indirect:
        return
    attributes = list(given) if isinstance(given, Array) else [given]
    kept = [a for a in attributes if not _emptied(a)]
    if not kept:
        del element["/A"]
    elif len(kept) == 1 and isinstance(kept[0], Dictionary):
        element.A = kept[0]
    elif len(kept) != len(attributes):
        element.A = Array(kept)


def _share(pdf: pikepdf.Pdf, element: Dictionary, shared: dict[bytes, Dictionary]) -> None:
    """`element`'s direct attribute dictionary as the one object all its equals are."""
    given = element.get("/A")
    if not isinstance(given, Dictionary) or given.is_indirect:
        return
    key = given.unparse()
    found = shared.get(key)
    if found is None:
        found = shared[key] = pdf.make_indirect(given)
    element.A = found


def _emptied(attribute: Any) -> bool:
    """Whether a direct attribute dictionary says nothing once its defaults are out."""
    if not isinstance(attribute, Dictionary) or attribute.is_indirect:
        return False
    for key, default in _DEFAULTS:
        if attribute.get(key) == default:
            del attribute[key]
    return set(attribute.keys()) <= {"/O"}


def _repoint(tree: Dictionary, lifted: dict[tuple[int, int], Dictionary]) -> None:
    """The `/ParentTree`'s entries that named a lifted element name its parent."""
    seen: set[tuple[int, int]] = set()
    todo = [tree]
    while todo:
        node = todo.pop()
        if node.is_indirect:
            if node.objgen in seen:
                continue
            seen.add(node.objgen)
        nums = node.get("/Nums")
        if isinstance(nums, Array):
            for index in range(1, len(nums), 2):
                _repoint_value(nums, index, lifted)
        todo += [kid for kid in node.get("/Kids", ()) if isinstance(kid, Dictionary)]


def _repoint_value(nums: Array, index: int, lifted: dict[tuple[int, int], Dictionary]) -> None:
    """One `/Nums` value: a page's array of parents (by MCID), or one parent."""
    value = nums[index]
    if isinstance(value, Array):
        for position, entry in enumerate(value):
            if _is_lifted(entry, lifted):
                value[position] = lifted[entry.objgen]
    elif _is_lifted(value, lifted):
        nums[index] = lifted[value.objgen]


def _is_lifted(value: Any, lifted: dict[tuple[int, int], Dictionary]) -> bool:
    return isinstance(value, Dictionary) and value.is_indirect and value.objgen in lifted

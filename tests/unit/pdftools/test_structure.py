"""`structure.slim` on trees made here: a `/NonStruct` wrapper lifted into its parent
with the `/ParentTree` repointed, one with something of its own kept, content on another
page kept as an `/MCR` naming it, and a tree that loops walked once."""

from __future__ import annotations

import pikepdf
from pikepdf import Array, Dictionary, Name

from services.pdftools.structure import slim


def tagged(pages: int = 1) -> tuple[pikepdf.Pdf, Dictionary]:
    """A document of `pages` blank pages with a tree root and an empty `Document` element."""
    pdf = pikepdf.new()
    for _ in range(pages):
        pdf.add_blank_page()
    root = pdf.make_indirect(Dictionary(Type=Name.StructTreeRoot))
    document = pdf.make_indirect(Dictionary(Type=Name.StructElem, S=Name.Document, P=root))
    root.K = document
    root.ParentTree = pdf.make_indirect(Dictionary(Nums=Array([])))
    pdf.Root.StructTreeRoot = root
    return pdf, document


def element(pdf: pikepdf.Pdf, kind: str, parent: Dictionary, **more: object) -> Dictionary:
    made = pdf.make_indirect(Dictionary(Type=Name.StructElem, S=Name("/" + kind), P=parent, **more))
    kids = parent.get("/K")
    given = list(kids) if isinstance(kids, Array) else [] if kids is None else [kids]
    parent.K = Array([*given, made])
    return made


def test_a_wrapper_without_meaning_is_lifted_and_the_parent_tree_names_its_parent() -> None:
    pdf, document = tagged()
    page = pdf.pages[0].obj
    cell = element(pdf, "TD", document, Pg=page, A=Dictionary(O=Name.Table, RowSpan=1))
    wrapper = element(pdf, "NonStruct", cell, Pg=page, K=0)
    kept = element(pdf, "NonStruct", cell, Pg=page, K=1, Alt=pikepdf.String("a chart"))
    pdf.Root.StructTreeRoot.ParentTree.Nums = Array([0, Array([wrapper, kept])])
    page.StructParents = 0
    assert slim(pdf) == 1
    first, second = list(cell.K)
    assert first == 0 and second.objgen == kept.objgen
    parents = pdf.Root.StructTreeRoot.ParentTree.Nums[1]
    assert [p.objgen for p in parents] == [cell.objgen, kept.objgen]
    assert "/A" not in cell and "/Type" not in cell  # only defaults and the optional /Type


def test_content_on_another_page_becomes_an_mcr_naming_its_page() -> None:
    pdf, document = tagged(pages=2)
    first, second = pdf.pages[0].obj, pdf.pages[1].obj
    paragraph = element(pdf, "P", document, Pg=first, K=0)
    element(pdf, "NonStruct", paragraph, Pg=second, K=3)
    assert slim(pdf) == 1
    kids = list(paragraph.K)
    assert kids[0] == 0 and kids[1].MCID == 3 and kids[1].Pg.objgen == second.objgen


def test_a_tree_that_loops_is_walked_once() -> None:
    pdf, document = tagged()
    section = element(pdf, "Sect", document)
    element(pdf, "NonStruct", section, Pg=pdf.pages[0].obj, K=0)
    section.K = Array([*section.K, document])  # back to an ancestor
    assert slim(pdf) == 1

"""The steps that change pages in place: `rotate` (clockwise, all pages or some) and
`flatten` (form fields and annotations drawn into the page content, by qpdf)."""

from __future__ import annotations

from services.core.model.options import page_numbers
from services.pdftools.document import Document
from services.pdftools.steps import Rotate


def rotate(doc: Document, step: Rotate) -> None:
    pdf = doc.pdf()
    for number in page_numbers(step.pages, len(pdf.pages)):
        pdf.pages[number - 1].rotate(step.angle, relative=True)


def flatten(doc: Document) -> list[str]:
    """Flatten `doc`; a note when it had nothing to flatten."""
    pdf = doc.pdf()
    annotated = sum(len(page.obj.get("/Annots", ())) for page in pdf.pages)
    if "/AcroForm" in pdf.Root:
        pdf.generate_appearance_streams()  # fields whose values have no appearance yet
    pdf.flatten_annotations("all")
    left = sum(len(page.obj.get("/Annots", ())) for page in pdf.pages)
    return [f"{doc.name}: {annotated - left} of {annotated} annotations flattened"]

"""The `facturx` step (and `options.facturx`): the invoice's CII XML, checked first
(`invoice.checked`: its own profile equal to the declared one, valid against that
profile's Factur-X XSD), embedded as `factur-x.xml` (MIME text/xml) with the
relationship its profile calls for, in a PDF/A-3b whose XMP carries the Factur-X
properties and their extension schema (`extension`), as Factur-X 1.0 asks so
e-invoicing software finds the invoice."""

from __future__ import annotations

from services.core.model.finishingoptions import FACTURX_FILE
from services.pdftools import invoice, pdfa
from services.pdftools.attachments import embed
from services.pdftools.document import Document
from services.pdftools.xmp import FACTURX, Extension

FILE_NAME = FACTURX_FILE
NAMESPACE = FACTURX
DATA_ONLY = ("MINIMUM", "BASIC WL")
"""Profiles that do not hold a whole invoice: their XML is /Data, the others' /Alternative
(the PDF and the XML are the same invoice)."""


def relationship(profile: str) -> str:
    return "Data" if profile in DATA_ONLY else "Alternative"


def apply(doc: Document, xml: str, declared: str | None, icc_profile: str, where: str) -> list[str]:
    """Check the invoice, embed it and make `doc` a PDF/A-3b with the Factur-X XMP;
    the PDF/A warnings (constructs not checked). `where` names the XML in errors."""
    profile = invoice.checked(xml, declared, where)
    embed(doc.pdf(), FILE_NAME, xml.encode(), "text/xml", relationship(profile))
    return pdfa.convert(doc, "3b", icc_profile, [extension(profile)])


def extension(profile: str) -> Extension:
    """The Factur-X properties of the XMP, and their extension schema (Factur-X 1.0)."""
    return Extension(
        prefix="fx",
        schema="Factur-X PDFA Extension Schema",
        values={
            "DocumentType": "INVOICE",
            "DocumentFileName": FILE_NAME,
            "Version": "1.0",
            "ConformanceLevel": profile,
        },
        kinds={
            "DocumentFileName": ("Text", "external", "The name of the embedded XML document"),
            "DocumentType": (
                "Text",
                "external",
                "The type of the hybrid document in capital letters",
            ),
            "Version": ("Text", "external", "The actual version of the Factur-X XML schema"),
            "ConformanceLevel": (
                "Text",
                "external",
                "The conformance level of the embedded XML document",
            ),
        },
    )

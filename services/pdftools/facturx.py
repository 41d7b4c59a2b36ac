"""The `facturx` step (and `options.facturx`): the invoice's CII XML, checked first
(`invoice.checked`: its own profile equal to the declared one, valid against that
profile's Factur-X XSD), embedded as `factur-x.xml` (MIME text/xml) with the
relationship its profile calls for, in a PDF/A-3b whose XMP carries the Factur-X
properties and their extension schema (`xmp_extra`), as Factur-X 1.0 asks so
e-invoicing software finds the invoice."""

from __future__ import annotations

from services.pdftools import invoice, pdfa
from services.pdftools.attachments import embed
from services.pdftools.document import Document
from services.pdftools.xmp import FACTURX

FILE_NAME = "factur-x.xml"
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
    return pdfa.convert(doc, "3b", icc_profile, extension=xmp_extra(profile))


def xmp_extra(profile: str) -> str:
    """The XMP descriptions of the Factur-X properties and of their extension schema."""
    return (
        f'<rdf:Description rdf:about="" xmlns:fx="{NAMESPACE}">\n'
        f"<fx:DocumentType>INVOICE</fx:DocumentType>"
        f"<fx:DocumentFileName>{FILE_NAME}</fx:DocumentFileName>"
        f"<fx:Version>1.0</fx:Version>"
        f"<fx:ConformanceLevel>{profile}</fx:ConformanceLevel>\n"
        "</rdf:Description>\n" + _EXTENSION_SCHEMA
    )


def _property(name: str, description: str) -> str:
    return (
        f'<rdf:li rdf:parseType="Resource"><pdfaProperty:name>{name}</pdfaProperty:name>'
        "<pdfaProperty:valueType>Text</pdfaProperty:valueType>"
        "<pdfaProperty:category>external</pdfaProperty:category>"
        f"<pdfaProperty:description>{description}</pdfaProperty:description></rdf:li>\n"
    )


_EXTENSION_SCHEMA = (
    '<rdf:Description rdf:about=""'
    ' xmlns:pdfaExtension="http://www.aiim.org/pdfa/ns/extension/"'
    ' xmlns:pdfaSchema="http://www.aiim.org/pdfa/ns/schema#"'
    ' xmlns:pdfaProperty="http://www.aiim.org/pdfa/ns/property#">\n'
    '<pdfaExtension:schemas><rdf:Bag><rdf:li rdf:parseType="Resource">\n'
    "<pdfaSchema:schema>Factur-X PDFA Extension Schema</pdfaSchema:schema>"
    f"<pdfaSchema:namespaceURI>{NAMESPACE}</pdfaSchema:namespaceURI>"
    "<pdfaSchema:prefix>fx</pdfaSchema:prefix>\n<pdfaSchema:property><rdf:Seq>\n"
    + _property("DocumentFileName", "The name of the embedded XML document")
    + _property("DocumentType", "The type of the hybrid document in capital letters")
    + _property("Version", "The actual version of the Factur-X XML schema")
    + _property("ConformanceLevel", "The conformance level of the embedded XML document")
    + "</rdf:Seq></pdfaSchema:property>\n</rdf:li></rdf:Bag></pdfaExtension:schemas>\n"
    "</rdf:Description>\n"
)

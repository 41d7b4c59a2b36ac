"""`options.facturx`: the invoice's CII XML embedded as `factur-x.xml` (MIME text/xml)
with the relationship its profile calls for, in a PDF/A-3b whose XMP carries the
Factur-X extension schema (`xmp_extra`, written by `pdfa.py`), as Factur-X 1.0 asks so
e-invoicing software finds the invoice."""

from __future__ import annotations

import io

import pikepdf

from services.core.errors import FinishingError
from services.core.finishingoptions import invoice_problem
from services.core.pageoptions import FacturX, PageOptions
from services.pdftools.attachments import embed, saved
from services.pdftools.context import Context

FILE_NAME = "factur-x.xml"
NAMESPACE = "urn:factur-x:pdfa:CrossIndustryDocument:invoice:1p0#"
DATA_ONLY = ("MINIMUM", "BASIC WL")
"""Profiles that do not hold a whole invoice: their XML is /Data, the others' /Alternative
(the PDF and the XML are the same invoice)."""


def applies(options: PageOptions) -> bool:
    return options.facturx is not None


def relationship(invoice: FacturX) -> str:
    return "Data" if invoice.profile in DATA_ONLY else "Alternative"


def apply(pdf: bytes, options: PageOptions, context: Context) -> bytes:
    invoice = options.facturx
    if invoice is None:
        return pdf
    problem = invoice_problem(invoice.xml)  # the gateway checked; an older one may not have
    if problem is not None:
        raise FinishingError(f"options.facturx.xml {problem}")
    with pikepdf.open(io.BytesIO(pdf)) as doc:
        embed(doc, FILE_NAME, invoice.xml.encode(), "text/xml", relationship(invoice))
        return saved(doc)


def xmp_extra(invoice: FacturX) -> str:
    """The XMP descriptions of the Factur-X properties and of their extension schema."""
    return (
        f'<rdf:Description rdf:about="" xmlns:fx="{NAMESPACE}">\n'
        f"<fx:DocumentType>INVOICE</fx:DocumentType>"
        f"<fx:DocumentFileName>{FILE_NAME}</fx:DocumentFileName>"
        f"<fx:Version>1.0</fx:Version>"
        f"<fx:ConformanceLevel>{invoice.profile}</fx:ConformanceLevel>\n"
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

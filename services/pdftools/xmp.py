"""XMP details the libraries leave to us: the namespace prefixes as the standards spell
them, descriptions added to a packet (Factur-X's properties and extension schema), and
PDF dates.

pikepdf and pyHanko both write XMP through lxml, which names a namespace it was not told
about `ns0`: PDF/A validators and Factur-X readers look for `fx:`, `pdfaid:`, `pdfuaid:`.
Importing this module registers every prefix Pressroom writes with lxml (process-wide,
which is what both libraries read), so a packet they rewrite (pyHanko does, when it
signs) keeps the standard prefixes.
"""

from __future__ import annotations

import datetime
from collections.abc import Sequence
from dataclasses import dataclass
from xml.sax.saxutils import escape

import pikepdf
from lxml import etree

FACTURX = "urn:factur-x:pdfa:CrossIndustryDocument:invoice:1p0#"
NAMESPACES = {
    "pdfaid": "http://www.aiim.org/pdfa/ns/id/",
    "pdfuaid": "http://www.aiim.org/pdfua/ns/id/",
    "dc": "http://purl.org/dc/elements/1.1/",
    "pdf": "http://ns.adobe.com/pdf/1.3/",
    "xmp": "http://ns.adobe.com/xap/1.0/",
    "fx": FACTURX,
    "pdfaExtension": "http://www.aiim.org/pdfa/ns/extension/",
    "pdfaSchema": "http://www.aiim.org/pdfa/ns/schema#",
    "pdfaProperty": "http://www.aiim.org/pdfa/ns/property#",
}
RDF = "http://www.w3.org/1999/02/22-rdf-syntax-ns#"
_HEADER = '<?xpacket begin="\ufeff" id="W5M0MpCehiHzreSzNTczkc9d"?>\n'.encode()
_TRAILER = b'\n<?xpacket end="w"?>'
_PARSER = etree.XMLParser(resolve_entities=False, no_network=True, remove_blank_text=False)

for _prefix, _uri in NAMESPACES.items():
    etree.register_namespace(_prefix, _uri)


def pdf_date() -> str:
    """Now as a PDF date, in UTC, with the apostrophe PDF 1.7 wants after the minutes."""
    return datetime.datetime.now(datetime.UTC).strftime("D:%Y%m%d%H%M%S+00'00'")


@dataclass(frozen=True)
class Extension:
    """Properties of a namespace PDF/A does not predefine (Factur-X's `fx`, PDF/UA's
    `pdfuaid` for PDF/A), with the PDF/A extension schema that declares them: each
    property's value, and its value type, category and description."""

    prefix: str
    schema: str
    values: dict[str, str]
    kinds: dict[str, tuple[str, str, str]]

    @property
    def uri(self) -> str:
        return NAMESPACES[self.prefix]

    def description(self) -> str:
        body = "".join(
            f"<{self.prefix}:{k}>{escape(v)}</{self.prefix}:{k}>" for k, v in self.values.items()
        )
        opening = f'<rdf:Description rdf:about="" xmlns:{self.prefix}="{self.uri}">'
        return f"{opening}{body}</rdf:Description>\n"

    def schema_item(self) -> str:
        properties = "".join(
            '<rdf:li rdf:parseType="Resource">'
            f"<pdfaProperty:name>{name}</pdfaProperty:name>"
            f"<pdfaProperty:valueType>{kind}</pdfaProperty:valueType>"
            f"<pdfaProperty:category>{category}</pdfaProperty:category>"
            f"<pdfaProperty:description>{escape(text)}</pdfaProperty:description></rdf:li>\n"
            for name, (kind, category, text) in self.kinds.items()
        )
        return (
            '<rdf:li rdf:parseType="Resource">\n'
            f"<pdfaSchema:schema>{escape(self.schema)}</pdfaSchema:schema>"
            f"<pdfaSchema:namespaceURI>{self.uri}</pdfaSchema:namespaceURI>"
            f"<pdfaSchema:prefix>{self.prefix}</pdfaSchema:prefix>\n"
            f"<pdfaSchema:property><rdf:Seq>\n{properties}</rdf:Seq></pdfaSchema:property>\n"
            "</rdf:li>"
        )


def add_extensions(pdf: pikepdf.Pdf, extensions: Sequence[Extension]) -> None:
    """Each extension's properties, and one PDF/A extension schema list declaring them all."""
    schemas = "".join(extension.schema_item() for extension in extensions)
    listing = (
        '<rdf:Description rdf:about=""'
        + "".join(
            f' xmlns:{p}="{NAMESPACES[p]}"' for p in ("pdfaExtension", "pdfaSchema", "pdfaProperty")
        )
        + f"><pdfaExtension:schemas><rdf:Bag>{schemas}</rdf:Bag></pdfaExtension:schemas>"
        "</rdf:Description>\n"
    )
    add_descriptions(pdf, "".join(e.description() for e in extensions) + listing)


def declared(pdf: pikepdf.Pdf) -> tuple[set[str], set[str]]:
    """The namespace URIs and prefixes the XMP's PDF/A extension schemas declare."""
    if "/Metadata" not in pdf.Root:
        return set(), set()
    try:
        root = etree.fromstring(pdf.Root.Metadata.read_bytes(), _PARSER)
    except etree.XMLSyntaxError:
        return set(), set()
    return _values(root, "namespaceURI"), _values(root, "prefix")


def _values(root: etree._Element, name: str) -> set[str]:
    """Each `pdfaSchema:<name>`, as an element or as an attribute (RDF's short form,
    which pyHanko writes when it rewrites a packet)."""
    tag = f"{{{NAMESPACES['pdfaSchema']}}}{name}"
    found = {e.text.strip() for e in root.iter(tag) if e.text}
    found |= {str(e.get(tag)).strip() for e in root.iter() if e.get(tag) is not None}
    return found


def add_descriptions(pdf: pikepdf.Pdf, descriptions: str) -> None:
    """Append `descriptions` (`rdf:Description` elements, as XML text) to the document's
    XMP packet, replacing earlier descriptions of the same namespaces."""
    with pdf.open_metadata(set_pikepdf_as_editor=False, update_docinfo=False):
        pass  # makes the packet when the document has none
    root = etree.fromstring(pdf.Root.Metadata.read_bytes(), _PARSER)
    rdf = root if root.tag == f"{{{RDF}}}RDF" else root.find(f"{{{RDF}}}RDF")
    if rdf is None:
        raise ValueError("the XMP packet has no rdf:RDF")
    wrapper = f'<rdf:RDF xmlns:rdf="{RDF}">{descriptions}</rdf:RDF>'
    added = list(etree.fromstring(wrapper.encode(), _PARSER))
    namespaces = {uri for element in added for uri in element.nsmap.values()} - {RDF}
    for old in list(rdf):
        if namespaces & (set(old.nsmap.values()) - {RDF}) and _describes(old, namespaces):
            rdf.remove(old)
    rdf.extend(added)
    stream = pdf.make_stream(_HEADER + etree.tostring(root, encoding="utf-8") + _TRAILER)
    stream.Type, stream.Subtype = pikepdf.Name.Metadata, pikepdf.Name.XML
    pdf.Root.Metadata = stream


def _describes(element: etree._Element, namespaces: set[str]) -> bool:
    """Whether `element` holds properties only of `namespaces`."""
    used = {etree.QName(child).namespace for child in element}
    used |= {etree.QName(name).namespace for name in element.attrib}
    return bool(used - {RDF, None}) and used - {RDF, None} <= namespaces

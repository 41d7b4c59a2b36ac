"""The XMP metadata packet of a PDF/A file, written whole from the document information
dictionary (so the two say the same, as PDF/A requires), with the PDF/A identification
and, for Factur-X, a description and extension schema of its own (`extra`)."""

from __future__ import annotations

import datetime
from xml.sax.saxutils import escape

import pikepdf
from pikepdf.models.metadata import decode_pdf_date

NAMESPACES = {
    "pdfaid": "http://www.aiim.org/pdfa/ns/id/",
    "dc": "http://purl.org/dc/elements/1.1/",
    "pdf": "http://ns.adobe.com/pdf/1.3/",
    "xmp": "http://ns.adobe.com/xap/1.0/",
}


def packet(doc: pikepdf.Pdf, part: str, conformance: str, extra: str = "") -> bytes:
    """The XMP of `doc` as PDF/A-`part``conformance`; dates are added to the document
    information when Chromium left them out."""
    info = _dated(doc)
    xmlns = " ".join(f'xmlns:{prefix}="{uri}"' for prefix, uri in NAMESPACES.items())
    body = "".join(_properties(info))
    return (
        '<?xpacket begin="\ufeff" id="W5M0MpCehiHzreSzNTczkc9d"?>\n'
        '<x:xmpmeta xmlns:x="adobe:ns:meta/">\n'
        '<rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#">\n'
        f'<rdf:Description rdf:about="" {xmlns}>\n'
        f"<pdfaid:part>{part}</pdfaid:part><pdfaid:conformance>{conformance}</pdfaid:conformance>\n"
        f"{body}</rdf:Description>\n{extra}</rdf:RDF>\n</x:xmpmeta>\n"
        '<?xpacket end="w"?>'
    ).encode()


def pdf_date() -> str:
    """Now as a PDF date, in UTC, with the apostrophe PDF 1.7 wants after the minutes."""
    return datetime.datetime.now(datetime.UTC).strftime("D:%Y%m%d%H%M%S+00'00'")


def _dated(doc: pikepdf.Pdf) -> dict[str, str]:
    now = pdf_date()
    for key in ("/CreationDate", "/ModDate"):
        if key not in doc.docinfo:
            doc.docinfo[key] = now
    return {str(k): str(v) for k, v in doc.docinfo.items() if isinstance(v, pikepdf.String)}


def _properties(info: dict[str, str]) -> list[str]:
    lines = []
    if "/Title" in info:
        lines.append(f"<dc:title>{_alt(info['/Title'])}</dc:title>\n")
    if "/Author" in info:
        author = f"<rdf:Seq><rdf:li>{escape(info['/Author'])}</rdf:li></rdf:Seq>"
        lines.append(f"<dc:creator>{author}</dc:creator>\n")
    if "/Subject" in info:
        lines.append(f"<dc:description>{_alt(info['/Subject'])}</dc:description>\n")
    simple = {
        "/Keywords": "pdf:Keywords",
        "/Producer": "pdf:Producer",
        "/Creator": "xmp:CreatorTool",
    }
    lines += [f"<{tag}>{escape(info[key])}</{tag}>\n" for key, tag in simple.items() if key in info]
    for key, tag in (("/CreationDate", "xmp:CreateDate"), ("/ModDate", "xmp:ModifyDate")):
        lines.append(f"<{tag}>{decode_pdf_date(info[key]).isoformat()}</{tag}>\n")
    return lines


def _alt(text: str) -> str:
    return f'<rdf:Alt><rdf:li xml:lang="x-default">{escape(text)}</rdf:li></rdf:Alt>'

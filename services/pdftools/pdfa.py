"""`options.pdfa` (`"2b"` or `"3b"`, and `facturx`, which is a PDF/A-3b): a PDF/A file.

What Chromium prints is close already (fonts embedded as subsets, no encryption, no
JavaScript, a trailer /ID from qpdf); this step adds what PDF/A requires beyond it:

- an sRGB output intent, the ICC profile `PRESSROOM_ICC_PROFILE`, since Chromium draws
  in DeviceRGB;
- XMP metadata equal to the document information, with the PDF/A identification
  (`xmp.py`), and the Factur-X schema when there is an invoice;
- the Print flag on every annotation (links), and no Hidden or NoView flag;
- in PDF/A-3 the catalog's /AF array naming every embedded file.

A font that is not embedded fails the job (`FinishingError`): such a file cannot conform.
"""

from __future__ import annotations

import io

import pikepdf

from services.core.errors import FinishingError
from services.core.pageoptions import PageOptions
from services.pdftools import facturx, xmp
from services.pdftools.attachments import saved
from services.pdftools.context import Context

SRGB = "sRGB IEC61966-2.1"
_PRINT, _HIDDEN, _NO_VIEW = 4, 2, 32  # annotation flags (PDF 32000-1, 12.5.3)


def applies(options: PageOptions) -> bool:
    return options.pdfa is not None or options.facturx is not None


def level(options: PageOptions) -> str:
    """`"2b"` or `"3b"`: Factur-X is always PDF/A-3b."""
    return "3b" if options.facturx is not None else options.pdfa or "3b"


def apply(pdf: bytes, options: PageOptions, context: Context) -> bytes:
    part, conformance = level(options)[0], level(options)[1].upper()
    with pikepdf.open(io.BytesIO(pdf)) as doc:
        check_fonts(doc)
        add_output_intent(doc, context.icc_profile)
        flag_annotations(doc)
        if part == "3":
            list_embedded_files(doc)
        extra = facturx.xmp_extra(options.facturx) if options.facturx is not None else ""
        doc.Root.Metadata = doc.make_stream(xmp.packet(doc, part, conformance, extra))
        doc.Root.Metadata.Type = pikepdf.Name.Metadata
        doc.Root.Metadata.Subtype = pikepdf.Name.XML
        return saved(doc)


def add_output_intent(doc: pikepdf.Pdf, icc_profile: str) -> None:
    try:
        with open(icc_profile, "rb") as file:
            profile = doc.make_stream(file.read(), N=3)
    except OSError as exc:  # the renderer's setup, not the job: still the same every time
        raise FinishingError(f"the sRGB profile for PDF/A cannot be read: {exc}") from None
    intent = pikepdf.Dictionary(
        Type=pikepdf.Name.OutputIntent,
        S=pikepdf.Name.GTS_PDFA1,
        OutputConditionIdentifier=pikepdf.String(SRGB),
        Info=pikepdf.String(SRGB),
        RegistryName=pikepdf.String("http://www.color.org"),
        DestOutputProfile=profile,
    )
    doc.Root.OutputIntents = pikepdf.Array([doc.make_indirect(intent)])


def flag_annotations(doc: pikepdf.Pdf) -> None:
    for page in doc.pages:
        for annotation in page.obj.get("/Annots", pikepdf.Array()):
            flags = int(annotation.get("/F", 0))
            annotation.F = (flags | _PRINT) & ~(_HIDDEN | _NO_VIEW)


def list_embedded_files(doc: pikepdf.Pdf) -> None:
    files = [spec.obj for spec in doc.attachments.values()]
    if files:
        doc.Root.AF = pikepdf.Array(files)


def check_fonts(doc: pikepdf.Pdf) -> None:
    """`FinishingError` naming the first font used on a page that is not embedded."""
    for number, page in enumerate(doc.pages, start=1):
        for font in _fonts(page.obj.get("/Resources", pikepdf.Dictionary())):
            if not _embedded(font):
                raise FinishingError(
                    f"font {font.get('/BaseFont')} on page {number} is not embedded"
                )


def _fonts(resources: pikepdf.Object) -> list[pikepdf.Object]:
    fonts = list(resources.get("/Font", pikepdf.Dictionary()).values())
    for xobject in resources.get("/XObject", pikepdf.Dictionary()).values():
        if xobject.get("/Subtype") == pikepdf.Name.Form and "/Resources" in xobject:
            fonts += _fonts(xobject.Resources)
    return fonts


def _embedded(font: pikepdf.Object) -> bool:
    if font.get("/Subtype") == pikepdf.Name.Type3:
        return True  # glyphs drawn by the font's own content streams
    if font.get("/Subtype") == pikepdf.Name.Type0:
        font = font.DescendantFonts[0]
    descriptor = font.get("/FontDescriptor", pikepdf.Dictionary())
    return any(key in descriptor for key in ("/FontFile", "/FontFile2", "/FontFile3"))

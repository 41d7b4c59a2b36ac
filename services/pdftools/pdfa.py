"""The `pdfa` step (and `options.pdfa`, `options.facturx`): a PDF/A-1b, 2b or 3b file,
or `PdfaNotPossible` naming why the document cannot be one.

pikepdf's PDF/A module does the work: `prepare` replaces the output intents with one for
`PRESSROOM_ICC_PROFILE` (sRGB), sets the Print flag on annotations and removes hidden
ones, adds /CIDSet to PDF/A-1 subset fonts, gives PDF/A-3 embedded files their /AF
entries, and rewrites the XMP with the PDF/A identification and the Info's values; the
document is then written with the settings the level pins (PDF/A-1: PDF 1.4, no object
streams) and the written bytes are checked by pikepdf's allowlist validator, whose
violations (veraPDF's rule ids) are the error's reasons.

Before that, what no repair can give fails at once with a plain reason: a font used on a
page that is not embedded, and embedded files in PDF/A-1 or 2. Two quirks of Chromium's
files that the allowlist does not know are tidied away first (a /Type key in /MarkInfo
and /ViewerPreferences, neither defined there; PDF 1.5's /Tabs for PDF/A-1).

pikepdf's validator does not read XMP extension schemas, so a Factur-X file's `fx:`
properties and their schema show as "namespace not permitted": exactly those findings,
for the namespaces the extension declares, are set aside (`declared_by_extension`).
"""

from __future__ import annotations

import io
from collections.abc import Sequence

import pikepdf
import pikepdf.pdfa

from services.core.model.errors import FinishingError, PdfaNotPossible
from services.pdftools import pdfua, xmp
from services.pdftools.document import Document

LEVELS = ("1b", "2b", "3b")
SRGB = "sRGB IEC61966-2.1"
_MACHINERY = tuple(xmp.NAMESPACES[p] for p in ("pdfaExtension", "pdfaSchema", "pdfaProperty"))
"""The namespaces of the extension schemas themselves."""
_MAX_REASONS = 5


def convert(
    doc: Document, level: str, icc_profile: str, extensions: Sequence[xmp.Extension] = ()
) -> list[str]:
    """Make `doc` PDF/A-`level` and write it; the validator's notes on what it does not
    check (each a warning for the report). `extensions`: XMP properties PDF/A does not
    predefine, declared by extension schemas (a PDF/UA identification is kept so)."""
    pdf = doc.pdf()
    _refuse_impossible(pdf, level, doc.name)
    _tidy(pdf, level)
    if pdfua.claimed(pdf):
        extensions = [*extensions, pdfua.EXTENSION]
    pikepdf.pdfa.prepare(
        pdf, level, output_intent=_profile(icc_profile), output_condition_identifier=SRGB
    )
    if extensions:
        xmp.add_extensions(pdf, extensions)
    doc.save_kwargs = pikepdf.pdfa.resolve_save_kwargs(level)
    doc.pdfa = level
    report = pikepdf.pdfa.validate_written(io.BytesIO(doc.data()), level, doc.save_kwargs)
    uris = {e.uri for e in extensions}
    prefixes = {e.prefix for e in extensions}
    findings = [f for f in report.findings if not declared_by_extension(f, uris, prefixes)]
    violations = [f for f in findings if f.kind == "violation"]
    if violations:
        reasons = "; ".join(f"{f.message} ({f.where}, {f.rule})" for f in violations[:_MAX_REASONS])
        more = len(violations) - _MAX_REASONS
        raise PdfaNotPossible(
            f"{doc.name} cannot be PDF/A-{level}: {reasons}"
            + (f"; and {more} more" if more > 0 else "")
        )
    return [f"PDF/A-{level} not checked: {f.message} ({f.where})" for f in findings]


def _profile(path: str) -> bytes:
    try:
        with open(path, "rb") as file:
            return file.read()
    except OSError as exc:  # the service's setup, not the job: still the same every time
        raise FinishingError(f"the sRGB profile for PDF/A cannot be read: {exc}") from None


def _refuse_impossible(pdf: pikepdf.Pdf, level: str, name: str) -> None:
    if level != "3b" and pdf.attachments:
        files = ", ".join(sorted(pdf.attachments)[:3])
        raise PdfaNotPossible(
            f"{name} cannot be PDF/A-{level}: it embeds files ({files}); PDF/A-1 allows "
            "none and PDF/A-2 only PDF/A files: use 3b"
        )
    check_fonts(pdf, name)


def _tidy(pdf: pikepdf.Pdf, level: str) -> None:
    for key in ("/MarkInfo", "/ViewerPreferences"):
        holder = pdf.Root.get(key)
        if isinstance(holder, pikepdf.Dictionary) and "/Type" in holder:
            del holder["/Type"]
    if level == "1b":
        for page in pdf.pages:
            if "/Tabs" in page.obj:
                del page.obj["/Tabs"]


def check_fonts(pdf: pikepdf.Pdf, name: str) -> None:
    """`PdfaNotPossible` naming the first font used on a page that is not embedded."""
    for number, page in enumerate(pdf.pages, start=1):
        for font in _fonts(page.obj.get("/Resources", pikepdf.Dictionary())):
            if not embedded(font):
                raise PdfaNotPossible(
                    f"{name} cannot be PDF/A: font {font.get('/BaseFont')} on page {number} "
                    "is not embedded"
                )


def _fonts(resources: pikepdf.Object, depth: int = 0) -> list[pikepdf.Object]:
    fonts = list(resources.get("/Font", pikepdf.Dictionary()).values())
    if depth > 8:  # form XObjects nest; a loop of them must not recurse forever
        return fonts
    for xobject in resources.get("/XObject", pikepdf.Dictionary()).values():
        if xobject.get("/Subtype") == pikepdf.Name.Form and "/Resources" in xobject:
            fonts += _fonts(xobject.Resources, depth + 1)
    return fonts


def embedded(font: pikepdf.Object) -> bool:
    """Whether `font`'s glyphs are in the file (a Type 3 font draws its own)."""
    if font.get("/Subtype") == pikepdf.Name.Type3:
        return True
    if font.get("/Subtype") == pikepdf.Name.Type0:
        font = font.DescendantFonts[0]
    descriptor = font.get("/FontDescriptor", pikepdf.Dictionary())
    return any(key in descriptor for key in ("/FontFile", "/FontFile2", "/FontFile3"))


def declared_by_extension(
    finding: pikepdf.pdfa.Finding, uris: set[str], prefixes: set[str]
) -> bool:
    """A finding about a namespace an extension schema declares, or about the schemas
    themselves (see the module docstring); none when no extension is declared."""
    if not uris:
        return False
    message = finding.message
    if any(uri in message for uri in (*uris, *_MACHINERY)):
        return True
    return any(f"XMP property {prefix}:" in message for prefix in (*prefixes, "pdfaExtension"))

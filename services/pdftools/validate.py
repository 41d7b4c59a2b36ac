"""The `validate` step: what a document claims, and the checks that say whether it holds.

The document is checked as written (its bytes, after every earlier step), by readers
that did not write it: pikepdf for the structures, pikepdf's PDF/A allowlist validator
for the PDF/A level the XMP claims, the `factur-x` package for an embedded invoice
(`invoice`), pyHanko for signatures (`signatures`). Each check is named (docs/pdf-tools.md's
validation table lists them) and passes, fails with a reason, or does not apply.

    claims            checks
    PDF/A part        pdfa_rules (the validator's violations), xmp_present,
                      xmp_info_consistent, output_intent, fonts_embedded, not_encrypted,
                      no_active_content, associated_files (3), no_object_streams (1)
    PDF/UA part       pdfuaid, marked, structure_tree, lang, display_doc_title, title
    Factur-X          facturx_xsd, facturx_profile (when an invoice is embedded)
    signatures        signatures_intact
"""

from __future__ import annotations

import io
import re

import pikepdf
import pikepdf.pdfa

from services.core.model.errors import InvoiceInvalid, PdfaNotPossible
from services.pdftools import active, invoice, metadata, signatures, xmp
from services.pdftools.document import Document, open_pdf
from services.pdftools.pdfa import check_fonts, declared_by_extension
from services.pdftools.report import Check, Encryption, FacturXFacts, Status, Validation

_OBJECT_STREAM = re.compile(rb"/Type\s*/ObjStm\b")
INVOICE_NAMES = ("factur-x.xml", "zugferd-invoice.xml", "xrechnung.xml")
_MAX_REASONS = 5
_MAX_INVOICE = 10 * 2**20


def _check(name: str, ok: bool, reason: str = "") -> Check:
    return Check(name, Status.PASSED if ok else Status.FAILED, "" if ok else reason)


def _not_applicable(name: str, reason: str) -> Check:
    return Check(name, Status.NOT_APPLICABLE, reason)


def validate(doc: Document) -> Validation:
    """The validation of `doc` as written."""
    data = doc.data()
    with open_pdf(data, doc.name, doc.password) as pdf:
        meta = pdf.open_metadata(set_pikepdf_as_editor=False, update_docinfo=False)
        result = Validation(
            document=doc.name,
            version=str(pdf.pdf_version),
            pages=len(pdf.pages),
            encryption=_encryption(pdf, data),
            pdfa=_claim(meta, "pdfaid:part", "pdfaid:conformance"),
            pdfua=_claim(meta, "pdfuaid:part"),
            tagged="/StructTreeRoot" in pdf.Root,
        )
        result.checks += _pdfa_checks(pdf, data, result.pdfa)
        result.checks += _pdfua_checks(pdf, result.pdfua)
        result.facturx = _facturx(pdf, meta, result.checks)
    result.signatures = signatures.found(data, doc.password)
    if result.signatures:
        broken = [s.field or "?" for s in result.signatures if not (s.intact and s.valid)]
        result.checks.append(
            _check("signatures_intact", not broken, "broken: " + ", ".join(broken))
        )
    return result


def _claim(meta: pikepdf.models.PdfMetadata, *keys: str) -> str | None:
    try:
        return "".join(str(meta[key]) for key in keys)
    except KeyError:
        return None


def _encryption(pdf: pikepdf.Pdf, data: bytes) -> Encryption | None:
    if not pdf.is_encrypted:
        return None
    info = pdf.encryption
    try:
        pikepdf.open(io.BytesIO(data)).close()
        needs_password = False
    except pikepdf.PasswordError:
        needs_password = True
    return Encryption(
        filter="Standard",
        revision=int(info.R),
        bits=int(info.bits),
        method=str(info.stream_method.name),
        needs_user_password=needs_password,
    )


def _pdfa_checks(pdf: pikepdf.Pdf, data: bytes, claim: str | None) -> list[Check]:
    if claim is None or claim.lower() not in ("1b", "2b", "3b", "1a", "2a", "3a", "2u", "3u"):
        return [_not_applicable("pdfa_rules", "the XMP claims no PDF/A level")]
    level = claim[0] + "b"  # A and U files are B files too: their B rules are checked
    report = pikepdf.pdfa.validate_written(io.BytesIO(data), level)
    uris, prefixes = xmp.declared(pdf)
    violations = [f for f in report.violations if not declared_by_extension(f, uris, prefixes)]
    reasons = "; ".join(f"{f.message} ({f.rule})" for f in violations[:_MAX_REASONS])
    checks = [_check("pdfa_rules", not violations, reasons)]
    checks.append(_check("xmp_present", "/Metadata" in pdf.Root, "no XMP metadata stream"))
    differences = metadata.differences(pdf)
    checks.append(_check("xmp_info_consistent", not differences, "; ".join(differences)))
    checks.append(
        _check("output_intent", _has_output_intent(pdf), "no output intent with an ICC profile")
    )
    checks.append(_fonts(pdf))
    checks.append(_check("not_encrypted", not pdf.is_encrypted, "the file is encrypted"))
    found = active.found(pdf)
    checks.append(_check("no_active_content", not found, "; ".join(found)))
    if level == "3b":
        checks.append(_associated(pdf))
    if level == "1b":
        streams = _OBJECT_STREAM.search(data) is not None
        checks.append(_check("no_object_streams", not streams, "PDF/A-1 forbids object streams"))
    return checks


def _has_output_intent(pdf: pikepdf.Pdf) -> bool:
    for intent in pdf.Root.get("/OutputIntents", pikepdf.Array()):
        profile = intent.get("/DestOutputProfile")
        if isinstance(profile, pikepdf.Stream) and intent.get("/S") == "/GTS_PDFA1":
            return True
    return False


def _fonts(pdf: pikepdf.Pdf) -> Check:
    try:
        check_fonts(pdf, "the document")
    except PdfaNotPossible as exc:  # its reason is the check's
        return _check("fonts_embedded", False, str(exc))
    return _check("fonts_embedded", True)


def _associated(pdf: pikepdf.Pdf) -> Check:
    listed = {spec.objgen for spec in pdf.Root.get("/AF", pikepdf.Array())}
    missing = [
        name
        for name, spec in pdf.attachments.items()
        if spec.obj.objgen not in listed or "/AFRelationship" not in spec.obj
    ]
    return _check(
        "associated_files", not missing, "not in /AF with a relationship: " + ", ".join(missing)
    )


def _pdfua_checks(pdf: pikepdf.Pdf, claim: str | None) -> list[Check]:
    """The PDF/UA identification's promises, checked when the XMP claims PDF/UA."""
    if claim is None:
        return [_not_applicable("pdfuaid", "the XMP claims no PDF/UA part")]
    root = pdf.Root
    marked = bool(root.get("/MarkInfo", pikepdf.Dictionary()).get("/Marked", False))
    preferences = root.get("/ViewerPreferences", pikepdf.Dictionary())
    shows_title = bool(preferences.get("/DisplayDocTitle", False))
    return [
        _check("pdfuaid", claim == "1", f"pdfuaid:part is {claim}, not 1"),
        _check("marked", marked, "/MarkInfo /Marked is not true"),
        _check("structure_tree", "/StructTreeRoot" in root, "no /StructTreeRoot"),
        _check("lang", bool(str(root.get("/Lang", "")).strip()), "no document /Lang"),
        _check("display_doc_title", shows_title, "/DisplayDocTitle is not true"),
        _check("title", bool(str(pdf.docinfo.get("/Title", "")).strip()), "no /Title"),
    ]


def _facturx(
    pdf: pikepdf.Pdf, meta: pikepdf.models.PdfMetadata, checks: list[Check]
) -> FacturXFacts | None:
    name = next((n for n in pdf.attachments if n.lower() in INVOICE_NAMES), None)
    if name is None:
        return None
    declared = _claim(meta, f"{{{xmp.FACTURX}}}ConformanceLevel")
    facts = FacturXFacts(file_name=name, declared_profile=declared)
    stream = pdf.attachments[name].get_file()
    if int(stream.obj.get("/Length", 0)) > _MAX_INVOICE:
        facts.problem = f"the XML is over {_MAX_INVOICE} bytes"
    else:
        _check_invoice(stream.read_bytes(), facts)
    checks.append(_check("facturx_xsd", facts.xsd_valid, facts.problem))
    checks.append(
        _check(
            "facturx_profile",
            facts.xml_profile is not None and facts.xml_profile == declared,
            f"the XMP declares {declared}, the XML is {facts.xml_profile}",
        )
    )
    return facts


def _check_invoice(xml: bytes, facts: FacturXFacts) -> None:
    try:
        root = invoice.parsed(xml, facts.file_name)
        facts.xml_profile = invoice.profile_of(root, facts.file_name)
    except InvoiceInvalid as exc:
        facts.problem = exc.message
        return
    problem = invoice.xsd_problem(root, facts.xml_profile)
    facts.xsd_valid, facts.problem = problem is None, problem or ""

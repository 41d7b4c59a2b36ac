"""PDF tools on real inputs: documents Chromium printed (tagged, with an outline) and a
form made with pikepdf, through a real worker process (`Tools` on the jail), each
output read back by readers that did not write it: `qpdf --check`, poppler (`pdfinfo`,
`pdftotext`, `pdfdetach`), pikepdf, pyHanko, and pikepdf's PDF/A validator.

PDF/A conformance is checked by the structural checks Pressroom documents (the
`validate` step and pikepdf's allowlist validator, whose rules are veraPDF's): no
veraPDF here (test_finishing.py says why).
"""

from __future__ import annotations

import io
import zipfile
from collections.abc import AsyncIterator
from pathlib import Path

import msgspec
import pikepdf
import pikepdf.pdfa
import pytest
import pytest_asyncio
from asn1crypto.x509 import Certificate
from pyhanko.pdf_utils.reader import PdfFileReader
from pyhanko.sign.validation import async_validate_pdf_signature
from pyhanko_certvalidator import ValidationContext

from services.core.model.errors import (
    FinishingError,
    InvoiceInvalid,
    PdfaNotPossible,
    PdfUaNotPossible,
)
from services.core.model.pageoptions import Metadata as PrintMetadata
from services.core.model.pageoptions import PageOptions
from services.core.sandbox.jail import Jail, TemplateLimits
from services.pdftools import archive
from services.pdftools.context import Context, Limits
from services.pdftools.pipeline import Input, Result
from services.pdftools.report import Status, Validation
from services.pdftools.steps import (
    Attach,
    AttachedFile,
    Encrypt,
    FacturX,
    Flatten,
    Merge,
    Metadata,
    Optimise,
    PdfA,
    PdfUA,
    ReadMetadata,
    Rotate,
    Sign,
    Split,
    Stamp,
    Step,
    Validate,
    Watermark,
)
from services.pdftools.worker import Tools
from services.renderer.browser import BrowserPool, Html
from tests.integration import hostile_pdfs
from tests.integration.pdf_inputs import (
    TOOLS,
    chapters,
    form,
    pdfinfo,
    pdftotext,
    qpdf_check,
    run,
    saved,
)
from tests.integration.test_browser import CHROMIUM
from tests.pki import signing_key

pytestmark = [pytest.mark.asyncio(loop_scope="module"), TOOLS]

ROOT = Path(__file__).resolve().parents[2]
INVOICE_XML = (ROOT / "examples" / "factur-x.xml").read_text()
FX = "{urn:factur-x:pdfa:CrossIndustryDocument:invoice:1p0#}"
KEY = signing_key()
LIMITS = TemplateLimits(1024 * 2**20, 60.0, 200_000_000)


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def printed() -> AsyncIterator[dict[str, bytes]]:
    """Chromium's PDFs: three tagged chapters with an outline, and two untagged pages."""
    async with BrowserPool(CHROMIUM, pages=1, timeout=60.0, max_output_bytes=50_000_000) as pool:
        tagged = PageOptions(outline=True, metadata=PrintMetadata(title="Chapters", author="Ada"))
        yield {
            "chapters.pdf": (await pool.render(Html(chapters(3)), tagged)).data,
            "plain.pdf": (await pool.render(Html(chapters(2)), PageOptions(tagged=False))).data,
        }


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def tools() -> AsyncIterator[Tools]:
    async with Jail(1, LIMITS, what="the PDF steps", error=FinishingError) as jail:
        yield Tools(jail, Context(signing=KEY), Limits())


async def ran(tools: Tools, inputs: dict[str, bytes], *steps: Step, **files: bytes) -> Result:
    return await tools.run([Input(n, d) for n, d in inputs.items()], list(steps), files)


def validation(result: Result) -> Validation:
    (found,) = result.report.validations
    return found


def failed(found: Validation) -> list[str]:
    return [f"{c.name}: {c.reason}" for c in found.checks if c.status is Status.FAILED]


async def test_merge_gives_each_input_an_outline_entry_holding_its_own_outline(
    tools: Tools, printed: dict[str, bytes], tmp_path: Path
) -> None:
    result = await ran(tools, printed, Merge(name="book.pdf"))
    (book,) = result.documents
    assert (book.name, book.pages) == ("book.pdf", 5)
    qpdf_check(book.data, tmp_path)
    assert pdfinfo(book.data, tmp_path)["Pages"] == "5"
    text = pdftotext(book.data, tmp_path)
    assert text.index("Chapter 3") < text.index("Paragraph 0 of chapter 1, with words enough", 200)
    with pikepdf.open(io.BytesIO(book.data)) as pdf, pdf.open_outline() as outline:
        pages = {page.obj.objgen: index for index, page in enumerate(pdf.pages)}
        top = [(item.title, pages[item.destination[0].objgen]) for item in outline.root]
        assert top == [("chapters.pdf", 0), ("plain.pdf", 3)]
        kept = [
            (item.title, pages[item.destination[0].objgen]) for item in outline.root[0].children
        ]
        assert kept == [("Chapter 1", 0), ("Chapter 2", 1), ("Chapter 3", 2)]
        assert all("/StructParents" not in page.obj for page in pdf.pages)
    assert result.report.pages_processed == 5
    assert "untagged" in result.report.steps[0].notes[0]


async def test_split_by_ranges_every_and_outline_names_its_parts(
    tools: Tools, printed: dict[str, bytes], tmp_path: Path
) -> None:
    chapters_only = {"chapters.pdf": printed["chapters.pdf"]}
    by_ranges = await ran(tools, chapters_only, Split(ranges=["1-2", "3"]))
    assert [(d.name, d.pages) for d in by_ranges.documents] == [
        ("chapters-1-2.pdf", 2),
        ("chapters-3.pdf", 1),
    ]
    by_outline = await ran(tools, chapters_only, Split(outline=True))
    assert [d.name for d in by_outline.documents] == [
        "Chapter 1.pdf",
        "Chapter 2.pdf",
        "Chapter 3.pdf",
    ]
    assert "Chapter 2" in pdftotext(by_outline.documents[1].data, tmp_path)
    every = await ran(tools, printed, Split(every=2))
    assert [d.name for d in every.documents] == [
        "chapters-1-2.pdf",
        "chapters-3.pdf",
        "plain-1-2.pdf",
    ]
    for document in every.documents:
        qpdf_check(document.data, tmp_path)
    data, media_type, _ = archive.packaged(every.documents)
    with zipfile.ZipFile(io.BytesIO(data)) as zipped:
        assert (media_type, zipped.namelist()) == (
            "application/zip",
            [d.name for d in every.documents],
        )
        assert zipped.read("plain-1-2.pdf") == every.documents[2].data


async def test_rotate_turns_only_the_pages_asked(
    tools: Tools, printed: dict[str, bytes], tmp_path: Path
) -> None:
    result = await ran(tools, {"c.pdf": printed["chapters.pdf"]}, Rotate(angle=90, pages="2-"))
    data = result.documents[0].data
    qpdf_check(data, tmp_path)
    assert pdfinfo(data, tmp_path, "-f", "1", "-l", "3")["Page    2 rot"] == "90"
    with pikepdf.open(io.BytesIO(data)) as pdf:
        assert [int(page.obj.get("/Rotate", 0)) for page in pdf.pages] == [0, 90, 90]


async def test_flatten_draws_a_form_field_into_the_page(tools: Tools, tmp_path: Path) -> None:
    result = await ran(tools, {"form.pdf": form()}, Flatten())
    data = result.documents[0].data
    qpdf_check(data, tmp_path)
    with pikepdf.open(io.BytesIO(data)) as pdf:
        assert "/AcroForm" not in pdf.Root and not pdf.pages[0].obj.get("/Annots")
    assert "Filled in" in pdftotext(data, tmp_path)  # now page content, not a field
    assert result.report.steps[0].notes == ["form.pdf: 1 of 1 annotations flattened"]


async def test_metadata_is_written_to_info_and_xmp_alike_and_read_back(
    tools: Tools, printed: dict[str, bytes], tmp_path: Path
) -> None:
    step = Metadata(
        title="Annual report", author="Grace", keywords="a, b", created="2026-01-02T03:04:05+00:00"
    )
    result = await ran(tools, {"c.pdf": printed["chapters.pdf"]}, step, ReadMetadata())
    data = result.documents[0].data
    shown = pdfinfo(data, tmp_path)
    assert (shown["Title"], shown["Author"], shown["Keywords"]) == (
        "Annual report",
        "Grace",
        "a, b",
    )
    with pikepdf.open(io.BytesIO(data)) as pdf:
        meta = pdf.open_metadata()
        assert (meta["dc:title"], meta["dc:creator"]) == ("Annual report", ["Grace"])
        assert str(pdf.docinfo.CreationDate).startswith("D:20260102030405")
    (facts,) = result.report.metadata
    assert facts.consistent and facts.info["Title"] == "Annual report" and not facts.differences


@pytest.mark.parametrize("level", ["1b", "2b", "3b"])
async def test_pdfa_output_passes_the_validator_and_the_structural_checks(
    tools: Tools, printed: dict[str, bytes], tmp_path: Path, level: str
) -> None:
    result = await ran(tools, {"c.pdf": printed["chapters.pdf"]}, PdfA(level=level), Validate())
    data = result.documents[0].data
    qpdf_check(data, tmp_path)
    found = validation(result)
    assert found.pdfa == level.upper() and not failed(found), failed(found)
    report = pikepdf.pdfa.validate_written(io.BytesIO(data), level)
    assert not report.violations, report.summary()
    # Only Chromium's outline items' links to their headings (/SE, PDF 1.3) are left
    # unchecked by the allowlist: kept, and reported as warnings.
    assert {f.message for f in report.unsupported} <= {"/SE is not supported by this validator"}
    assert all("/SE" in warning for warning in result.report.warnings)
    if level == "1b":
        assert data.startswith(b"%PDF-1.4") and b"/ObjStm" not in data
    assert "Chapter 2" in pdftotext(data, tmp_path)


async def test_pdfa_of_a_document_with_a_font_not_embedded_names_the_font(tools: Tools) -> None:
    with pytest.raises(PdfaNotPossible, match=r"font /Helvetica on page 1 is not embedded"):
        await ran(tools, {"helvetica.pdf": hostile_pdfs.plain()}, PdfA(level="2b"))


async def test_pdfua_identifies_a_tagged_document_and_refuses_an_untagged_one(
    tools: Tools, printed: dict[str, bytes]
) -> None:
    result = await ran(tools, {"c.pdf": printed["chapters.pdf"]}, PdfUA(lang="en"), Validate())
    found = validation(result)
    assert found.pdfua == "1" and found.tagged and not failed(found), failed(found)
    with pikepdf.open(io.BytesIO(result.documents[0].data)) as pdf:
        assert pdf.open_metadata()["pdfuaid:part"] == "1"
        assert b"ns0" not in pdf.Root.Metadata.read_bytes()
        assert (
            pdf.Root.MarkInfo.Marked is True and pdf.Root.ViewerPreferences.DisplayDocTitle is True
        )
    with pytest.raises(PdfUaNotPossible, match=r"plain\.pdf is not tagged"):
        await ran(tools, {"plain.pdf": printed["plain.pdf"]}, PdfUA(lang="en"))


async def test_encrypt_is_aes_256_with_only_the_permissions_granted(
    tools: Tools, printed: dict[str, bytes], tmp_path: Path
) -> None:
    crypt = Encrypt(
        owner_password="owner-pass-1", user_password="user-pass-1", permissions=["print"]
    )
    result = await ran(tools, {"c.pdf": printed["chapters.pdf"]}, crypt, Validate())
    data = result.documents[0].data
    shown = run("qpdf", "--password=user-pass-1", "--show-encryption", str(saved(data, tmp_path)))
    assert "R = 6" in shown.stdout and "AESv3" in shown.stdout, shown.stdout
    assert "print low resolution: allowed" in shown.stdout
    assert "extract for any purpose: not allowed" in shown.stdout
    qpdf_check(data, tmp_path, "--password=user-pass-1")
    encryption = validation(result).encryption
    assert encryption is not None and (encryption.revision, encryption.bits) == (6, 256)
    assert encryption.needs_user_password


async def test_attachments_and_a_facturx_invoice_are_listed_by_pdfdetach_and_validated(
    tools: Tools, printed: dict[str, bytes], tmp_path: Path
) -> None:
    attach = Attach(files=[AttachedFile(name="data.csv", source="csv", mime="text/csv")])
    steps = (attach, FacturX(xml=INVOICE_XML, profile="EN 16931"), Validate())
    result = await ran(
        tools, {"invoice.pdf": printed["chapters.pdf"]}, *steps, csv=b"number,total\n1,2\n"
    )
    data = result.documents[0].data
    qpdf_check(data, tmp_path)
    listed = run("pdfdetach", "-list", str(saved(data, tmp_path)))
    assert listed.stdout.splitlines()[1:] == ["1: data.csv", "2: factur-x.xml"]
    found = validation(result)
    assert found.pdfa == "3B" and not failed(found), failed(found)
    assert found.facturx is not None and found.facturx.xsd_valid
    assert found.facturx.xml_profile == found.facturx.declared_profile == "EN 16931"
    with pikepdf.open(io.BytesIO(data)) as pdf:
        assert sorted(str(spec.UF) for spec in pdf.Root.AF) == ["data.csv", "factur-x.xml"]
        xmp = pdf.Root.Metadata.read_bytes()
        assert b"<fx:ConformanceLevel>EN 16931</fx:ConformanceLevel>" in xmp and b"ns0:" not in xmp


async def test_an_xsd_invalid_invoice_is_refused_naming_the_xsd_problem(
    tools: Tools, printed: dict[str, bytes]
) -> None:
    invalid = INVOICE_XML.replace("<ram:TypeCode>380</ram:TypeCode>", "<ram:Kind>380</ram:Kind>", 1)
    with pytest.raises(
        InvoiceInvalid, match=r"steps\[0\]\.xml fails the Factur-X EN 16931 XSD: .*Kind"
    ):
        await ran(tools, {"i.pdf": printed["chapters.pdf"]}, FacturX(xml=invalid))


async def test_an_invoice_declared_with_another_profile_than_its_own_is_refused(
    tools: Tools, printed: dict[str, bytes]
) -> None:
    mismatch = r"is a Factur-X EN 16931 invoice .* declared is BASIC"
    with pytest.raises(InvoiceInvalid, match=mismatch):
        await ran(
            tools, {"i.pdf": printed["chapters.pdf"]}, FacturX(xml=INVOICE_XML, profile="BASIC")
        )


@pytest.mark.parametrize("kind", [Stamp, Watermark])
async def test_a_pdf_mark_is_drawn_on_the_pages_asked_over_or_under_the_content(
    tools: Tools, printed: dict[str, bytes], tmp_path: Path, kind: type[Stamp | Watermark]
) -> None:
    mark = hostile_pdfs.plain(text="APPROVED")
    result = await ran(
        tools,
        {"c.pdf": printed["chapters.pdf"]},
        kind(pdf="mark", pages="2", rotation=0),
        mark=mark,
    )
    data = result.documents[0].data
    qpdf_check(data, tmp_path)
    assert "APPROVED" in pdftotext(data, tmp_path, "-f", "2", "-l", "2")
    assert "APPROVED" not in pdftotext(data, tmp_path, "-f", "1", "-l", "1")
    with pikepdf.open(io.BytesIO(data)) as pdf:
        contents = pdf.pages[1].obj.Contents
        drawn = [stream.read_bytes() for stream in contents]
        mark_first = b"/Artifact" in drawn[0]  # a watermark is drawn before the page
        assert mark_first == (kind is Watermark)


async def test_a_signed_facturx_file_keeps_xmp_and_info_equal_and_the_standard_prefixes(
    tools: Tools, printed: dict[str, bytes], tmp_path: Path
) -> None:
    steps = (FacturX(xml=INVOICE_XML), Sign(reason="Issued"), Validate())
    result = await ran(tools, {"invoice.pdf": printed["chapters.pdf"]}, *steps)
    data = result.documents[0].data
    qpdf_check(data, tmp_path)
    with pikepdf.open(io.BytesIO(data)) as pdf:
        meta = pdf.open_metadata()
        assert meta["pdf:Producer"] == str(pdf.docinfo.Producer)
        xmp = pdf.Root.Metadata.read_bytes()
        assert b"ns0" not in xmp and b"fx:ConformanceLevel" in xmp and b"pdfaid:part" in xmp
        assert meta[FX + "ConformanceLevel"] == "EN 16931"
    (signature,) = PdfFileReader(io.BytesIO(data)).embedded_signatures
    trust = ValidationContext(trust_roots=[Certificate.load(KEY.certificate)])
    status = await async_validate_pdf_signature(signature, trust)
    assert status.intact and status.valid and status.trusted, status.pretty_print_details()
    found = validation(result)
    assert not failed(found), failed(found)
    assert [(s.field, s.intact, s.whole_file) for s in found.signatures] == [
        ("Signature1", True, True)
    ]


async def test_optimise_shrinks_a_tagged_chromium_pdf_and_says_by_how_much(
    tools: Tools, printed: dict[str, bytes], tmp_path: Path
) -> None:
    given = printed["chapters.pdf"]
    result = await ran(tools, {"c.pdf": given}, Optimise())
    data = result.documents[0].data
    qpdf_check(data, tmp_path)
    assert len(data) < len(given) * 0.8, (len(data), len(given))
    written, lifted = result.report.steps[0].notes
    assert written == (
        f"c.pdf: {len(given)} bytes written as {len(data)} ({len(data) / len(given):.0%})"
    )
    assert lifted.endswith("structure elements without meaning lifted"), lifted
    assert pdftotext(data, tmp_path) == pdftotext(given, tmp_path)


async def test_the_report_is_json_naming_each_step_and_output(
    tools: Tools, printed: dict[str, bytes]
) -> None:
    result = await ran(tools, printed, Merge(), Validate())
    report = msgspec.json.decode(msgspec.json.encode(result.report))
    assert [s["step"] for s in report["steps"]] == ["merge", "validate"]
    assert report["outputs"] == [
        {"name": "merged.pdf", "pages": 5, "bytes": len(result.documents[0].data)}
    ]
    assert report["pages_processed"] == 5


async def test_a_pdfa_file_is_not_signed_with_a_key_that_would_make_it_pdf_2(
    printed: dict[str, bytes],
) -> None:
    async with Jail(1, LIMITS, what="the PDF steps", error=FinishingError) as jail:
        tools = Tools(jail, Context(signing=signing_key("ec")), Limits())
        with pytest.raises(PdfaNotPossible, match=r"PDF 2\.0 .* RSA key"):
            await ran(tools, {"a.pdf": printed["chapters.pdf"]}, PdfA(level="2b"), Sign())
        signed = await ran(tools, {"a.pdf": printed["chapters.pdf"]}, Sign(), Validate())
        assert validation(signed).signatures[0].intact  # a file that is not PDF/A is signed


async def test_a_pdfua_document_made_pdfa_keeps_its_identification_declared_for_pdfa(
    tools: Tools, printed: dict[str, bytes], tmp_path: Path
) -> None:
    """PDF/A predefines no pdfuaid: the identification stays, under an extension schema."""
    steps = (PdfUA(lang="en"), PdfA(level="2b"), Validate())
    result = await ran(tools, {"c.pdf": printed["chapters.pdf"]}, *steps)
    found = validation(result)
    assert (found.pdfa, found.pdfua) == ("2B", "1") and not failed(found), failed(found)
    data = result.documents[0].data
    qpdf_check(data, tmp_path)
    with pikepdf.open(io.BytesIO(data)) as pdf:
        xmp = pdf.Root.Metadata.read_bytes()
    assert b"<pdfaSchema:prefix>pdfuaid</pdfaSchema:prefix>" in xmp and b"ns0" not in xmp

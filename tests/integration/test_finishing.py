"""The finishing steps on real Chromium output, read back by tools that did not write
the files: pikepdf (qpdf's library) for the structures, the `qpdf` and poppler
(`pdfdetach`, `pdffonts`) command lines.

PDF/A conformance is checked structurally, not by a validator: veraPDF comes from Maven
Central, which this machine cannot reach (`mvn dependency:get` fails with "Unknown host
repo.maven.apache.org"), and no Debian or PyPI package ships it. The structural checks are
what PDF/A-2b/3b asks of such a file: fonts embedded, an sRGB output intent with its ICC
profile, XMP metadata with the PDF/A identification equal to the document information,
a trailer /ID, no encryption, annotations printable, embedded files with a MIME type, a
relationship and a place in the catalog's /AF, and `qpdf --check` clean.
"""

from __future__ import annotations

import io
import json
import shutil
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path

import jinja2
import pikepdf
import pytest
import pytest_asyncio

from services.core.model.errors import FinishingError, InvoiceInvalid, PdfInvalid
from services.core.model.pageoptions import Attachment, Encrypt, FacturX, Metadata, PageOptions
from services.core.sandbox.jail import Jail, TemplateLimits
from services.renderer import finishing
from services.renderer.browser import BrowserPool, Html, RenderResult
from services.renderer.finishing.worker import Finisher
from tests.integration.test_browser import CHROMIUM

pytestmark = pytest.mark.asyncio(loop_scope="module")

ROOT = Path(__file__).resolve().parents[2]
INVOICE_XML = (ROOT / "examples" / "factur-x.xml").read_text()
MINIMUM_XML = (ROOT / "examples" / "factur-x-minimum.xml").read_text()
CSV = "data:text/csv;base64,bnVtYmVyLHRvdGFsCklOVi0yMDI2LTAwNDIxNyw2OTM2ODQuNjgK"
FX = "{urn:factur-x:pdfa:CrossIndustryDocument:invoice:1p0#}"
LIMITS = TemplateLimits(1024 * 2**20, 30.0, 50_000_000)
CONTEXT = finishing.Context()
TOOLS = pytest.mark.skipif(
    not all(shutil.which(tool) for tool in ("qpdf", "pdfdetach", "pdffonts")),
    reason="needs qpdf and poppler-utils (apt-get install qpdf poppler-utils)",
)


def invoice_html() -> str:
    workload = ROOT / "bench" / "workload"
    template = jinja2.Template((workload / "invoice.html.j2").read_text())
    return template.render(**json.loads((workload / "data.json").read_text()))


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def printed() -> AsyncIterator[RenderResult]:
    """The shared invoice printed once by Chromium, with a title and author."""
    async with BrowserPool(CHROMIUM, pages=1, timeout=30.0, max_output_bytes=50_000_000) as pool:
        options = PageOptions(metadata=Metadata(title="Invoice INV-2026-004217", author="Acme"))
        yield await pool.render(Html(invoice_html()), options)


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def finisher() -> AsyncIterator[Finisher]:
    async with Jail(1, LIMITS, what="finishing the PDF", error=FinishingError) as jail:
        yield Finisher(jail, CONTEXT)


async def finished(finisher: Finisher, printed: RenderResult, options: PageOptions) -> bytes:
    return (await finisher.finished(printed, options)).data


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, capture_output=True, text=True)


def qpdf_check(data: bytes, tmp_path: Path, *args: str) -> str:
    path = tmp_path / "checked.pdf"
    path.write_bytes(data)
    checked = run("qpdf", *args, "--check", str(path))
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "No syntax or stream encoding errors found" in checked.stdout
    return checked.stdout


def assert_pdfa_structure(doc: pikepdf.Pdf, part: str) -> None:
    """What PDF/A-2b/3b asks of a Chromium file, read back with pikepdf."""
    assert not doc.is_encrypted and "/Encrypt" not in doc.trailer
    assert len(doc.trailer.ID) == 2
    (intent,) = doc.Root.OutputIntents
    assert intent.S == "/GTS_PDFA1" and intent.OutputConditionIdentifier == "sRGB IEC61966-2.1"
    profile = intent.DestOutputProfile
    assert profile.N == 3 and profile.read_bytes()[36:40] == b"acsp"  # an ICC profile
    assert "/Filter" not in doc.Root.Metadata.stream_dict  # XMP readable without decoding
    meta = doc.open_metadata()
    assert (meta["pdfaid:part"], meta["pdfaid:conformance"]) == (part, "B")
    assert meta["dc:title"] == str(doc.docinfo.Title) == "Invoice INV-2026-004217"
    assert meta["dc:creator"] == ["Acme"] and meta["pdf:Producer"] == str(doc.docinfo.Producer)
    for page in doc.pages:
        for annotation in page.obj.get("/Annots", []):
            assert int(annotation.F) & 4 and not int(annotation.F) & (2 | 32)


def pdffonts(data: bytes, tmp_path: Path) -> list[list[str]]:
    path = tmp_path / "fonts.pdf"
    path.write_bytes(data)
    out = subprocess.run(["pdffonts", str(path)], capture_output=True, text=True, check=True)
    return [line.split() for line in out.stdout.splitlines()[2:]]


@TOOLS
async def test_pdfa_2b_passes_the_structural_checks_with_every_font_embedded(
    finisher: Finisher, printed: RenderResult, tmp_path: Path
) -> None:
    data = await finished(finisher, printed, PageOptions(pdfa="2b"))
    with pikepdf.open(io.BytesIO(data)) as doc:
        assert_pdfa_structure(doc, "2")
        assert "/AF" not in doc.Root and not doc.attachments
    fonts = pdffonts(data, tmp_path)
    assert fonts and all(row[-5] == "yes" for row in fonts)  # the "emb" column
    qpdf_check(data, tmp_path)


@TOOLS
async def test_facturx_embeds_the_invoice_xml_byte_equal_with_its_relationship_and_xmp(
    finisher: Finisher, printed: RenderResult, tmp_path: Path
) -> None:
    options = PageOptions(facturx=FacturX(xml=INVOICE_XML, profile="EN 16931"))
    data = await finished(finisher, printed, options)
    with pikepdf.open(io.BytesIO(data)) as doc:
        assert_pdfa_structure(doc, "3")
        spec = doc.attachments["factur-x.xml"]
        assert spec.get_file().read_bytes() == INVOICE_XML.encode()
        assert spec.get_file().mime_type == "text/xml"
        assert spec.obj.AFRelationship == "/Alternative"
        assert [str(f.UF) for f in doc.Root.AF] == ["factur-x.xml"]
        meta = doc.open_metadata()
        assert meta[FX + "DocumentType"] == "INVOICE"
        assert meta[FX + "DocumentFileName"] == "factur-x.xml"
        assert (meta[FX + "Version"], meta[FX + "ConformanceLevel"]) == ("1.0", "EN 16931")
        assert b"<pdfaSchema:prefix>fx</pdfaSchema:prefix>" in doc.Root.Metadata.read_bytes()
    qpdf_check(data, tmp_path)


async def test_a_minimum_profile_invoice_is_data_not_an_alternative(
    finisher: Finisher, printed: RenderResult
) -> None:
    options = PageOptions(facturx=FacturX(xml=MINIMUM_XML, profile="MINIMUM"))
    with pikepdf.open(io.BytesIO(await finished(finisher, printed, options))) as doc:
        assert doc.attachments["factur-x.xml"].obj.AFRelationship == "/Data"
        assert doc.open_metadata()[FX + "ConformanceLevel"] == "MINIMUM"


@TOOLS
async def test_attachments_are_listed_back_with_their_mime_types(
    finisher: Finisher, printed: RenderResult, tmp_path: Path
) -> None:
    files = (
        Attachment(name="data.csv", content=CSV),
        Attachment(name="notes.txt", content="data:text/plain;charset=utf-8;base64,aMOkbGxv"),
    )
    data = await finished(finisher, printed, PageOptions(attachments=files, pdfa="3b"))
    with pikepdf.open(io.BytesIO(data)) as doc:
        mimes = {name: spec.get_file().mime_type for name, spec in doc.attachments.items()}
        assert mimes == {"data.csv": "text/csv", "notes.txt": "text/plain"}
        assert doc.attachments["notes.txt"].get_file().read_bytes() == "hällo".encode()
        assert sorted(str(f.UF) for f in doc.Root.AF) == ["data.csv", "notes.txt"]
        assert_pdfa_structure(doc, "3")
    path = tmp_path / "attached.pdf"
    path.write_bytes(data)
    listed = run("pdfdetach", "-list", str(path))
    assert listed.stdout.splitlines()[1:] == ["1: data.csv", "2: notes.txt"]


@TOOLS
async def test_hostile_attachment_names_are_embedded_safe_and_apart(
    finisher: Finisher, printed: RenderResult, tmp_path: Path
) -> None:
    """Names that reached the renderer unchecked (a job accepted before the gateway
    refused them) are embedded under the names a reader can save them as: safe, unique
    ignoring case, `factur-x.xml` left to the invoice. pikepdf and pdfdetach read them."""
    names = [
        "../../evil.csv", "CON.csv", "a\u202etxt.exe", "Data.csv", "data.csv",
        "FACTUR-X.XML", "\u3164", "x\uff0fy.csv", "C:\\x.csv", "caf\u0065\u0301.csv",
    ]  # fmt: skip
    files = tuple(Attachment(name=name, content=CSV) for name in names)
    options = PageOptions(attachments=files, facturx=FacturX(xml=INVOICE_XML))
    data = await finished(finisher, printed, options)
    safe = [
        "_.._evil.csv", "_CON.csv", "atxt.exe", "Data.csv", "data (2).csv",
        "FACTUR-X (2).XML", "attachment", "x_y.csv", "C__x.csv", "caf\u00e9.csv",
    ]  # fmt: skip
    with pikepdf.open(io.BytesIO(data)) as doc:
        assert sorted(doc.attachments) == sorted([*safe, "factur-x.xml"])
        assert doc.attachments["factur-x.xml"].get_file().read_bytes() == INVOICE_XML.encode()
        assert {str(f.UF) for f in doc.Root.AF} == {*safe, "factur-x.xml"}
        assert {str(f.F) for f in doc.Root.AF} == {*safe, "factur-x.xml"}
    path = tmp_path / "attached.pdf"
    path.write_bytes(data)
    folder = tmp_path / "saved"
    folder.mkdir()
    saved = run("pdfdetach", "-saveall", "-o", str(folder), str(path))
    assert saved.returncode == 0, saved.stderr
    assert sorted(p.name for p in folder.iterdir()) == sorted([*safe, "factur-x.xml"])


@TOOLS
async def test_encrypted_file_opens_with_either_password_only_and_grants_what_was_asked(
    finisher: Finisher, printed: RenderResult, tmp_path: Path
) -> None:
    crypt = Encrypt(
        owner_password="owner-pass-1", user_password="user-pass-1", permissions=["print"]
    )
    data = await finished(finisher, printed, PageOptions(encrypt=crypt))
    with pytest.raises(pikepdf.PasswordError):
        pikepdf.open(io.BytesIO(data))
    with pikepdf.open(io.BytesIO(data), password="user-pass-1") as doc:
        assert doc.encryption.R == 6 and doc.encryption.bits == 256
        allowed = doc.allow
        assert allowed.print_lowres and not allowed.print_highres
        assert not (allowed.extract or allowed.modify_other or allowed.modify_annotation)
        assert len(doc.pages) == len(pikepdf.open(io.BytesIO(printed.data)).pages)
    with pikepdf.open(io.BytesIO(data), password="owner-pass-1") as doc:
        assert doc.owner_password_matched
    shown = qpdf_check(data, tmp_path, "--password=user-pass-1")
    assert "encrypted" in qpdf_check(data, tmp_path, "--password=owner-pass-1") + shown
    path = tmp_path / "checked.pdf"
    refused = run("qpdf", "--check", str(path))
    assert refused.returncode != 0 and "invalid password" in refused.stderr


async def test_a_plain_untagged_job_does_not_reach_a_finishing_worker(
    printed: RenderResult,
) -> None:
    """Only a small untagged job: a tagged one is always compacted (test_tagged_size)."""
    async with Jail(1, LIMITS, error=FinishingError) as jail:
        finisher = Finisher(jail, CONTEXT)
        await jail.__aexit__(None, None, None)  # no worker left: a call would fail
        assert await finisher.finished(printed, PageOptions(tagged=False)) is printed
    assert not finishing.needed(PageOptions(metadata=Metadata(title="t"), outline=True))


async def test_finishing_over_its_time_limit_is_a_finishing_error(printed: RenderResult) -> None:
    async with Jail(1, TemplateLimits(LIMITS.memory_bytes, 0.01, 50_000_000),
                    what="finishing the PDF", error=FinishingError) as jail:  # fmt: skip
        with pytest.raises(FinishingError, match=r"took longer than 0\.01 s"):
            await Finisher(jail, CONTEXT).finished(printed, PageOptions(pdfa="2b"))


async def test_a_bad_invoice_that_reached_the_renderer_fails_deterministically() -> None:
    options = PageOptions(facturx=FacturX(xml="<Invoice/>"))
    with pytest.raises(FinishingError, match="CrossIndustryInvoice"):
        finishing.finish(b"%PDF-1.4", options, CONTEXT)


async def test_a_pdf_the_library_cannot_read_is_pdf_invalid_naming_the_document() -> None:
    with pytest.raises(PdfInvalid, match=r"document\.pdf is not a PDF that can be read"):
        finishing.finish(b"not a pdf", PageOptions(attachments=(Attachment("a", CSV),)), CONTEXT)


async def test_a_rendered_invoice_failing_the_factur_x_xsd_is_refused_naming_the_problem(
    printed: RenderResult,
) -> None:
    """The audit's finding: an XSD-invalid XML used to be embedded without complaint."""
    invalid = INVOICE_XML.replace("<ram:TypeCode>380</ram:TypeCode>", "", 1)
    with pytest.raises(
        InvoiceInvalid, match=r"options\.facturx\.xml fails the Factur-X EN 16931 XSD"
    ):
        finishing.finish(printed.data, PageOptions(facturx=FacturX(xml=invalid)), CONTEXT)

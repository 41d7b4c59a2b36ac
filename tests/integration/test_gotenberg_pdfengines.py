"""Gotenberg's bookmark and Factur-X routes on the whole stack: `curl --form` lines as
Gotenberg's documentation writes them, the PDFs they answer read back by pikepdf."""

from __future__ import annotations

import asyncio
import io
import json
import zipfile
from pathlib import Path

import pikepdf
import pytest

from tests.conftest import Stack
from tests.integration.gotenberg_forms import settings  # noqa: F401  (a fixture)
from tests.integration.test_gotenberg import curl

INVOICE_XML = Path(__file__).parents[2] / "examples" / "factur-x.xml"


def blank_pdf(path: Path, pages: int) -> Path:
    with pikepdf.new() as pdf:
        for _ in range(pages):
            pdf.add_blank_page(page_size=(595, 842))
        pdf.save(path)
    return path


def outline(data: bytes) -> list[tuple[str, int, list[str]]]:
    """Each top-level entry: its title, its page (from 1), its children's titles."""
    with pikepdf.open(io.BytesIO(data)) as pdf:
        pages = {page.obj.objgen: number for number, page in enumerate(pdf.pages, 1)}
        with pdf.open_outline() as tree:
            return [
                (str(item.title), pages[item.destination[0].objgen],
                 [str(child.title) for child in item.children])
                for item in tree.root
            ]  # fmt: skip


async def test_bookmarks_written_to_every_pdf_or_by_name_and_read_back(
    stack: Stack, tmp_path: Path
) -> None:
    first = blank_pdf(tmp_path / "a.pdf", 3)
    second = blank_pdf(tmp_path / "b.pdf", 2)
    marks = [{"title": "Cover", "page": 1},
             {"title": "Terms", "page": 2, "children": [{"title": "Fees", "page": 2}]}]  # fmt: skip
    status, headers, body = await asyncio.to_thread(
        curl, stack, "/forms/pdfengines/bookmarks/write", "--form", f"files=@{first}",
        "--form", f"files=@{second}", "--form-string", f"bookmarks={json.dumps(marks)}",
    )  # fmt: skip
    assert status == 200 and headers["content-type"] == "application/zip", body
    with zipfile.ZipFile(io.BytesIO(body)) as archive:
        written = {name: archive.read(name) for name in archive.namelist()}
    expected = [("Cover", 1, []), ("Terms", 2, ["Fees"])]
    assert outline(written["a.pdf"]) == outline(written["b.pdf"]) == expected
    (tmp_path / "marked.pdf").write_bytes(written["a.pdf"])
    by_name = {"marked.pdf": [{"title": "Last", "page": 2}]}
    status, _, body = await asyncio.to_thread(
        curl, stack, "/forms/pdf/bookmarks/write", "--form", f"files=@{tmp_path / 'marked.pdf'}",
        "--form", f"files=@{second}", "--form-string", f"bookmarks={json.dumps(by_name)}",
    )  # fmt: skip
    assert status == 200, body
    with zipfile.ZipFile(io.BytesIO(body)) as archive:
        assert outline(archive.read("marked.pdf")) == [("Last", 2, [])]
        assert outline(archive.read("b.pdf")) == []  # not named: its outline is kept (none)
    marked = tmp_path / "marked.pdf"
    status, headers, body = await asyncio.to_thread(
        curl, stack, "/forms/pdfengines/bookmarks/read", "--form", f"files=@{marked}"
    )
    assert status == 200 and headers["content-type"].startswith("application/json"), body
    assert json.loads(body) == {"marked.pdf": marks}  # Gotenberg's shape: children omitted if none


@pytest.mark.parametrize(
    "bookmarks",
    ['[{"title": "Zero", "page": 0}]', '{"a.pdf": "Cover"}', '[{"title": "x"}]', "not json"],
)
async def test_bad_bookmarks_are_a_400_naming_the_field(
    stack: Stack, tmp_path: Path, bookmarks: str
) -> None:
    pdf = blank_pdf(tmp_path / "a.pdf", 1)
    status, _, body = await asyncio.to_thread(
        curl, stack, "/forms/pdfengines/bookmarks/write",
        "--form", f"files=@{pdf}", "--form-string", f"bookmarks={bookmarks}",
    )  # fmt: skip
    assert status == 400 and b"bookmarks" in body, body


async def test_factur_x_embeds_the_invoice_in_a_pdf_a_3b(stack: Stack, tmp_path: Path) -> None:
    pdf = blank_pdf(tmp_path / "invoice.pdf", 1)
    status, headers, body = await asyncio.to_thread(
        curl, stack, "/forms/pdfengines/factur-x", "--form", f"files=@{pdf}",
        "--form", f"facturxXml=@{INVOICE_XML}", "--form", "facturxConformanceLevel=EN 16931",
    )  # fmt: skip
    assert status == 200 and headers["content-type"] == "application/pdf", body
    with pikepdf.open(io.BytesIO(body)) as made:
        assert made.open_metadata().pdfa_status == "3B"
        embedded = made.attachments["factur-x.xml"].get_file().read_bytes()
        assert embedded == INVOICE_XML.read_bytes()
        assert "EN 16931" in str(made.open_metadata())
    for extra, named in (
        (("--form", "facturxConformanceLevel=EN 16931"), b"facturxXml"),
        (("--form", f"facturxXml=@{INVOICE_XML}", "--form", "facturxConformanceLevel=XRECHNUNG"),
         b"facturxConformanceLevel"),
        (("--form", f"facturxXml=@{INVOICE_XML}", "--form", "facturxConformanceLevel=BASIC",
          "--form", "pdfa=PDF/A-2b"), b"pdfa"),
    ):  # fmt: skip
        status, _, body = await asyncio.to_thread(
            curl, stack, "/forms/pdf/factur-x", "--form", f"files=@{pdf}", *extra
        )
        assert status == 400 and named in body, body


async def test_metadata_copyright_marked_and_pdf_version_are_written(
    stack: Stack, tmp_path: Path
) -> None:
    pdf = blank_pdf(tmp_path / "a.pdf", 1)
    given = {"Copyright": "Copyright Me at Me, Inc", "Marked": True, "PDFVersion": 1.7,
             "Author": "Ana"}  # fmt: skip
    status, _, body = await asyncio.to_thread(
        curl, stack, "/forms/pdfengines/metadata/write", "--form", f"files=@{pdf}",
        "--form-string", f"metadata={json.dumps(given)}",
    )  # fmt: skip
    assert status == 200, body
    with pikepdf.open(io.BytesIO(body)) as made:
        assert made.pdf_version == "1.7"  # object streams alone make it 1.5
        xmp = made.open_metadata()
        assert xmp["dc:rights"] == "Copyright Me at Me, Inc"
        assert xmp["xmpRights:Marked"] == "True"
        assert str(made.docinfo["/Author"]) == "Ana"
    status, _, body = await asyncio.to_thread(
        curl, stack, "/forms/pdfengines/metadata/write", "--form", f"files=@{pdf}",
        "--form-string", 'metadata={"PDFVersion": 1.1}',
    )  # fmt: skip
    assert status == 400 and b"metadata" in body, body

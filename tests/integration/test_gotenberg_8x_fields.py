"""Gotenberg 8.x's later PDF engine fields on the whole stack (permissions 8.34, embeds
metadata 8.31, merge bookmarks 8.28/8.36, image optimisation 8.36, post-processing on
merge and split), as `curl --form` lines send them: each one honoured, checked in the
answered PDF by pikepdf and poppler, or a `400` naming it; and a field given twice."""

from __future__ import annotations

import asyncio
import io
import json
import zipfile
from pathlib import Path

import pikepdf
import pytest

from services.gateway.gotenberg.routes import VERSION
from tests.conftest import Stack
from tests.integration.gotenberg_forms import settings  # noqa: F401  (a fixture)
from tests.integration.test_gotenberg import curl, pdftotext
from tests.integration.test_gotenberg_pdfengines import INVOICE_XML, blank_pdf, outline

USER, OWNER = "user-pass-1234", "owner-pass-1234"


def allowed(data: bytes) -> pikepdf.Permissions:
    """What the user password grants, as the file says."""
    with pikepdf.open(io.BytesIO(data), password=USER) as pdf:
        assert pdf.is_encrypted
        return pdf.allow


def letters(text: str) -> list[str]:
    return sorted("".join(text.split()))


async def test_permissions_restrict_what_the_user_password_grants(
    stack: Stack, tmp_path: Path
) -> None:
    pdf = blank_pdf(tmp_path / "a.pdf", 1)
    status, _, body = await asyncio.to_thread(
        curl, stack, "/forms/pdfengines/encrypt", "--form", f"files=@{pdf}",
        "--form", f"userPassword={USER}", "--form", f"ownerPassword={OWNER}",
        "--form", "allowPrinting=false", "--form", "allowCopying=false",
        "--form", "allowFillingForms=false",
    )  # fmt: skip
    assert status == 200, body
    allow = allowed(body)
    assert not allow.print_lowres and not allow.print_highres and not allow.extract
    assert not allow.modify_form
    assert allow.modify_other and allow.modify_annotation and allow.modify_assembly
    status, _, body = await asyncio.to_thread(
        curl, stack, "/forms/pdf/merge", "--form", f"files=@{pdf}",
        "--form", f"userPassword={USER}", "--form", "allowModifying=false",
        "--form", "allowAnnotating=false", "--form", "allowAssembling=false",
    )  # fmt: skip
    assert status == 200, body
    allow = allowed(body)
    assert not allow.modify_other and not allow.modify_annotation and not allow.modify_assembly
    assert allow.print_highres and allow.extract and allow.modify_form
    status, _, body = await asyncio.to_thread(
        curl, stack, "/forms/pdfengines/merge", "--form", f"files=@{pdf}",
        "--form", "allowCopying=false",
    )  # fmt: skip
    assert status == 400 and b"allowCopying" in body, body  # no password to anchor it


async def test_chromium_passwords_take_the_permissions(stack: Stack, tmp_path: Path) -> None:
    index = tmp_path / "index.html"
    index.write_text("<!doctype html><title>Locked</title><p>Locked page</p>")
    status, _, body = await asyncio.to_thread(
        curl, stack, "/forms/chromium/convert/html", "--form", f"files=@{index}",
        "--form", f"userPassword={USER}", "--form", "allowPrinting=false",
    )  # fmt: skip
    assert status == 200, body
    allow = allowed(body)
    assert not allow.print_lowres and not allow.print_highres and allow.extract


async def test_merge_applies_marks_rotation_bookmarks_metadata_and_described_embeds(
    stack: Stack, tmp_path: Path
) -> None:
    first = blank_pdf(tmp_path / "a.pdf", 2)
    second = blank_pdf(tmp_path / "b.pdf", 1)
    data = tmp_path / "data.xml"
    data.write_text("<data/>")
    marks = [{"title": "Start", "page": 1}, {"title": "Second file", "page": 3}]
    described = {"data.xml": {"mimeType": "application/xml", "relationship": "Source"}}
    status, _, body = await asyncio.to_thread(
        curl, stack, "/forms/pdfengines/merge", "--form", f"files=@{first}",
        "--form", f"files=@{second}", "--form", "watermarkSource=text",
        "--form", "watermarkExpression=DRAFTMARK", "--form", "stampExpression=STAMPMARK",
        "--form", "stampPages=3", "--form", "rotateAngle=90", "--form", "rotatePages=1",
        "--form-string", f"bookmarks={json.dumps(marks)}",
        "--form-string", 'metadata={"Title": "Merged"}', "--form", f"embeds=@{data}",
        "--form-string", f"embedsMetadata={json.dumps(described)}",
    )  # fmt: skip
    assert status == 200, body
    with pikepdf.open(io.BytesIO(body)) as pdf:
        assert [int(page.obj.get("/Rotate", 0)) for page in pdf.pages] == [90, 0, 0]
        assert str(pdf.docinfo["/Title"]) == "Merged"
        spec = pdf.attachments["data.xml"]
        assert spec.obj["/AFRelationship"] == pikepdf.Name("/Source")
        assert spec.get_file().mime_type == "application/xml"
    assert outline(body) == [("Start", 1, []), ("Second file", 3, [])]
    pages = pdftotext(body).split("\f")  # the watermark is diagonal: its letters, any order
    assert letters(pages[0]) == letters(pages[1]) == sorted("DRAFTMARK")
    assert letters(pages[2]) == sorted("DRAFTMARK" + "STAMPMARK")  # the stamp: page 3 only


@pytest.mark.parametrize(
    ("extra", "named"),
    [
        (("--form", "autoIndexBookmarks=true"), b"autoIndexBookmarks"),
        (("--form", "titleBookmarks=true"), b"titleBookmarks"),
        (("--form", "optimizeImages=true"), b"optimizeImages"),
        (("--form", "imageQuality=50"), b"imageQuality"),
        (("--form-string", 'bookmarks={"a.pdf": [{"title": "x", "page": 1}]}'), b"bookmarks"),
        (("--form-string", 'embedsMetadata={"other.xml": {"mimeType": "text/xml"}}'),
         b"embedsMetadata"),
        (("--form-string", 'embedsMetadata={"a.xml": {"relationship": "Own"}}'),
         b"embedsMetadata"),
        (("--form", "metadata={}", "--form", 'metadata={"Title": "Twice"}'), b"metadata"),
    ],
)  # fmt: skip
async def test_merge_fields_pressroom_cannot_honour_are_a_400_naming_them(
    stack: Stack, tmp_path: Path, extra: tuple[str, ...], named: bytes
) -> None:
    pdf = blank_pdf(tmp_path / "a.pdf", 1)
    embed = tmp_path / "a.xml"
    embed.write_text("<a/>")
    status, _, body = await asyncio.to_thread(
        curl, stack, "/forms/pdfengines/merge", "--form", f"files=@{pdf}",
        "--form", f"embeds=@{embed}", *extra,
    )  # fmt: skip
    assert status == 400 and named in body, body


async def test_split_post_processes_each_part(stack: Stack, tmp_path: Path) -> None:
    pdf = blank_pdf(tmp_path / "a.pdf", 2)
    status, headers, body = await asyncio.to_thread(
        curl, stack, "/forms/pdfengines/split", "--form", f"files=@{pdf}",
        "--form", "splitMode=intervals", "--form", "splitSpan=1",
        "--form", "rotateAngle=180", "--form", "stampExpression=PARTMARK",
        "--form", f"facturxXml=@{INVOICE_XML}", "--form", "facturxConformanceLevel=EN 16931",
    )  # fmt: skip
    assert status == 200 and headers["content-type"] == "application/zip", body
    with zipfile.ZipFile(io.BytesIO(body)) as archive:
        parts = [archive.read(name) for name in archive.namelist()]
    assert len(parts) == 2
    for part in parts:
        with pikepdf.open(io.BytesIO(part)) as made:
            assert int(made.pages[0].obj.get("/Rotate", 0)) == 180
            assert made.open_metadata().pdfa_status == "3B"
            assert "factur-x.xml" in made.attachments
        assert "PARTMARK" in pdftotext(part)


async def test_embed_route_describes_its_files_and_special_parts_are_never_inputs(
    stack: Stack, tmp_path: Path
) -> None:
    pdf = blank_pdf(tmp_path / "a.pdf", 1)
    table = tmp_path / "table.csv"
    table.write_text("a,b\n1,2\n")
    described = {"table.csv": {"mimeType": "text/csv", "relationship": "Data"}}
    status, _, body = await asyncio.to_thread(
        curl, stack, "/forms/pdfengines/embed", "--form", f"files=@{pdf}",
        "--form", f"embeds=@{table}", "--form-string", f"embedsMetadata={json.dumps(described)}",
    )  # fmt: skip
    assert status == 200, body
    with pikepdf.open(io.BytesIO(body)) as made:
        spec = made.attachments["table.csv"]
        assert spec.obj["/AFRelationship"] == pikepdf.Name("/Data")
        assert spec.get_file().mime_type == "text/csv"
    status, _, body = await asyncio.to_thread(
        curl, stack, "/forms/pdf/embed", "--form", f"files=@{pdf}", "--form", f"embeds=@{table}",
        "--form", f"facturxXml=@{INVOICE_XML}", "--form", "facturxConformanceLevel=EN 16931",
    )  # fmt: skip
    assert status == 200, body
    with pikepdf.open(io.BytesIO(body)) as made:
        assert made.open_metadata().pdfa_status == "3B"
        assert set(made.attachments) == {"table.csv", "factur-x.xml"}
    mark = blank_pdf(tmp_path / "mark.pdf", 1)
    for route, extra, named in (
        ("/forms/pdfengines/merge", ("--form", f"watermark=@{mark}"), b"watermark"),
        ("/forms/pdfengines/rotate", ("--form", "rotateAngle=90", "--form", f"embeds=@{table}"),
         b"embeds"),
        ("/forms/pdfengines/optimize", ("--form", "imageQuality=60"), b"imageQuality"),
    ):  # fmt: skip
        status, _, body = await asyncio.to_thread(
            curl, stack, route, "--form", f"files=@{pdf}", *extra
        )
        assert status == 400 and named in body, (route, body)


async def test_repeated_marks_are_one_step_each_and_other_repeated_fields_a_400(
    stack: Stack, tmp_path: Path
) -> None:
    pdf = blank_pdf(tmp_path / "a.pdf", 2)
    status, _, body = await asyncio.to_thread(
        curl, stack, "/forms/pdfengines/stamp", "--form", f"files=@{pdf}",
        "--form", "stampSource=text", "--form", "stampExpression=ALPHA",
        "--form", "stampPages=1", "--form", "stampSource=text",
        "--form", "stampExpression=OMEGA", "--form", "stampPages=2",
    )  # fmt: skip
    assert status == 200, body
    pages = pdftotext(body).split("\f")
    assert letters(pages[0]) == sorted("ALPHA") and letters(pages[1]) == sorted("OMEGA")
    index = tmp_path / "index.html"
    index.write_text("<p>x</p>")
    for route, extra, named in (
        ("/forms/pdf/stamp", ("--form", "stampExpression=A", "--form", "stampExpression=B"),
         b"stampExpression"),
        ("/forms/pdfengines/rotate", ("--form", "rotateAngle=90", "--form", "rotateAngle=180"),
         b"rotateAngle"),
        ("/forms/pdf/validate", ("--form", "profile=PDF/A-2b", "--form", "profile=PDF/UA-1"),
         b"profile"),
        ("/forms/chromium/convert/html", ("--form", "paperWidth=8in", "--form", "paperWidth=9in"),
         b"paperWidth"),
    ):  # fmt: skip
        first = f"files=@{index}" if "chromium" in route else f"files=@{pdf}"
        status, _, body = await asyncio.to_thread(curl, stack, route, "--form", first, *extra)
        assert status == 400 and named in body and b"more" in body, (route, body)


async def test_version_names_the_gotenberg_whose_fields_the_door_covers(stack: Stack) -> None:
    async with stack.client.get(f"{stack.url}/version") as response:
        assert response.status == 200
        assert await response.text() == VERSION == "8.36.0"

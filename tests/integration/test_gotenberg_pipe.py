"""Gotenberg 9's stages on the whole stack: `POST /forms/pdf/pipe` and `stages` on a
Chromium conversion, sent as `curl --form` lines, the PDFs read back by pikepdf and
poppler; a stage Pressroom cannot run, or a parameter it cannot honour, is a `400`
naming `stages[i].<name>`."""

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
from tests.integration.test_gotenberg import curl, pdftotext
from tests.integration.test_gotenberg_pdfengines import blank_pdf
from tests.integration.test_gotenberg_sign import identity, recorded_input, signatures


def rotations(data: bytes) -> list[int]:
    with pikepdf.open(io.BytesIO(data)) as pdf:
        return [int(page.obj.get("/Rotate", 0)) for page in pdf.pages]


async def test_stages_run_in_order_on_the_uploaded_pdfs(stack: Stack, tmp_path: Path) -> None:
    first = blank_pdf(tmp_path / "a.pdf", 3)
    second = blank_pdf(tmp_path / "b.pdf", 2)
    stages = [
        {"op": "merge"},
        {"op": "select", "pages": "2-5"},
        {"op": "rotate", "angle": 90, "pages": "1"},
        {"op": "stamp-text", "text": "DRAFT"},
        {"op": "set-metadata", "title": "Piped", "author": "Finance",
         "creationDate": "D:20260102030405Z"},
    ]  # fmt: skip
    status, headers, body = await asyncio.to_thread(
        curl, stack, "/forms/pdf/pipe", "--form", f"files=@{second}", "--form", f"files=@{first}",
        "--form-string", f"stages={json.dumps(stages)}",
    )  # fmt: skip
    assert status == 200 and headers["content-type"] == "application/pdf", body
    assert rotations(body) == [90, 0, 0, 0]  # 5 merged pages, 2-5 kept, the first turned
    with pikepdf.open(io.BytesIO(body)) as pdf:
        assert str(pdf.docinfo["/Title"]) == "Piped"
        assert str(pdf.docinfo["/Author"]) == "Finance"
        assert str(pdf.docinfo["/CreationDate"]).startswith("D:20260102030405")
    assert pdftotext(body).count("DRAFT") == 4
    job = await stack.finished(headers["pressroom-job-id"])
    assert job["status"] == "done"


async def test_without_a_merge_or_with_a_split_the_parts_come_in_a_zip(
    stack: Stack, tmp_path: Path
) -> None:
    first = blank_pdf(tmp_path / "a.pdf", 3)
    second = blank_pdf(tmp_path / "b.pdf", 1)
    stages = [{"op": "rotate", "angle": 180}]
    status, headers, body = await asyncio.to_thread(
        curl, stack, "/forms/pdf/pipe", "--form", f"files=@{first}", "--form", f"files=@{second}",
        "--form-string", f"stages={json.dumps(stages)}",
    )  # fmt: skip
    assert status == 200 and headers["content-type"] == "application/zip", body
    with zipfile.ZipFile(io.BytesIO(body)) as archive:
        parts = {name: rotations(archive.read(name)) for name in archive.namelist()}
    assert parts == {"a.pdf": [180, 180, 180], "b.pdf": [180]}
    stages = [
        {"op": "split", "ranges": ["1", "2-3"]},
        {"op": "encrypt", "userPassword": "pass-word", "permissions": {"print": False}},
    ]
    status, headers, body = await asyncio.to_thread(
        curl, stack, "/forms/pdf/pipe", "--form", f"files=@{first}",
        "--form-string", f"stages={json.dumps(stages)}",
    )  # fmt: skip
    assert status == 200 and headers["content-type"] == "application/zip", body
    with zipfile.ZipFile(io.BytesIO(body)) as archive:
        names = sorted(archive.namelist())
        counts = []
        for name in names:
            with pikepdf.open(io.BytesIO(archive.read(name)), password="pass-word") as pdf:
                counts.append(len(pdf.pages))
                assert pdf.is_encrypted and not pdf.allow.print_lowres
    assert counts == [1, 2], names


@pytest.mark.parametrize(
    ("stages", "named"),
    [
        ([{"op": "merge"}, {"op": "redact"}], "stages[1].op"),
        ([{"op": "stamp-image", "image": "logo.png"}], "stages[0].op"),
        ([{"op": "rotate", "angle": 45}], "stages[0].angle"),
        ([{"op": "stamp-text", "text": "A", "fontSize": 30}], "stages[0].fontSize"),
        ([{"op": "stamp-text", "text": "A", "stampPages": "1"}], "stages[0].stampPages"),
        ([{"op": "merge", "fileBookmarks": True}], "stages[0].fileBookmarks"),
        ([{"op": "set-metadata", "modDate": "yesterday"}], "stages[0].modDate"),
        ([{"op": "remediate", "profile": "PDF/A-4"}], "stages[0].profile"),
        ([{"op": "encrypt", "userPassword": "a", "algorithm": "rc4-40"}], "stages[0].algorithm"),
        ([{"op": "split", "every": 0}], "stages[0].every"),
        ([{"op": "select"}], "'stages[0].pages' is required\n"),
        ({"op": "merge"}, "stages"),
    ],
)
async def test_a_stage_pressroom_cannot_run_is_a_400_naming_it(
    stack: Stack, tmp_path: Path, stages: object, named: str
) -> None:
    pdf = blank_pdf(tmp_path / "a.pdf", 2)
    status, _, body = await asyncio.to_thread(
        curl, stack, "/forms/pdf/pipe", "--form", f"files=@{pdf}",
        "--form-string", f"stages={json.dumps(stages)}",
    )  # fmt: skip
    assert status == 400 and named.encode() in body, body


async def test_stages_run_on_the_pdf_a_chromium_conversion_prints(
    stack: Stack, tmp_path: Path
) -> None:
    page = tmp_path / "index.html"
    page.write_text("<h1>One</h1><div style='page-break-before:always'><h1>Two</h1></div>")
    stages = [
        {"op": "rotate", "angle": 270, "pages": "2"},
        {"op": "set-metadata", "author": "Stage author"},
        {"op": "stamp-text", "text": "COPY"},
    ]
    status, headers, body = await asyncio.to_thread(
        curl, stack, "/forms/chromium/convert/html", "--form", f"files=@{page}",
        "--form", 'metadata={"Title": "Printed"}', "--form-string", f"stages={json.dumps(stages)}",
    )  # fmt: skip
    assert status == 200 and headers["content-type"] == "application/pdf", body
    assert rotations(body) == [0, 270]
    with pikepdf.open(io.BytesIO(body)) as pdf:
        assert str(pdf.docinfo["/Author"]) == "Stage author"
        assert str(pdf.docinfo["/Title"]) == "Printed"  # written while printing, kept
    assert pdftotext(body).count("COPY") == 2
    second = await stack.finished(headers["pressroom-job-id"])  # the PDF-tools job
    assert second["status"] == "done"
    for route, stages_field, named in (
        ("/forms/chromium/convert/html", [{"op": "redact"}], b"stages[0].op"),
        ("/forms/chromium/convert/html", [{"op": "sign"}], b"'stages[0].certificate' is required"),
        ("/forms/chromium/convert/html", [{"op": "rotate", "angle": 1}], b"stages[0].angle"),
        ("/forms/chromium/screenshot/html", [{"op": "flatten"}], b"stages"),
    ):
        status, _, body = await asyncio.to_thread(
            curl, stack, route, "--form", f"files=@{page}",
            "--form-string", f"stages={json.dumps(stages_field)}",
        )  # fmt: skip
        assert status == 400 and named in body, (route, body)


def outline_titles(data: bytes) -> list[str]:
    with pikepdf.open(io.BytesIO(data)) as pdf, pdf.open_outline() as tree:
        return [str(item.title) for item in tree.root]


def tagged(data: bytes) -> bool:
    with pikepdf.open(io.BytesIO(data)) as pdf:
        return "/StructTreeRoot" in pdf.Root


async def test_gotenberg_9_names_of_renamed_chromium_fields_map_as_the_8_x_names(
    stack: Stack, tmp_path: Path
) -> None:
    page = tmp_path / "index.html"
    page.write_text("<title>T</title><h1>Terms</h1><p>x</p><h1>Fees</h1><p>y</p>")
    answers = {}
    for fields in (
        ("nativeBookmarks=true",),
        ("generateDocumentOutline=true",),
        ("nativeTaggedPdf=true",),
        ("generateTaggedPdf=true",),
        (),
    ):
        extra = [part for name in fields for part in ("--form", name)]
        status, _, body = await asyncio.to_thread(
            curl, stack, "/forms/chromium/convert/html", "--form", f"files=@{page}", *extra
        )
        assert status == 200, (fields, body)
        answers[fields[0].split("=")[0] if fields else ""] = body
    assert outline_titles(answers["nativeBookmarks"]) == ["Terms", "Fees"]
    assert outline_titles(answers["generateDocumentOutline"]) == ["Terms", "Fees"]
    assert tagged(answers["nativeTaggedPdf"]) and tagged(answers["generateTaggedPdf"])
    assert not tagged(answers[""]) and outline_titles(answers[""]) == []
    for both, named in (
        (("nativeBookmarks=true", "generateDocumentOutline=false"), b"nativeBookmarks"),
        (("nativeTaggedPdf=false", "generateTaggedPdf=true"), b"nativeTaggedPdf"),
        (("nativeTaggedPdf=perhaps",), b"nativeTaggedPdf"),
    ):
        extra = [part for name in both for part in ("--form", name)]
        status, _, body = await asyncio.to_thread(
            curl, stack, "/forms/chromium/convert/html", "--form", f"files=@{page}", *extra
        )
        assert status == 400 and named in body, (both, body)


async def test_a_sign_stage_signs_last_with_the_uploaded_certificate_never_stored(
    stack: Stack, tmp_path: Path
) -> None:
    cert, _ = identity(tmp_path)
    first, second = blank_pdf(tmp_path / "a.pdf", 2), blank_pdf(tmp_path / "b.pdf", 1)
    sign = {"op": "sign", "certificate": "signer.p12", "certificatePassword": "s3cret-pass",
            "reason": "Approved", "location": "Paris"}  # fmt: skip
    stages = [{"op": "merge"}, {"op": "rotate", "angle": 90, "pages": "3"}, sign]
    status, headers, body = await asyncio.to_thread(
        curl, stack, "/forms/pdf/pipe", "--form", f"files=@{first}", "--form", f"files=@{second}",
        "--form", f"files=@{tmp_path / 'signer.p12'}",
        "--form-string", f"stages={json.dumps(stages)}",
    )  # fmt: skip
    assert status == 200 and headers["content-type"] == "application/pdf", body
    assert rotations(body) == [0, 0, 90]
    assert await signatures(body, cert) == [(True, "Common Name: Ana Tester", "Approved", "Paris")]
    recorded = await recorded_input(stack, headers["pressroom-job-id"])
    assert "signer.p12" not in recorded and "s3cret-pass" not in recorded  # no job file
    page = tmp_path / "index.html"
    page.write_text("<h1>Signed after printing</h1>")
    status, headers, body = await asyncio.to_thread(
        curl, stack, "/forms/chromium/convert/html", "--form", f"files=@{page}",
        "--form", f"files=@{tmp_path / 'signer.p12'}",
        "--form-string", f"stages={json.dumps([sign])}",
    )  # fmt: skip
    assert status == 200 and headers["content-type"] == "application/pdf", body
    assert await signatures(body, cert) == [(True, "Common Name: Ana Tester", "Approved", "Paris")]
    second = json.loads(await recorded_input(stack, headers["pressroom-job-id"]))
    printed = await recorded_input(stack, second["pdf"]["inputs"][0]["job"])
    assert "index.html" in printed or "Signed after printing" in printed
    assert "signer.p12" not in printed  # not a file of the printing job either
    for bad, named in (
        ({**sign, "certificatePassword": "wrong-pass"}, b"stages[0].certificatePassword"),
        ({**sign, "certificate": "none.p12"}, b"stages[0].certificate"),
        ({**sign, "timestampUrl": "https://tsa.example"}, b"stages[0].timestampUrl"),
    ):
        status, _, body = await asyncio.to_thread(
            curl, stack, "/forms/pdf/pipe", "--form", f"files=@{first}",
            "--form", f"files=@{tmp_path / 'signer.p12'}",
            "--form-string", f"stages={json.dumps([bad])}",
        )  # fmt: skip
        assert status == 400 and named in body, body

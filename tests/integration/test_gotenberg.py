"""The Gotenberg-compatible routes on the whole stack, driven by `curl --form` lines as
Gotenberg's documentation writes them: each form is one Pressroom job, answered with the
file (checked by pikepdf and poppler, not by Pressroom's own reader) or with Gotenberg's
status and a plain-text reason naming the field."""

from __future__ import annotations

import asyncio
import io
import json
import subprocess
import zipfile
from dataclasses import replace
from pathlib import Path

import pikepdf
import pytest
from aiohttp import web

from services.core.runtime.settings import Settings
from tests.conftest import Stack, serving

INDEX = "<!doctype html><title>Invoice</title><h1>Invoice INV-2026-004217</h1>"


def curl(
    stack: Stack, route: str, *args: str, out: Path | None = None
) -> tuple[int, dict[str, str], bytes]:
    """Run curl as a Gotenberg user would, with the tenant's API key as Basic password;
    the status, headers (lowercased names) and body."""
    command = ["curl", "--silent", "--show-error", "--request", "POST",
               f"{stack.url}{route}", "--user", f"any:{stack.tenant.key}",
               "--dump-header", "-", *args]  # fmt: skip
    done = subprocess.run(command, capture_output=True, check=True, timeout=120)
    head, _, body = done.stdout.partition(b"\r\n\r\n")
    lines = head.decode().split("\r\n")
    status = int(lines[0].split()[1])
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    return status, headers, body


@pytest.fixture
def index(tmp_path: Path) -> Path:
    path = tmp_path / "index.html"
    path.write_text(INDEX)
    return path


def page_size_pt(data: bytes) -> tuple[float, float]:
    with pikepdf.open(io.BytesIO(data)) as pdf:
        box = [float(v) for v in pdf.pages[0].mediabox]
    return box[2] - box[0], box[3] - box[1]


def pdftotext(data: bytes) -> str:
    done = subprocess.run(["pdftotext", "-", "-"], input=data, capture_output=True, check=True)
    return done.stdout.decode()


async def test_the_docs_html_curl_line_answers_a_letter_pdf_with_the_trace_echoed(
    stack: Stack, index: Path
) -> None:
    status, headers, body = await asyncio.to_thread(
        curl, stack, "/forms/chromium/convert/html", "--form", f"files=@{index}",
        "--header", "Gotenberg-Trace: my-trace-42",
        "--header", "Gotenberg-Output-Filename: invoice",
    )  # fmt: skip
    assert status == 200, body
    assert headers["content-type"] == "application/pdf"
    assert headers["gotenberg-trace"] == "my-trace-42"
    assert 'filename="invoice.pdf"' in headers["content-disposition"]
    width, height = page_size_pt(body)
    assert (round(width), round(height)) == (612, 792)  # Gotenberg's default: Letter
    assert "INV-2026-004217" in pdftotext(body)
    job = await stack.finished(headers["pressroom-job-id"])  # a real job of the tenant
    assert job["status"] == "done"


@pytest.mark.parametrize(
    ("width", "height", "expected"),
    [
        ("210mm", "297mm", (595, 842)),
        ("21cm", "29.7cm", (595, 842)),
        ("8.27", "11.7", (595, 842)),
        ("595pt", "842pt", (595, 842)),
        ("794px", "1123px", (596, 842)),
        ("49.6pc", "70.2pc", (595, 842)),
    ],
)
async def test_paper_size_in_every_gotenberg_unit(
    stack: Stack, index: Path, width: str, height: str, expected: tuple[int, int]
) -> None:
    status, _, body = await asyncio.to_thread(
        curl, stack, "/forms/chromium/convert/html", "--form", f"files=@{index}",
        "--form", f"paperWidth={width}", "--form", f"paperHeight={height}",
        "--form", "marginTop=1cm", "--form", "marginLeft=36pt", "--form", "landscape=false",
    )  # fmt: skip
    assert status == 200, body
    w, h = page_size_pt(body)
    assert abs(w - expected[0]) <= 1.5 and abs(h - expected[1]) <= 1.5, (w, h)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("paperWidth", "wide"),
        ("scale", "9"),
        ("landscape", "maybe"),
        ("emulatedMediaFeatures", '[{"name":"prefers-color-scheme","value":"sepia"}]'),
        ("pdfa", "PDF/A-1b"),
        ("noSuchField", "1"),
        ("metadata", "{not json"),
        ("waitDelay", "5 parsecs"),
        ("nativePageRanges", "x-y"),
    ],
)
async def test_a_field_pressroom_cannot_honour_is_a_400_naming_it(
    stack: Stack, index: Path, field: str, value: str
) -> None:
    status, headers, body = await asyncio.to_thread(
        curl, stack, "/forms/chromium/convert/html", "--form", f"files=@{index}",
        "--form-string", f"{field}={value}",
    )  # fmt: skip
    assert status == 400, body
    assert headers["content-type"].startswith("text/plain")
    assert field.encode() in body, body


async def test_no_key_is_a_401_and_a_bearer_key_works(stack: Stack, index: Path) -> None:
    async with stack.client.post(
        f"{stack.url}/forms/chromium/convert/html",
        data={"x": "1"},
        headers={"Authorization": "Basic eDp5"},
    ) as response:
        assert response.status == 401
    form = {"files": index.open("rb")}
    async with stack.client.post(f"{stack.url}/forms/chromium/convert/html", data=form) as response:
        assert response.status == 200, await response.text()  # the session sends Bearer
        assert response.headers["Content-Type"] == "application/pdf"


async def test_health_version_and_libreoffice(stack: Stack, tmp_path: Path) -> None:
    async with stack.client.get(f"{stack.url}/health") as response:
        assert response.status == 200
        body = await response.json()
        assert body["status"] == "up"
        assert body["details"]["chromium"]["status"] == "up"
    async with stack.client.head(f"{stack.url}/health") as response:
        assert response.status == 200
    async with stack.client.get(f"{stack.url}/version") as response:
        assert (await response.text()).startswith("8.")
    doc = tmp_path / "a.docx"
    doc.write_bytes(b"PK\x03\x04")
    status, _, body = await asyncio.to_thread(
        curl, stack, "/forms/libreoffice/convert", "--form", f"files=@{doc}"
    )
    assert status == 501 and b"office" in body


@pytest.fixture
def short_wait(settings: Settings) -> Settings:
    return replace(settings, gotenberg_timeout=1.0)


async def test_a_job_outliving_the_wait_is_a_503_naming_it_and_still_finishes(
    short_wait: Settings, tmp_path: Path
) -> None:
    stack = Stack(short_wait)
    await stack.start()
    try:
        slow = tmp_path / "index.html"
        slow.write_text(
            "<p id=p></p><script>setTimeout(() => p.textContent = 'late', 2500)</script>"
        )
        status, headers, body = await asyncio.to_thread(
            curl, stack, "/forms/chromium/convert/html", "--form", f"files=@{slow}",
            "--form", "waitForExpression=document.getElementById('p').textContent === 'late'",
        )  # fmt: skip
        assert status == 503, body
        job_id = headers["pressroom-job-id"]
        assert job_id.encode() in body
        job = await stack.finished(job_id)
        assert job["status"] == "done"
    finally:
        await stack.close()


async def test_screenshots_in_each_format_and_a_markdown_form(stack: Stack, tmp_path: Path) -> None:
    page = tmp_path / "index.html"
    page.write_text("<h1 style='color:#c00'>Shot</h1>")
    for kind, magic in (("png", b"\x89PNG"), ("jpeg", b"\xff\xd8\xff"), ("webp", b"RIFF")):
        status, headers, body = await asyncio.to_thread(
            curl, stack, "/forms/chromium/screenshot/html", "--form", f"files=@{page}",
            "--form", f"format={kind}", "--form", "quality=80", "--form", "width=640",
        )  # fmt: skip
        assert status == 200, body
        assert headers["content-type"] == f"image/{kind}"
        assert body.startswith(magic)
    index = tmp_path / "md" / "index.html"
    index.parent.mkdir()
    index.write_text('<html><body>{{ toHTML "notes.md" }}</body></html>')
    notes = index.parent / "notes.md"
    notes.write_text("# Release notes\n\n| a | b |\n|---|---|\n| 1 | 2 |\n")
    status, _, body = await asyncio.to_thread(
        curl, stack, "/forms/chromium/convert/markdown",
        "--form", f"files=@{index}", "--form", f"files=@{notes}",
    )  # fmt: skip
    assert status == 200, body
    text = pdftotext(body)
    assert "Release notes" in text and "{{" not in text


@pytest.fixture
def short_compiles(settings: Settings) -> Settings:
    return replace(settings, template_timeout=0.5)


async def test_a_hostile_markdown_file_is_parsed_off_the_event_loop_within_the_time_limit(
    short_compiles: Settings, tmp_path: Path
) -> None:
    """Markdown that takes the parser seconds (unclosed brackets) is parsed in the
    gateway's template workers, not on its event loop: the form is refused with a 4xx
    once the workers' time limit runs out, and the gateway answers others meanwhile."""
    stack = Stack(short_compiles)
    await stack.start()
    try:
        index = tmp_path / "index.html"
        index.write_text('<html><body>{{ toHTML "slow.md" }}</body></html>')
        slow = tmp_path / "slow.md"
        slow.write_text("[a" * 100_000)
        form = asyncio.create_task(asyncio.to_thread(
            curl, stack, "/forms/chromium/convert/markdown",
            "--form", f"files=@{index}", "--form", f"files=@{slow}",
        ))  # fmt: skip
        answered = 0
        while not form.done():
            status, _, _ = await asyncio.to_thread(curl, stack, "/version", "--request", "GET")
            assert status == 200
            answered += 1
        status, _, body = await form
        assert 400 <= status < 500, body
        assert b"took longer" in body or b"time" in body, body
        assert answered >= 1
    finally:
        await stack.close()


async def test_webhook_mode_answers_204_then_sends_the_file_or_the_failure(
    stack: Stack, index: Path
) -> None:
    got: asyncio.Queue[tuple[str, str, dict[str, str], bytes]] = asyncio.Queue()

    async def receive(request: web.Request) -> web.Response:
        if request.path == "/missing":  # the page the failing job prints
            return web.Response(status=404, text="no such page")
        await got.put((request.method, request.path, dict(request.headers), await request.read()))
        return web.Response(status=200)

    app = web.Application()
    app.router.add_route("*", "/{name}", receive)
    async with serving(app) as base:
        hooks = [
            "--header", f"Gotenberg-Webhook-Url: {base}/done",
            "--header", f"Gotenberg-Webhook-Error-Url: {base}/error",
            "--header", "Gotenberg-Webhook-Method: PUT",
            "--header", 'Gotenberg-Webhook-Extra-Http-Headers: {"X-Token": "s3cret-token"}',
            "--header", "Gotenberg-Trace: hook-trace-1",
            "--header", "Gotenberg-Output-Filename: statement",
        ]  # fmt: skip
        status, headers, body = await asyncio.to_thread(
            curl, stack, "/forms/chromium/convert/html", "--form", f"files=@{index}", *hooks
        )
        assert status == 204, body
        method, path, sent, data = await asyncio.wait_for(got.get(), 60)
        assert (method, path) == ("PUT", "/done")
        assert sent["Content-Type"] == "application/pdf" and data.startswith(b"%PDF")
        assert 'filename="statement.pdf"' in sent["Content-Disposition"]
        assert sent["X-Token"] == "s3cret-token" and sent["Gotenberg-Trace"] == "hook-trace-1"
        assert "INV-2026-004217" in pdftotext(data)
        async with stack.client.get(f"{stack.url}/jobs/{headers['pressroom-job-id']}/events") as r:
            assert b"s3cret-token" not in await r.read()  # sealed on the log
        status, _, body = await asyncio.to_thread(
            curl, stack, "/forms/chromium/convert/url", "--form", f"url={base}/missing",
            *hooks[:4],
        )  # fmt: skip
        assert status == 204, body
        method, path, sent, data = await asyncio.wait_for(got.get(), 60)
        assert (method, path) == ("POST", "/error")
        assert sent["Content-Type"] == "application/json"
        failure = json.loads(data)
        assert failure["status"] == 409 and "HTTP 404" in failure["message"]


async def test_a_bad_webhook_header_is_a_400_naming_it(stack: Stack, index: Path) -> None:
    for extra, named in (
        (["--header", "Gotenberg-Webhook-Url: https://example.com/a"], b"Error-Url"),
        (["--header", "Gotenberg-Webhook-Url: https://example.com/a",
          "--header", "Gotenberg-Webhook-Error-Url: https://example.com/b",
          "--header", "Gotenberg-Webhook-Method: DELETE"], b"Gotenberg-Webhook-Method"),
        (["--header", "Gotenberg-Webhook-Url: https://example.com/a",
          "--header", "Gotenberg-Webhook-Error-Url: https://example.com/b",
          "--header", "Gotenberg-Webhook-Extra-Http-Headers: [1]"], b"Extra-Http-Headers"),
    ):  # fmt: skip
        status, _, body = await asyncio.to_thread(
            curl, stack, "/forms/chromium/convert/html", "--form", f"files=@{index}", *extra
        )
        assert status == 400 and named in body, body


@pytest.mark.parametrize(
    ("body", "content_type", "named"),
    [
        (b"{}", "application/json", b"Content-Type"),
        (b"", "multipart/form-data; boundary=x", b"multipart"),
        (b"--x\r\nnot a part\r\n--x--\r\n", "multipart/form-data; boundary=x", b""),
        (b"garbage", "multipart/form-data", b""),
        (b'--x\r\nContent-Disposition: form-data; name="files"; filename="../up.html"\r\n\r\n'
         b"<p>\r\n--x--\r\n", "multipart/form-data; boundary=x", b"up.html"),
        (b'--x\r\nContent-Disposition: form-data; name="files"; filename="index.html"\r\n\r\n'
         b"\xff\xfe\r\n--x--\r\n", "multipart/form-data; boundary=x", b"index.html"),
        (b'--x\r\nContent-Disposition: form-data; name="scale"\r\n\r\n\xff\r\n'
         b'--x\r\nContent-Disposition: form-data; name="files"; filename="index.html"\r\n\r\n'
         b"<p>\r\n--x--\r\n", "multipart/form-data; boundary=x", b"scale"),
    ],
)  # fmt: skip
async def test_a_malformed_form_is_a_4xx_never_a_500(
    stack: Stack, body: bytes, content_type: str, named: bytes
) -> None:
    url = f"{stack.url}/forms/chromium/convert/html"
    async with stack.client.post(url, data=body, headers={"Content-Type": content_type}) as r:
        text = await r.read()
        assert 400 <= r.status < 500, (r.status, text)
        assert named in text, text


async def test_pdf_engine_routes_on_uploaded_pdfs(stack: Stack, tmp_path: Path) -> None:
    """Merge (in file-name order), split, metadata write and read, PDF/A, under both
    Gotenberg 8's and 9's names."""
    for number in (1, 2):
        page = tmp_path / f"page{number}.html"
        page.write_text(f"<h1>Part {number}</h1>" + "<p style='page-break-after:always'>x</p>")
        status, _, body = await asyncio.to_thread(
            curl,
            stack,
            "/forms/chromium/convert/html",
            "--form",
            f"files=@{page};filename=index.html",
        )
        assert status == 200, body
        (tmp_path / f"{'b' if number == 1 else 'a'}.pdf").write_bytes(body)  # b first, a second
    pdfs = ["--form", f"files=@{tmp_path / 'b.pdf'}", "--form", f"files=@{tmp_path / 'a.pdf'}"]
    status, headers, merged = await asyncio.to_thread(
        curl, stack, "/forms/pdfengines/merge", *pdfs,
        "--form", 'metadata={"Author": "Ana", "Creator": "Pressroom tests"}',
    )  # fmt: skip
    assert status == 200 and headers["content-type"] == "application/pdf", merged
    text = pdftotext(merged)
    assert text.index("Part 2") < text.index("Part 1")  # a.pdf (Part 2) sorts first
    with pikepdf.open(io.BytesIO(merged)) as pdf:
        assert len(pdf.pages) == 2 and str(pdf.docinfo["/Author"]) == "Ana"
    (tmp_path / "merged.pdf").write_bytes(merged)
    status, headers, archive = await asyncio.to_thread(
        curl, stack, "/forms/pdf/split", "--form", f"files=@{tmp_path / 'merged.pdf'}",
        "--form", "splitMode=intervals", "--form", "splitSpan=1",
    )  # fmt: skip
    assert status == 200 and headers["content-type"] == "application/zip", archive
    status, _, read = await asyncio.to_thread(
        curl,
        stack,
        "/forms/pdfengines/metadata/read",
        "--form",
        f"files=@{tmp_path / 'merged.pdf'}",
    )
    assert status == 200, read
    facts = json.loads(read)["merged.pdf"]
    assert facts["Author"] == "Ana" and facts["PageCount"] == 2 and facts["Linearized"] == "No"
    status, _, archival = await asyncio.to_thread(
        curl, stack, "/forms/pdf/convert", "--form", f"files=@{tmp_path / 'merged.pdf'}",
        "--form", "pdfa=PDF/A-2b",
    )  # fmt: skip
    assert status == 200, archival
    with pikepdf.open(io.BytesIO(archival)) as pdf:
        assert pdf.open_metadata().pdfa_status == "2B"
    data = tmp_path / "data.csv"
    data.write_text("number,total\nINV-1,10.00\n")
    status, _, embedded = await asyncio.to_thread(
        curl, stack, "/forms/pdf/embed", "--form", f"files=@{tmp_path / 'merged.pdf'}",
        "--form", f"embeds=@{data}",
    )  # fmt: skip
    assert status == 200, embedded
    with pikepdf.open(io.BytesIO(embedded)) as pdf:
        assert pdf.attachments["data.csv"].get_file().read_bytes().startswith(b"number,total")
    status, _, body = await asyncio.to_thread(
        curl, stack, "/forms/pdfengines/merge", *pdfs, "--form", "pdfa=PDF/A-9z"
    )
    assert status == 400 and b"pdfa" in body


async def test_post_processing_on_a_chromium_route_is_a_second_job(
    stack: Stack, tmp_path: Path
) -> None:
    page = tmp_path / "index.html"
    page.write_text("<h1>One</h1><div style='page-break-before:always'><h1>Two</h1></div>")
    status, headers, body = await asyncio.to_thread(
        curl, stack, "/forms/chromium/convert/html", "--form", f"files=@{page}",
        "--form", "splitMode=pages", "--form", "splitSpan=1-2",
        "--form", 'metadata={"Title": "Split", "Creator": "Gotenberg form", "Trapped": "True"}',
    )  # fmt: skip
    assert status == 200 and headers["content-type"] == "application/zip", body
    with zipfile.ZipFile(io.BytesIO(body)) as archive:
        parts = [archive.read(name) for name in sorted(archive.namelist())]
    assert len(parts) == 2
    assert "Two" in pdftotext(parts[1]) and "One" not in pdftotext(parts[1])
    with pikepdf.open(io.BytesIO(parts[0])) as pdf:
        assert str(pdf.docinfo["/Creator"]) == "Gotenberg form"
        assert pdf.docinfo["/Trapped"] == pikepdf.Name("/True")
        assert str(pdf.docinfo["/Title"]) == "Split"  # written while printing, kept
    second = await stack.finished(headers["pressroom-job-id"])  # the PDF-tools job
    assert second["status"] == "done"

"""Markdown jobs on the real stack: a table printed as a table, a stored template wrapping
the Markdown, and raw HTML inside Markdown held to the same sandbox as an HTML job.

Verifies: the PDF of a Markdown job holds its table's cells in rows and takes its title
from the first heading; a stored template gets the Markdown's HTML as `content` with its
own header; the same raw HTML (a script, a `file:` image, a loopback image) sent as HTML
and inside Markdown makes the same refusals, each with its reason, and the loopback
server sees no request from either; `pressroom render --markdown` and the client send
Markdown (with a stylesheet and a wrapping template file).
"""

from __future__ import annotations

import dataclasses
import io
import zipfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pypdf
import pytest
from aiohttp import web

from pressroom.client import AsyncClient
from services.core.model.pageoptions import PageOptions
from services.core.objectstore.storage import LocalStorage
from services.core.runtime.settings import Settings
from services.core.sandbox.markdown import markdown_document
from services.renderer.browser import BrowserPool, Html
from services.renderer.jobfiles import FileCache, JobFiles
from tests.conftest import Stack, serving
from tests.integration.test_batches import download, finished_batch, submit_batch
from tests.integration.test_cli import pressroom
from tests.integration.test_job_files import images, png, stored

TABLE = """# Delivery note 2041

Goods sent on **3 December**:

| Item | Qty | Price |
|------|----:|------:|
| Paper A4 | 12 | 4.20 |
| Toner | 2 | 61.00 |

~~Pending~~ everything shipped.
"""


async def document(stack: Stack, job_id: str) -> bytes:
    job = await stack.finished(job_id)
    assert job["status"] == "done", job
    async with stack.client.get(job["url"]) as response:
        assert response.status == 200
        return await response.read()


async def refusals(stack: Stack, job_id: str) -> list[dict[str, str]]:
    """The `refused` list of the job's `done` event, as `GET /jobs/{id}/events` shows it."""
    async with stack.client.get(f"{stack.url}/jobs/{job_id}/events") as response:
        assert response.status == 200
        shown = await response.json()
    done = [event for event in shown["events"] if event["type"] == "done"]
    assert len(done) == 1, shown
    refused: list[dict[str, str]] = done[0].get("refused", [])
    return refused


def text_of(pdf: bytes) -> tuple[str, Any]:
    reader = pypdf.PdfReader(io.BytesIO(pdf))
    return "\n".join(page.extract_text() for page in reader.pages), reader.metadata


async def test_a_markdown_table_is_printed_in_rows_under_the_first_headings_title(
    stack: Stack,
) -> None:
    accepted = await stack.submit({"markdown": TABLE, "stylesheet": "th { color: #c00 }"})
    text, metadata = text_of(await document(stack, accepted["id"]))
    lines = [" ".join(line.split()) for line in text.splitlines()]
    assert "Delivery note 2041" in lines
    assert "Item Qty Price" in lines and "Paper A4 12 4.20" in lines, lines
    assert "Toner 2 61.00" in lines
    assert metadata.title == "Delivery note 2041"


async def test_a_stored_template_wraps_the_markdown_it_is_given(stack: Stack) -> None:
    body = {
        "name": "letterhead",
        "body": "<!doctype html><header>ACME for {{ customer }}</header>{{ content }}",
    }
    async with stack.client.post(f"{stack.url}/templates", json=body) as response:
        assert response.status == 201, await response.text()
        template_id = (await response.json())["id"]
    accepted = await stack.submit(
        {"markdown": TABLE, "template_id": template_id, "data": {"customer": "Globex <Ltd>"}}
    )
    text, _ = text_of(await document(stack, accepted["id"]))
    assert "ACME for Globex <Ltd>" in text  # the data escaped, as in any template
    assert "Paper A4" in text and "**" not in text and "|" not in text


@dataclasses.dataclass
class Loopback:
    url: str = ""
    hits: list[str] = dataclasses.field(default_factory=list)


@pytest.fixture
async def loopback() -> AsyncIterator[Loopback]:
    seen = Loopback()

    async def hit(request: web.Request) -> web.Response:
        seen.hits.append(request.path)
        return web.Response(body=b"", content_type="image/png")

    app = web.Application()
    app.router.add_get("/{name}", hit)
    async with serving(app) as base:
        seen.url = base
        yield seen


async def test_raw_html_in_markdown_meets_the_same_refusals_as_an_html_job(
    settings: Settings, loopback: Loopback
) -> None:
    raw = (
        f'<img src="file:///etc/hostname"><img src="{loopback.url}/img.png">'
        '<iframe src="file:///etc/passwd"></iframe>'
        f"<script>fetch('{loopback.url}/script')</script>"
    )
    stack = Stack(dataclasses.replace(settings, allow_private_networks=False))
    await stack.start()
    try:
        as_html = await stack.submit({"html": f"<!doctype html><p>page</p>{raw}"})
        as_markdown = await stack.submit({"markdown": f"# page\n\n{raw}\n"})
        for job in (as_html, as_markdown):
            await document(stack, job["id"])
        refused = {
            name: sorted(await refusals(stack, job["id"]), key=lambda r: r["url"])
            for name, job in (("html", as_html), ("markdown", as_markdown))
        }
    finally:
        await stack.close()
    assert refused["markdown"] == refused["html"], refused
    urls = {r["url"]: r["reason"] for r in refused["html"]}
    assert urls["file:///etc/hostname"] == "scheme file: is not allowed"
    assert urls["file:///etc/passwd"] == "scheme file: is not allowed"  # a frame's document
    assert "loopback" in urls[f"{loopback.url}/img.png"]
    assert "loopback" in urls[f"{loopback.url}/script"]
    assert all(reason for reason in urls.values()), urls  # every refusal says why
    assert loopback.hits == []


async def test_the_cli_and_the_client_send_markdown_files(stack: Stack, tmp_path: Path) -> None:
    (tmp_path / "notes.md").write_text(TABLE)
    (tmp_path / "notes.css").write_text("td { color: #060 }")
    (tmp_path / "wrapper.html.j2").write_text("<p>Wrapped</p>{{ content }}<style>{{ stylesheet }}")
    status, _, err = await pressroom(
        tmp_path, "render", "--markdown", "notes.md", "--stylesheet", "notes.css",
        "wrapper.html.j2", "--url", stack.url, "--key", stack.tenant.key,
    )  # fmt: skip
    assert status == 0, err
    text, _ = text_of((tmp_path / "notes.pdf").read_bytes())
    assert "Wrapped" in text and "Paper A4" in text, text
    status, _, err = await pressroom(
        tmp_path, "render", "--stylesheet", "notes.css", "--html", "notes.md"
    )
    assert status == 2 and "--stylesheet styles --markdown" in err

    async with AsyncClient(stack.url, stack.tenant.key) as client:
        job = await client.submit(markdown=TABLE, stylesheet="th { color: red }")
        done = await client.wait(job.id, timeout=60)
        assert done.status == "done" and done.pages == 1


async def test_markdown_images_and_links_come_from_the_jobs_files(
    chromium: str, tmp_path: Path
) -> None:
    """`![logo](img/logo.png)` in Markdown is the page's relative name like any HTML's:
    served from the job's files (`renderer/jobfiles`), drawn in the PDF."""
    storage = LocalStorage(str(tmp_path / "files"), "http://pressroom.test", "secret")
    refs = await stored(storage, "t1", **{"img/logo.png": png(40, 20)})
    document = markdown_document("# Logo\n\n![logo](img/logo.png)\n", None, {}, None)
    async with BrowserPool(chromium, pages=1, timeout=20, max_output_bytes=10**8) as pool:
        files = JobFiles(FileCache(storage, 10**7), "t1", refs)
        result = await pool.render(Html(document), PageOptions(), None, files)
    assert images(result.data, tmp_path) == [(40, 20)]
    assert result.refused == ()


async def test_hostile_markdown_fails_its_job_within_the_jails_time_and_the_next_renders(
    settings: Settings,
) -> None:
    """Unclosed brackets make the parser's work grow with the text (seconds for a few
    hundred kilobytes): the renderer's jail stops it at `PRESSROOM_TEMPLATE_TIMEOUT`, the
    job fails at once naming the Markdown, and the next job renders."""
    stack = Stack(dataclasses.replace(settings, template_timeout=0.5))
    await stack.start()
    try:
        hostile = await stack.submit({"markdown": "[" * 200_000 + "a" + "](" * 100_000})
        failed = await stack.finished(hostile["id"])
        after = await stack.submit({"markdown": "# still here"})
        text, _ = text_of(await document(stack, after["id"]))
    finally:
        await stack.close()
    assert (failed["status"], failed["attempts"], failed["error"]["type"]) == (
        "failed",
        1,
        "template",
    ), failed
    assert failed["error"]["message"] == "the Markdown took longer than 0.5 s and was stopped"
    assert "still here" in text


async def test_a_batch_of_markdown_items_alone_and_wrapped_by_its_template(stack: Stack) -> None:
    """Each item's `markdown` is its document: printed with the default style in a batch
    without a template, given as `content` (beside its data) in one with a template."""
    alone = await submit_batch(
        stack,
        {"items": [{"markdown": TABLE}, {"markdown": "# Second *note*", "filename": "b.pdf"}]},
    )
    wrapped = await submit_batch(
        stack,
        {
            "template": "<p>For {{ customer }}</p>{{ content }}",
            "items": [{"markdown": "| a | b |\n|---|---|\n| 1 | 2 |", "data": {"customer": "Ana"}}],
        },
    )
    texts = {}
    for batch_id in (alone, wrapped):
        batch = await finished_batch(stack, batch_id)
        assert batch["status"] == "done", batch
        archive = zipfile.ZipFile(io.BytesIO(await download(batch["url"])))
        texts[batch_id] = {
            name: text_of(archive.read(name))[0]
            for name in archive.namelist()
            if name.endswith(".pdf")
        }
    assert set(texts[alone]) == {"00000.pdf", "b.pdf"}
    assert "Paper A4 12 4.20" in " ".join(texts[alone]["00000.pdf"].split())
    assert texts[alone]["b.pdf"].strip() == "Second note"
    assert " ".join(texts[wrapped]["00000.pdf"].split()) == "For Ana a b 1 2"


async def test_a_markdown_file_with_its_image_from_the_command_line(
    stack: Stack, tmp_path: Path
) -> None:
    """A README with a logo, as a team has it on disk: `pressroom render --markdown
    README.md --asset logo.png` prints the logo from the file sent with the job."""
    (tmp_path / "README.md").write_text("# Handbook\n\n![Logo](logo.png)\n\nWelcome.\n")
    (tmp_path / "logo.png").write_bytes(png(40, 20))
    status, _, err = await pressroom(
        tmp_path, "render", "--markdown", "README.md", "--asset", "logo.png",
        "--url", stack.url, "--key", stack.tenant.key,
    )  # fmt: skip
    assert status == 0, err
    pdf = (tmp_path / "README.pdf").read_bytes()
    assert images(pdf, tmp_path) == [(40, 20)]
    assert "Welcome." in text_of(pdf)[0]

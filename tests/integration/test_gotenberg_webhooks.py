"""Post-processing fields in webhook mode: the printed job and the job that post-processes
it are submitted together, the second waiting for the first; the webhook gets the
post-processed file, or the first job's failure."""

from __future__ import annotations

import asyncio
import io
import json
import zipfile
from dataclasses import replace
from pathlib import Path

import pikepdf
import pytest
from aiohttp import web

from services.core.runtime.settings import Settings
from tests.conftest import Stack, serving
from tests.integration.test_gotenberg import curl, pdftotext


@pytest.fixture
def settings(settings: Settings) -> Settings:
    """Retries that outlast a slow first job on a loaded machine (they guard hangs only)."""
    return replace(settings, max_attempts=12, retry_base=0.5, retry_cap=5.0)


async def test_webhook_mode_sends_the_post_processed_file_or_the_first_job_s_failure(
    stack: Stack, tmp_path: Path
) -> None:
    got: asyncio.Queue[tuple[str, dict[str, str], bytes]] = asyncio.Queue()

    async def receive(request: web.Request) -> web.Response:
        if request.path == "/missing":  # the page the failing job prints
            return web.Response(status=404, text="no such page")
        await got.put((request.path, dict(request.headers), await request.read()))
        return web.Response(status=200)

    app = web.Application()
    app.router.add_route("*", "/{name}", receive)
    page = tmp_path / "index.html"
    page.write_text("<h1>One</h1><div style='page-break-before:always'><h1>Two</h1></div>")
    async with serving(app) as base:
        hooks = ["--header", f"Gotenberg-Webhook-Url: {base}/done",
                 "--header", f"Gotenberg-Webhook-Error-Url: {base}/error"]  # fmt: skip
        status, headers, body = await asyncio.to_thread(
            curl, stack, "/forms/chromium/convert/html", "--form", f"files=@{page}",
            "--form", "splitMode=pages", "--form", "splitSpan=1-2",
            "--form", 'metadata={"Creator": "Gotenberg webhook"}', *hooks,
        )  # fmt: skip
        assert status == 204, body
        path, sent, data = await asyncio.wait_for(got.get(), 240)
        assert path == "/done" and sent["Content-Type"] == "application/zip", (path, data[:300])
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            parts = [archive.read(name) for name in sorted(archive.namelist())]
        assert len(parts) == 2 and "Two" in pdftotext(parts[1]) and "One" not in pdftotext(parts[1])
        with pikepdf.open(io.BytesIO(parts[0])) as pdf:
            assert str(pdf.docinfo["/Creator"]) == "Gotenberg webhook"
        second = await stack.finished(headers["pressroom-job-id"])  # the PDF-tools job
        assert second["status"] == "done"
        status, _, body = await asyncio.to_thread(
            curl, stack, "/forms/chromium/convert/url", "--form", f"url={base}/missing",
            "--form", "flatten=true", *hooks,
        )  # fmt: skip
        assert status == 204, body
        path, sent, data = await asyncio.wait_for(got.get(), 240)
        assert path == "/error" and sent["Content-Type"] == "application/json"
        failure = json.loads(data)
        assert failure["status"] == 409 and "HTTP 404" in failure["message"], failure


async def test_webhook_mode_sends_the_file_gotenberg_9_stages_made(
    stack: Stack, tmp_path: Path
) -> None:
    got: asyncio.Queue[tuple[str, dict[str, str], bytes]] = asyncio.Queue()

    async def receive(request: web.Request) -> web.Response:
        await got.put((request.path, dict(request.headers), await request.read()))
        return web.Response(status=200)

    app = web.Application()
    app.router.add_route("*", "/{name}", receive)
    with pikepdf.new() as blank:
        for _ in range(3):
            blank.add_blank_page()
        blank.save(tmp_path / "a.pdf")
    page = tmp_path / "index.html"
    page.write_text("<h1>One</h1><div style='page-break-before:always'><h1>Two</h1></div>")
    stages = [{"op": "rotate", "angle": 90, "pages": "2"}, {"op": "select", "pages": "2-3"}]
    async with serving(app) as base:
        hooks = ["--header", f"Gotenberg-Webhook-Url: {base}/done",
                 "--header", f"Gotenberg-Webhook-Error-Url: {base}/error"]  # fmt: skip
        for route, source in (
            ("/forms/pdf/pipe", f"files=@{tmp_path / 'a.pdf'}"),
            ("/forms/chromium/convert/html", f"files=@{page}"),
        ):
            status, _, body = await asyncio.to_thread(
                curl, stack, route, "--form", source,
                "--form-string", f"stages={json.dumps(stages)}", *hooks,
            )  # fmt: skip
            assert status == 204, body
            path, sent, data = await asyncio.wait_for(got.get(), 240)
            assert path == "/done" and sent["Content-Type"] == "application/pdf", (path, data[:300])
            with pikepdf.open(io.BytesIO(data)) as pdf:
                turns = [int(p.obj.get("/Rotate", 0)) for p in pdf.pages]
            expected = [90, 0] if route.endswith("pipe") else [90]
            assert turns == expected, route

"""Which statuses of the page's own document fail a job (`failOnHttpStatusCodes`,
`options.fail_on_status`) and which are printed as the page the server sent: on the whole
stack, against a real HTTP server the page reaches."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path

import pytest
from aiohttp import web

from services.core.runtime.settings import Settings
from tests.conftest import Stack, serving
from tests.integration.test_gotenberg import curl, pdftotext

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture
def settings(settings: Settings) -> Settings:
    """A wait for each job long enough for a loaded machine: it only guards against hangs."""
    return replace(settings, gotenberg_timeout=300.0)


PAGES = {
    "/page": (200, "Ledger twelve"),
    "/gone": (404, "Nothing lives here"),
    "/broken": (500, "The server fell over"),
}
"""Each page of the site: the status it answers and the text of its HTML body."""


@pytest.fixture
async def site() -> AsyncIterator[str]:
    """The `PAGES`, served; the base URL."""

    async def page(request: web.Request) -> web.Response:
        status, text = PAGES[request.path]
        body = f"<!doctype html><h1>{text}</h1>"
        return web.Response(status=status, content_type="text/html", text=body)

    app = web.Application()
    for path in PAGES:
        app.router.add_get(path, page)
    async with serving(app) as base:
        yield base


async def _convert(stack: Stack, url: str, *fields: str) -> tuple[int, bytes]:
    args = ["--form", f"url={url}"]
    for field in fields:
        args += ["--form-string", field]
    status, _, body = await asyncio.to_thread(curl, stack, "/forms/chromium/convert/url", *args)
    return status, body


async def test_a_404_page_fails_by_default_and_is_printed_with_an_empty_list(
    stack: Stack, site: str
) -> None:
    status, body = await _convert(stack, f"{site}/gone")
    assert status == 409, body
    assert b"HTTP 404" in body and f"{site}/gone".encode() in body, body
    status, body = await _convert(stack, f"{site}/gone", "failOnHttpStatusCodes=[]")
    assert status == 200, body
    assert body.startswith(b"%PDF-")
    assert "Nothing lives here" in pdftotext(body)


async def test_a_status_not_listed_is_printed_and_a_listed_200_fails(
    stack: Stack, site: str
) -> None:
    status, body = await _convert(stack, f"{site}/broken", "failOnHttpStatusCodes=[499]")
    assert status == 200, body  # 499 is any 4xx: a 500 is not one of them
    assert "The server fell over" in pdftotext(body)
    status, body = await _convert(stack, f"{site}/page", "failOnHttpStatusCodes=[200]")
    assert status == 409, body
    assert b"HTTP 200" in body and b"fail_on_status" in body, body
    status, body = await _convert(stack, f"{site}/page", "failOnHttpStatusCodes=[499, 599]")
    assert status == 200, body  # Gotenberg's default list, written out
    assert "Ledger twelve" in pdftotext(body)


async def test_a_screenshot_of_a_404_page_with_an_empty_list(stack: Stack, site: str) -> None:
    status, _, body = await asyncio.to_thread(
        curl, stack, "/forms/chromium/screenshot/url", "--form", f"url={site}/gone",
        "--form-string", "failOnHttpStatusCodes=[]",
    )  # fmt: skip
    assert status == 200, body
    assert body.startswith(PNG_MAGIC)
    status, _, body = await asyncio.to_thread(
        curl, stack, "/forms/chromium/screenshot/url", "--form", f"url={site}/gone"
    )
    assert status == 409, body


@pytest.mark.parametrize("value", ["[700]", '["404"]', "404", "[true]"])
async def test_a_bad_list_is_a_400_naming_the_field(stack: Stack, site: str, value: str) -> None:
    status, body = await _convert(stack, f"{site}/page", f"failOnHttpStatusCodes={value}")
    assert status == 400, body
    assert b"failOnHttpStatusCodes" in body, body


async def test_a_native_job_prints_or_fails_by_its_fail_on_status(
    stack: Stack, site: str, tmp_path: Path
) -> None:
    path = await stack.rendered(
        {"url": f"{site}/gone", "options": {"fail_on_status": [500]}}, tmp_path
    )
    assert "Nothing lives here" in pdftotext(path.read_bytes())
    accepted = await stack.submit({"url": f"{site}/page", "options": {"fail_on_status": [299]}})
    job = await stack.finished(accepted["id"], timeout=300)
    assert job["status"] == "failed", job
    assert job["error"]["type"] == "source", job
    assert "HTTP 200" in json.dumps(job["error"]), job
    body = {"url": f"{site}/page", "options": {"fail_on_status": [600]}}
    async with stack.client.post(f"{stack.url}/jobs", json=body) as reply:
        assert reply.status == 400, await reply.text()
        error = (await reply.json())["error"]
    assert error["field"] == "options.fail_on_status", error

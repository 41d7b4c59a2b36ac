"""Where a job's document comes from: `template`, `template_id`, `html` or `url`, exactly one.

Verifies: an `html` source is printed as is (Jinja syntax in it stays literal text); a `url`
source is loaded by the browser from a local server; no source, several sources, blank
sources, `data` without a template, `template_version` without `template_id` and URLs the
address policy forbids are each a 400 naming the field.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field, replace
from typing import Any

import pytest
from aiohttp import web

from services.core.runtime.settings import Settings
from tests.conftest import Stack, serving
from tests.integration.test_pipeline import pdf_text

PAGE = "<html><body><h1>Served page 42</h1><p>from a local server</p></body></html>"


@pytest.fixture
async def gateway(settings: Settings) -> AsyncIterator[Stack]:
    stack = Stack(replace(settings, allow_private_networks=False))
    await stack.start("gateway")
    yield stack
    await stack.close()


@dataclass
class PageServer:
    """An HTTP server on loopback serving `PAGE` at `url` and counting its requests."""

    url: str = ""
    hits: list[str] = field(default_factory=list)

    async def page(self, request: web.Request) -> web.Response:
        self.hits.append(request.path)
        return web.Response(text=PAGE, content_type="text/html")


@pytest.fixture
async def page_server() -> AsyncIterator[PageServer]:
    server = PageServer()
    app = web.Application()
    app.router.add_get("/page", server.page)
    async with serving(app) as base:
        server.url = f"{base}/page"
        yield server


async def post_job(stack: Stack, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    async with stack.client.post(f"{stack.url}/jobs", json=body) as response:
        assert response.content_type == "application/json"
        return response.status, await response.json()


ID = "0" * 32
EXACTLY_ONE = "give exactly one of template, template_id, html, url"


@pytest.mark.parametrize(
    ("body", "field", "words"),
    [
        ({}, "template", EXACTLY_ONE),
        ({"data": {"a": 1}}, "template", EXACTLY_ONE),
        ({"template": "x", "html": "y"}, "html", "got template, html"),
        ({"html": "x", "url": "http://example.com/"}, "url", "got html, url"),
        ({"template": "x", "template_id": ID}, "template_id", "got template, template_id"),
        ({"template": "x", "template_id": ID, "html": "y", "url": "http://example.com/"},
         "template_id", "got template, template_id, html, url"),
        ({"html": "   "}, "html", "html must not be empty"),
        ({"url": ""}, "url", "url must not be empty"),
        ({"template_id": " "}, "template_id", "template_id must not be empty"),
        ({"template": "\n"}, "template", "template must not be empty"),
        ({"html": 5}, "html", "Expected `str | null`, got `int`"),
        ({"html": "<p>x</p>", "data": {"a": 1}}, "data", "only used with template"),
        ({"url": "http://example.com/", "data": {"a": 1}}, "data", "only used with template"),
        ({"html": "<p>x</p>", "template_version": 1}, "template_version", "needs template_id"),
        ({"template_id": ID, "template_version": 0}, "template_version", ">= 1"),
        ({"template_id": "not-a-template"}, "template_id", "no stored template"),
        ({"url": "ftp://example.com/file"}, "url", "http(s)"),
        ({"url": "/relative/page"}, "url", "http(s)"),
        ({"url": "http://127.0.0.1:9/page"}, "url", "loopback"),
        ({"url": "http://169.254.169.254/latest/meta-data/"}, "url", "link-local"),
        ({"url": "http://10.0.0.7/"}, "url", "private"),
    ],
)  # fmt: skip
async def test_invalid_source_is_400_naming_the_field(
    gateway: Stack, body: dict[str, Any], field: str, words: str
):
    status, answer = await post_job(gateway, body)
    assert status == 400, answer
    assert answer["error"]["type"] == "validation"
    assert answer["error"]["field"] == field
    assert words in answer["error"]["message"]


async def test_html_source_is_printed_as_is(stack: Stack):
    accepted = await stack.submit({"html": "<h1>Raw {{ x }} page</h1>", "data": {}})
    job = await stack.finished(accepted["id"])
    assert job["status"] == "done", job
    assert "Raw {{ x }} page" in await pdf_text(stack, job["url"])


async def test_url_source_is_loaded_by_the_browser(stack: Stack, page_server: PageServer):
    accepted = await stack.submit({"url": page_server.url})
    job = await stack.finished(accepted["id"])
    assert job["status"] == "done", job
    assert "/page" in page_server.hits
    assert "Served page 42" in await pdf_text(stack, job["url"])


async def test_the_text_of_an_escaped_nul_in_a_script_is_no_nul(stack: Stack):
    """Only a real NUL in a decoded string is refused: a script that spells `\\u0000`
    (the JSON body then holds `\\\\u0000`) is a document like any other."""
    html = '<p id=r>x</p><script>r.textContent = "escaped " + "\\u0000".length</script>'
    accepted = await stack.submit({"html": html, "options": {"javascript": True}})
    job = await stack.finished(accepted["id"])
    assert job["status"] == "done", job
    assert "escaped 1" in await pdf_text(stack, job["url"])


async def test_a_page_error_holding_a_nul_still_ends_the_job(stack: Stack):
    """A page error with a NUL in it (PostgreSQL cannot store NUL) used to make a `failed`
    event the projector skipped: the job stayed `running` for good. It ends `failed`, the
    NUL shown as U+FFFD."""
    body = {
        "html": "<p>x</p>",
        "options": {
            "wait_for": {
                "expression": "(() => { throw new Error('a' + String.fromCharCode(0) + 'b') })()",
                "timeout": 0.3,
            }
        },
    }
    job = await stack.finished((await stack.submit(body))["id"])
    assert job["status"] == "failed", job
    assert "Error: a\ufffdb" in job["error"]["message"]

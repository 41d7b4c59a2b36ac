"""A render's diagnosis on the real stack: `GET /jobs/{id}/diagnostics`.

The stack here forbids private networks, as production does, so a page's request to
loopback is refused by the egress policy and shows in the diagnosis with its reason.
"""

from __future__ import annotations

import dataclasses
import struct
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest

from services.core.runtime.settings import Settings
from tests.conftest import Stack

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"

FAILING_PAGE = """<!doctype html><html><body><h1>Invoice 7</h1>
<img src="http://127.0.0.1:9/pixel.png">
<script>
console.error("boom");
setTimeout(() => { throw new Error("kaput"); }, 0);
</script></body></html>"""

GOOD_PAGE = """<!doctype html><html><body><h1>Receipt</h1>
<script>console.log("hello", 42);</script></body></html>"""


@pytest.fixture
async def stack(settings: Settings) -> AsyncIterator[Stack]:
    """The five services with the egress policy of production: no private networks."""
    stack = Stack(dataclasses.replace(settings, allow_private_networks=False))
    await stack.start()
    yield stack
    await stack.close()


async def get(http: aiohttp.ClientSession, url: str) -> tuple[int, Any]:
    async with http.get(url) as response:
        return response.status, await response.json()


async def fetch_png(http: aiohttp.ClientSession, url: str) -> tuple[int, int]:
    """The width and height of the PNG behind `url` (read from its IHDR chunk)."""
    async with http.get(url) as response:
        assert response.status == 200, await response.text()
        data = await response.read()
    assert data.startswith(PNG_SIGNATURE) and data[12:16] == b"IHDR"
    width, height = struct.unpack(">II", data[16:24])
    return width, height


async def diagnosis_of(stack: Stack, job_id: str) -> dict[str, Any]:
    status, body = await get(stack.client, f"{stack.url}/jobs/{job_id}/diagnostics")
    assert status == 200, body
    assert body["id"] == job_id
    (attempt,) = body["attempts"]
    return dict(attempt)


async def test_a_failed_wait_keeps_the_console_errors_requests_pending_selector_and_a_screenshot(
    stack: Stack,
) -> None:
    """Verifies, for a job whose `wait_for` selector never appears:
    - it fails (`wait_timeout`) and its diagnosis names that error;
    - the console error and the uncaught error, with where they were raised;
    - the selector still pending;
    - the page's requests, the one to loopback refused with the egress policy's reason;
    - a screenshot that is a real PNG, fetched through its signed URL;
    - another tenant gets a plain 404, and DELETE removes the diagnosis and its PNG."""
    job = await stack.submit(
        {"html": FAILING_PAGE, "options": {"wait_for": {"selector": "#never", "timeout": 1}}}
    )
    ended = await stack.finished(job["id"])
    assert ended["status"] == "failed" and ended["error"]["type"] == "wait_timeout"

    found = await diagnosis_of(stack, job["id"])
    assert found["attempt"] == 1 and found["error"]["type"] == "wait_timeout"
    assert "#never" in found["error"]["message"]
    boom = [line for line in found["console"] if line["text"] == "boom"]
    # Chromium numbers the lines of a written inline script from the script's own text.
    assert boom and boom[0]["level"] == "error" and boom[0]["line"] == 2
    assert any("kaput" in error["text"] for error in found["errors"])
    assert found["pending_wait_for"] == {"selector": "#never", "timeout": 1}
    pixel = [r for r in found["requests"] if r["url"] == "http://127.0.0.1:9/pixel.png"]
    assert pixel, found["requests"]
    assert "loopback" in pixel[0]["refused"] and pixel[0]["status"] is None
    assert await fetch_png(stack.client, found["screenshot"]) == (800, 600)

    other = await stack.new_tenant()
    status, body = await get(other.http, f"{stack.url}/jobs/{job['id']}/diagnostics")
    assert status == 404 and body["error"]["type"] == "not_found"

    async with stack.client.delete(f"{stack.url}/jobs/{job['id']}") as response:
        assert response.status == 200
    status, body = await get(stack.client, f"{stack.url}/jobs/{job['id']}/diagnostics")
    assert status == 404 and body["error"]["type"] == "no_diagnosis"
    async with stack.client.get(found["screenshot"]) as response:
        assert response.status == 404


async def test_a_good_job_keeps_a_diagnosis_only_when_it_asks_for_one(stack: Stack) -> None:
    """`options.diagnostics: true` gives a successful job a diagnosis (no error, its
    console, a screenshot); the same job without it has none (404 `no_diagnosis`)."""
    asked = await stack.submit(
        {"html": GOOD_PAGE, "options": {"javascript": True, "diagnostics": True}}
    )
    plain = await stack.submit({"html": GOOD_PAGE, "options": {"javascript": True}})
    assert (await stack.finished(asked["id"]))["status"] == "done"
    assert (await stack.finished(plain["id"]))["status"] == "done"

    found = await diagnosis_of(stack, asked["id"])
    assert found["error"] is None and found["pending_wait_for"] is None
    assert [line["text"] for line in found["console"]] == ["hello 42"]
    assert found["console"][0]["level"] == "log"
    assert await fetch_png(stack.client, found["screenshot"]) == (800, 600)

    status, body = await get(stack.client, f"{stack.url}/jobs/{plain['id']}/diagnostics")
    assert status == 404 and body["error"]["type"] == "no_diagnosis"


async def test_an_attempt_that_fails_before_any_page_keeps_its_error_as_its_diagnosis(
    stack: Stack,
) -> None:
    """Every failed attempt has a diagnosis: a template error has no page (no console,
    requests or screenshot), and its diagnosis holds the error itself."""
    bad = await stack.submit({"template": "{{ missing.name }}", "data": {}})
    failed = await stack.finished(bad["id"])
    assert failed["status"] == "failed" and failed["error"]["type"] == "template"
    found = await diagnosis_of(stack, bad["id"])
    assert found["error"]["type"] == "template"
    assert found["error"]["message"] == failed["error"]["message"]
    assert found["console"] == found["requests"] == found["errors"] == []
    assert found["screenshot"] is None

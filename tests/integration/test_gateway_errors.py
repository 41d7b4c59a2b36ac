"""Bad requests get a JSON error naming the field or cause, and create no job."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from dataclasses import replace
from typing import Any

import aiohttp
import pytest

from services.core.runtime.settings import Settings
from tests.conftest import Stack, free_port


@pytest.fixture
async def gateway(settings: Settings) -> AsyncIterator[Stack]:
    stack = Stack(replace(settings, allow_private_networks=False, max_body_bytes=4096))
    await stack.start("gateway")
    yield stack
    await stack.close()


async def post(stack: Stack, data: bytes, content_type: str = "application/json") -> Any:
    headers = {"Content-Type": content_type} if content_type else {}
    async with stack.client.post(f"{stack.url}/jobs", data=data, headers=headers) as response:
        assert response.content_type == "application/json"
        return response.status, (await response.json())["error"]


@pytest.mark.parametrize(
    ("body", "field", "words"),
    [
        (b"{}", "template", "give exactly one of template, template_id, html, url"),
        (b'{"template": "   "}', "template", "must not be empty"),
        (b'{"template": 5}', "template", "Expected `str | null`, got `int`"),
        (b'{"template": "x", "data": [1]}', "data", "Expected `object`"),
        (b'{"template": "x", "data": "s"}', "data", "Expected `object`"),
        (b'{"template": "x", "colour": 1}', "colour", "unknown field `colour`"),
        (b'{"template": "x", "options": {"dpi": 1}}', "options.dpi", "unknown field `dpi`"),
        (b'{"template": "x"', "body", "not valid JSON"),
        (b'{"template": "x", "data": {"a": ' + b"[" * 2000 + b"]" * 2000 + b"}}", "body",
         "nests deeper than 32"),
        (b'{"template": "x", "data": {"a": ' + b"[" * 33 + b"]" * 33 + b"}}", "body",
         "nests deeper than 32"),
        (b"[1, 2]", "body", "must be a JSON object"),
        (b'{"template": "a\\u0000b"}', "template", "template must not contain NUL"),
        (b'{"template": "x", "data": {"rows": [{"n": "a\\u0000"}]}}', "data.rows[0].n", "NUL"),
        (b'{"template": "x", "options": {"format": "B7"}}', "options.format", "one of"),
        (b'{"template": "x", "options": {"margin": {"top": "1 furlong"}}}',
         "options.margin.top", "length"),
        (b'{"template": "x", "webhook_url": "ftp://example.com/"}', "webhook_url", "http(s)"),
        (b'{"template": "x", "webhook_url": "http://127.0.0.1:9/"}', "webhook_url", "loopback"),
        (b'{"template": "x", "webhookUrl": "http://169.254.169.254/"}', "webhook_url",
         "link-local"),
    ],
)  # fmt: skip
async def test_invalid_body_is_400_naming_the_field(
    gateway: Stack, body: bytes, field: str, words: str
):
    status, error = await post(gateway, body)
    assert status == 400
    assert error["type"] == "validation"
    assert error["field"] == field
    assert words in error["message"]


async def test_wrong_content_type_is_400(gateway: Stack):
    status, error = await post(gateway, b'{"template": "x"}', "text/plain")
    assert status == 400
    assert error["field"] == "Content-Type"
    assert "application/json" in error["message"]


async def test_body_over_the_limit_is_413(gateway: Stack):
    big = b'{"template": "' + b"x" * 5000 + b'"}'
    status, error = await post(gateway, big)
    assert status == 413
    assert "4096" in error["message"]


async def test_unknown_job_is_404_json(gateway: Stack):
    for job_id in ("0" * 32, "no.such*job"):
        async with gateway.client.get(f"{gateway.url}/jobs/{job_id}") as response:
            assert response.status == 404
            assert (await response.json())["error"]["type"] == "not_found"


async def test_unknown_route_and_method_are_json(gateway: Stack):
    async with gateway.client.get(f"{gateway.url}/nope") as response:
        assert response.status == 404
        assert (await response.json())["error"]["type"] == "http"
    async with gateway.client.delete(f"{gateway.url}/healthz") as response:
        assert response.status == 405
        assert (await response.json())["error"]["type"] == "http"


async def test_every_route_answers_a_method_it_does_not_take_with_405_and_allow(gateway: Stack):
    """`Allow` names exactly the methods the OpenAPI document lists for the path (and
    HEAD beside GET): a client told 405 learns what to send instead."""
    async with gateway.client.get(f"{gateway.url}/openapi.json") as response:
        paths = (await response.json())["paths"]
    for path, item in paths.items():
        taken = {method.upper() for method in item}
        taken |= {"HEAD"} if "GET" in taken else set()
        wrong = next(m for m in ("PUT", "PATCH", "POST", "DELETE") if m not in taken)
        concrete = re.sub(r"\{\w+\}", "x", path)
        async with gateway.client.request(wrong, f"{gateway.url}{concrete}") as response:
            assert response.status == 405, (wrong, path)
            assert {m.strip() for m in response.headers["Allow"].split(",")} == taken, path
            error = (await response.json())["error"]
            assert error["type"] == "http" and wrong in error["message"], path


async def test_forged_or_expired_download_link_is_404(gateway: Stack):
    url = f"{gateway.url}/files/jobs/x.pdf?expires=9999999999&sig=00"
    async with gateway.client.get(url) as response:
        assert response.status == 404
        assert "invalid or expired" in (await response.json())["error"]["message"]


async def test_health_ready_and_metrics_on_their_own_port(settings: Settings):
    """/healthz and /readyz answer without a key; /metrics is served on
    PRESSROOM_METRICS_PORT, not on the public port, and counts what the gateway did."""
    metrics_port = free_port()
    stack = Stack(replace(settings, metrics_port=metrics_port))
    await stack.start("gateway")
    metrics_url = f"http://127.0.0.1:{metrics_port}/metrics"
    try:
        async with aiohttp.ClientSession() as anonymous:
            async with anonymous.get(f"{stack.url}/healthz") as response:
                assert response.status == 200
            async with anonymous.get(f"{stack.url}/readyz") as response:
                assert (await response.json()) == {
                    "ready": True,
                    "checks": {"nats": True, "postgres": True},
                }
            async with stack.client.get(f"{stack.url}/metrics") as response:
                assert response.status == 404
            # The registry is this process's: earlier tests' rejections are in it too,
            # so it is this one rejection's step that shows the gateway counted it.
            before = await rejected_400(anonymous, metrics_url)
            await post(stack, b"{}")
            after = await rejected_400(anonymous, metrics_url)
        assert after - before == 1
    finally:
        await stack.close()


async def rejected_400(http: aiohttp.ClientSession, url: str) -> float:
    """`pressroom_requests_rejected_total{status="400"}` as /metrics shows it (0 if absent)."""
    async with http.get(url) as response:
        assert response.status == 200
        text = await response.text()
    found = re.search(r'^pressroom_requests_rejected_total\{status="400"\} (\S+)$', text, re.M)
    return float(found.group(1)) if found else 0.0

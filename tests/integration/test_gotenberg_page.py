"""What a Gotenberg form asks its page to send and how it may fail: `cookies`,
`extraHttpHeaders` (with and without `;scope=`), `userAgent` and
`failOnConsoleExceptions`, on the whole stack, seen by the servers the page reaches."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from aiohttp import web

from tests.conftest import Stack, serving
from tests.integration.gotenberg_forms import PNG, settings  # noqa: F401  (a fixture)
from tests.integration.test_gotenberg import curl, pdftotext


async def test_cookies_headers_and_user_agent_reach_only_the_requests_in_their_scope(
    stack: Stack,
) -> None:
    seen: dict[str, dict[str, str]] = {}

    async def handle(request: web.Request) -> web.Response:
        seen[f"{request.host.split(':')[0]}{request.path}"] = dict(request.headers)
        port = request.host.split(":")[1]
        if request.path == "/page":
            return web.Response(
                content_type="text/html",
                text=f"<!doctype html><h1>Statement 77</h1><img src='/inside.png'>"
                f"<img src='http://localhost:{port}/outside.png'><img src='/away.png'>",
            )
        if request.path == "/away.png":  # a hop in scope, sent on to another host
            raise web.HTTPFound(f"http://localhost:{port}/landed.png")
        return web.Response(body=PNG, content_type="image/png")

    app = web.Application()
    app.router.add_get("/{name}", handle)
    async with serving(app) as base:
        scope = base.replace(".", r"\.") + "/"
        cookies = [{"name": "session", "value": "c00kie-77", "domain": "127.0.0.1",
                    "path": "/", "httpOnly": True, "secure": False, "sameSite": "Lax"}]  # fmt: skip
        headers = {"X-Everywhere": "for-all", "Authorization": f"Bearer t0ken-77;scope=^{scope}"}
        status, answer, body = await asyncio.to_thread(
            curl, stack, "/forms/chromium/convert/url", "--form", f"url={base}/page",
            "--form-string", f"cookies={json.dumps(cookies)}",
            "--form-string", f"extraHttpHeaders={json.dumps(headers)}",
            "--form-string", "userAgent=PressroomTest/7.7",
        )  # fmt: skip
        assert status == 200, body
        assert "Statement 77" in pdftotext(body)
    for inside in ("127.0.0.1/page", "127.0.0.1/inside.png"):
        sent = seen[inside]
        assert sent["Authorization"] == "Bearer t0ken-77", inside
        assert sent["X-Everywhere"] == "for-all", inside
        assert "session=c00kie-77" in sent.get("Cookie", ""), inside
        assert sent["User-Agent"] == "PressroomTest/7.7", inside
    for away in ("localhost/outside.png", "localhost/landed.png"):  # out of scope, redirected
        outside = seen[away]
        assert "Authorization" not in outside and "c00kie" not in outside.get("Cookie", ""), away
    assert seen["127.0.0.1/away.png"]["Authorization"] == "Bearer t0ken-77"
    assert outside["X-Everywhere"] == "for-all"  # no scope: every request, as Gotenberg
    job_id = answer["pressroom-job-id"]
    async with stack.client.get(f"{stack.url}/jobs/{job_id}/events") as reply:
        log = await reply.read()
    assert b"t0ken-77" not in log and b"c00kie-77" not in log  # sealed on the log
    async with stack.client.get(f"{stack.url}/jobs/{job_id}") as reply:
        row = await reply.read()
    assert b"t0ken-77" not in row and b"c00kie-77" not in row


async def test_fail_on_console_exceptions_fails_the_job_naming_the_error(
    stack: Stack, tmp_path: Path
) -> None:
    index = tmp_path / "index.html"
    index.write_text("<!doctype html><h1>Throws</h1><script>throw new Error('kaboom-42')</script>")
    form = ("--form", f"files=@{index}")
    status, _, body = await asyncio.to_thread(
        curl, stack, "/forms/chromium/convert/html", *form, "--form", "failOnConsoleExceptions=true"
    )
    assert status == 409, body
    assert b"kaboom-42" in body
    status, _, body = await asyncio.to_thread(curl, stack, "/forms/chromium/convert/html", *form)
    assert status == 200, body  # without the field the error is only in the diagnosis
    assert "Throws" in pdftotext(body)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("cookies", '[{"name":"a","value":"b"}]'),
        ("cookies", '[{"name":"a","value":"b","domain":"x.test","sameSite":"Sometimes"}]'),
        ("cookies", '{"name":"a"}'),
        ("extraHttpHeaders", '{"Host":"evil.test"}'),
        ("extraHttpHeaders", '{"X-A":"1;scope=("}'),
        ("extraHttpHeaders", '{"X-A":1}'),
        ("userAgent", "Bot\u00e9/1"),
        ("failOnConsoleExceptions", "perhaps"),
    ],
)
async def test_a_bad_cookie_header_or_agent_is_a_400_naming_the_field(
    stack: Stack, tmp_path: Path, field: str, value: str
) -> None:
    index = tmp_path / "index.html"
    index.write_text("<!doctype html><p>x</p>")
    status, _, body = await asyncio.to_thread(
        curl, stack, "/forms/chromium/convert/html", "--form", f"files=@{index}",
        "--form-string", f"{field}={value}",
    )  # fmt: skip
    assert status == 400, body
    assert field.encode() in body, body

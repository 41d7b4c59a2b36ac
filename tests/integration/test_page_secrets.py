"""`page_secrets` on `POST /jobs`: cookies and scoped headers reach the page's server,
never the log; bad ones are a 400 naming the field."""

from __future__ import annotations

from aiohttp import web

from tests.conftest import Stack, serving


async def test_a_job_s_cookies_and_headers_reach_its_page_and_never_the_log(stack: Stack) -> None:
    seen: dict[str, dict[str, str]] = {}

    async def handle(request: web.Request) -> web.Response:
        seen[request.path] = dict(request.headers)
        return web.Response(content_type="text/html", text="<h1>Account 12</h1>")

    app = web.Application()
    app.router.add_get("/{name}", handle)
    async with serving(app) as base:
        secrets = {
            "cookies": [{"name": "sid", "value": "n4tive-c00kie", "domain": "127.0.0.1"}],
            "headers": [
                {"name": "X-Key", "value": "n4tive-k3y", "scope": "/account$"},
                {"name": "X-Other", "value": "never", "scope": "^https://elsewhere\\.test/"},
            ],
        }
        accepted = await stack.submit({"url": f"{base}/account", "page_secrets": secrets})
        job = await stack.finished(accepted["id"])
    assert job["status"] == "done", job
    sent = seen["/account"]
    assert sent["X-Key"] == "n4tive-k3y" and "sid=n4tive-c00kie" in sent.get("Cookie", "")
    assert "X-Other" not in sent  # its scope does not match
    for path in (f"/jobs/{accepted['id']}/events", f"/jobs/{accepted['id']}"):
        async with stack.client.get(f"{stack.url}{path}") as reply:
            text = await reply.text()
        assert "n4tive" not in text, path


async def test_bad_page_secrets_are_a_400_naming_the_field(stack: Stack) -> None:
    for body in (
        {"html": "<p>x</p>", "page_secrets": {"cookies": [{"name": "a", "value": "b"}]}},
        {"html": "<p>x</p>", "page_secrets": {"headers": [{"name": "Host", "value": "x"}]}},
        {"html": "<p>x</p>", "page_secrets": {"headers": [{"name": "X", "value": "1",
                                                            "scope": "(unclosed"}]}},
        {"pdf": {"inputs": [{"file": "a.pdf"}], "steps": [{"step": "flatten"}]},
         "page_secrets": {"headers": [{"name": "X", "value": "1"}]}},
    ):  # fmt: skip
        async with stack.client.post(f"{stack.url}/jobs", json=body) as reply:
            answer = await reply.json()
        assert reply.status == 400, answer
        assert answer["error"]["field"].startswith("page_secrets"), answer

"""Two tenants rendering at once on one shared Chromium: nothing one job's page did is
anywhere another job's owner can read it.

The real stack (gateway, projector, renderer with its Chromium, notifier), two tenants,
many jobs each way, submitted interleaved so that their renders run side by side and one
after another on the same pages. Every job's page is marked with a token of its own and
leaves it wherever a job records something: its text (the PDF), console lines, a `file:`
image Chromium blocks (refused, with the policy's reason), requests from a same-process
frame and from a sandboxed frame (a process of its own where Chromium isolates those),
and, on timers that keep firing until the job's browser context is closed, requests and
console lines after its render ended. Half the pages make no network request at all
(blocked `file:` images and console lines only): before issue 29 such a page kept its
context for the next job. The others also ask for `ftp:` (refused by the request
filter at once), for a name that must be looked up first (`*.invalid`: its verdict comes
after an await), and for loopback; and `url` jobs load a page with a cross-site frame.

Verifies, for every job: its events (`GET /jobs/{id}/events`, whose `done` lists the
refused requests), status, diagnosis (`GET /jobs/{id}/diagnostics`), PDF text and
webhook carry its own token (where its page put it) and no other job's; and late
evidence came, and was dropped and counted instead of recorded.

Run as production runs (loopback refused: no webhook can reach the loopback receiver,
no `url` job either), with private networks allowed (webhooks delivered, `url` jobs
served from loopback), and, where installed, on the full Chromium, which gives
cross-site and sandboxed frames processes of their own (out-of-process frames).
"""

from __future__ import annotations

import dataclasses
import io
import json
import shutil
import uuid
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from prometheus_client import REGISTRY
from pypdf import PdfReader

from services.core.runtime.settings import Settings
from tests.conftest import Receiver, Stack, Tenant, eventually, serving

JOBS_EACH = 8
LATE_SOURCES = ("request", "console", "filter", "proxy", "connection", "window")
FULL = shutil.which("chromium")


def traces(token: str, quiet: bool, lookups: bool = True) -> str:
    """Markup that leaves `token` in every record of a job, now and after its render; its
    timers start at `load` (an image still loading would hold `load` back) and run until
    its context is closed. With `lookups`, it asks for names the policy must look up."""
    looked_up = f'new Image().src = "http://{token}.invalid/tick-" + n;' if lookups else ""
    noisy = (
        ""
        if quiet
        else (
            f'new Image().src = "ftp://{token}.example/tick-" + n;{looked_up}'
            f'new Image().src = "http://127.0.0.1:9/{token}/tick-" + n;'
        )
    )
    sandboxed = (
        f"<script>console.log('sandboxed {token}');"
        f"setInterval(() => {{ new Image().src = 'file:///{token}/sandboxed' }}, 20)</script>"
    )
    return f"""<h1>{token} document</h1>
<img src="file:///{token}/image.png">
<iframe srcdoc="<p>{token} frame</p><img src='file:///{token}/srcdoc.png'>"></iframe>
<iframe sandbox="allow-scripts" srcdoc="{sandboxed}"></iframe>
<script>
console.log("console {token}");
let n = 0;
addEventListener("load", () => {{
  setInterval(() => {{
    n += 1;
    console.log("tick {token} " + n);
    new Image().src = "file:///{token}/tick-" + n;
    {noisy}
  }}, 20);
  setTimeout(() => {{ window.ready = true; }}, 300);
}});
</script>"""


@dataclasses.dataclass
class Job:
    tenant: Tenant
    token: str
    body: dict[str, Any]
    id: str = ""


def late_evidence() -> float:
    """Page evidence this process dropped so far because its job had ended."""
    values = (
        REGISTRY.get_sample_value("pressroom_late_evidence_total", {"source": source})
        for source in LATE_SOURCES
    )
    return sum(value or 0.0 for value in values)


@pytest.fixture
async def site() -> AsyncIterator[str]:
    """Each `url` job's page, with a frame of another site (`localhost`), on loopback."""

    async def page(request: web.Request) -> web.Response:
        token = request.match_info["token"]
        other = request.url.with_host("localhost").with_path(f"/frame/{token}")
        body = f'{traces(token, quiet=False, lookups=False)}<iframe src="{other}"></iframe>'
        return web.Response(text=body, content_type="text/html")

    async def frame(request: web.Request) -> web.Response:
        token = request.match_info["token"]
        text = (
            f"<p>{token} cross-site frame</p><script>console.log('frame {token}');"
            f"setInterval(() => {{ new Image().src = 'ftp://{token}.example/frame' }}, 20)"
            "</script>"
        )
        return web.Response(text=text, content_type="text/html")

    app = web.Application()
    app.router.add_get("/page/{token}", page)
    app.router.add_get("/frame/{token}", frame)
    async with serving(app) as base:
        yield base


def bodies(count: int, site: str, private: bool, webhook: str) -> list[dict[str, Any]]:
    """Job requests, each a token's: html quiet and noisy, and `url` jobs where loopback
    may be reached."""
    options = {"diagnostics": True, "wait_for": {"expression": "window.ready === true"}}
    made = []
    for number in range(count):
        token = f"tok{uuid.uuid4().hex[:16]}"
        body: dict[str, Any] = {"options": options, "token": token}
        if private and number % 4 == 3:
            body["url"] = f"{site}/page/{token}"
        else:
            quiet = number % 4 < 2
            body["html"] = "<!doctype html>" + traces(token, quiet, lookups=not private)
        if private:
            body["webhook_url"] = webhook
        made.append(body)
    return made


async def read(http: aiohttp.ClientSession, url: str) -> Any:
    async with http.get(url) as response:
        assert response.status == 200, await response.text()
        return await response.json()


async def pdf_text(http: aiohttp.ClientSession, url: str) -> str:
    async with http.get(url) as response:
        assert response.status == 200
        data = await response.read()
    return "\n".join(p.extract_text() for p in PdfReader(io.BytesIO(data)).pages)


async def readable(stack: Stack, job: Job, receiver: Receiver) -> dict[str, str]:
    """What `job`'s owner can read about it, by where it is read."""
    http, base = job.tenant.http, f"{stack.url}/jobs/{job.id}"
    status = await eventually(lambda: _done(http, base), 120, f"job {job.id} done")
    hooks = [r["body"].decode() for r in receiver.requests if r["json"]["data"]["id"] == job.id]
    return {
        "status": json.dumps(status),
        "events": json.dumps(await read(http, f"{base}/events")),
        "diagnostics": json.dumps(await read(http, f"{base}/diagnostics")),
        "pdf": await pdf_text(http, status["url"]),
        "webhooks": "\n".join(hooks),
    }


async def _done(http: aiohttp.ClientSession, url: str) -> dict[str, Any] | None:
    status: dict[str, Any] = await read(http, url)
    assert status["status"] not in {"failed", "cancelled"}, status
    return status if status["status"] == "done" else None


@pytest.mark.parametrize(
    ("private", "binary"),
    [
        pytest.param(False, None, id="production"),
        pytest.param(True, None, id="private-networks"),
        pytest.param(
            True,
            FULL,
            id="full-chromium",
            marks=pytest.mark.skipif(FULL is None, reason="no full Chromium installed"),
        ),
    ],
)
async def test_no_byte_of_one_tenants_pages_reaches_what_another_can_read(
    settings: Settings, receiver: Receiver, site: str, private: bool, binary: str | None
) -> None:
    changed = dataclasses.replace(
        settings, allow_private_networks=private, chromium=binary or settings.chromium
    )
    stack = Stack(changed)
    await stack.start()
    try:
        tenants = [await stack.new_tenant(), await stack.new_tenant()]
        requests = bodies(2 * JOBS_EACH, site, private, receiver.url)
        jobs = [Job(tenants[i % 2], body.pop("token"), body) for i, body in enumerate(requests)]
        before = late_evidence()
        for job in jobs:  # A, B, A, B, …: side by side on the pages, and one after another
            async with job.tenant.http.post(f"{stack.url}/jobs", json=job.body) as response:
                assert response.status == 202, await response.text()
                job.id = (await response.json())["id"]
        seen = {job.id: await readable(stack, job, receiver) for job in jobs}
        if private:
            await eventually(lambda: len(receiver.requests) >= len(jobs), 30, "webhooks")
            for job in jobs:
                seen[job.id] = await readable(stack, job, receiver)
    finally:
        await stack.close()

    for job in jobs:
        found = seen[job.id]
        # Its own traces are where its page put them: the checks below can see a page.
        assert f"{job.token} document" in found["pdf"]
        assert f"console {job.token}" in found["diagnostics"]
        assert f"file:///{job.token}/image.png" in found["events"]
        assert "scheme file: is not allowed" in found["events"]
        if private:
            assert job.id in found["webhooks"]
        others = [other.token for other in jobs if other is not job]
        for where, text in found.items():
            leaked = [token for token in others if token in text]
            assert not leaked, f"job {job.id}'s {where} holds other jobs' traces: {leaked}"
    # The timers went on after their renders: what came late was dropped, not recorded.
    assert late_evidence() > before

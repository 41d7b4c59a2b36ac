"""A renderer killed after its upload, before it reported or acked: the job is rendered
twice and counted once.

Storage is moto behind a small proxy of this test's own, which forwards every request and,
for the first document upload, waits after moto has stored it: the renderer never hears
back. The renderer is SIGKILLed there (the PDF is in the bucket; no `done` was published,
the message not acked) and a replacement started.

Verifies:
- the job comes back after the ack wait, is rendered (and uploaded) a second time, and
  ends `done` once, with one object;
- its tenant's usage counts it once (the closing check compares usage with every job);
- the billable count did not move twice: one usage row for the job.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator

import aiohttp
import pytest
from aiohttp import web

from tests.conftest import serving
from tests.faults.harness import Cluster, assert_no_job_left_behind, poll, small_job

_HOP = {"host", "content-length", "transfer-encoding", "connection", "content-encoding"}


class HoldingProxy:
    """Forwards to S3; the first PUT of a document is stored, then never answered."""

    def __init__(self, upstream: str) -> None:
        self.upstream = upstream
        self.stored = asyncio.Event()
        self.uploads = 0
        self.http: aiohttp.ClientSession | None = None

    async def handle(self, request: web.Request) -> web.StreamResponse:
        assert self.http is not None
        headers = {k: v for k, v in request.headers.items() if k.lower() not in _HOP}
        async with self.http.request(
            request.method, f"{self.upstream}{request.path_qs}", headers=headers,
            data=await request.read(), allow_redirects=False,
        ) as upstream:  # fmt: skip
            body = await upstream.read()
            status = upstream.status
            answer = {k: v for k, v in upstream.headers.items() if k.lower() not in _HOP}
        if request.method == "PUT" and request.path.endswith(".pdf"):
            self.uploads += 1
            if self.uploads == 1:
                self.stored.set()
                await asyncio.Event().wait()  # stored, and the renderer never learns it
        return web.Response(status=status, body=body, headers=answer)


@pytest.fixture
async def proxy(s3_endpoint: str) -> AsyncIterator[tuple[HoldingProxy, str]]:
    holding = HoldingProxy(s3_endpoint)
    app = web.Application(client_max_size=64 * 2**20)
    app.router.add_route("*", "/{tail:.*}", holding.handle)
    async with aiohttp.ClientSession(auto_decompress=False) as http, serving(app) as url:
        holding.http = http
        yield holding, url


async def test_job_rendered_twice_after_a_kill_past_the_upload_is_counted_once(
    cluster: Cluster, proxy: tuple[HoldingProxy, str]
) -> None:
    holding, url = proxy
    await cluster.up(
        renderers=1,
        PRESSROOM_STORAGE="s3",
        PRESSROOM_S3_ENDPOINT=url,
        PRESSROOM_S3_BUCKET=f"twice-{uuid.uuid4().hex[:10]}",
        PRESSROOM_S3_ACCESS_KEY="testing",
        PRESSROOM_S3_SECRET_KEY="testing",
    )
    reply = await cluster.post_job(small_job(1))
    assert reply.status == 202, reply
    job_id = reply.body["id"]
    await asyncio.wait_for(holding.stored.wait(), 60)
    cluster.kill(cluster.renderers()[0])
    assert await cluster.count_events("done") == 0  # killed before it could report
    cluster.start("renderer")

    outcome = await assert_no_job_left_behind(cluster, "killed_after_upload", timeout=60)
    assert outcome.count("done") == 1
    started = [s for s in await cluster.started_events() if s[0] == job_id]
    assert len(started) == 2, started  # rendered twice
    assert holding.uploads == 2  # and uploaded twice, to the same key
    rows = await cluster.query(
        "SELECT outcome, count(*) AS n FROM usage_documents WHERE job_id = $1 GROUP BY 1", job_id
    )
    assert [(r["outcome"], r["n"]) for r in rows] == [("done", 1)]
    usage = await poll(lambda: _succeeded(cluster), 10, "the month's usage")
    assert usage == 1


async def _succeeded(cluster: Cluster) -> int:
    rows = await cluster.query(
        "SELECT coalesce(sum(succeeded), 0) AS n FROM usage_months WHERE tenant_id = $1",
        cluster.tenant.id,
    )
    return int(rows[0]["n"])

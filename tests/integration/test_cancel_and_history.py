"""Cancel, file deletion, the timeline from the log, and fast 503s while NATS is away."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import nats
import pytest
from aiohttp import web

from services.core.log import bus
from services.core.runtime.settings import Settings
from tests.conftest import NatsServer, Receiver, Stack, eventually, serving
from tests.integration.test_pipeline import HELLO, job_events

TERMINAL = {"done", "failed", "cancelled"}


async def delete(stack: Stack, job_id: str) -> tuple[int, dict]:
    async with stack.client.delete(f"{stack.url}/jobs/{job_id}") as response:
        return response.status, await response.json()


async def renderer_idle(settings: Settings) -> bool:
    """Nothing pending or in hand on any durable of single jobs (every tenant's)."""
    nc = await nats.connect(settings.nats_url)
    try:
        infos = [info async for info in bus.durables(nc.jetstream()) if bus.renders_waiting(info)]
    finally:
        await nc.close()
    return all(info.num_pending == 0 and info.num_ack_pending == 0 for info in infos)


async def test_cancelled_queued_job_is_never_rendered(settings: Settings):
    stack = Stack(settings)
    await stack.start("gateway", "projector")
    try:
        job_id = (await stack.submit(HELLO))["id"]
        cancelled = {"id": job_id, "status": "cancelled", "url": None}
        assert await delete(stack, job_id) == (200, cancelled)
        await stack.start("renderer")
        await eventually(lambda: renderer_idle(settings))
        assert await delete(stack, job_id) == (200, cancelled)
        job = await stack.finished(job_id)
        history = await job_events(stack, job_id)
        async with stack.client.get(f"{stack.url}/jobs/{job_id}/events") as response:
            logged = [event["type"] for event in (await response.json())["events"]]
    finally:
        await stack.close()
    assert job["status"] == "cancelled"
    assert job["url"] is None
    assert history == ["submitted", "cancelled"]
    assert logged == ["submitted", "cancelled"]  # no renderer started it
    assert not (Path(settings.storage_dir) / "jobs" / f"{job_id}.pdf").exists()


async def test_delete_of_finished_job_removes_its_file_idempotently(stack: Stack):
    job = await stack.finished((await stack.submit(HELLO))["id"])
    assert job["status"] == "done"
    for _ in range(2):
        status, body = await delete(stack, job["id"])
        assert (status, body["status"], body["url"]) == (200, "done", None)
    async with stack.client.get(job["url"]) as response:
        assert response.status == 404

    async def no_url() -> bool:
        return (await stack.job(job["id"]))["url"] is None

    await eventually(no_url)


async def test_events_endpoint_returns_the_timeline_from_the_log(stack: Stack):
    job = await stack.finished((await stack.submit({"template": "{{ nope }}"}))["id"])
    async with stack.client.get(f"{stack.url}/jobs/{job['id']}/events") as response:
        assert response.status == 200
        timeline = (await response.json())["events"]
    assert [e["type"] for e in timeline] == ["submitted", "started", "failed"]
    assert [e["seq"] for e in timeline] == sorted(e["seq"] for e in timeline)
    assert timeline[1]["attempt"] == 1 and timeline[1]["worker"]
    assert "'nope' is undefined" in timeline[2]["error"]["message"]
    async with stack.client.get(f"{stack.url}/jobs/{'0' * 32}/events") as response:
        assert response.status == 404


async def test_submit_answers_503_at_once_while_nats_is_down(
    settings: Settings, nats_server: NatsServer
):
    stack = Stack(settings)
    await stack.start("gateway")
    try:
        nats_server.stop()
        started = time.monotonic()
        async with stack.client.post(f"{stack.url}/jobs", json=HELLO) as response:
            assert response.status == 503
            assert (await response.json())["error"]["type"] == "unavailable"
        assert time.monotonic() - started < 2
        async with stack.client.get(f"{stack.url}/readyz") as response:
            assert response.status == 503
        nats_server.start()

        async def accepted() -> bool:
            async with stack.client.post(f"{stack.url}/jobs", json=HELLO) as response:
                return response.status == 202

        await eventually(accepted, 30)
    finally:
        await stack.close()


# --- cancelling a running job, and a cancel racing the end of a render ----------------------


@dataclass
class HeldPage:
    """A page on loopback whose answer the test holds back: `asked` is set once Chromium
    asked for it, `served` once it was sent, which happens when the test sets `release`.
    A job with this page as its `url` is running until then."""

    url: str = ""
    asked: asyncio.Event = field(default_factory=asyncio.Event)
    release: asyncio.Event = field(default_factory=asyncio.Event)
    served: asyncio.Event = field(default_factory=asyncio.Event)

    async def handle(self, request: web.Request) -> web.StreamResponse:
        self.asked.set()
        await self.release.wait()
        response = web.StreamResponse(headers={"Content-Type": "text/html"})
        await response.prepare(request)
        await response.write_eof(b"<h1>held page</h1>")
        self.served.set()
        return response


@pytest.fixture
async def held() -> AsyncIterator[HeldPage]:
    page = HeldPage()
    app = web.Application()
    app.router.add_get("/held", page.handle)
    async with serving(app) as base:
        page.url = f"{base}/held"
        yield page
        page.release.set()  # a render still waiting must not hold the server's shutdown


async def timeline_of(stack: Stack, job_id: str) -> list[str]:
    """The job's event types from `GET /jobs/{id}/events` (the log), webhook attempts left
    out."""
    async with stack.client.get(f"{stack.url}/jobs/{job_id}/events") as response:
        assert response.status == 200, await response.text()
        found = (await response.json())["events"]
    return [e["type"] for e in found if e["type"] != "webhook"]


def files_of(settings: Settings, job_id: str) -> list[Path]:
    return list(Path(settings.storage_dir).rglob(f"{job_id}.*"))


async def running(stack: Stack, job_id: str) -> bool:
    return (await stack.job(job_id))["status"] == "running"


def hooks_for(receiver: Receiver, job_id: str) -> list[dict[str, Any]]:
    return [r["json"]["data"] for r in receiver.requests if r["json"]["data"]["id"] == job_id]


async def test_a_running_job_cancelled_ends_cancelled_and_its_render_is_discarded(
    stack: Stack, held: HeldPage, receiver: Receiver
):
    job_id = (await stack.submit({"url": held.url, "webhook_url": receiver.url}))["id"]
    await asyncio.wait_for(held.asked.wait(), 30)
    await eventually(lambda: running(stack, job_id), what="job shown running")
    assert await delete(stack, job_id) == (200, {"id": job_id, "status": "cancelled", "url": None})
    held.release.set()  # the render goes on to its end; what it makes must not count
    await asyncio.wait_for(held.served.wait(), 30)
    await eventually(lambda: renderer_idle(stack.settings), what="the held render ended")
    job = await stack.finished(job_id)
    history = await timeline_of(stack, job_id)
    hooks = await eventually(lambda: hooks_for(receiver, job_id), what="webhook")
    assert (job["status"], job["url"]) == ("cancelled", None)
    assert history == ["submitted", "started", "cancelled"]
    assert files_of(stack.settings, job_id) == []
    assert [(h["status"], h["url"]) for h in hooks] == [("cancelled", None)]


async def unlinked(stack: Stack, job_id: str) -> dict[str, Any] | None:
    job = await stack.job(job_id)
    return job if job["status"] in TERMINAL and job["url"] is None else None


async def logged_done(stack: Stack, job_id: str) -> bool:
    return "done" in await timeline_of(stack, job_id)


@pytest.mark.parametrize("moment", ["once its file is stored", "once done is logged"])
async def test_a_cancel_racing_the_end_of_a_render_leaves_one_end_everyone_agrees_on(
    settings: Settings, held: HeldPage, receiver: Receiver, moment: str
):
    """The cancel lands as the render ends: its file is stored and `done` about to be
    published (either may win), or `done` is in the log but the projector has not seen it
    (the gateway has no row for it yet, only the log; `done` must win). Either way the DELETE's
    answer, GET, the timeline and the webhook tell the same one end; and whichever won, the
    DELETE leaves neither file nor link (of a finished job it deletes the file)."""
    stack = Stack(settings)
    late = moment == "once done is logged"
    await stack.start(*(("gateway", "renderer", "notifier") if late else ()))
    try:
        job_id = (await stack.submit({"url": held.url, "webhook_url": receiver.url}))["id"]
        await asyncio.wait_for(held.asked.wait(), 30)
        held.release.set()
        if late:
            await eventually(lambda: logged_done(stack, job_id), what="done in the log")
        else:
            await eventually(lambda: files_of(settings, job_id), what="file", interval=0.002)
        status, answer = await delete(stack, job_id)
        if late:
            await stack.start("projector")
        await eventually(lambda: renderer_idle(settings), what="the render ended")
        job = await eventually(lambda: unlinked(stack, job_id), what="ended, without a link")
        history = await timeline_of(stack, job_id)
        hooks = await eventually(lambda: hooks_for(receiver, job_id), what="webhook")
    finally:
        await stack.close()
    assert status == 200 and answer["status"] in {"done", "cancelled"}
    if late:
        assert answer["status"] == "done"
    assert job["status"] == answer["status"]
    assert [t for t in history if t in TERMINAL] == [answer["status"]]
    assert [h["status"] for h in hooks] == [answer["status"]]
    assert files_of(settings, job_id) == []

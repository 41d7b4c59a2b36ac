"""Cancel, file deletion, the timeline from the log, and fast 503s while NATS is away."""

from __future__ import annotations

import time
from pathlib import Path

import nats

from services.core import events
from services.core.settings import Settings
from tests.conftest import NatsServer, Stack, eventually
from tests.integration.test_pipeline import HELLO, job_events


async def delete(stack: Stack, job_id: str) -> tuple[int, dict]:
    async with stack.client.delete(f"{stack.url}/jobs/{job_id}") as response:
        return response.status, await response.json()


async def renderer_idle(settings: Settings) -> bool:
    nc = await nats.connect(settings.nats_url)
    try:
        info = await nc.jetstream().consumer_info(events.STREAM, events.RENDERER)
    finally:
        await nc.close()
    return info.num_pending == 0 and info.num_ack_pending == 0


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
    finally:
        await stack.close()
    assert job["status"] == "cancelled"
    assert job["url"] is None
    assert history == ["submitted", "cancelled"]
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

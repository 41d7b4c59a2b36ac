"""Reads that need the log answer 503 while NATS is down, naming what is unavailable.

A job nobody has projected yet is known only to the log: its status and its timeline are
read from NATS, and while NATS is stopped the gateway says so (`503`, type `unavailable`)
instead of failing with a 500.
"""

from __future__ import annotations

from typing import Any

from services.core.runtime.settings import Settings
from tests.conftest import NatsServer, Stack, eventually
from tests.integration.test_pipeline import HELLO


async def _get(stack: Stack, path: str) -> tuple[int, Any]:
    async with stack.client.get(f"{stack.url}{path}") as response:
        return response.status, await response.json()


async def test_status_and_timeline_of_a_job_only_the_log_knows_are_503_without_nats(
    settings: Settings, nats_server: NatsServer
) -> None:
    stack = Stack(settings)
    await stack.start("gateway")  # no projector: the job stays known to the log only
    try:
        async with stack.client.post(f"{stack.url}/jobs", json=HELLO) as response:
            assert response.status == 202
            job_id = (await response.json())["id"]
        assert (await _get(stack, f"/jobs/{job_id}"))[1]["status"] == "queued"
        nats_server.stop()
        for path, what in (
            (f"/jobs/{job_id}", "job status is unavailable: NATS"),
            (f"/jobs/{job_id}/events", "job history is unavailable: NATS"),
        ):
            status, body = await _get(stack, path)
            assert status == 503, (path, body)
            assert body["error"]["type"] == "unavailable", body
            assert body["error"]["message"].startswith(what), body
        nats_server.start()

        async def readable() -> bool:
            status, _ = await _get(stack, f"/jobs/{job_id}/events")
            return status == 200

        await eventually(readable, 30)
    finally:
        await stack.close()

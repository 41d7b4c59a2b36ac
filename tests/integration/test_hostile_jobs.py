"""Hostile templates through the whole stack: submitted to the gateway, rendered by the
renderer, their refusals in the job's timeline, and nothing reaching loopback.

The per-route attacks are in test_hostile_pages.py (on the production browser pool);
this is the same promise as a tenant sees it through the API.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import replace
from typing import Any

import pytest

from services.core.runtime.settings import Settings
from tests.conftest import Stack
from tests.integration.test_pipeline import pdf_text

pytestmark = pytest.mark.chromium


@pytest.fixture
async def stack(settings: Settings) -> AsyncIterator[Stack]:
    stack = Stack(replace(settings, allow_private_networks=False))
    await stack.start()
    yield stack
    await stack.close()


async def test_a_template_that_reaches_for_loopback_gets_nothing_and_the_next_job_is_fine(
    stack: Stack,
) -> None:
    accepted: list[int] = []

    async def accept(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        accepted.append(1)
        writer.close()

    canary = await asyncio.start_server(accept, "127.0.0.1", 0)
    port = canary.sockets[0].getsockname()[1]
    loopback = f"127.0.0.1:{port}"
    template = (
        "<h1>Invoice {{ number }}</h1><p id=r></p><script>"
        f"window.open('http://{loopback}/popup');"
        f"const s = new WebSocket('ws://{loopback}/ws');"
        "s.onerror = () => { r.textContent = 'socket refused' };"
        f"fetch('http://localhost:{port}/fetch').catch(() => 0);"
        "</script>"
    )
    try:
        body: dict[str, Any] = {
            "template": template,
            "data": {"number": 7},
            "options": {"javascript": True, "wait_for": {"selector": "#r:not(:empty)"}},
        }
        job = await stack.finished((await stack.submit(body))["id"])
        assert job["status"] == "done", job
        text = await pdf_text(stack, job["url"])
        assert "Invoice 7" in text and "socket refused" in text
        async with stack.client.get(f"{stack.url}/jobs/{job['id']}/events") as response:
            timeline = await response.json()
        (done,) = [event for event in timeline["events"] if event["type"] == "done"]
        refused = {refusal["url"] for refusal in done["refused"]}
        assert loopback in refused  # the WebSocket's CONNECT, refused by the egress proxy
        assert f"http://localhost:{port}/fetch" in refused
        assert accepted == []

        after = await stack.finished((await stack.submit({"html": "<p>next job</p>"}))["id"])
        assert after["status"] == "done"
        assert "next job" in await pdf_text(stack, after["url"])
        assert accepted == []
    finally:
        canary.close()

"""Live updates over Server-Sent Events: `GET /jobs/{id}/stream`, `GET /batches/{id}/stream`.

Verifies, against the real stack (Chromium renders): a job's stream shows `submitted`,
`started` and `done` (with the status after each and the download URL) and then closes,
even when it was opened before any renderer ran; a finished job's stream gives its whole
history and closes at once; `Last-Event-ID` resumes after that event only; a batch's
stream shows its counts moving, then a last `progress` and the batch's `done`; each tenant
may hold `PRESSROOM_MAX_STREAMS` open (429 past that) and a closed one frees its slot;
another tenant's job or batch, or an unknown one, is a 404; a bad `Last-Event-ID` is a 400;
a quiet stream sends keep-alives; the gateway shuts down at once with streams open.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field, replace
from typing import Any

import aiohttp
import msgspec
import nats
import pytest

from services.core.model import events, subjects
from services.core.runtime.settings import Settings
from services.gateway import streams
from tests.conftest import Stack, eventually


@dataclass
class Message:
    id: int
    event: str
    data: dict[str, Any]


@dataclass
class Reader:
    """Reads one SSE answer line by line: its messages, and its comments."""

    response: aiohttp.ClientResponse
    comments: list[str] = field(default_factory=list)

    async def next(self, timeout: float = 30) -> Message | None:
        """The next message; None once the server has closed the stream."""
        fields: dict[str, str] = {}
        async with asyncio.timeout(timeout):
            async for raw in self.response.content:
                line = raw.decode().rstrip("\n")
                if not line and fields:
                    return Message(int(fields["id"]), fields["event"], json.loads(fields["data"]))
                if line.startswith(":"):
                    self.comments.append(line[1:].strip())
                elif line:
                    name, _, value = line.partition(": ")
                    fields[name] = value
        return None

    async def until_closed(self, timeout: float = 60) -> list[Message]:
        found = []
        while (message := await self.next(timeout)) is not None:
            found.append(message)
        return found


@dataclass
class Opened:
    status: int
    reader: Reader
    body: Any = None


@contextlib.asynccontextmanager
async def stream(http: aiohttp.ClientSession, url: str, **headers: str) -> AsyncIterator[Opened]:
    async with http.get(url, headers=headers, timeout=aiohttp.ClientTimeout()) as response:
        body = None
        if response.status == 200:
            assert response.content_type == "text/event-stream"
        else:
            body = await response.json()
        yield Opened(response.status, Reader(response), body)


@pytest.fixture
async def quiet(settings: Settings) -> AsyncIterator[Stack]:
    """Gateway and projector only: jobs are accepted and stay queued, streams stay open."""
    stack = Stack(replace(settings, max_streams=2))
    await stack.start("gateway", "projector")
    yield stack
    await stack.close()


async def test_a_job_stream_opened_before_any_render_shows_every_event_then_closes(
    quiet: Stack,
):
    job_id = (await quiet.submit({"html": "<h1>Streamed</h1>"}))["id"]
    async with stream(quiet.client, f"{quiet.url}/jobs/{job_id}/stream") as opened:
        assert opened.status == 200
        first = await opened.reader.next()
        assert first is not None and first.event == "submitted"
        assert first.data["status"] == "queued" and first.data["seq"] == first.id
        await quiet.start("renderer")
        rest = await opened.reader.until_closed()
    assert [m.event for m in rest] == ["started", "done"]
    assert [m.data["status"] for m in rest] == ["running", "done"]
    ids = [first.id, *(m.id for m in rest)]
    assert ids == sorted(ids) and len(set(ids)) == 3
    async with quiet.client.get(rest[-1].data["url"]) as response:
        assert (await response.read()).startswith(b"%PDF")
    async with quiet.client.get(f"{quiet.url}/jobs/{job_id}/events") as response:
        timeline = (await response.json())["events"]
    assert [{k: v for k, v in m.data.items() if k not in ("status", "url")}
            for m in [first, *rest]] == timeline  # fmt: skip


async def test_a_finished_job_gives_its_history_at_once_and_resumes_after_last_event_id(
    stack: Stack,
):
    job_id = (await stack.submit({"html": "<h1>Done</h1>"}))["id"]
    await stack.finished(job_id)
    url = f"{stack.url}/jobs/{job_id}/stream"
    async with stream(stack.client, url) as opened:
        history = await opened.reader.until_closed(10)
    assert [m.event for m in history] == ["submitted", "started", "done"]
    async with stream(stack.client, url, **{"Last-Event-ID": str(history[0].id)}) as opened:
        resumed = await opened.reader.until_closed(10)
    assert [(m.id, m.event) for m in resumed] == [(m.id, m.event) for m in history[1:]]
    async with stream(stack.client, f"{url}?last_event_id={history[-1].id}") as opened:
        assert await opened.reader.until_closed(10) == []


async def test_a_batch_stream_shows_progress_moving_and_ends_with_the_batch(stack: Stack):
    body = {"template": "<h1>{{ n }}</h1>", "items": [{"data": {"n": i}} for i in range(4)]}
    async with stack.client.post(f"{stack.url}/batches", json=body) as response:
        assert response.status == 202, await response.text()
        batch_id = (await response.json())["id"]
    async with stream(stack.client, f"{stack.url}/batches/{batch_id}/stream") as opened:
        messages = await opened.reader.until_closed(90)
    names = [m.event for m in messages]
    assert names[-2:] == ["progress", "done"], names
    assert "submitted" in names
    progress = [m.data for m in messages if m.event == "progress"]
    ended = [p["done"] + p["failed"] + p["cancelled"] for p in progress]
    assert ended == sorted(ended) and ended[-1] == 4 and len(set(ended)) >= 2, ended
    final = messages[-1].data
    assert final["status"] == "done" and final["done"] == 4 and final["url"]
    assert messages[-1].id == messages[-2].id == max(m.id for m in messages)


async def test_each_tenant_has_at_most_max_streams_and_a_closed_one_frees_its_slot(
    quiet: Stack,
):
    job_id = (await quiet.submit({"html": "<p>wait</p>"}))["id"]
    url = f"{quiet.url}/jobs/{job_id}/stream"
    other = await quiet.new_tenant()
    async with other.http.post(f"{quiet.url}/jobs", json={"html": "<p>theirs</p>"}) as response:
        their_url = f"{quiet.url}/jobs/{(await response.json())['id']}/stream"
    async with stream(quiet.client, url) as one, stream(quiet.client, url) as two:
        assert one.status == two.status == 200
        async with stream(quiet.client, url) as three:
            assert three.status == 429
            assert three.body["error"]["type"] == "too_many_streams"
        async with stream(other.http, their_url) as theirs:
            assert theirs.status == 200  # the bound is per tenant

    async def admitted() -> bool:  # the gateway notices a client gone within a tick
        async with stream(quiet.client, url) as again, stream(quiet.client, url) as third:
            return again.status == third.status == 200

    await eventually(admitted, 10, "both slots freed")


async def test_another_tenants_or_an_unknown_id_is_404_and_a_bad_resume_point_400(
    quiet: Stack,
):
    job_id = (await quiet.submit({"html": "<p>mine</p>"}))["id"]
    other = await quiet.new_tenant()
    for url in (
        f"{quiet.url}/jobs/{job_id}/stream",
        f"{quiet.url}/jobs/{'0' * 32}/stream",
        f"{quiet.url}/batches/b{'0' * 31}/stream",
        f"{quiet.url}/batches/nope/stream",
    ):
        async with stream(other.http, url) as opened:
            assert opened.status == 404, url
            assert opened.body["error"]["type"] == "not_found"
    url = f"{quiet.url}/jobs/{job_id}/stream"
    async with stream(quiet.client, url, **{"Last-Event-ID": "x1"}) as opened:
        assert opened.status == 400 and opened.body["error"]["field"] == "Last-Event-ID"


async def test_a_quiet_stream_sends_keep_alives_and_shutdown_does_not_wait_for_it(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setattr(streams, "KEEP_ALIVE", 0.3)
    stack = Stack(settings)
    await stack.start("gateway")
    job_id = (await stack.submit({"html": "<p>quiet</p>"}))["id"]
    async with stream(stack.client, f"{stack.url}/jobs/{job_id}/stream") as opened:
        assert (await opened.reader.next()).event == "submitted"
        reading = asyncio.create_task(opened.reader.next(30))
        await eventually(lambda: "keep-alive" in opened.reader.comments, 10)
        started = time.monotonic()
        stack.stop.set()
        assert await reading is None  # the gateway closed the stream
    await stack.close()
    assert time.monotonic() - started < 5


BUSY_LOG = 1000
"""Events of other jobs published just before a job's end: the stream stores them in
order, so the end is stored a moment after its bell rang."""


async def test_a_stream_ends_with_its_job_although_the_bell_rang_before_the_log_stored_it(
    settings: Settings,
):
    # The gateway's bell (a core NATS subscription) hears the job's end as NATS routes it;
    # the stream stores it after the other jobs' events queued before it, so the read the
    # bell prompts does not find it yet. Without a second read the stream would end only
    # at its next scheduled read, with the keep-alive.
    stack = Stack(settings)
    await stack.start("gateway")
    nc = await nats.connect(settings.nats_url)
    try:
        for n in range(3):
            job_id = (await stack.submit({"html": f"<p>{n}</p>"}))["id"]
            async with stream(stack.client, f"{stack.url}/jobs/{job_id}/stream") as opened:
                assert (await opened.reader.next()).event == "submitted"
                other = uuid.uuid4().hex
                started = events.JobStarted(
                    job_id=other, tenant=stack.tenant.id, attempt=1, worker="w"
                )
                filler = msgspec.json.encode(started)
                for _ in range(BUSY_LOG):
                    await nc.publish(subjects.subject(other, "started"), filler)
                error = events.ErrorInfo(type="timeout", message="render took too long")
                failed = events.JobFailed(
                    job_id=job_id, tenant=stack.tenant.id, attempt=1, error=error
                )
                await nc.publish(subjects.subject(job_id, "failed"), msgspec.json.encode(failed))
                await nc.flush()
                # Well short of the keep-alive read (15 s), long enough for a loaded machine.
                ended = await opened.reader.until_closed(streams.KEEP_ALIVE / 2)
            assert [(m.event, m.data["status"]) for m in ended] == [("failed", "failed")]
            assert ended[0].data["error"] == {"type": "timeout", "message": "render took too long"}
    finally:
        await nc.close()
        await stack.close()

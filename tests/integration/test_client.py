"""`pressroom.client` against the real stack.

Verifies: a job submitted with `Client` (blocking, in a thread) and with `AsyncClient` is
waited for and downloaded as a real PDF, to a path and to an open file; a job ended
`failed` comes back from `wait()` with its error; `wait()` past its deadline raises the
typed `WaitTimeout`, and polls when the tenant's streams are all open (429); error
answers raise one exception per family carrying the API's `error.type`, `field` and
status (404, 400 naming the field, 401); a batch's `progress()` reaches `done` and its
items are listed; stored templates and usage read back typed; `jobs()` pages through the
tenant's jobs; `verify_webhook` accepts a real signed delivery and refuses a changed body
or another secret, as `standardwebhooks` does; a request refused for now is sent again
when that is safe (a 429 after its `Retry-After`; a 503 only for a submission with an
`Idempotency-Key`), and raised when it is not; a stream cut mid-way is opened again
from its last message (`Last-Event-ID`) rather than given up for polling.
"""

from __future__ import annotations

import asyncio
import io
import re
from collections.abc import AsyncIterator, Callable
from dataclasses import replace
from pathlib import Path

import httpx
import pytest
from standardwebhooks.webhooks import Webhook, WebhookVerificationError

from pressroom.client import (
    AsyncClient,
    Batch,
    Client,
    Invalid,
    Job,
    NotFound,
    RateLimited,
    Unauthorized,
    Unavailable,
    WaitTimeout,
    verify_webhook,
)
from services.core.runtime.settings import Settings
from tests.conftest import NatsServer, Receiver, Stack, eventually

HELLO = "<h1>Hi {{ name }}</h1>"


@pytest.fixture
def settings(settings: Settings) -> Settings:
    """The stack of each test: a job still rendering at its end is given 1 s, not 5; one
    live stream per tenant, so a test can fill it."""
    return replace(settings, shutdown_grace=1.0, max_streams=1)


@pytest.fixture
async def client(stack: Stack) -> AsyncIterator[AsyncClient]:
    async with AsyncClient(stack.url, stack.tenant.key) as client:
        yield client


def render_blocking(url: str, key: str, path: Path) -> tuple[Job, int]:
    """What a script does with `Client`: submit, wait, download to a path."""
    with Client(url, key) as pressroom:
        job = pressroom.submit(template=HELLO, data={"name": "Ana"})
        job = pressroom.wait(job.id, timeout=60)
        return job, pressroom.download(job, path)


async def test_a_job_is_submitted_waited_for_and_downloaded_as_a_real_pdf(
    stack: Stack, client: AsyncClient, tmp_path: Path
):
    job, size = await asyncio.to_thread(
        render_blocking, stack.url, stack.tenant.key, tmp_path / "hi.pdf"
    )
    assert job.status == "done" and job.pages == 1 and job.url
    assert (tmp_path / "hi.pdf").read_bytes()[:5] == b"%PDF-" and size > 1000
    assert not (tmp_path / "hi.pdf.part").exists()

    accepted = await client.submit(html="<p>async</p>", idempotency_key="k-1")
    assert accepted.status == "queued" and accepted.url is None
    done = await client.wait(accepted.id, timeout=60)
    into = io.BytesIO()
    assert await client.download(done, into) == len(into.getvalue())
    assert into.getvalue().startswith(b"%PDF-")
    timeline = await client.events(done.id)
    assert (timeline[0].type, timeline[-1].type) == ("submitted", "done")
    assert timeline[-1].details["pages"] == 1  # the whole entry, beyond the typed fields


async def streams_full(stack: Stack, job_id: str) -> bool:
    async with stack.client.get(f"{stack.url}/jobs/{job_id}/stream") as response:
        return response.status == 429


async def test_failures_come_back_typed_a_failed_job_a_timeout_and_error_answers(
    stack: Stack, client: AsyncClient
):
    job = await client.submit(template="{{ missing.name }}")
    failed = await client.wait(job.id, timeout=60)
    assert failed.status == "failed" and failed.error is not None
    assert failed.error.type == "template" and "missing" in failed.error.message

    slow = await client.submit(
        html="<p>x</p>", options={"wait_for": {"selector": "#never", "timeout": 30}}
    )
    with pytest.raises(WaitTimeout) as caught:
        await client.wait(slow.id, timeout=0.5)
    assert caught.value.type == "timeout" and isinstance(caught.value, TimeoutError)

    holder = asyncio.create_task(client.wait(slow.id, timeout=60))  # the tenant's one stream
    await eventually(lambda: streams_full(stack, slow.id), 10, "the stream limit reached")
    quick = await client.submit(html="<p>polled</p>")
    assert (await client.wait(quick.id, timeout=60)).status == "done"  # 429: polled instead
    await client.cancel(slow.id)
    assert (await holder).status == "cancelled"

    with pytest.raises(NotFound) as missing:
        await client.get("nosuchjob")
    assert (missing.value.type, missing.value.status) == ("not_found", 404)

    with pytest.raises(Invalid) as invalid:
        await client.submit(template=HELLO, data={"name": "x"}, options={"scale": 99})
    assert invalid.value.status == 400 and invalid.value.type == "validation"
    assert invalid.value.field == "options.scale"

    async with AsyncClient(stack.url, "prk_not-a-key") as stranger:
        with pytest.raises(Unauthorized) as refused:
            await stranger.usage()
    assert (refused.value.type, refused.value.status) == ("unauthorized", 401)


async def test_a_batch_progresses_to_done_and_lists_its_items(client: AsyncClient):
    items = [{"data": {"name": f"N{i}"}, "filename": f"n{i}.pdf"} for i in range(4)]
    accepted = await client.submit_batch(items, template=HELLO, output="zip")
    assert accepted.status == "queued" and accepted.total == 4
    seen: list[Batch] = [b async for b in client.progress(accepted.id, timeout=90, interval=0.2)]
    assert seen[-1].status == "done" and seen[-1].done == 4 and seen[-1].url
    assert all(not b.terminal for b in seen[:-1])
    listed = [item async for item in client.batch_items(accepted.id)]
    assert [(i.index, i.filename, i.status) for i in listed] == [
        (i, f"n{i}.pdf", "done") for i in range(4)
    ]
    archive = io.BytesIO()
    await client.download(seen[-1], archive)
    assert archive.getvalue()[:2] == b"PK"


async def test_templates_usage_and_the_job_listing_read_back_typed(client: AsyncClient):
    first = await client.create_template("invoice", HELLO)
    second = await client.create_template("invoice", HELLO + "<p>v2</p>")
    assert (first.version, second.version, second.id) == (1, 2, first.id)
    assert [(t.name, t.latest_version) async for t in client.templates()] == [("invoice", 2)]
    stored = await client.template(first.id, version=1)
    assert stored.body == HELLO and [v.version for v in stored.versions] == [1, 2]

    ids = [(await client.submit(template_id=first.id, data={"name": str(i)})).id for i in range(3)]
    for job_id in ids:
        await client.wait(job_id, timeout=60)
    assert [job.id async for job in client.jobs(limit=2)] == ids[::-1][:2]
    assert {job.id async for job in client.jobs(status="done")} == set(ids)
    used = await client.usage()
    assert used.succeeded == 3 and used.billable == 0

    assert (await client.template_named("invoice", 1)).body == HELLO
    with pytest.raises(NotFound):
        await client.template_named("no-such-template")
    named = await client.submit(template_name="invoice", template_version=1, data={"name": "n"})
    timeline = await client.events(named.id)
    assert (timeline[0].details["template_id"], timeline[0].details["template_version"]) == (
        first.id,
        1,
    )


async def test_verify_webhook_accepts_a_real_delivery_and_refuses_a_changed_one(
    stack: Stack, client: AsyncClient, receiver: Receiver
):
    job = await client.submit(html="<p>hook</p>", webhook_url=receiver.url)
    await eventually(lambda: receiver.requests, 60, "the webhook")
    body, headers = receiver.requests[0]["body"], receiver.requests[0]["headers"]
    secret = stack.tenant.webhook_secret
    assert receiver.requests[0]["json"]["data"]["id"] == job.id

    assert verify_webhook(body, headers, secret)
    Webhook(secret).verify(body, headers)  # the reference implementation agrees
    assert verify_webhook(body, headers, ["whsec_" + "A" * 32, secret])  # any of several
    assert not verify_webhook(body.replace(b"done", b"fail"), headers, secret)
    with pytest.raises(WebhookVerificationError):
        Webhook(secret).verify(body.replace(b"done", b"fail"), headers)
    other = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
    assert not verify_webhook(body, headers, other)
    stamp = int(headers["webhook-timestamp"])
    assert not verify_webhook(body, headers, secret, now=stamp + 301)


class Watched(httpx.AsyncHTTPTransport):
    """Real HTTP that records each answer's status and calls `then(status)` after it."""

    def __init__(self) -> None:
        super().__init__()
        self.statuses: list[int] = []
        self.then: Callable[[int], None] = lambda status: None

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await super().handle_async_request(request)
        self.statuses.append(response.status_code)
        self.then(response.status_code)
        return response


class WatchedBlocking(httpx.HTTPTransport):
    """`Watched` for the blocking `Client`."""

    def __init__(self) -> None:
        super().__init__()
        self.statuses: list[int] = []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        response = super().handle_request(request)
        self.statuses.append(response.status_code)
        return response


def submit_blocking(url: str, key: str, transport: httpx.BaseTransport) -> Job:
    with Client(url, key, transport=transport) as pressroom:
        return pressroom.submit(html="<p>blocking</p>")


async def test_a_rate_limited_request_is_sent_again_after_its_retry_after(stack: Stack):
    slow = await stack.new_tenant(rate_limit={"per_second": 0.5, "burst": 1})
    async with AsyncClient(stack.url, slow.key, retries=0) as impatient:
        await impatient.submit(html="<p>1</p>")
        with pytest.raises(RateLimited) as refused:
            await impatient.submit(html="<p>2</p>")
    assert refused.value.retry_after is not None and 1 <= refused.value.retry_after <= 2
    watched = Watched()
    async with AsyncClient(stack.url, slow.key, transport=watched) as patient:
        job = await patient.submit(html="<p>3</p>")  # the bucket is still empty
    assert job.status == "queued"
    assert watched.statuses == [429, 202]
    blocking = WatchedBlocking()
    job = await asyncio.to_thread(submit_blocking, stack.url, slow.key, blocking)
    assert job.status == "queued"
    assert blocking.statuses == [429, 202]


async def test_a_503_is_waited_out_only_by_a_submission_that_cannot_make_two_jobs(
    stack: Stack, nats_server: NatsServer
):
    watched = Watched()
    async with AsyncClient(stack.url, stack.tenant.key, retries=8, transport=watched) as client:
        nats_server.stop()
        with pytest.raises(Unavailable) as away:
            await client.submit(html="<p>no key</p>")  # it may have been stored: not again
        assert (away.value.status, watched.statuses) == (503, [503])

        def back(status: int) -> None:  # NATS returns once the gateway has said 503 again
            if status == 503 and nats_server.proc is None:
                nats_server.start()

        watched.then = back
        job = await client.submit(html="<p>with a key</p>", idempotency_key="retry-me")
        again = await client.submit(html="<p>with a key</p>", idempotency_key="retry-me")
    assert watched.statuses[:2] == [503, 503] and watched.statuses[-2] == 202
    assert again.id == job.id
    assert (await stack.finished(job.id))["status"] == "done"


class Relay:
    """A TCP relay to the gateway whose connections the test can cut, keeping what each
    connection carried each way (a real network break, between real client and server)."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.up: list[bytearray] = []  # client to gateway, one per connection
        self.down: list[bytearray] = []  # gateway to client
        self.writers: list[asyncio.StreamWriter] = []
        self.server: asyncio.Server | None = None

    async def start(self) -> str:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return f"http://127.0.0.1:{self.server.sockets[0].getsockname()[1]}"

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        upstream_reader, upstream = await asyncio.open_connection("127.0.0.1", self.port)
        self.writers += [writer, upstream]
        self.up.append(bytearray())
        self.down.append(bytearray())
        await asyncio.gather(
            self._pump(reader, upstream, self.up[-1]),
            self._pump(upstream_reader, writer, self.down[-1]),
            return_exceptions=True,
        )

    @staticmethod
    async def _pump(
        source: asyncio.StreamReader, sink: asyncio.StreamWriter, seen: bytearray
    ) -> None:
        while data := await source.read(65536):
            seen += data
            sink.write(data)
            await sink.drain()
        sink.close()

    def cut(self) -> None:
        """Reset every connection open now, both ways."""
        for writer in self.writers:
            writer.transport.abort()
        self.writers.clear()

    async def close(self) -> None:
        self.cut()
        if self.server is not None:
            self.server.close()


def wait_blocking(url: str, key: str, job_id: str) -> Job:
    with Client(url, key) as pressroom:
        return pressroom.wait(job_id, timeout=60)


@pytest.mark.parametrize("blocking", [False, True], ids=["async", "blocking"])
async def test_a_stream_cut_mid_way_resumes_from_its_last_message(
    settings: Settings, blocking: bool
):
    stack = Stack(replace(settings, max_streams=4))
    await stack.start("gateway", "projector")  # no renderer yet: the job stays queued
    relay = Relay(stack.settings.port)
    try:
        url = await relay.start()
        job_id = (await stack.submit({"template": HELLO, "data": {"name": "Ana"}}))["id"]
        if blocking:
            waiter = asyncio.create_task(
                asyncio.to_thread(wait_blocking, url, stack.tenant.key, job_id)
            )
        else:
            client = AsyncClient(url, stack.tenant.key)
            waiter = asyncio.create_task(client.wait(job_id, timeout=60))
        await eventually(
            lambda: _holds(relay, b"event: submitted"), 30, "the stream's first message"
        )
        relay.cut()
        await eventually(lambda: _resumed(relay), 30, "the stream opened again")
        await stack.start("renderer")
        job = await waiter
        if not blocking:
            await client.aclose()
    finally:
        await relay.close()
        await stack.close()
    assert job.status == "done"
    requests = [bytes(up).split(b"\r\n\r\n")[0].decode() for up in relay.up]
    streams = [r for r in requests if r.startswith(f"GET /jobs/{job_id}/stream ")]
    assert len(streams) == 2 and "last-event-id: " not in streams[0].lower()
    first = next(bytes(down) for down in relay.down if b"event: submitted" in down)
    last_seen = re.findall(rb"^id: (\d+)$", first, re.M)[-1].decode()
    assert f"last-event-id: {last_seen}\r\n" in streams[1].lower()
    polls = [r for r in requests if r.startswith(f"GET /jobs/{job_id} ")]
    assert len(polls) == 1  # wait()'s one read of the ended job, no polling meanwhile


async def _holds(relay: Relay, text: bytes) -> bool:
    return any(text in down for down in relay.down)


async def _resumed(relay: Relay) -> bool:
    return sum(b"/stream " in up for up in relay.up) >= 2

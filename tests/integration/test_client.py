"""`pressroom.client` against the real stack.

Verifies: a job submitted with `Client` (blocking, in a thread) and with `AsyncClient` is
waited for and downloaded as a real PDF, to a path and to an open file; a job ended
`failed` comes back from `wait()` with its error; `wait()` past its deadline raises the
typed `WaitTimeout`, and polls when the tenant's streams are all open (429); error
answers raise one exception per family carrying the API's `error.type`, `field` and
status (404, 400 naming the field, 401); a batch's `progress()` reaches `done` and its
items are listed; stored templates and usage read back typed; `jobs()` pages through the
tenant's jobs; `verify_webhook` accepts a real signed delivery and refuses a changed body
or another secret, as `standardwebhooks` does.
"""

from __future__ import annotations

import asyncio
import io
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path

import pytest
from standardwebhooks.webhooks import Webhook, WebhookVerificationError

from pressroom.client import (
    AsyncClient,
    Batch,
    Client,
    Invalid,
    Job,
    NotFound,
    Unauthorized,
    WaitTimeout,
    verify_webhook,
)
from services.core.settings import Settings
from tests.conftest import Receiver, Stack, eventually

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

"""The notifier against hostile and broken receivers.

Verifies: 410 Gone stops retrying; a receiver that hangs times out and is retried, and
does not delay deliveries to other receivers; a redirect is reported, never followed,
so it cannot reach a forbidden address; every attempt is in GET /jobs/{id}/webhooks.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass, field, replace
from typing import Any

import asyncpg
import nats
import pytest
from aiohttp import web

from services.core.log import timeline
from services.core.model import subjects
from services.core.runtime.settings import Settings
from tests.conftest import Receiver, Stack, eventually, free_port
from tests.integration.test_pipeline import HELLO


async def attempts(stack: Stack, job_id: str, count: int) -> list[dict[str, Any]]:
    async def log() -> list[dict[str, Any]] | None:
        async with stack.client.get(f"{stack.url}/jobs/{job_id}/webhooks") as response:
            found: list[dict[str, Any]] = (await response.json())["attempts"]
        return found if len(found) >= count else None

    result: list[dict[str, Any]] = await eventually(log, 30)
    return result


@dataclass
class OddReceiver:
    """/hang never answers in time, /moved redirects to a metadata address, /gone is 410,
    /fast answers at once. `seen` lists the routes asked; `hanging` counts the requests to
    /hang still open (one ends when the notifier gives up on it and disconnects); `fast`
    holds, per request to /fast, (requests to /hang open then, requests to /hang so far)."""

    url: str = ""
    seen: list[str] = field(default_factory=list)
    hanging: int = 0
    fast: list[tuple[int, int]] = field(default_factory=list)
    hang_began: asyncio.Event = field(default_factory=asyncio.Event)

    async def hang(self, request: web.Request) -> web.Response:
        self.seen.append("hang")
        self.hanging += 1
        self.hang_began.set()
        try:
            await asyncio.sleep(30)  # cancelled when the notifier disconnects
        finally:
            self.hanging -= 1
        return web.Response()

    async def moved(self, request: web.Request) -> web.Response:
        self.seen.append("moved")
        raise web.HTTPFound("http://169.254.169.254/latest/meta-data")

    async def gone(self, request: web.Request) -> web.Response:
        self.seen.append("gone")
        return web.Response(status=410)

    async def fast_one(self, request: web.Request) -> web.Response:
        # Delivered concurrently, this may come just before the hanging request: note
        # the state once that one has begun, so that only order-independent facts count.
        await self.hang_began.wait()
        self.seen.append("fast")
        self.fast.append((self.hanging, self.seen.count("hang")))
        return web.Response()


@pytest.fixture
async def odd_receiver() -> AsyncIterator[OddReceiver]:
    odd = OddReceiver()
    app = web.Application()
    app.router.add_post("/hang", odd.hang)
    app.router.add_post("/moved", odd.moved)
    app.router.add_post("/gone", odd.gone)
    app.router.add_post("/fast", odd.fast_one)
    # handler_cancellation: a handler ends when its client goes, so `hanging` is exact.
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.1, handler_cancellation=True)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    odd.url = f"http://127.0.0.1:{runner.addresses[0][1]}"
    yield odd
    await runner.cleanup()


def hook_settings(settings: Settings) -> Settings:
    return replace(settings, webhook_timeout=1.0, webhook_schedule=(0.0, 0.2, 0.2))


@pytest.fixture
async def hook_stack(settings: Settings) -> AsyncIterator[Stack]:
    stack = Stack(hook_settings(settings))
    await stack.start()
    yield stack
    await stack.close()


async def test_410_gone_stops_retrying(
    hook_stack: Stack, odd_receiver: OddReceiver, receiver: Receiver
):
    job = await hook_stack.submit({**HELLO, "webhook_url": f"{odd_receiver.url}/gone"})
    await attempts(hook_stack, job["id"], 1)
    # A witness whose first attempt fails is retried on the same schedule, and it starts
    # later: once its retry is logged, the slot of a retry of the 410 has passed.
    receiver.statuses = [503]
    witness = await hook_stack.submit({**HELLO, "webhook_url": receiver.url})
    retried = await attempts(hook_stack, witness["id"], 2)
    assert [a["outcome"] for a in retried] == ["retrying", "delivered"]
    log = await attempts(hook_stack, job["id"], 1)
    assert [(a["status_code"], a["outcome"]) for a in log] == [(410, "gave_up")]
    assert odd_receiver.seen == ["gone"]


async def test_redirect_is_not_followed(hook_stack: Stack, odd_receiver: OddReceiver):
    job = await hook_stack.submit({**HELLO, "webhook_url": f"{odd_receiver.url}/moved"})
    log = await attempts(hook_stack, job["id"], 3)
    assert [a["status_code"] for a in log] == [302, 302, 302]
    assert [a["outcome"] for a in log] == ["retrying", "retrying", "gave_up"]
    assert "169.254.169.254" in log[0]["error"] and "not followed" in log[0]["error"]


async def test_hanging_receiver_times_out_without_blocking_others(
    settings: Settings, odd_receiver: OddReceiver
):
    stack = Stack(hook_settings(settings))
    await stack.start("gateway", "projector", "renderer")
    try:
        slow = await stack.submit({**HELLO, "webhook_url": f"{odd_receiver.url}/hang"})
        await stack.finished(slow["id"])
        fast = await stack.submit({**HELLO, "webhook_url": f"{odd_receiver.url}/fast"})
        await stack.finished(fast["id"])
        # Both webhooks are due when the notifier starts, the hanging one first in the log.
        await stack.start("notifier")
        await eventually(lambda: odd_receiver.fast, 10, "the fast webhook")
        log = await attempts(stack, slow["id"], 3)
    finally:
        await stack.close()
    # The fast one came while the first request to /hang was still open: not after it
    # timed out, nor in a gap between its retries.
    assert odd_receiver.fast == [(1, 1)]
    assert all(a["status_code"] is None and "within 1s" in a["error"] for a in log)
    assert [a["outcome"] for a in log] == ["retrying", "retrying", "gave_up"]


async def test_address_policy_is_enforced_again_at_delivery(settings: Settings, receiver):
    """A URL that passed at submission but resolves to a forbidden address when the
    notifier connects (DNS rebinding) is refused at connect time."""
    lenient = Stack(settings)  # gateway, projector, renderer: private networks allowed
    strict = Stack(replace(settings, allow_private_networks=False, port=free_port()))
    await lenient.start("gateway", "projector", "renderer")
    await strict.start("notifier")
    try:
        job = await lenient.submit({**HELLO, "webhook_url": receiver.url})
        log = await attempts(lenient, job["id"], 3)
    finally:
        await strict.close()
        await lenient.close()
    assert receiver.requests == []
    assert all("forbidden" in a["error"] for a in log), log
    assert log[-1]["outcome"] == "gave_up"


async def test_redeliver_sends_the_same_webhook_again(stack: Stack, receiver: Receiver):
    job = await stack.submit({**HELLO, "webhook_url": receiver.url})
    await attempts(stack, job["id"], 1)
    url = f"{stack.url}/jobs/{job['id']}/webhooks/redeliver"
    async with stack.client.post(url) as response:
        assert response.status == 202
        assert (await response.json())["redelivery"] == "queued"
    log = await attempts(stack, job["id"], 2)
    assert [a["outcome"] for a in log] == ["delivered", "delivered"]
    assert len(receiver.requests) == 2
    ids = {r["headers"]["webhook-id"] for r in receiver.requests}
    assert len(ids) == 1  # the same event: receivers may deduplicate it

    plain = await stack.finished((await stack.submit(HELLO))["id"])
    async with stack.client.post(f"{stack.url}/jobs/{plain['id']}/webhooks/redeliver") as r:
        assert r.status == 409
        assert "no webhook_url" in (await r.json())["error"]["message"]
    async with stack.client.post(f"{stack.url}/jobs/{'0' * 32}/webhooks/redeliver") as r:
        assert r.status == 404


async def test_redeliver_of_an_unfinished_job_is_409_and_accepted_once_it_is_done(
    settings: Settings, receiver: Receiver
):
    stack = Stack(settings)
    await stack.start("gateway", "projector", "notifier")  # no renderer: the job waits
    try:
        job = await stack.submit({**HELLO, "webhook_url": receiver.url})
        url = f"{stack.url}/jobs/{job['id']}/webhooks/redeliver"
        await eventually(lambda: _projected(stack, job["id"]), 30, "the job's row")
        async with stack.client.post(url) as response:
            assert response.status == 409
            assert response.content_type == "application/json"
            error = (await response.json())["error"]
        assert error["type"] == "conflict"
        assert "has not finished" in error["message"]
        await stack.start("renderer")
        await stack.finished(job["id"])
        await attempts(stack, job["id"], 1)
        async with stack.client.post(url) as response:
            assert response.status == 202
        log = await attempts(stack, job["id"], 2)
    finally:
        await stack.close()
    assert [a["outcome"] for a in log] == ["delivered", "delivered"]
    assert len(receiver.requests) == 2


async def _projected(stack: Stack, job_id: str) -> bool:
    """Whether the job has its row (with its webhook_url), not only its place in the log."""
    return (await stack.job(job_id)).get("webhook_url") is not None


async def test_per_job_secret_signs_instead_of_the_tenants_and_is_never_stored_plain(
    stack: Stack, receiver: Receiver
):
    from standardwebhooks.webhooks import Webhook, WebhookVerificationError

    from services.core.secrets.signing import new_secret

    own = new_secret()
    job = await stack.submit({**HELLO, "webhook_url": receiver.url, "webhook_secret": own})
    await attempts(stack, job["id"], 1)
    hook = receiver.requests[0]
    assert Webhook(own).verify(hook["body"], hook["headers"])["data"]["id"] == job["id"]
    with pytest.raises(WebhookVerificationError):
        Webhook(stack.tenant.webhook_secret).verify(hook["body"], hook["headers"])
    async with stack.client.get(f"{stack.url}/jobs/{job['id']}/events") as response:
        assert own not in await response.text()  # never shown back
    async with stack.client.get(f"{stack.url}/jobs/{job['id']}") as response:
        assert own not in await response.text()
    # Neither the log nor the projection holds it in plain text.
    nc = await nats.connect(stack.settings.nats_url)
    try:
        raw = await nc.jetstream().get_last_msg("JOBS", f"jobs.{job['id']}.submitted.*")
    finally:
        await nc.close()
    key = own.removeprefix("whsec_").encode()
    assert own.encode() not in raw.data and key not in raw.data
    assert b'"webhook_secret":"sealed2:' in raw.data
    conn = await asyncpg.connect(stack.settings.database_url)
    try:
        dump = await conn.fetchval("SELECT string_agg(j::text, '') FROM jobs AS j")
        events_dump = await conn.fetchval("SELECT string_agg(body::text, '') FROM job_events")
    finally:
        await conn.close()
    assert key.decode() not in dump and key.decode() not in events_dump


async def test_every_secret_of_the_tenant_signs_during_a_rotation(stack: Stack, receiver: Receiver):
    from standardwebhooks.webhooks import Webhook

    async with stack.client.post(f"{stack.url}/webhook-secrets") as response:
        assert response.status == 201
        new = (await response.json())["secret"]
    job = await stack.submit({**HELLO, "webhook_url": receiver.url})
    await attempts(stack, job["id"], 1)
    hook = receiver.requests[0]
    assert len(hook["headers"]["webhook-signature"].split(" ")) == 2
    for secret in (stack.tenant.webhook_secret, new):
        assert Webhook(secret).verify(hook["body"], hook["headers"])["data"]["id"] == job["id"]


@pytest.mark.parametrize(
    ("body", "words"),
    [
        ({"webhook_secret": "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}, "needs a webhook_url"),
        ({"webhook_url": "http://127.0.0.1:9/", "webhook_secret": "nope"}, "whsec_"),
    ],
)
async def test_bad_per_job_secret_is_400(stack: Stack, body: dict, words: str):
    async with stack.client.post(f"{stack.url}/jobs", json={**HELLO, **body}) as response:
        assert response.status == 400
        error = (await response.json())["error"]
    assert error["field"] == "webhook_secret"
    assert words in error["message"]


async def test_the_notifier_is_never_handed_the_end_of_a_job_without_a_webhook(
    stack: Stack, receiver: Receiver
):
    """Its end is logged on `jobs.<id>.done.quiet`, which the notifier's durable does not
    take; a job with a webhook still ends on `jobs.<id>.done` and gets its webhook."""
    quiet = await stack.finished((await stack.submit(HELLO))["id"])
    cancelled = (await stack.submit({**HELLO, "options": {"wait_for": {"selector": "#x"}}}))["id"]
    async with stack.client.delete(f"{stack.url}/jobs/{cancelled}") as response:
        assert (await response.json())["status"] == "cancelled"
    hooked = await stack.submit({**HELLO, "webhook_url": receiver.url})
    await eventually(lambda: _received(receiver), 30, "the webhook")
    nc = await nats.connect(stack.settings.nats_url)
    try:
        js = nc.jetstream()
        notifier = await js.consumer_info(subjects.STREAM, subjects.NOTIFIER)
        ends = {
            job_id: [
                raw.subject async for raw in timeline.messages(js, subjects.subject(job_id, ">"))
            ]
            for job_id in (quiet["id"], cancelled, hooked["id"])
        }
    finally:
        await nc.close()
    assert quiet["status"] == "done"
    assert f"jobs.{quiet['id']}.done.quiet" in ends[quiet["id"]]
    assert f"jobs.{cancelled}.cancelled.quiet" in ends[cancelled]
    assert f"jobs.{hooked['id']}.done" in ends[hooked["id"]]
    assert notifier.delivered.consumer_seq == 1  # the hooked job's end, and nothing else
    assert notifier.num_pending == 0 and notifier.num_ack_pending == 0


async def _received(receiver: Receiver) -> bool:
    return len(receiver.requests) == 1

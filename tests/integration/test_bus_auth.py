"""NATS lets each service do what its code needs and nothing more (issue 29: one escaped
page must not be able to publish job events for any tenant).

Verifies, against a real nats-server configured from `busaccess` as `pressroom dev` and
deploy/k8s configure theirs: a client without credentials, or with a key NATS does not
know, is refused at connect; each service's identity can publish the events its code
publishes (through `bus`) and is refused every other kind — a renderer cannot submit,
cancel or end a batch, a gateway cannot finish a job — and nothing refused reaches the
log; no identity can delete, purge or reconfigure the log, take another service's
messages, write another's bucket, read the gateways' copy of the API keys, forge an
advisory or read another's replies; and a payload cannot pass for another kind than its
subject's: a renderer's `done` subject carrying a submission creates no job.

That the services' identities have every permission they need is what every other
integration test shows: the `stack` runs each service as its own identity, and the
`nats_server` fixture fails any test in which NATS refused a client anything.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Iterator
from dataclasses import replace
from pathlib import Path

import nats
import pytest
from nats.aio.client import Client
from nats.js import JetStreamContext

from services.core.log import bus, buskeys
from services.core.log.busaccess import SERVICES, Role
from services.core.model import events, subjects
from services.core.runtime.settings import Settings
from services.gateway import keymirror
from tests.conftest import NATS_SEEDS, NatsServer, Stack, eventually

G, R, P, N, C = Role.GATEWAY, Role.RENDERER, Role.PROJECTOR, Role.NOTIFIER, Role.CONDUCTOR
ERROR = events.ErrorInfo(type="x", message="x")
HOOK = "https://example.com/hook"


def samples(job: str) -> dict[str, tuple[set[Role], events.LogEvent]]:
    """One event of each kind the log holds, for job `job` (a batch `b<job>`, its item
    0), with the services whose code publishes that kind: the policy, stated here
    independently of `busaccess`."""
    item, batch = subjects.item_job_id(f"b{job}", 0), f"b{job}"
    counts = {"total": 1, "done": 1, "failed": 0, "cancelled": 0}
    return {
        "submitted": ({G, P}, events.JobSubmitted(job_id=job, tenant="t1")),
        "item submitted": ({C, P}, events.JobSubmitted(job_id=item, batch_id=batch, index=0)),
        "started": ({R}, events.JobStarted(job_id=job, attempt=1, worker="w")),
        "item started": ({R}, events.JobStarted(job_id=item, attempt=1, worker="w")),
        "retrying": (
            {R},
            events.JobRetrying(job_id=job, attempt=1, worker="w", error=ERROR, delay=1),
        ),
        "done": ({R}, _done(job, HOOK)),
        "quiet done": ({R}, _done(job, None)),
        "item done": ({R}, _done(item, None)),
        "failed": ({R, P}, events.JobFailed(job_id=job, attempt=1, error=ERROR, webhook_url=HOOK)),
        "quiet failed": ({R, P}, events.JobFailed(job_id=job, attempt=1, error=ERROR)),
        "item failed": ({R, P}, events.JobFailed(job_id=item, attempt=1, error=ERROR)),
        "cancelled": ({G}, events.JobCancelled(job_id=job, webhook_url=HOOK)),
        "quiet cancelled": ({G}, events.JobCancelled(job_id=job)),
        "item cancelled": ({G, C}, events.JobCancelled(job_id=item)),
        "deleted": ({G}, events.JobDeleted(job_id=job, object_key="k")),
        "redeliver": ({G}, events.WebhookRedeliver(job_id=job, request="r")),
        "webhook": (
            {N},
            events.WebhookAttempted(job_id=job, webhook_id="w", attempt=1, url=HOOK, outcome="x"),
        ),
        "batch submitted": ({G}, events.BatchSubmitted(batch_id=batch, total=1, items_key="k")),
        "batch paused": ({G}, events.BatchPaused(batch_id=batch)),
        "batch resumed": ({G}, events.BatchResumed(batch_id=batch)),
        "batch cancel": ({G}, events.BatchCancel(batch_id=batch)),
        "batch complete": ({P}, events.BatchComplete(batch_id=batch)),
        "batch progress": ({P}, events.BatchProgress(batch_id=batch, **counts)),
        "batch done": ({C}, events.BatchDone(batch_id=batch, object_key="k", bytes=1, **counts)),
        "batch failed": ({C}, events.BatchFailed(batch_id=batch, error=ERROR, **counts)),
        "batch cancelled": ({C}, events.BatchCancelled(batch_id=batch, **counts)),
    }


def _done(job_id: str, webhook: str | None) -> events.JobDone:
    return events.JobDone(
        job_id=job_id, attempt=1, object_key="k", bytes=1, pages=1, render_ms=1, webhook_url=webhook
    )


def subject_of(event: events.LogEvent) -> str:
    if isinstance(event, events.BatchEvent):
        return events.batch_subject_of(event)
    return events.subject_of(event)


OTHERS = {
    # what no service may do to the log, but its keeper its settings
    "$JS.API.STREAM.DELETE.JOBS": set(),
    "$JS.API.STREAM.PURGE.JOBS": set(),
    "$JS.API.STREAM.MSG.DELETE.JOBS": set(),
    "$JS.API.STREAM.UPDATE.JOBS": {P},
    # the durables of other services: take their messages, delete or reconfigure them
    "$JS.API.CONSUMER.MSG.NEXT.JOBS.projector": {P},
    "$JS.ACK.JOBS.projector.1.5.5.1.0": {P},
    "$JS.API.CONSUMER.DELETE.JOBS.projector": {P},
    "$JS.API.CONSUMER.CREATE.JOBS.projector": {P},
    "$JS.API.CONSUMER.CREATE.JOBS.notifier": {N},
    "$JS.API.CONSUMER.DELETE.JOBS.renderer": set(),
    "$JS.API.CONSUMER.CREATE.JOBS.renderer.jobs.>": set(),
    "$JS.API.CONSUMER.MSG.NEXT.JOBS.conductor": {C},
    "$JS.API.CONSUMER.MSG.NEXT.JOBS_ADVISORIES.finalizer": {P},
    "$JS.API.CONSUMER.CREATE.JOBS.spy": set(),
    "$JS.API.CONSUMER.CREATE.JOBS.spy.jobs.>": set(),
    # a lane's or a batch's durable by a fixed durable's name: its reconfiguration
    "$JS.API.CONSUMER.CREATE.JOBS.projector.jobs.*.submitted.*": set(),
    "$JS.API.CONSUMER.CREATE.JOBS.renderer.jobs.*.*.submitted": set(),
    "$JS.API.CONSUMER.DELETE.JOBS.conductor": set(),
    # another service's bucket
    "$KV.BATCH_STATE.b1": {C},
    "$KV.IDEMPOTENCY.t1.abc": {G},
    # a forged advisory would fail a job as `worker_lost`
    "$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.JOBS.renderer": set(),
    "usage.t1.document": {P},
    "pressroom.lanes.t1": {G},
}
"""Subjects beyond events, with the services that may publish on them."""


@pytest.fixture
def bus_server(tmp_path: Path) -> Iterator[NatsServer]:
    """A nats-server like the `nats_server` fixture's, whose refusals are this module's
    subject rather than a failure."""
    server = NatsServer(tmp_path / "nats")
    server.start()
    yield server
    server.stop()


def plain_url(server: NatsServer) -> str:
    return f"nats://127.0.0.1:{server.port}"


@pytest.fixture
async def log(bus_server: NatsServer) -> AsyncIterator[JetStreamContext]:
    """The streams, made as an operator's tool would (the tests' own identity)."""
    async with bus.open_bus(Settings(nats_url=bus_server.url), name="test") as (_, js):
        yield js


async def connect_as(server: NatsServer, role: Role) -> Client:
    settings = Settings(nats_url=plain_url(server), nats_nkey_seed=NATS_SEEDS[role])
    return await bus.connect(settings, name=f"test-{role}", role=role)


async def test_a_client_without_credentials_or_with_an_unknown_key_is_refused(
    bus_server: NatsServer,
):
    stranger = Settings(nats_url=plain_url(bus_server), nats_nkey_seed=buskeys.new_seed())
    for settings in (Settings(nats_url=plain_url(bus_server)), stranger):
        with pytest.raises(Exception, match="Authorization Violation"):
            await nats.connect(
                settings.nats_url, allow_reconnect=False, **buskeys.connect_options(settings)
            )
    await eventually(lambda: len(bus_server.refusals()) == 2, 10)


async def _publish(js: JetStreamContext, event: events.LogEvent) -> None:
    if isinstance(event, events.BatchEvent):
        await bus.publish_batch(js, event, timeout=2)
    else:
        await bus.publish(js, event, timeout=2)


async def test_each_identity_publishes_its_own_events_and_is_refused_every_other(
    bus_server: NatsServer, log: JetStreamContext
):
    refused = {role: await _try_everything(bus_server, role) for role in SERVICES}

    def all_logged() -> bool:
        logged = "\n".join(bus_server.refusals())
        return all(f'Subject "{s}"' in logged for names in refused.values() for s in names)

    await eventually(all_logged, 10)
    for role, names in refused.items():
        for subject in names:
            if subject.startswith(("jobs.", "batches.")):
                assert not await _stored(log, subject), (role, subject)


async def _try_everything(server: NatsServer, role: Role) -> list[str]:
    """Publish, as `role`, each sample event and each of `OTHERS`: what `role` may publish
    through `bus` (which waits for the log's acknowledgement), the rest as it is; return
    the subjects that NATS must have refused."""
    nc = await connect_as(server, role)
    js = nc.jetstream(timeout=2)
    refused: dict[str, bytes] = {}
    try:
        for publishers, event in samples(f"{role}1").values():
            if role in publishers:
                await _publish(js, event)
            else:
                refused[subject_of(event)] = _encoded(event)
        for subject, publishers in OTHERS.items():
            if role not in publishers:
                refused[subject] = b"{}"
        for subject, payload in refused.items():
            await _refused_publish(server, nc, subject, payload)
    finally:
        await nc.close()
    return list(refused)


async def _refused_publish(server: NatsServer, nc: Client, subject: str, payload: bytes) -> None:
    """Publish where the client may not, until the server has logged the refusal. Each is
    confirmed before the next: under load, publishes buffered by nats-py were seen lost
    (14 of a role's 40 refusals logged, CI of 2026-12-03), which would read as refusals
    that never happened."""
    line = f'Subject "{subject}"'

    async def logged() -> bool:
        if any(line in refusal for refusal in server.refusals()):
            return True
        with contextlib.suppress(nats.errors.Error, TimeoutError):
            await nc.publish(subject, payload)
            await nc.flush(timeout=2)
        return False

    await eventually(logged, 10, f"the refusal of {subject!r} in the server's log", interval=0.01)


def _encoded(event: events.LogEvent) -> bytes:
    if isinstance(event, events.BatchEvent):
        return events.encode_batch(event)
    return events.encode(event)


async def _stored(js: JetStreamContext, subject: str) -> bool:
    try:
        await js.get_last_msg(subjects.STREAM, subject)
    except nats.js.errors.NotFoundError:
        return False
    return True


async def test_no_identity_reads_another_s_replies_or_the_whole_bus(bus_server: NatsServer):
    forbidden = {
        G: ["_INBOX_renderer.>", "_INBOX.>", ">"],
        R: ["_INBOX_projector.>", "_INBOX_gateway.x", "jobs.>", ">"],
        P: ["_INBOX_renderer.>", "jobs.>", "$JS.EVENT.>"],
        N: ["_INBOX_conductor.>", "batches.>"],
        C: ["_INBOX_gateway.>", "pressroom.lanes.*"],
    }
    for role, names in forbidden.items():
        nc = await connect_as(bus_server, role)
        try:
            for subject in names:
                await nc.subscribe(subject)
            await nc.flush()
        finally:
            await nc.close()

    def all_logged() -> bool:
        logged = "\n".join(bus_server.refusals())
        wanted = [s for names in forbidden.values() for s in names]
        return all(f'Subscription Violation - Subject "{s}"' in logged for s in wanted)

    await eventually(all_logged, 10)


async def test_only_gateways_may_read_the_copy_of_the_api_keys(bus_server: NatsServer):
    gateway = await connect_as(bus_server, G)
    try:
        copy = await keymirror.open_bucket(gateway.jetstream(timeout=5), Settings())
        await copy.put("key.k1", b"{}")
        assert (await copy.get("key.k1")).value == b"{}"
    finally:
        await gateway.close()
    for role in (R, P, N, C):
        nc = await connect_as(bus_server, role)
        try:
            with pytest.raises(Exception):  # noqa: B017  # refused: a timeout or an error
                await nc.jetstream(timeout=2).key_value(subjects.KEY_DIRECTORY)
        finally:
            await nc.close()

    def refused() -> bool:
        logged = "\n".join(bus_server.refusals())
        return logged.count(f'Subject "$JS.API.STREAM.INFO.KV_{subjects.KEY_DIRECTORY}"') >= 4

    await eventually(refused, 10, "every other identity refused")


async def test_a_renderer_cannot_pass_a_submission_off_as_its_result(stack: Stack):
    """The renderer may publish `done` for any job; a submission on that subject (to make
    a job for any tenant) is no event of that subject's, and readers drop it."""
    forged_id = "forged1"
    forged = events.JobSubmitted(job_id=forged_id, tenant=stack.tenant.id, html="<p>x</p>")
    renderer = replace(stack.settings, nats_nkey_seed=NATS_SEEDS[R])
    nc = await bus.connect(renderer, name="forger", role=R)
    try:
        js = nc.jetstream(timeout=2)
        ack = await js.publish(subjects.quiet_ends(forged_id, "done"), events.encode(forged))
        assert ack.seq
    finally:
        await nc.close()
    # The projector reads the log in order: by the time a later job is done, it has seen
    # the forged message.
    later = await stack.submit({"html": "<p>later</p>"})
    assert (await stack.finished(later["id"]))["status"] == "done"
    async with stack.client.get(f"{stack.url}/jobs/{forged_id}") as response:
        assert response.status == 404, await response.text()

"""Fail jobs whose render deliveries ran out without anyone saying so.

The renderer finalizes a job itself when an attempt fails (it publishes `failed`, then
terms). A worker that dies on every attempt never does: JetStream stops redelivering after
`max_deliver` and only emits a MAX_DELIVERIES advisory. `bus.ensure_stream` keeps those
advisories in a stream; this loop reads them, finds the job from the original `submitted`
message and publishes `failed` ("worker_lost") for it.

Handling is idempotent, because advisories can fire twice (nats-server #8156, before
2.12.9 / 2.14.1) and are redelivered until acked: a job already terminal in Postgres is
skipped, and every terminal event of a job shares one dedup id, so a racing second
`failed` (or a real `done`) is dropped by JetStream and the projector never regresses.

nats-server 2.15.1 emits the advisory only when the renderer consumer next receives a pull
request, so it arrives once any renderer is fetching again; the reconciler covers the
case where none ever does.
"""

from __future__ import annotations

import asyncio
import logging

import asyncpg
import msgspec
from nats.aio.msg import Msg
from nats.js import JetStreamContext

from services.core.database import db
from services.core.log import bus
from services.core.model import events, subjects
from services.core.model.errors import NotFound, Unavailable
from services.core.model.errortypes import ErrorType
from services.core.model.status import TERMINAL
from services.core.runtime import metrics

log = logging.getLogger(__name__)

BATCH = 64
RETRY_DELAY = 2.0
"""Seconds before an advisory whose handling hit NATS or Postgres trouble comes back."""


class MaxDeliveries(msgspec.Struct):
    """The fields we use of `io.nats.jetstream.advisory.v1.max_deliver` (others ignored)."""

    stream_seq: int
    deliveries: int


_decoder = msgspec.json.Decoder(MaxDeliveries)


def worker_lost(job: events.JobSubmitted, deliveries: int) -> events.JobFailed:
    """The terminal event of a job whose every delivery ended without an answer."""
    return events.JobFailed(
        job_id=job.job_id,
        tenant=job.tenant,
        attempt=deliveries,
        error=events.ErrorInfo(
            type=ErrorType.WORKER_LOST, message=f"gave up after {deliveries} attempts: worker lost"
        ),
        webhook_url=job.webhook_url,
    )


async def run(js: JetStreamContext, pool: asyncpg.Pool, stop: asyncio.Event) -> None:
    """Handle advisories until `stop` is set; each is acked only once it is dealt with."""
    sub = await bus.subscribe_advisories(js)
    try:
        while not stop.is_set():
            for msg in await bus.fetch(sub, BATCH):
                await handle(js, pool, msg)
    finally:
        await bus.close_subscription(sub)


async def handle(js: JetStreamContext, pool: asyncpg.Pool, msg: Msg) -> None:
    """Finalize the job one advisory names, then ack it; on NATS or Postgres trouble, nak
    it with a delay so it comes back (never raises for those)."""
    try:
        outcome = await finalize(js, pool, msg.data)
    except Unavailable as exc:
        log.warning("advisory %s: will retry: %s", msg.metadata.sequence.stream, exc)
        await msg.nak(delay=RETRY_DELAY)
        return
    metrics.FINALIZER_ADVISORIES.labels(outcome).inc()
    await msg.ack()


async def finalize(js: JetStreamContext, pool: asyncpg.Pool, payload: bytes) -> str:
    """Publish `failed` for the job of one advisory and wait for its `PubAck`.

    Returns the outcome: `failed` (published), `terminal` (the job had already ended) or
    `skipped` (no job to finalize: a bad advisory, or its message is gone from the log).
    """
    try:
        advisory = _decoder.decode(payload)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        log.error("ignoring an undecodable advisory: %s", exc)
        return "skipped"
    job = await _submitted(js, advisory.stream_seq)
    if job is None:
        return "skipped"
    if await db.job_status(pool, job.job_id) in TERMINAL:
        return "terminal"
    await bus.publish_terminal(js, worker_lost(job, advisory.deliveries))
    log.warning("job %s: %d deliveries, no answer: failed", job.job_id, advisory.deliveries)
    return "failed"


async def _submitted(js: JetStreamContext, seq: int) -> events.JobSubmitted | None:
    """The `submitted` event stored at `seq` in the job stream, None if it is not there
    (aged out: then the reconciler, which reads Postgres, is the one to act)."""
    try:
        with bus.map_bus_errors():
            raw = await js.get_msg(subjects.STREAM, seq)
    except NotFound:
        log.warning("advisory for stream seq %d: the message is no longer in the log", seq)
        return None
    try:
        event = events.decode(raw.data or b"", subject=raw.subject or "")
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        log.error("advisory for stream seq %d: undecodable message: %s", seq, exc)
        return None
    if not isinstance(event, events.JobSubmitted):
        log.error("advisory for stream seq %d names a %s event", seq, events.event_name(event))
        return None
    return event

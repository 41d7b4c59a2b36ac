"""The projector's loop: fetch a batch, apply it in one transaction, then ack it."""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field

import asyncpg
import msgspec
from nats.aio.msg import Msg
from nats.js import JetStreamContext

from services.core.database import db
from services.core.log import bus
from services.core.model import events, subjects
from services.core.model.errors import Refused, Unavailable
from services.core.runtime import lifecycle, metrics
from services.projector import batches, usage
from services.projector.apply import apply

log = logging.getLogger(__name__)

BATCH = 256
LINGER = 0.05
"""Seconds a partial batch waits for more events: one transaction then carries several
events (a job's `started` and `progress` often arrive within it), which costs the
projector and PostgreSQL far less CPU per event than one transaction each, for a lag of
50 ms. A batch holding a single job's end does not wait: its client may be waiting for
the row (`GET /jobs/{id}` after the stream said `done`), and a batch item's end, the
bulk of a busy log's ends, still lingers."""


def _decode(msg: Msg) -> events.LogEvent | None:
    try:
        return events.decode_log(msg.data, subject=msg.subject)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        log.error("skipping undecodable message %s: %s", msg.subject, exc)
        return None


@dataclass(frozen=True)
class Projection:
    """Where the projector writes, and what it needs to know to count usage."""

    js: JetStreamContext
    pool: asyncpg.Pool
    free_tier: int
    progress_sent: dict[str, float] = field(default_factory=dict)  # batch -> monotonic


@dataclass
class Outbox:
    """What one transaction publishes before it commits: billable documents, and the
    `complete` of each batch whose items have all ended (one per batch)."""

    billable: list[events.DocumentUsed] = field(default_factory=list)
    complete: dict[str, events.BatchComplete] = field(default_factory=dict)
    progress: dict[str, events.BatchProgress] = field(default_factory=dict)


async def apply_batch(target: Projection, msgs: list[Msg], *, clean: bool = False) -> None:
    """Apply `msgs` in stream order, all or nothing; with `clean`, each event as
    `events.storable` makes it (for events logged before the log carried no NUL).

    Billable documents (to the USAGE stream) and completed batches are published before
    the transaction commits: a crash in between repeats the batch, whose republication
    carries the same idempotency keys and dedup ids.
    """
    outbox = Outbox()
    async with db.transaction(target.pool) as conn:
        for msg in msgs:
            event = _decode(msg)
            if event is not None:
                await _apply_one(target, conn, msg, event, outbox, clean=clean)
        reported = _due(target, outbox)
        await asyncio.gather(
            *(bus.publish_usage(target.js, used) for used in outbox.billable),
            *(batches.publish_complete(target.js, done) for done in outbox.complete.values()),
            *(bus.publish_batch(target.js, progress) for progress in reported),
        )


PROGRESS_EVERY = 5.0
"""Seconds between two progress reports of one batch (from one projector)."""


def _due(target: Projection, outbox: Outbox) -> list[events.BatchProgress]:
    """The progress reports to publish now: the latest of each batch not yet complete
    whose last report is `PROGRESS_EVERY` old (a lost one is no loss: the next, or the
    batch's end, says more)."""
    now = time.monotonic()
    due = []
    for batch_id, progress in outbox.progress.items():
        sent = target.progress_sent.get(batch_id)
        if batch_id in outbox.complete or (sent is not None and now - sent < PROGRESS_EVERY):
            continue
        target.progress_sent[batch_id] = now
        due.append(progress)
    if len(target.progress_sent) > 10_000:  # forget batches reported long ago
        oldest = sorted(target.progress_sent, key=target.progress_sent.__getitem__)
        for batch_id in oldest[:5_000]:
            del target.progress_sent[batch_id]
    return due


async def _apply_one(
    target: Projection,
    conn: asyncpg.Connection,
    msg: Msg,
    event: events.LogEvent,
    outbox: Outbox,
    *,
    clean: bool,
) -> None:
    """Apply one event of the log: a batch's own, or a job's (which may be an item)."""
    seq, at = msg.metadata.sequence.stream, msg.metadata.timestamp
    if isinstance(event, events.BatchEvent):
        event = batches.storable(event) if clean else event
        if await batches.apply(conn, seq, event, at):
            metrics.EVENTS_PROJECTED.labels(batches.tag(event)).inc()
        return
    event = events.storable(event) if clean else event
    applied = await apply(conn, seq, event, at)
    if applied.new:
        metrics.EVENTS_PROJECTED.labels(events.event_name(event)).inc()
    if applied.counted is not None:
        outbox.billable += usage.billable(applied.counted, target.free_tier)
    followed = await batches.follow_item(conn, event, applied, at)
    if isinstance(followed, events.BatchComplete):
        outbox.complete[followed.batch_id] = followed
    elif followed is not None:
        outbox.progress[followed.batch_id] = followed


async def _ack_all(msgs: list[Msg]) -> None:
    for msg in msgs:
        await msg.ack()


async def run(target: Projection, stop: asyncio.Event) -> None:
    """Project until `stop` is set.

    While Postgres is down the batch is held and retried, so nothing is skipped; JetStream
    redelivers whatever this process held if it dies.
    """
    sub = await bus.subscribe(target.js, subjects.PROJECTOR)
    try:
        while not stop.is_set():
            msgs = await _next_batch(sub, stop)
            if msgs:
                await _apply_until_stored(target, msgs, stop)
    finally:
        await bus.close_subscription(sub)


async def _next_batch(sub: JetStreamContext.PullSubscription, stop: asyncio.Event) -> list[Msg]:
    """The next events: a first few, then whatever else arrived within `LINGER`."""
    msgs = await bus.fetch(sub, BATCH)
    if msgs and len(msgs) < BATCH and not any(subjects.single_job_end(m.subject) for m in msgs):
        await lifecycle.pause(stop, LINGER)
        msgs += await bus.fetch(sub, BATCH - len(msgs), timeout=0.01)
    return msgs


async def _apply_or_skip(target: Projection, msgs: list[Msg]) -> None:
    """Apply `msgs` in one transaction; if PostgreSQL refuses one of them, apply them one
    by one and skip the refused ones (logged and counted: the log still holds them, and
    `pressroom projector --rebuild` replays them once the cause is fixed)."""
    try:
        await apply_batch(target, msgs)
        return
    except Refused:  # PostgreSQL refuses an event itself: retrying cannot help
        pass
    for msg in msgs:
        try:
            try:
                await apply_batch(target, [msg])
            except Refused:
                # A NUL in a string, the one refusal known (the log carries none since
                # events.encode makes events storable; older events may): store it with
                # U+FFFD instead rather than leave the job without its event.
                await apply_batch(target, [msg], clean=True)
        except Refused as exc:
            kind = subjects.kind_of(msg.subject)
            log.error(
                "skipping event %d (%s): PostgreSQL refuses it: %s",
                msg.metadata.sequence.stream, msg.subject, exc,
            )  # fmt: skip
            metrics.EVENTS_SKIPPED.labels(kind).inc()


async def _apply_until_stored(target: Projection, msgs: list[Msg], stop: asyncio.Event) -> None:
    delay = 0.5
    while True:
        try:
            await _apply_or_skip(target, msgs)
        except Unavailable as exc:
            log.warning("PostgreSQL or NATS unavailable, holding %d events: %s", len(msgs), exc)
            for msg in msgs:
                await msg.in_progress()
            if stop.is_set():
                return  # unacked: JetStream redelivers them to the next projector
            await lifecycle.pause(stop, delay)
            delay = min(delay * 2, 10.0)
            continue
        await _ack_all(msgs)
        return

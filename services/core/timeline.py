"""Reading one job's events back from the log (the stream, not the projection)."""

from __future__ import annotations

import contextlib

import msgspec
from nats.js import JetStreamContext
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy
from nats.js.errors import NotFoundError

from services.core import bus, events

_TERMINAL_TAGS = ("cancelled", "done", "failed")


async def job_events(js: JetStreamContext, job_id: str) -> list[tuple[int, events.AnyEvent]]:
    """Every event of `job_id` still in the stream, as (stream sequence, event), in order.

    Uses a short-lived ephemeral consumer filtered on the job's subjects; the server's
    subject index keeps this cheap however long the stream is.
    """
    config = ConsumerConfig(
        ack_policy=AckPolicy.NONE,
        deliver_policy=DeliverPolicy.ALL,
        inactive_threshold=10.0,
        mem_storage=True,
    )
    sub = await js.pull_subscribe(events.subject(job_id, ">"), stream=events.STREAM, config=config)
    found: list[tuple[int, events.AnyEvent]] = []
    try:
        while True:
            msgs = await bus.fetch(sub, 256, timeout=0.5)
            for msg in msgs:
                with contextlib.suppress(msgspec.DecodeError, msgspec.ValidationError):
                    found.append((msg.metadata.sequence.stream, events.decode(msg.data)))
            if not msgs or msgs[-1].metadata.num_pending == 0:
                return found
    finally:
        await bus.close_subscription(sub)


async def last_event(
    js: JetStreamContext, job_id: str, tag: str, *, direct: bool = False
) -> events.AnyEvent | None:
    """The job's latest event of type `tag` in the stream, or None.

    `direct` asks with a direct get, which any replica of the stream answers without the
    JetStream API's JSON (about half the server's CPU): on a replicated stream the answer
    can lag the leader's, so only callers that tolerate a slightly old answer use it.
    """
    try:
        raw = await js.get_last_msg(events.STREAM, events.subject(job_id, tag), direct=direct)
    except NotFoundError:
        return None
    try:
        return events.decode(raw.data or b"")
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None


async def terminal_event(
    js: JetStreamContext, job_id: str, *, direct: bool = False
) -> events.AnyEvent | None:
    """The job's terminal event in the log (cancelled, done or failed), if any."""
    for tag in _TERMINAL_TAGS:
        event = await last_event(js, job_id, tag, direct=direct)
        if event is not None:
            return event
    return None

"""Reading one job's events back from the log (the stream, not the projection)."""

from __future__ import annotations

import contextlib
import datetime as dt
from typing import Any, cast

import msgspec
from nats.js import JetStreamContext

# `bus` imports this module too: only its functions are used here, at call time.
from services.core import bus, events
from services.core.errors import NotFound
from services.core.status import JobStatus

# A terminal event's tag is the status it gives its job.
_TERMINAL_TAGS = (JobStatus.CANCELLED, JobStatus.DONE, JobStatus.FAILED)


Stored = tuple[int, dt.datetime, events.AnyEvent]
"""An event as the log holds it: (stream sequence, when the log stored it, the event)."""


async def job_events(js: JetStreamContext, job_id: str) -> list[Stored]:
    """Every event of `job_id` still in the stream, in order.

    One message get per event ("the next message at or after this sequence on the job's
    subjects"), so reading a timeline leaves no state on the server: a dashboard polling
    timelines cannot pile up consumers, as an ephemeral consumer per call would.
    """
    found: list[Stored] = []
    seq = 1
    subjects = events.subject(job_id, ">")
    while True:
        try:
            with bus.map_bus_errors():
                raw = await js.get_msg(events.STREAM, seq=seq, subject=subjects, next=True)
        except NotFound:
            return found
        seq = int(raw.seq or seq) + 1
        with contextlib.suppress(msgspec.DecodeError, msgspec.ValidationError):
            stored_at = cast(dt.datetime, raw.time)  # the API always sends a message's time
            found.append((seq - 1, stored_at, events.decode(raw.data or b"")))


async def last_event(
    js: JetStreamContext, job_id: str, tag: str, *, direct: bool = False
) -> events.AnyEvent | None:
    """The job's latest event of type `tag` in the stream, or None.

    `direct` asks with a direct get, which any replica of the stream answers without the
    JetStream API's JSON (about half the server's CPU): on a replicated stream the answer
    can lag the leader's, so only callers that tolerate a slightly old answer use it.
    """
    try:
        with bus.map_bus_errors():
            raw = await js.get_last_msg(events.STREAM, events.subject(job_id, tag), direct=direct)
    except NotFound:
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


async def first_terminal_seq(js: JetStreamContext, job_id: str) -> int | None:
    """The stream sequence of the job's first terminal event, None if it has none: the
    one that counts, whatever a later copy says (see `bus.publish_terminal`)."""
    firsts = []
    for tag in _TERMINAL_TAGS:
        try:
            with bus.map_bus_errors():
                raw = await js.get_msg(
                    events.STREAM, seq=1, subject=events.subject(job_id, tag), next=True
                )
        except NotFound:
            continue
        if raw.seq is not None:
            firsts.append(int(raw.seq))
    return min(firsts, default=None)


async def batch_submission(
    js: JetStreamContext, batch_id: str, *, direct: bool = False
) -> events.BatchSubmitted | None:
    """The batch's `submitted` event (its shared template and options), None if the log
    holds none."""
    try:
        with bus.map_bus_errors():
            raw = await js.get_last_msg(
                events.STREAM, events.batch_subject(batch_id, "submitted"), direct=direct
            )
    except NotFound:
        return None
    try:
        event = events.decode_log(raw.data or b"")
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None
    return event if isinstance(event, events.BatchSubmitted) else None


BatchStored = tuple[int, dt.datetime, events.AnyBatchEvent]


async def batch_events(js: JetStreamContext, batch_id: str) -> list[BatchStored]:
    """Every event of the batch itself still in the stream, in order (its items' events
    are theirs: `job_events`). Read like `job_events`, one message get per event."""
    found: list[BatchStored] = []
    seq = 1
    subjects = events.batch_subject(batch_id, ">")
    while True:
        try:
            with bus.map_bus_errors():
                raw = await js.get_msg(events.STREAM, seq=seq, subject=subjects, next=True)
        except NotFound:
            return found
        seq = int(raw.seq or seq) + 1
        with contextlib.suppress(msgspec.DecodeError, msgspec.ValidationError):
            event = events.decode_log(raw.data or b"")
            if isinstance(event, events.BatchEvent):
                found.append((seq - 1, cast(dt.datetime, raw.time), cast(Any, event)))

"""Reading a job's or a batch's events back from the log (the stream, not the projection)."""

from __future__ import annotations

import contextlib
import datetime as dt
from collections.abc import AsyncIterator
from typing import Any, cast

import msgspec
from nats.js import JetStreamContext
from nats.js.api import RawStreamMsg

from services.core.log.buserrors import map_bus_errors
from services.core.model import events, subjects
from services.core.model.errors import NotFound
from services.core.model.status import JobStatus

# A terminal event's tag is the status it gives its job.
_TERMINAL_TAGS = (JobStatus.CANCELLED, JobStatus.DONE, JobStatus.FAILED)


Stored = tuple[int, dt.datetime, events.AnyEvent]
"""An event as the log holds it: (stream sequence, when the log stored it, the event)."""


async def messages(
    js: JetStreamContext, wanted: str, start: int = 1
) -> AsyncIterator[RawStreamMsg]:
    """Every message on `wanted` (subjects, wildcards allowed) still in the stream from
    sequence `start` on, in order.

    One message get per message ("the next message at or after this sequence on these
    subjects"), so reading a timeline leaves no state on the server: a dashboard polling
    timelines cannot pile up consumers, as an ephemeral consumer per call would.
    """
    seq = start
    while True:
        try:
            with map_bus_errors():
                raw = await js.get_msg(subjects.STREAM, seq=seq, subject=wanted, next=True)
        except NotFound:
            return
        seq = int(raw.seq or seq) + 1
        yield raw


def _stored_at(raw: RawStreamMsg) -> dt.datetime:
    return cast(dt.datetime, raw.time)  # the API always sends a message's time


async def job_events(js: JetStreamContext, job_id: str) -> list[Stored]:
    """Every event of `job_id` still in the stream, in order."""
    found: list[Stored] = []
    async for raw in messages(js, subjects.subject(job_id, ">")):
        with contextlib.suppress(msgspec.DecodeError, msgspec.ValidationError):
            found.append(
                (
                    int(raw.seq or 0),
                    _stored_at(raw),
                    events.decode(raw.data or b"", subject=raw.subject or ""),
                )
            )
    return found


async def last_event(
    js: JetStreamContext, job_id: str, tag: str, *, direct: bool = False
) -> events.AnyEvent | None:
    """The job's latest event of type `tag` in the stream, or None.

    `direct` asks with a direct get, which any replica of the stream answers without the
    JetStream API's JSON (much of the server's CPU): on a replicated stream the answer
    can lag the leader's, so only callers that tolerate a slightly old answer use it.
    """
    wanted = [subjects.subject(job_id, tag)]
    if subjects.batch_of(job_id) is None:
        if tag == "submitted":
            # A single job's submission carries its tenant's lane token; before lanes, none.
            wanted.insert(0, subjects.subject(job_id, "submitted.*"))
        elif tag in _TERMINAL_TAGS:
            wanted.insert(0, subjects.quiet_ends(job_id, tag))  # a job without a webhook
    return await _last_of_first(js, wanted, direct)


async def _last_of_first(
    js: JetStreamContext, wanted: list[str], direct: bool
) -> events.AnyEvent | None:
    """The event of the last message on the first of `wanted` (subjects, wildcards
    allowed) that has any; None if none has, or that message does not decode."""
    for subject in wanted:
        try:
            with map_bus_errors():
                raw = await js.get_last_msg(subjects.STREAM, subject, direct=direct)
        except NotFound:
            continue
        try:
            return events.decode(raw.data or b"", subject=raw.subject or "")
        except (msgspec.DecodeError, msgspec.ValidationError):
            return None
    return None


async def terminal_event(
    js: JetStreamContext, job_id: str, *, direct: bool = False
) -> events.AnyEvent | None:
    """The job's terminal event in the log (cancelled, done or failed), if any.

    A single job without a webhook ends on `jobs.<id>.<tag>.quiet`: one look at the last
    of those (whichever tag) comes first, then one for each tag without the token (a job
    with a webhook, a batch's item, an end logged before the token existed)."""
    wanted = [subjects.subject(job_id, tag) for tag in _TERMINAL_TAGS]
    if subjects.batch_of(job_id) is None:
        wanted.insert(0, subjects.quiet_ends(job_id))
    return await _last_of_first(js, wanted, direct)


async def first_terminal_seq(js: JetStreamContext, job_id: str) -> int | None:
    """The stream sequence of the job's first terminal event, None if it has none: the
    one that counts, whatever a later copy says (see `bus.publish_terminal`)."""
    wanted = [subjects.subject(job_id, tag) for tag in _TERMINAL_TAGS]
    if subjects.batch_of(job_id) is None:
        wanted.append(subjects.quiet_ends(job_id))
    return await _first_seq(js, wanted)


async def first_batch_terminal_seq(js: JetStreamContext, batch_id: str) -> int | None:
    """The stream sequence of the batch's first terminal event, None if it has none."""
    return await _first_seq(js, [subjects.batch_subject(batch_id, tag) for tag in _TERMINAL_TAGS])


async def _first_seq(js: JetStreamContext, wanted: list[str]) -> int | None:
    """The lowest stream sequence of a message on any of `wanted`, None if none."""
    firsts = []
    for subject in wanted:
        try:
            with map_bus_errors():
                raw = await js.get_msg(subjects.STREAM, seq=1, subject=subject, next=True)
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
        with map_bus_errors():
            raw = await js.get_last_msg(
                subjects.STREAM, subjects.batch_subject(batch_id, "submitted"), direct=direct
            )
    except NotFound:
        return None
    try:
        event = events.decode_log(raw.data or b"", subject=raw.subject or "")
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None
    return event if isinstance(event, events.BatchSubmitted) else None


BatchStored = tuple[int, dt.datetime, events.AnyBatchEvent]


async def batch_events(js: JetStreamContext, batch_id: str) -> list[BatchStored]:
    """Every event of the batch itself still in the stream, in order (its items' events
    are theirs: `job_events`)."""
    found: list[BatchStored] = []
    async for raw in messages(js, subjects.batch_subject(batch_id, ">")):
        with contextlib.suppress(msgspec.DecodeError, msgspec.ValidationError):
            event = events.decode_log(raw.data or b"", subject=raw.subject or "")
            if isinstance(event, events.BatchEvent):
                found.append((int(raw.seq or 0), _stored_at(raw), cast(Any, event)))
    return found

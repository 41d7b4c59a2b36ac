"""Live updates: `GET /jobs/{id}/stream` and `GET /batches/{id}/stream` (Server-Sent Events).

Fed from the log. Every message sent is read from the JOBS stream by sequence (one
message get at a time, as `timeline.messages` reads a timeline: no consumer is left on the
server), and its SSE `id:` is that stream sequence, so `Last-Event-ID` resumes exactly
after it. A core NATS subscription on the same subjects is only a bell: it wakes the
stream at once when something is published, and the log is read again; a quiet stream
reads it anyway every `KEEP_ALIVE` seconds, when it also sends `: keep-alive`, in case a
bell was lost while NATS reconnected. The bell is rung before the log is first read, so
nothing published after that read goes unheard; but it can ring before the stream has
stored the message (`settle.py`), so a read after a bell that found nothing new is made
again after short pauses that double, until the log shows something or the pauses reach
a second (a message JetStream dropped as a duplicate rings too).

A job stream closes after the job's terminal event; a batch stream after the batch's,
which follows a last `progress` message. Each tenant has at most `PRESSROOM_MAX_STREAMS`
open in one gateway (`429 too_many_streams` past that); a stream whose client has gone
gives its slot and its subscriptions back within `TICK`, and every stream ends when the
gateway shuts down (`on_shutdown`), so shutting down never waits on a client.

A stream is only as good as the key that opened it: before each step it asks the key
`Directory` again (`recheck`), and the Directory wakes the streams of a key the moment it
learns the key was revoked (here at once, from another gateway within
`PRESSROOM_AUTH_REFRESH`). Such a stream ends with a last `error` message carrying the
same `{"error": {...}}` a request would get (`unauthorized`, `forbidden`), with no `id:`.

Size: the job and batch streams share the bell, the log reads, the key recheck and the SSE
writing, which are most of the module; a split by stream would divide that one loop.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import datetime as dt
import logging
import time
from collections.abc import AsyncIterator, Iterable
from typing import Any, Protocol, cast

import msgspec
from aiohttp import web
from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.aio.subscription import Subscription
from nats.js.api import RawStreamMsg

from services.core.database import db
from services.core.log import bus, timeline
from services.core.model import events, subjects
from services.core.model.errors import (
    Forbidden,
    NotFound,
    RequestError,
    TooManyStreams,
    Unauthorized,
    Unavailable,
)
from services.core.model.numbers import bounded_int
from services.core.model.status import TERMINAL, BatchStatus, JobStatus
from services.gateway import batches, jobs
from services.gateway.auth import DIRECTORY, Caller, caller_of, guarded
from services.gateway.headers import header
from services.gateway.keys import JS, NATS, POOL, SETTINGS, STORAGE
from services.gateway.postgres import unavailable_without_postgres
from services.gateway.requests import BATCH_ID, JOB_ID
from services.gateway.settle import Settle

log = logging.getLogger(__name__)

KEEP_ALIVE = 15.0
"""Seconds of quiet before a `: keep-alive` comment (proxies close idle connections)."""
TICK = 1.0
"""How often a quiet stream checks that its client is still there."""
PROGRESS_EVERY = 1.0
"""A batch stream sends `progress` at most this often, s."""
PROGRESS_WATCH = 5.0
"""How long after the last bell a batch stream keeps reading its counts: the projection
counts an item's end a moment after the log holds it."""
MAX_SEQUENCE = 2**64 - 1
"""Largest stream sequence JetStream has (an unsigned 64-bit integer)."""

SCOPE = "jobs:read"
"""The scope a key needs to open and keep a stream."""

_encoder = msgspec.json.Encoder()


class Bell:
    """Core NATS subscriptions that wake a stream when a message arrives on its subjects."""

    def __init__(self) -> None:
        self._rang = asyncio.Event()
        self._subs: list[Subscription] = []

    async def listen(self, nc: Client, wanted: Iterable[str]) -> None:
        with bus.map_bus_errors("cannot follow the log"):
            for subject in wanted:
                self._subs.append(await nc.subscribe(subject, cb=self._on_message))

    async def _on_message(self, msg: Msg) -> None:
        self._rang.set()

    def ring(self) -> None:
        self._rang.set()

    async def wait(self, timeout: float) -> bool:
        """Whether it rang, at most `timeout` s from now (and it is quiet again)."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout):
                await self._rang.wait()
        rang = self._rang.is_set()
        self._rang.clear()
        return rang

    async def close(self) -> None:
        for sub in self._subs:
            with contextlib.suppress(Exception):
                await sub.unsubscribe()
        self._subs.clear()


class Streams:
    """The open streams of one gateway: a bound per tenant, and an end for all of them."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.closing = False
        self._open: collections.Counter[str] = collections.Counter()
        self._bells: set[Bell] = set()
        self._by_key: collections.defaultdict[str, set[Bell]] = collections.defaultdict(set)

    def count(self, tenant: str) -> int:
        return self._open[tenant]

    @contextlib.asynccontextmanager
    async def open(self, caller: Caller, nc: Client, wanted: list[str]) -> AsyncIterator[Bell]:
        """A slot of the caller's tenant and a bell on `wanted` (subjects), both given back on
        exit; the bell also rings when the caller's key changes (`keys_changed`)."""
        tenant = caller.tenant
        if self.closing:
            raise Unavailable("the gateway is shutting down; reconnect to another")
        if self._open[tenant] >= self.limit:
            raise TooManyStreams(
                f"at most {self.limit} streams may be open at once (PRESSROOM_MAX_STREAMS)",
                retry_after=1,
            )
        self._open[tenant] += 1
        bell = Bell()
        self._bells.add(bell)
        self._by_key[caller.key_id or ""].add(bell)
        try:
            await bell.listen(nc, wanted)
            yield bell
        finally:
            self._bells.discard(bell)
            self._forget(caller.key_id or "", bell)
            await bell.close()
            self._open[tenant] -= 1

    def _forget(self, key_id: str, bell: Bell) -> None:
        bells = self._by_key[key_id]
        bells.discard(bell)
        if not bells:
            del self._by_key[key_id]

    def keys_changed(self, key_ids: set[str]) -> None:
        """Wake the streams opened with these keys: each checks its key again at once."""
        for key_id in key_ids:
            for bell in self._by_key.get(key_id, ()):
                bell.ring()

    def close_all(self) -> None:
        """End every stream (and refuse new ones): the gateway is shutting down."""
        self.closing = True
        for bell in self._bells:
            bell.ring()


STREAMS = web.AppKey("streams", Streams)


class Sse:
    """One `text/event-stream` answer."""

    def __init__(self, request: web.Request) -> None:
        self.request = request
        self.response = web.StreamResponse(
            headers={
                "Content-Type": "text/event-stream",
                "Cache-Control": "no-cache",
                "X-Accel-Buffering": "no",  # nginx would hold the messages back otherwise
            }
        )
        self.written = time.monotonic()

    async def start(self) -> None:
        await self.response.prepare(self.request)

    async def send(self, seq: int, name: str, data: Any) -> None:
        head = b"id: %d\nevent: %s\ndata: " % (seq, name.encode())
        await self._write(head + _encoder.encode(data) + b"\n\n")

    async def fail(self, error: Unauthorized | Forbidden) -> None:
        """A last `error` message, as a request would have been answered (no `id:`: a
        resume point stays the last event's)."""
        body = {"error": {"type": error.kind, "message": error.message}}
        await self._write(b"event: error\ndata: " + _encoder.encode(body) + b"\n\n")

    async def keep_alive(self) -> None:
        if self.quiet() >= KEEP_ALIVE:
            await self._write(b": keep-alive\n\n")

    def quiet(self) -> float:
        """Seconds since the last write."""
        return time.monotonic() - self.written

    def gone(self) -> bool:
        transport = self.request.transport
        return transport is None or transport.is_closing()

    async def _write(self, chunk: bytes) -> None:
        await self.response.write(chunk)
        self.written = time.monotonic()


class Feed(Protocol):
    """What a stream sends: `step` sends what is new (the bool: whether to read the log
    again) and returns True once the stream is over; `next_seq` is the stream sequence
    its next read of the log starts from."""

    next_seq: int

    async def step(self, sse: Sse, woke: bool) -> bool: ...


async def _refused(request: web.Request, sse: Sse) -> bool:
    """Whether the caller's key no longer allows the stream (revoked, or its scope gone);
    then the stream's last message says so."""
    caller = caller_of(request)
    try:
        request.app[DIRECTORY].recheck(caller, SCOPE)
    except (Unauthorized, Forbidden) as exc:
        log.info("stream %s of key %s ended: %s", request.path, caller.key_id, exc.message)
        await sse.fail(exc)
        return True
    return False


async def _follow(request: web.Request, sse: Sse, bell: Bell, feed: Feed) -> None:
    """Run the feed's step now, and again on each tick, until it ends the stream, the
    client goes, its key stops allowing it or the gateway shuts down. NATS or PostgreSQL
    away: the stream waits for them. A read after a bell that found nothing new is made
    again soon (module docstring)."""
    streams, read_at, woke = request.app[STREAMS], time.monotonic(), True
    chasing, settle = False, Settle()  # chasing: this read looks for a bell's message
    while not streams.closing and not sse.gone():
        if await _refused(request, sse):
            return
        seen = feed.next_seq
        try:
            if await feed.step(sse, woke):
                return
        except Unavailable as exc:
            log.info("stream %s waits: %s", request.path, exc.message)
        await sse.keep_alive()
        again = chasing and feed.next_seq == seen and not settle.spent
        pause = settle.pause() if again else None
        if pause is None:
            settle = Settle()
        chasing = await bell.wait(TICK if pause is None else pause) or pause is not None
        woke = chasing or time.monotonic() - read_at >= KEEP_ALIVE
        read_at = time.monotonic() if woke else read_at


async def _serve(request: web.Request, wanted: list[str], feed: Feed) -> web.StreamResponse:
    async with request.app[STREAMS].open(caller_of(request), request.app[NATS], wanted) as bell:
        sse = Sse(request)
        await sse.start()
        try:
            await _follow(request, sse, bell, feed)
        except ConnectionError:  # the client went away while we wrote
            pass
        except Exception:  # the answer has begun: no JSON error can follow it
            log.exception("stream %s ended by an error", request.path)
        return sse.response


def _last_event_id(request: web.Request) -> int:
    """The sequence to resume after (`Last-Event-ID`, or `?last_event_id=`), 0 if none."""
    for name, raw in (
        ("Last-Event-ID", header(request, "Last-Event-ID")),
        ("last_event_id", request.query.get("last_event_id")),
    ):
        if raw is not None:
            sequence = bounded_int(raw, 0, MAX_SEQUENCE)
            if sequence is None:
                raise RequestError(f"{name} must be a stream sequence", field=name)
            return sequence
    return 0


def _decoded(raw: RawStreamMsg) -> events.LogEvent | None:
    with contextlib.suppress(msgspec.DecodeError, msgspec.ValidationError):
        return events.decode_log(raw.data or b"", subject=raw.subject or "")
    return None


def _stored(raw: RawStreamMsg) -> tuple[int, dt.datetime]:
    return int(raw.seq or 0), cast(dt.datetime, raw.time)


# --- jobs ---------------------------------------------------------------------------------

_STATUS_AFTER: dict[type, JobStatus] = {
    events.JobSubmitted: JobStatus.QUEUED,
    events.JobStarted: JobStatus.RUNNING,
    events.JobRetrying: JobStatus.QUEUED,
    events.JobDone: JobStatus.DONE,
    events.JobFailed: JobStatus.FAILED,
    events.JobCancelled: JobStatus.CANCELLED,
}
"""The status each event gives its job; other events (webhook attempts, a deleted file)
leave it."""


class JobFeed:
    """A job's events after `after`, each with the job's status after it."""

    def __init__(self, request: web.Request, job_id: str, after: int) -> None:
        self.request, self.job_id, self.after = request, job_id, after
        self.next_seq = 1  # the whole timeline is read: the status is folded from it
        self.status = JobStatus.QUEUED

    async def step(self, sse: Sse, woke: bool) -> bool:
        if not woke:
            return False
        wanted = subjects.subject(self.job_id, ">")
        async for raw in timeline.messages(self.request.app[JS], wanted, self.next_seq):
            seq, at = _stored(raw)
            self.next_seq = seq + 1
            event = _decoded(raw)
            if not isinstance(event, events.Event):
                continue
            self.status = _STATUS_AFTER.get(type(event), self.status)
            if seq > self.after:
                await sse.send(seq, events.event_name(event), await self._data(seq, at, event))
            if isinstance(event, events.TERMINAL):
                return True
        return False

    async def _data(self, seq: int, at: dt.datetime, event: events.AnyEvent) -> Any:
        """The event as `GET /jobs/{id}/events` lists it, the status after it, and on
        `done` the signed download URL."""
        data: dict[str, Any] = msgspec.to_builtins(jobs.timeline_entry(seq, at, event))
        data["status"] = self.status
        if isinstance(event, events.JobDone):
            app = self.request.app
            data["url"] = await app[STORAGE].url(event.object_key, app[SETTINGS].url_ttl)
        return data


async def _check_job(request: web.Request, job_id: str) -> None:
    """`NotFound` unless the log holds the caller's submission of the job."""
    if JOB_ID.fullmatch(job_id):
        submitted = await timeline.last_event(request.app[JS], job_id, "submitted")
        if submitted is not None and submitted.tenant == caller_of(request).tenant:
            return
    raise NotFound(f"no job {job_id!r}")


async def job_stream(request: web.Request) -> web.StreamResponse:
    """`GET /jobs/{id}/stream`: the job's events as they happen (its history first)."""
    job_id = request.match_info["job_id"]
    after = _last_event_id(request)
    await _check_job(request, job_id)
    feed = JobFeed(request, job_id, after)
    return await _serve(request, [subjects.subject(job_id, ">")], feed)


# --- batches ------------------------------------------------------------------------------


def _ended(row: db.BatchRow, event: events.BatchTerminal, at: dt.datetime) -> db.BatchRow:
    """The row as the projector leaves it after the batch's terminal event."""
    error = event.error if isinstance(event, events.BatchFailed) else None
    return msgspec.structs.replace(
        row,
        status=BatchStatus(events.batch_event_name(event)),
        done=event.done,
        failed=event.failed,
        cancelled=event.cancelled,
        object_key=event.object_key,
        bytes=None if isinstance(event, events.BatchFailed) else event.bytes,
        error_type=error.type if error else None,
        error_message=error.message if error else None,
        finished_at=at,
    )


def _as_of(row: db.BatchRow, event: events.AnyBatchEvent, at: dt.datetime) -> db.BatchRow:
    """`row` with `event` applied: the projection may not have it yet when the log does."""
    if row.status.terminal:
        return row
    if isinstance(event, events.BATCH_TERMINAL):
        return _ended(row, event, at)
    if isinstance(event, events.BatchPaused):
        return msgspec.structs.replace(row, status=BatchStatus.PAUSED)
    if isinstance(event, events.BatchResumed):
        resumed = BatchStatus.RUNNING if row.started_at else BatchStatus.QUEUED
        return msgspec.structs.replace(row, status=resumed)
    return row


class BatchFeed:
    """A batch's own events after `after`, and `progress` while its counts change; each
    with the batch's document (`GET /batches/{id}`) as data."""

    def __init__(self, request: web.Request, submitted: events.BatchSubmitted, after: int):
        self.request, self.submitted, self.after = request, submitted, after
        self.next_seq, self.last_seq = 1, after
        self.sent: tuple[Any, ...] | None = None
        self.progress_at = self.watch_until = 0.0

    async def step(self, sse: Sse, woke: bool) -> bool:
        if woke:
            self.watch_until = time.monotonic() + PROGRESS_WATCH
            if await self._events(sse):
                return True
        await self._progress(sse)
        return False

    async def _events(self, sse: Sse) -> bool:
        wanted = subjects.batch_subject(self.submitted.batch_id, ">")
        async for raw in timeline.messages(self.request.app[JS], wanted, self.next_seq):
            seq, at = _stored(raw)
            self.next_seq = seq + 1
            event = _decoded(raw)
            if not isinstance(event, events.BatchEvent) or isinstance(event, events.BatchProgress):
                continue  # the projector's progress events: this stream makes its own
            if seq > self.after and await self._send(sse, seq, at, cast(Any, event)):
                return True
            if isinstance(event, events.BATCH_TERMINAL):
                return True
        return False

    async def _send(self, sse: Sse, seq: int, at: dt.datetime, event: events.AnyBatchEvent) -> bool:
        self.last_seq = seq
        document = await self._document(event, at)
        if isinstance(event, events.BATCH_TERMINAL):
            await sse.send(seq, "progress", document)
        await sse.send(seq, events.batch_event_name(event), document)
        return isinstance(event, events.BATCH_TERMINAL)

    async def _progress(self, sse: Sse) -> None:
        """`progress` when the counts changed, at most every `PROGRESS_EVERY` s, while the
        batch has news (`PROGRESS_WATCH`)."""
        now = time.monotonic()
        if now - self.progress_at < PROGRESS_EVERY or now > self.watch_until:
            return
        document = await self._document()
        counts = tuple(document[k] for k in ("status", "total", "done", "failed", "cancelled"))
        if counts != self.sent:
            self.sent, self.progress_at = counts, now
            await sse.send(self.last_seq, "progress", document)

    async def _document(
        self, event: events.AnyBatchEvent | None = None, at: dt.datetime | None = None
    ) -> dict[str, Any]:
        """The batch as `GET /batches/{id}` shows it, with `event` applied."""
        with unavailable_without_postgres("batch status is unavailable"):
            row = await db.get_batch(self.request.app[POOL], self.submitted.batch_id)
        if row is None or row.tenant_id != self.submitted.tenant:
            view = batches.queued_view(self.submitted)
        else:
            if event is not None and at is not None:
                row = _as_of(row, event, at)
            view = await batches.batch_view(self.request, row)
        document: dict[str, Any] = msgspec.to_builtins(view)
        return document


async def _submission(request: web.Request, batch_id: str) -> events.BatchSubmitted:
    """The caller's batch's submission; `NotFound` for any other id."""
    if BATCH_ID.fullmatch(batch_id):
        submitted = await timeline.batch_submission(request.app[JS], batch_id)
        if submitted is not None and submitted.tenant == caller_of(request).tenant:
            return submitted
    raise NotFound(f"no batch {batch_id!r}")


def _batch_subjects(batch_id: str) -> list[str]:
    """The batch's own events, and its items' ends (which move its counts)."""
    ends = [subjects.subject(f"{batch_id}.*", str(tag)) for tag in sorted(TERMINAL)]
    return [subjects.batch_subject(batch_id, ">"), *ends]


async def batch_stream(request: web.Request) -> web.StreamResponse:
    """`GET /batches/{id}/stream`: the batch's progress and events as they happen."""
    batch_id = request.match_info["batch_id"]
    after = _last_event_id(request)
    feed = BatchFeed(request, await _submission(request, batch_id), after)
    return await _serve(request, _batch_subjects(batch_id), feed)


async def _close_streams(app: web.Application) -> None:
    app[STREAMS].close_all()


def add_routes(app: web.Application) -> None:
    app[STREAMS] = Streams(app[SETTINGS].max_streams)
    app[DIRECTORY].watch(app[STREAMS].keys_changed)
    app.on_shutdown.append(_close_streams)
    app.router.add_get("/jobs/{job_id}/stream", guarded(SCOPE, job_stream))
    app.router.add_get("/batches/{batch_id}/stream", guarded(SCOPE, batch_stream))

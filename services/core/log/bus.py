"""JetStream adapter: connection, publishing, reading.

Each service connects as its own identity (`busaccess`, `buskeys`) and, at start, makes
the streams and its own durables where missing (`provision`), so a fresh NATS needs no
separate deploy step. Retention is by age, not work-queue: each service reads the same
log through its own durable consumer, and the log can be replayed. A second, small stream
keeps the renderer's MAX_DELIVERIES advisories for the projector's finalizer (advisories
are core NATS messages, lost when nobody listens).

Size: the services' one adapter to JetStream (connecting, provisioning, publishing,
reading), kept together so that every call goes through the same connection handling and
error mapping. The lanes' plumbing (`SinglesLanes`, `ring`, `durables`, `Lane`) is the part
that would split out next.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import logging
import ssl
from collections.abc import AsyncIterator
from typing import Any

import msgspec
import nats
from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.errors import AuthorizationError, MaxPayloadError
from nats.js import JetStreamContext
from nats.js.api import (
    ConsumerInfo,
)
from nats.js.errors import APIError

from services.core.log import busaccess, buskeys, provision, timeline, topology
from services.core.log.busaccess import Role
from services.core.log.buserrors import NATS_DOWN as NATS_DOWN
from services.core.log.buserrors import map_bus_errors as map_bus_errors
from services.core.model import events, subjects
from services.core.model.errors import (
    EventTooLarge,
    LogFull,
    NotFound,
    PressroomError,
    Unavailable,
)
from services.core.runtime import lifecycle, metrics, tracing
from services.core.runtime.settings import Settings, SettingsError

log = logging.getLogger(__name__)


class SinglesLanes:
    """Makes each tenant's durable of single jobs once per process, before the first job
    that needs it is published: a submission stored before its durable existed would still
    be delivered (the durable starts at the stream's first message), but only once the
    durable is there to be asked. Creating an existing durable with the same configuration
    is a no-op on the server, so gateways racing for a new tenant are harmless."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._made: set[str] = set()

    async def ensure(self, js: JetStreamContext, tenant: str) -> None:
        if tenant in self._made:
            return
        with map_bus_errors(f"cannot make the job lane of tenant {tenant}"):
            await js.add_consumer(subjects.STREAM, topology.singles_config(self.settings, tenant))
        self._made.add(tenant)

    def forget(self, tenant: str) -> None:
        """The durable is gone (deleted by hand): make it again on next use."""
        self._made.discard(tenant)


async def ring(nc: Client, tenant: str) -> None:
    """Tell idle renderers that `tenant` has a new single job (`subjects.LANE_BELL`). Never
    raises: the bell is a hint, and the job is already safe in the log."""
    with contextlib.suppress(Exception):
        await nc.publish(subjects.lane_bell(tenant), b"")


CONSUMERS_PER_PAGE = 256
"""What JetStream's consumer list answers at most at once."""


async def durables(js: JetStreamContext) -> AsyncIterator[ConsumerInfo]:
    """Every durable on the JOBS stream, with its state, read page by page."""
    offset = 0
    while True:
        with map_bus_errors("cannot list the log's durables"):
            page = await js.consumers_info(subjects.STREAM, offset=offset or None)
        for info in page:
            yield info
        if len(page) < CONSUMERS_PER_PAGE:
            return
        offset += len(page)


def outstanding(info: ConsumerInfo) -> int:
    """What a durable has yet to finish: pending, plus delivered and not acknowledged (what
    KEDA's nats-jetstream scaler counts of one durable)."""
    return (info.num_pending or 0) + (info.num_ack_pending or 0)


def renders_waiting(info: ConsumerInfo) -> bool:
    """Whether `info` is a durable renderers take work from (single jobs or items)."""
    name = info.name or ""
    return (
        name == subjects.RENDERER
        or name.startswith(subjects.SINGLES)
        or name.startswith(subjects.bulk_durable(""))
    )


async def _on_error(exc: Exception) -> None:
    log.warning("nats: %s", exc)


async def _on_disconnect() -> None:
    metrics.NATS_CONNECTED.set(0)
    log.warning("nats: disconnected, reconnecting")


async def _on_reconnect() -> None:
    metrics.NATS_CONNECTED.set(1)
    log.info("nats: reconnected")


async def connect(settings: Settings, *, name: str, role: Role = Role.ADMIN) -> Client:
    """Connect as `role`, with this service's credentials and over TLS as settings say
    (`buskeys.connect_options`); while NATS cannot be reached, keep trying (pods should
    not give up), but a NATS that refuses the credentials or the TLS handshake at start is
    a `SettingsError`: trying again cannot help, and the service stops saying why."""
    where = f"NATS at {buskeys.redacted(settings.nats_url)}"
    refused: asyncio.Future[Exception] = asyncio.get_running_loop().create_future()

    async def on_error(exc: Exception) -> None:
        if _refuses_client(exc) and not refused.done():
            refused.set_result(exc)
        await _on_error(exc)

    connecting = asyncio.ensure_future(
        nats.connect(
            buskeys.servers(settings),
            name=f"pressroom-{name}",
            max_reconnect_attempts=-1,
            reconnect_time_wait=1,
            connect_timeout=5,
            error_cb=on_error,
            disconnected_cb=_on_disconnect,
            reconnected_cb=_on_reconnect,
            inbox_prefix=busaccess.inbox(role),
            **buskeys.connect_options(settings),
        )
    )
    with map_bus_errors(f"cannot reach {where}"):
        either: set[asyncio.Future[Any]] = {connecting, refused}
        await asyncio.wait(either, return_when=asyncio.FIRST_COMPLETED)
        if not connecting.done():
            await lifecycle.cancelled(connecting)
            raise SettingsError(
                f"{where} refuses this service: {refused.result()} (check "
                "PRESSROOM_NATS_NKEY_SEED and the PRESSROOM_NATS_TLS_* settings)"
            )
        nc = connecting.result()
    metrics.NATS_CONNECTED.set(1)
    return nc


def _refuses_client(exc: Exception) -> bool:
    """Whether NATS refused the client itself (its credentials, or TLS), not just failed
    to answer."""
    return isinstance(exc, AuthorizationError | ssl.SSLError) or (
        "authorization violation" in str(exc).lower()
    )


@map_bus_errors()
async def ensure_stream(js: JetStreamContext, settings: Settings, role: Role = Role.ADMIN) -> None:
    """Make the streams and `role`'s durables (`provision.ensure`)."""
    await provision.ensure(js, settings, busaccess.GRANTS[role])


@contextlib.asynccontextmanager
async def open_bus(
    settings: Settings, *, name: str, role: Role = Role.ADMIN
) -> AsyncIterator[tuple[Client, JetStreamContext]]:
    """A client connected as `role` with the streams in place; drained on exit. A
    service passes its own role; tests and operators' tools (`Role.ADMIN`) may do
    anything."""
    nc = await connect(settings, name=name, role=role)
    try:
        js = nc.jetstream(timeout=5)
        await ensure_stream(js, settings, role)
        yield nc, js
    finally:
        with contextlib.suppress(Exception):
            await nc.drain()


async def publish_terminal(js: JetStreamContext, event: events.Terminal) -> bool:
    """Publish a job's terminal event unless the job has already ended; True if `event`
    is now stored.

    All terminal events of a job share one dedup id, which drops a racing second one for
    the duplicate window (`PRESSROOM_DEDUP_WINDOW`); the log itself is asked first, so a
    job that ended longer ago than that never gets a second, contradicting end (a late
    re-drive, a stale advisory). `Unavailable` when NATS does not answer.
    """
    ended = await timeline.terminal_event(js, event.job_id)
    if ended is not None:
        log.info(
            "job %s already ended %s; not publishing %s",
            event.job_id,
            events.event_name(ended),
            events.event_name(event),
        )
        return False
    stored = await publish(js, event)
    if stored:
        count_finished(event)
    return stored


def count_finished(event: events.Terminal) -> None:
    """`pressroom_jobs_finished_total` for a terminal event just stored."""
    error_type = event.error.type if isinstance(event, events.JobFailed) else "none"
    metrics.JOBS_FINISHED.labels(events.event_name(event), error_type).inc()


@map_bus_errors("cannot read the log's oldest message")
async def oldest_message_at(js: JetStreamContext) -> dt.datetime | None:
    """When the oldest message the log still holds was published (the server's clock);
    None when it holds none. Everything older has left it (`PRESSROOM_STREAM_MAX_AGE`)."""
    info = await js.stream_info(subjects.STREAM)
    if not info.state.messages:
        return None
    return (await js.get_msg(subjects.STREAM, seq=info.state.first_seq)).time


@map_bus_errors("NATS did not acknowledge the event")
async def publish(
    js: JetStreamContext,
    event: events.AnyEvent,
    *,
    timeout: float = 5.0,
    msg_id: str | None = None,
    after: int | None = None,
) -> bool:
    """Publish with its dedup id; True if stored now, False if it was a duplicate.

    `msg_id` replaces the event's own dedup id (`events.msg_id`), for a deliberate second
    copy of the same fact such as a re-driven submission. With `after`, the event is
    stored only if the job's latest event is still the one at stream sequence `after`
    (JetStream checks it as it stores: one round trip, where a read of the job's events
    and then a publish took two); `Moved` if another came since, and nothing is stored.
    Raises `Unavailable` when JetStream does not acknowledge within `timeout`.
    """
    headers = {"Nats-Msg-Id": msg_id or events.msg_id(event), **tracing.headers()}
    if after is not None:
        headers[EXPECTED_LAST_SEQUENCE] = str(after)
        headers[EXPECTED_LAST_SEQUENCE_OF] = subjects.job_filter(event.job_id)
    try:
        ack = await js.publish(
            events.subject_of(event),
            events.encode(event),
            timeout=timeout,
            stream=subjects.STREAM,
            headers=headers,
        )
    except (APIError, MaxPayloadError) as exc:
        if after is not None and isinstance(exc, APIError) and exc.err_code == WRONG_LAST_SEQUENCE:
            raise Moved(f"job {event.job_id} has events after {after}") from exc
        raise _refusal(exc, event) from exc
    return not ack.duplicate


EXPECTED_LAST_SEQUENCE = "Nats-Expected-Last-Subject-Sequence"
EXPECTED_LAST_SEQUENCE_OF = "Nats-Expected-Last-Subject-Sequence-Subject"
"""The subjects (wildcards allowed) whose latest message `EXPECTED_LAST_SEQUENCE` names,
instead of the published subject's own (nats-server 2.11 and later)."""
WRONG_LAST_SEQUENCE = 10071
"""JetStream's error code when the expected last sequence is not the last."""


class Moved(Exception):
    """A conditional publish (`publish(after=…)`) found later events: nothing was stored."""


@map_bus_errors("NATS did not acknowledge the batch event")
async def publish_batch(
    js: JetStreamContext, event: events.AnyBatchEvent, *, timeout: float = 5.0
) -> bool:
    """Publish a batch event with its dedup id; True if stored now, False if a duplicate."""
    try:
        ack = await js.publish(
            events.batch_subject_of(event),
            events.encode_batch(event),
            timeout=timeout,
            stream=subjects.STREAM,
            headers={"Nats-Msg-Id": events.batch_msg_id(event)},
        )
    except APIError as exc:
        if exc.err_code == MAX_BYTES_EXCEEDED:
            raise LogFull("the job log is full (PRESSROOM_STREAM_MAX_BYTES); retry later") from exc
        raise Unavailable(f"NATS refused the event: {exc.description or exc}") from exc
    return not ack.duplicate


MAX_BYTES_EXCEEDED = 10077
"""JetStream's error code when a stream with `DiscardPolicy.NEW` is full."""
MESSAGE_TOO_LARGE = 10054
"""JetStream's error code for a message over the stream's `max_msg_size`."""


def _refusal(exc: APIError | MaxPayloadError, event: events.AnyEvent) -> PressroomError:
    """The project's error for a publish JetStream (or the client) refused."""
    if isinstance(exc, MaxPayloadError) or exc.err_code == MESSAGE_TOO_LARGE:
        size = len(events.encode(event))
        return EventTooLarge(
            f"the job is {size} bytes as an event, over the log's limit for one message "
            "(PRESSROOM_STREAM_MAX_MSG_SIZE, at most NATS max_payload)",
            field="body",
        )
    if exc.err_code == MAX_BYTES_EXCEEDED:
        return LogFull("the job log is full (PRESSROOM_STREAM_MAX_BYTES); retry later")
    return Unavailable(f"NATS refused the event: {exc.description or type(exc).__name__}")


@map_bus_errors("NATS did not acknowledge the usage")
async def publish_usage(js: JetStreamContext, used: events.DocumentUsed) -> None:
    """Record one billable document on the USAGE stream (deduplicated by its key)."""
    await js.publish(
        events.usage_subject(used.tenant),
        msgspec.json.encode(used),
        timeout=5.0,
        stream=subjects.USAGE_STREAM,
        headers={"Nats-Msg-Id": used.idempotency_key},
    )


@map_bus_errors()
async def subscribe(js: JetStreamContext, durable: str) -> JetStreamContext.PullSubscription:
    """Bind to one of the durables made by `ensure_stream`."""
    return await js.pull_subscribe_bind(durable, stream=subjects.STREAM)


@map_bus_errors()
async def subscribe_advisories(js: JetStreamContext) -> JetStreamContext.PullSubscription:
    """Bind to the `finalizer` durable on the advisory stream."""
    return await js.pull_subscribe_bind(topology.FINALIZER, stream=topology.ADVISORY_STREAM)


async def fetch(
    sub: JetStreamContext.PullSubscription, batch: int, timeout: float = 1.0
) -> list[Msg]:
    """Up to `batch` messages; an empty list when none came within `timeout`.

    nats-py raises on an empty fetch, and while disconnected; both just mean "nothing now".
    """
    try:
        msgs: list[Msg] = await sub.fetch(batch, timeout=timeout)
    except TimeoutError:  # nats-py's timeouts are `TimeoutError`s too
        return []
    except NATS_DOWN as exc:
        log.warning("fetch failed: %s", exc)
        await asyncio.sleep(timeout)  # reconnecting: do not spin
        return []
    return msgs


async def decode_or_term(msg: Msg) -> events.AnyEvent | None:
    """The message's event; a message that is not one is terminated (redelivering it
    cannot help) and None returned."""
    try:
        return events.decode(msg.data, subject=msg.subject)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        log.error("terminating undecodable message on %s: %s", msg.subject, exc)
        await msg.term()
        return None


class Lane:
    """A durable read with no-wait pulls: the messages it has now, or none at once.

    nats-py's `fetch` waits for messages until its timeout; a renderer that chooses
    between several durables (interactive jobs first, then batches' items) must instead
    ask each for what it has right now. The pull answers on this lane's own inbox.
    """

    def __init__(self, nc: Client, durable: str) -> None:
        self.nc = nc
        self.durable = durable
        self._sub: Any = None
        self._next = f"$JS.API.CONSUMER.MSG.NEXT.{subjects.STREAM}.{durable}"

    async def take(self, count: int, timeout: float = 2.0) -> list[Msg]:
        """Up to `count` messages available now. `NotFound` when the durable is gone (the
        batch ended); `Unavailable` when NATS does not answer."""
        with map_bus_errors(f"cannot read {self.durable}"):
            if self._sub is None:
                self._sub = await self.nc.subscribe(self.nc.new_inbox())
            request = msgspec.json.encode({"batch": count, "no_wait": True})
            await self.nc.publish(self._next, request, reply=self._sub.subject)
            msgs: list[Msg] = []
            while len(msgs) < count:
                msg = await self._sub.next_msg(timeout)
                status = (msg.headers or {}).get("Status")
                if status is None:
                    msgs.append(msg)
                    continue
                if status == "503":  # no responders: the durable does not exist (any more)
                    raise NotFound(f"{self.durable} does not exist")
                break  # 404/408: nothing (more) now; 409: the server refused this pull
            return msgs

    async def close(self) -> None:
        if self._sub is not None:
            with contextlib.suppress(Exception):
                await self._sub.unsubscribe()
            self._sub = None


async def close_subscription(sub: JetStreamContext.PullSubscription) -> None:
    """Unsubscribe before the client drains (a drain after fetch hangs otherwise)."""
    with contextlib.suppress(Exception):
        await sub.unsubscribe()

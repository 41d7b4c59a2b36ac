"""The notifier: one signed webhook per terminal event, retried on a schedule.

Attempt n (JetStream's delivery count) is sent; on failure the message is naked with delay
`schedule[n]` until the schedule runs out. Every attempt of a job's webhook is published
as a `webhook` event, which the projector records, before the message is acked or naked.
The `webhook-id` is the same for every attempt of one event, so receivers can deduplicate.

A batch's terminal event (`batches.<id>.done|failed|cancelled`) sends a `batch.*` webhook
the same way: same signing (the batch's own secret, else its tenant's), schedule and
address policy. Its attempts (and those of `batch.progress`) are not published, since a
`webhook` event names a job and the projector would make a job row of the batch's id: the
notifier records them itself in PostgreSQL (`batch_webhook_deliveries`), for
`GET /batches/{id}/webhooks`.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import json
import logging
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import asyncpg
import msgspec
from nats.aio.msg import Msg
from nats.js import JetStreamContext

from services.core.database import db
from services.core.log import bus, timeline
from services.core.model import events, subjects
from services.core.model.errors import NotFound, Refused, StorageError, Unavailable
from services.core.objectstore.storage import Storage
from services.core.runtime import lifecycle, logs, metrics, tracing
from services.core.runtime.settings import Settings
from services.core.secrets import signing
from services.notifier import delivery, filehooks
from services.notifier.keyring import Keyring

log = logging.getLogger(__name__)

RECORD_TIMEOUT = 5.0
"""Seconds a batch webhook attempt's record may take before it is given up (and logged):
with the attempt itself (at most `PRESSROOM_WEBHOOK_TIMEOUT`), inside the notifier's ack
wait (three times that plus 10 s, `topology.py`), so a slow PostgreSQL never gets the webhook
sent twice."""


def webhook_id(event: events.Terminal) -> str:
    return f"msg_{event.job_id}_{events.event_name(event)}"


def batch_webhook_id(event: events.BatchTerminal) -> str:
    return f"msg_{event.batch_id}_{events.batch_event_name(event)}"


def batch_data(event: events.BatchTerminal, url: str | None) -> dict[str, Any]:
    """The `data` of a batch's webhook: its outcome and its items' counts, the archive's
    signed download `url` (None without an archive) and, as for a job, `error`."""
    data: dict[str, Any] = {
        "id": event.batch_id, "status": events.batch_event_name(event), "total": event.total,
        "done": event.done, "failed": event.failed, "cancelled": event.cancelled,
        "error": None, "url": url,
    }  # fmt: skip
    if isinstance(event, events.BatchFailed):
        data["error"] = {"type": event.error.type, "message": event.error.message}
    if event.object_key is not None:
        data["object_key"] = event.object_key
        if not isinstance(event, events.BatchFailed):
            data["bytes"] = event.bytes
    return data


def envelope(kind: str, data: dict[str, Any]) -> bytes:
    """A webhook's body: `{"type", "timestamp", "data"}`, compact JSON."""
    body = {"type": kind, "timestamp": dt.datetime.now(dt.UTC).isoformat(), "data": data}
    return json.dumps(body, separators=(",", ":")).encode()


@dataclass(frozen=True)
class Hook:
    """One webhook to send: its id (the same for every attempt), where, what, and the
    keys that sign it."""

    id: str
    url: str
    body: bytes
    keys: list[bytes]
    method: str = "POST"
    headers: dict[str, str] = field(default_factory=dict)
    """Sent besides the signing headers (and over them: a file's `Content-Type`)."""


@dataclass(frozen=True)
class Sent:
    """One attempt at a webhook: its number, what came back, and what that means."""

    attempt: int
    outcome: delivery.Outcome
    verdict: delivery.Verdict


async def _decode_or_term(msg: Msg) -> events.LogEvent | None:
    """The message's event, job's or batch's; a message that is neither is terminated
    (redelivering it cannot help) and None returned."""
    try:
        return events.decode_log(msg.data, subject=msg.subject)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        log.error("terminating undecodable message on %s: %s", msg.subject, exc)
        await msg.term()
        return None


class Notifier:
    def __init__(
        self,
        settings: Settings,
        js: JetStreamContext,
        storage: Storage,
        session: aiohttp.ClientSession,
        keyring: Keyring,
        pool: asyncpg.Pool,
    ) -> None:
        self.settings = settings
        self.js = js
        self.storage = storage
        self.session = session
        self.keyring = keyring
        self.pool = pool

    async def handle(self, msg: Msg) -> None:
        """Send one attempt for one terminal event, a job's or a batch's; never raises."""
        event = await _decode_or_term(msg)
        if event is None:
            return
        job_id = None if isinstance(event, events.BatchEvent) else event.job_id
        batch_id = event.batch_id if isinstance(event, events.BatchEvent) else None
        about = {"job_id": job_id, "batch_id": batch_id, "tenant": event.tenant}
        try:
            with (
                logs.bound(**about),
                tracing.span("webhook", msg.headers, tracing.CONSUMER, **about),
                bus.map_bus_errors(),  # acks and naks, besides what `bus` does
            ):
                if isinstance(event, events.BatchEvent):
                    await self._notify_batch(msg, event)
                else:
                    await self._notify(msg, event)
        except (Unavailable, StorageError) as exc:
            log.warning("%s: webhook postponed: %r", msg.subject, exc)
            with contextlib.suppress(Unavailable), bus.map_bus_errors():
                await msg.nak(delay=5)

    async def _notify(self, msg: Msg, event: events.AnyEvent) -> None:
        terminal = await self._terminal_of(event)
        if terminal is None or terminal.webhook_url is None:
            await msg.ack()
            return
        if terminal is event and await self._superseded(msg, terminal):
            await msg.ack()
            return
        await self._attempt(msg, terminal, terminal.webhook_url)

    async def _notify_batch(self, msg: Msg, event: events.AnyBatchEvent) -> None:
        if isinstance(event, events.BatchProgress):
            await self._progress(msg, event)
            return
        if not isinstance(event, events.BATCH_TERMINAL) or event.webhook_url is None:
            await msg.ack()
            return
        first = await timeline.first_batch_terminal_seq(self.js, event.batch_id)
        if first is not None and first < msg.metadata.sequence.stream:
            log.warning("batch %s: ignoring a later terminal event", event.batch_id)
            await msg.ack()
            return
        await self._attempt_batch(msg, event, event.webhook_url)

    async def _progress(self, msg: Msg, event: events.BatchProgress) -> None:
        """One attempt at a `batch.progress` webhook, never retried (the next report, or
        the batch's end, says more), and none once the batch has ended."""
        ended = await timeline.first_batch_terminal_seq(self.js, event.batch_id)
        if event.webhook_url is None or ended is not None:
            await msg.ack()
            return
        data = {
            "id": event.batch_id, "status": "running", "total": event.total,
            "done": event.done, "failed": event.failed, "cancelled": event.cancelled,
            "progress": (event.done + event.failed + event.cancelled) / event.total,
        }  # fmt: skip
        ended_count = event.done + event.failed + event.cancelled
        hook = Hook(
            f"msg_{event.batch_id}_progress_{ended_count}",
            event.webhook_url,
            envelope("batch.progress", data),
            await self._batch_keys(event),
        )
        sent = await self._post(msg, hook)
        log.info(
            "batch %s: progress webhook %s (status %s, error %s)",
            event.batch_id, sent.verdict.name, sent.outcome.status_code, sent.outcome.error,
        )  # fmt: skip
        metrics.WEBHOOK_DELIVERIES.labels(sent.verdict.name).inc()
        await self._record_batch(event, "batch.progress", hook, sent)
        await msg.ack()

    async def _superseded(self, msg: Msg, event: events.Terminal) -> bool:
        """Whether the job ended before this terminal event (a copy stored after the
        duplicate window): then its webhook is never sent, so a client never hears two
        different ends of one job."""
        first = await timeline.first_terminal_seq(self.js, event.job_id)
        if first is None or first >= msg.metadata.sequence.stream:
            return False
        log.warning(
            "job %s: ignoring a later terminal event (%s at %d; it ended at %d)",
            event.job_id,
            events.event_name(event),
            msg.metadata.sequence.stream,
            first,
        )
        return True

    async def _terminal_of(self, event: events.AnyEvent) -> events.Terminal | None:
        """The terminal event to notify about: the event itself, or for a redelivery
        request the job's terminal event read back from the log."""
        if isinstance(event, events.WebhookRedeliver):
            found = await timeline.terminal_event(self.js, event.job_id)
            return found if isinstance(found, events.TERMINAL) else None
        return event if isinstance(event, events.TERMINAL) else None

    async def _keys_for(self, event: events.Terminal) -> list[bytes]:
        """The job's own signing secret if it was submitted with one, else its tenant's."""
        submitted = await timeline.last_event(self.js, event.job_id, "submitted")
        if isinstance(submitted, events.JobSubmitted):
            own = self.keyring.job_keys(submitted)
            if own is not None:
                return own
        return await self.keyring.tenant_keys(event.tenant)

    async def _batch_keys(self, event: events.BatchTerminal | events.BatchProgress) -> list[bytes]:
        """The batch's own signing secret if it was submitted with one, else its tenant's."""
        submitted = await timeline.batch_submission(self.js, event.batch_id)
        if submitted is not None:
            own = self.keyring.own_keys(submitted.webhook_secret, event.batch_id)
            if own is not None:
                return own
        return await self.keyring.tenant_keys(event.tenant)

    async def batch_payload(self, event: events.BatchTerminal) -> bytes:
        url = None
        if event.object_key is not None:
            url = await self.storage.url(event.object_key, self.settings.url_ttl)
        data = batch_data(event, url)
        return envelope(f"batch.{data['status']}", data)

    async def payload(self, event: events.Terminal) -> bytes:
        data: dict[str, Any] = {"id": event.job_id, "status": events.event_name(event)}
        if isinstance(event, events.JobDone):
            url = await self.storage.url(event.object_key, self.settings.url_ttl)
            data.update(error=None, url=url, pages=event.pages, bytes=event.bytes)
        elif isinstance(event, events.JobFailed):
            error = {"type": event.error.type, "message": event.error.message}
            data.update(error=error, url=None)
        else:
            data.update(error=None, url=None, reason=event.reason)
        return envelope(f"job.{data['status']}", data)

    async def _hook(self, event: events.Terminal, url: str) -> Hook:
        """The webhook of a job's end: Pressroom's signed JSON, or the file itself for a
        job that asked so (`filehooks`, Gotenberg's webhook mode)."""
        wid, keys = webhook_id(event), await self._keys_for(event)
        submitted = await timeline.last_event(self.js, event.job_id, "submitted")
        if isinstance(submitted, events.JobSubmitted) and submitted.file_webhook is not None:
            sent = await filehooks.message(self.storage, self.keyring, event, submitted, url)
            return Hook(wid, sent.url, sent.body, keys, sent.method, sent.headers)
        return Hook(wid, url, await self.payload(event), keys)

    async def _attempt(self, msg: Msg, event: events.Terminal, url: str) -> None:
        hook = await self._hook(event, url)
        wid, url = hook.id, hook.url
        sent = await self._post(msg, hook)
        await bus.publish(
            self.js,
            events.WebhookAttempted(
                job_id=event.job_id, tenant=event.tenant, webhook_id=wid, attempt=sent.attempt,
                url=url, outcome=sent.verdict.name, status_code=sent.outcome.status_code,
                error=sent.outcome.error, latency_ms=sent.outcome.latency_ms,
            ),
        )  # fmt: skip
        await self._settle(msg, sent)

    async def _attempt_batch(self, msg: Msg, event: events.BatchTerminal, url: str) -> None:
        body = await self.batch_payload(event)
        hook = Hook(batch_webhook_id(event), url, body, await self._batch_keys(event))
        sent = await self._post(msg, hook)
        log.info(
            "batch %s: webhook attempt %d %s (status %s, error %s, %d ms)",
            event.batch_id, sent.attempt, sent.verdict.name, sent.outcome.status_code,
            sent.outcome.error, sent.outcome.latency_ms,
        )  # fmt: skip
        await self._record_batch(event, f"batch.{events.batch_event_name(event)}", hook, sent)
        await self._settle(msg, sent)

    async def _record_batch(
        self,
        event: events.BatchTerminal | events.BatchProgress,
        kind: str,
        hook: Hook,
        sent: Sent,
    ) -> None:
        """Record one attempt of the batch's `kind` webhook, best effort: it was sent, and
        a receiver must not get it again because PostgreSQL is away, so a record that
        fails is only logged (the attempt's own log line keeps it)."""
        attempt = db.BatchWebhookAttempt(
            batch_id=event.batch_id, tenant_id=event.tenant, webhook_id=hook.id, event=kind,
            attempt=sent.attempt, url=hook.url, outcome=sent.verdict.name,
            status_code=sent.outcome.status_code, error=sent.outcome.error,
            latency_ms=sent.outcome.latency_ms,
        )  # fmt: skip
        try:
            async with asyncio.timeout(RECORD_TIMEOUT):
                await db.record_batch_webhook(self.pool, attempt)
        except (Unavailable, Refused, TimeoutError) as exc:
            log.warning(
                "batch %s: %s attempt %d not recorded: %r", event.batch_id, kind, sent.attempt, exc
            )

    async def _post(self, msg: Msg, hook: Hook) -> Sent:
        """Send attempt number n (JetStream's delivery count) of `hook`."""
        attempt = msg.metadata.num_delivered
        now = int(dt.datetime.now(dt.UTC).timestamp())
        headers = {**signing.headers(hook.keys, hook.id, now, hook.body), **hook.headers}
        outcome = await delivery.post(
            self.session, hook.url, hook.body, headers, self.settings.webhook_timeout,
            allow_private=self.settings.allow_private_networks, method=hook.method,
        )  # fmt: skip
        return Sent(
            attempt, outcome, delivery.verdict(outcome, attempt, self.settings.webhook_schedule)
        )

    async def _settle(self, msg: Msg, sent: Sent) -> None:
        """Count the attempt, then hand the message back for the next one or finish it."""
        metrics.WEBHOOK_DELIVERIES.labels(sent.verdict.name).inc()
        metrics.WEBHOOK_SECONDS.observe(sent.outcome.latency_ms / 1000)
        if isinstance(sent.verdict, delivery.Retrying):
            await msg.nak(delay=sent.verdict.delay)
        else:
            metrics.WEBHOOK_ATTEMPTS.labels(sent.verdict.name).observe(sent.attempt)
            await msg.ack()


async def track_backlog(js: JetStreamContext, stop: asyncio.Event, every: float = 15.0) -> None:
    """Keep `pressroom_webhook_backlog` current from the notifier consumer's state."""
    while not stop.is_set():
        with contextlib.suppress(Unavailable, NotFound), bus.map_bus_errors():
            info = await js.consumer_info(subjects.STREAM, subjects.NOTIFIER)
            metrics.WEBHOOK_BACKLOG.set(bus.outstanding(info))
        await lifecycle.pause(stop, every)

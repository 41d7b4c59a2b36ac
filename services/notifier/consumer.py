"""The notifier: one signed webhook per terminal event, retried on a schedule.

Attempt n (JetStream's delivery count) is sent; on failure the message is naked with delay
`schedule[n]` until the schedule runs out. Every attempt is published as a `webhook` event,
which the projector records, before the message is acked or naked. The `webhook-id` is the
same for every attempt of one event, so receivers can deduplicate.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import json
import logging
from typing import Any

import aiohttp
from nats.aio.msg import Msg
from nats.js import JetStreamContext

from services.core import bus, events, metrics, runtime, signing, timeline
from services.core.errors import NotFound, StorageError, Unavailable
from services.core.settings import Settings
from services.core.storage import Storage
from services.notifier import delivery
from services.notifier.keyring import Keyring

log = logging.getLogger(__name__)


def webhook_id(event: events.Terminal) -> str:
    return f"msg_{event.job_id}_{events.event_name(event)}"


class Notifier:
    def __init__(
        self,
        settings: Settings,
        js: JetStreamContext,
        storage: Storage,
        session: aiohttp.ClientSession,
        keyring: Keyring,
    ) -> None:
        self.settings = settings
        self.js = js
        self.storage = storage
        self.session = session
        self.keyring = keyring

    async def handle(self, msg: Msg) -> None:
        """Send one attempt for one terminal event; never raises."""
        event = await bus.decode_or_term(msg)
        if event is None:
            return
        try:
            with bus.map_bus_errors():  # acks and naks, besides what `bus` itself does
                await self._notify(msg, event)
        except (Unavailable, StorageError) as exc:
            log.warning("job %s: webhook postponed: %r", event.job_id, exc)
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
        body = {
            "type": f"job.{data['status']}",
            "timestamp": dt.datetime.now(dt.UTC).isoformat(),
            "data": data,
        }
        return json.dumps(body, separators=(",", ":")).encode()

    async def _attempt(self, msg: Msg, event: events.Terminal, url: str) -> None:
        attempt = msg.metadata.num_delivered
        body = await self.payload(event)
        wid = webhook_id(event)
        keys = await self._keys_for(event)
        headers = signing.headers(keys, wid, int(dt.datetime.now(dt.UTC).timestamp()), body)
        outcome = await delivery.post(
            self.session, url, body, headers, self.settings.webhook_timeout,
            allow_private=self.settings.allow_private_networks,
        )  # fmt: skip
        verdict = delivery.verdict(outcome, attempt, self.settings.webhook_schedule)
        await bus.publish(
            self.js,
            events.WebhookAttempted(
                job_id=event.job_id, tenant=event.tenant, webhook_id=wid, attempt=attempt,
                url=url, outcome=verdict.name, status_code=outcome.status_code, error=outcome.error,
                latency_ms=outcome.latency_ms,
            ),
        )  # fmt: skip
        metrics.WEBHOOK_DELIVERIES.labels(verdict.name).inc()
        metrics.WEBHOOK_SECONDS.observe(outcome.latency_ms / 1000)
        if isinstance(verdict, delivery.Retrying):
            await msg.nak(delay=verdict.delay)
        else:
            metrics.WEBHOOK_ATTEMPTS.labels(verdict.name).observe(attempt)
            await msg.ack()


async def track_backlog(js: JetStreamContext, stop: asyncio.Event, every: float = 15.0) -> None:
    """Keep `pressroom_webhook_backlog` current from the notifier consumer's state."""
    while not stop.is_set():
        with contextlib.suppress(Unavailable, NotFound), bus.map_bus_errors():
            info = await js.consumer_info(events.STREAM, events.NOTIFIER)
            metrics.WEBHOOK_BACKLOG.set((info.num_pending or 0) + (info.num_ack_pending or 0))
        await runtime.pause(stop, every)

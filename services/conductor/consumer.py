"""The conductor's consumer: one handler per batch event on the `conductor` durable.

    submitted  expand the item list into item submissions (`expand.py`)
    paused     set the batch's state `paused` (renderers start none of its items)
    resumed    set it `running` again
    cancel     set it `cancelled`, and cancel every item that has not ended
    complete   pack the archive (`pack.py`), publish the batch's terminal event, and
               drop its bulk durable and state

Every step is idempotent, so a message redelivered after a crash is simply handled again:
item submissions and terminal events carry dedup ids, the archive is rewritten under the
same key. A transient failure naks the message with a delay; a message that cannot be
decoded is terminated.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable
from typing import Any

import asyncpg
import msgspec
from nats.aio.msg import Msg
from nats.js import JetStreamContext

from services.conductor import expand, pack
from services.conductor.state import CANCELLED, PAUSED, RUNNING, BatchStates
from services.core.log import bus, timeline, topology
from services.core.model import events, subjects
from services.core.model.errors import (
    DeterministicError,
    InvalidEvent,
    NotFound,
    TransientError,
    Unavailable,
)
from services.core.model.errortypes import ErrorType
from services.core.objectstore.storage import Storage
from services.core.runtime import lifecycle, logs, tracing
from services.core.runtime.settings import Settings

log = logging.getLogger(__name__)

RETRY_DELAY = 5.0
"""Seconds before a message whose handling failed transiently comes back."""

PROJECTION_POLLS = 10
PROJECTION_POLL_EVERY = 0.2
"""`complete` comes from the projector right after it commits the last item; another
projector's commit of an earlier item may trail it briefly, so the rows are read again a
few times before the message is handed back for later."""


KEEP_ALIVE_EVERY = 5.0
"""Seconds between progress notes while a message is handled: well inside the conductor
durable's `ack_wait` (15 s), so a long expansion or pack is never redelivered under its
feet, while a conductor that dies hands its messages (a pause, a cancel) to another one
within seconds."""


async def keep_alive(msg: Msg, every: float = KEEP_ALIVE_EVERY) -> None:
    """Send progress notes for `msg` until cancelled, whatever the handler is doing (a
    pypdf merge in a thread gives no chance to send them in between); a note that fails
    is logged and tried again at the next turn."""
    while True:
        await asyncio.sleep(every)
        try:
            await msg.in_progress()
        except Exception as exc:  # NATS away: the next note may get through
            log.warning("progress note for %s failed: %s", msg.subject, exc)


class Conductor:
    def __init__(
        self,
        settings: Settings,
        js: JetStreamContext,
        pool: asyncpg.Pool,
        storage: Storage,
        states: BatchStates,
    ) -> None:
        self.settings = settings
        self.js = js
        self.pool = pool
        self.storage = storage
        self.states = states

    async def handle(self, msg: Msg) -> None:
        """Handle one batch event and ack, nak or term its message; never raises (but
        hands the message back when cancelled)."""
        try:
            event = events.decode_log(msg.data, subject=msg.subject)
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            log.error("terminating undecodable message on %s: %s", msg.subject, exc)
            with contextlib.suppress(Exception):
                await msg.term()
            return
        batch_id = event.batch_id if isinstance(event, events.BatchEvent) else None
        about = {"batch_id": batch_id, "tenant": event.tenant}
        with logs.bound(**about), tracing.span("batch", msg.headers, tracing.CONSUMER, **about):
            await self._handle(msg, event)

    async def _handle(self, msg: Msg, event: events.LogEvent) -> None:
        alive = asyncio.create_task(keep_alive(msg))
        try:
            with bus.map_bus_errors():
                await self._dispatch(event)
                await msg.ack()
        except asyncio.CancelledError:
            with contextlib.suppress(Exception):
                await msg.nak()
            raise
        except TransientError as exc:
            log.warning("%s: handled again in %.0fs: %s", msg.subject, RETRY_DELAY, exc)
            await _settle(msg.nak(delay=RETRY_DELAY))
        except DeterministicError as exc:
            log.error("%s: terminating: %s", msg.subject, exc)
            await _settle(msg.term())
        except Exception:
            log.exception("%s: unexpected failure; handled again later", msg.subject)
            await _settle(msg.nak(delay=RETRY_DELAY))
        finally:
            await lifecycle.cancelled(alive)

    async def _dispatch(self, event: events.LogEvent) -> None:
        if isinstance(event, events.BatchSubmitted):
            await self.expand_batch(event)
        elif isinstance(event, events.BatchPaused):
            await self.states.change(event.batch_id, event.tenant, PAUSED)
        elif isinstance(event, events.BatchResumed):
            await self.states.change(event.batch_id, event.tenant, RUNNING)
        elif isinstance(event, events.BatchCancel):
            await self.cancel(event)
        elif isinstance(event, events.BatchComplete):
            await self.complete(event)

    async def expand_batch(self, batch: events.BatchSubmitted) -> None:
        """Make the batch's durable, then its state, then submit its items. The durable
        comes first: a renderer that sees the batch `running` finds its durable at once
        (rather than skipping a batch it cannot read yet)."""
        if await self.states.ended(batch.batch_id):
            log.info("batch %s has ended; not expanding it again", batch.batch_id)
            return
        durable = topology.bulk_config(self.settings, batch.batch_id)
        with bus.map_bus_errors():
            await self.js.add_consumer(subjects.STREAM, durable)
        if not await self.states.start(batch.batch_id, batch.tenant):
            log.info("batch %s ended meanwhile; not expanding it again", batch.batch_id)
            with contextlib.suppress(NotFound), bus.map_bus_errors():
                await self.js.delete_consumer(subjects.STREAM, durable.durable_name or "")
            return
        try:
            count = await expand.expand(self.js, self.storage, batch)
        except NotFound:
            message = f"the batch's item list is missing from storage ({batch.items_key})"
            await self.fail(batch, "batch_items_missing", message)
            return
        except InvalidEvent as exc:
            await self.fail(batch, "batch_items_invalid", exc.message)
            return
        if count != batch.total:
            log.warning(
                "batch %s: %d items stored, %d announced", batch.batch_id, count, batch.total
            )
        log.info("batch %s: %d items submitted", batch.batch_id, count)

    async def fail(self, batch: events.BatchSubmitted, kind: str, message: str) -> None:
        """End a batch that cannot run at all: every item counts as failed."""
        log.error("batch %s failed: %s", batch.batch_id, message)
        await bus.publish_batch(
            self.js,
            events.BatchFailed(
                batch_id=batch.batch_id, tenant=batch.tenant, total=batch.total, done=0,
                failed=batch.total, cancelled=0, webhook_url=batch.webhook_url,
                error=events.ErrorInfo(type=kind, message=message),
            ),
        )  # fmt: skip
        await self.forget(batch.batch_id)

    async def cancel(self, event: events.BatchCancel) -> None:
        """Stop the batch's items from starting, and end each one that has not ended; the
        projector then sees every item ended and publishes `complete`."""
        if not await self.states.change(event.batch_id, event.tenant, CANCELLED):
            return  # the batch has ended already
        batch = await timeline.batch_submission(self.js, event.batch_id)
        if batch is None:
            return
        ended = await pack.ended_indexes(self.pool, batch.batch_id)
        unended = [index for index in range(batch.total) if index not in ended]
        for start in range(0, len(unended), expand.IN_FLIGHT):
            chunk = unended[start : start + expand.IN_FLIGHT]
            await asyncio.gather(
                *(self._cancel_item(batch, index, event.reason) for index in chunk)
            )

    async def _cancel_item(self, batch: events.BatchSubmitted, index: int, reason: str) -> None:
        job_id = subjects.item_job_id(batch.batch_id, index)
        cancelled = events.JobCancelled(job_id=job_id, tenant=batch.tenant, reason=reason)
        await bus.publish_terminal(self.js, cancelled)

    async def complete(self, event: events.BatchComplete) -> None:
        """Pack the archive, publish the batch's end, drop its durable and state."""
        batch = await timeline.batch_submission(self.js, event.batch_id)
        if batch is None:
            log.error("batch %s is complete but its submission is not in the log", event.batch_id)
            return
        items = await self._outcomes(batch)
        cancelled = await self.states.get(batch.batch_id) == CANCELLED
        terminal = await self._pack(batch, items, cancelled)
        await bus.publish_batch(self.js, terminal)
        await self.forget(batch.batch_id)
        log.info("batch %s ended %s", batch.batch_id, events.batch_event_name(terminal))

    async def _outcomes(self, batch: events.BatchSubmitted) -> list[pack.Outcome]:
        """Every item's ended row; `Unavailable` (retried later) while the projection
        does not hold them all yet."""
        items: list[pack.Outcome] = []
        for _ in range(PROJECTION_POLLS):
            items = await pack.outcomes(self.pool, batch.batch_id)
            if len(items) >= batch.total and all(i.status.terminal for i in items):
                return items
            await asyncio.sleep(PROJECTION_POLL_EVERY)
        ended = sum(1 for i in items if i.status.terminal)
        raise Unavailable(
            f"batch {batch.batch_id}: the projection holds {ended} ended items of {batch.total}"
        )

    async def _pack(
        self,
        batch: events.BatchSubmitted,
        items: list[pack.Outcome],
        cancelled: bool,
    ) -> events.BatchTerminal:
        """Write the batch's output and make its terminal event."""
        counts = pack.Counts.of(items)
        key: str | None = subjects.batch_archive_key(batch.tenant, batch.batch_id)
        size = 0
        if batch.output == "merged":
            key = subjects.batch_archive_key(batch.tenant, batch.batch_id, "pdf")
            if counts.done:
                size = await pack.write_merged(self.storage, key, items)
            else:
                key = None
        elif key is not None:
            size = await pack.write_zip(self.storage, key, batch.batch_id, items)
        common: dict[str, Any] = {
            "batch_id": batch.batch_id, "tenant": batch.tenant, "total": batch.total,
            "done": counts.done, "failed": counts.failed, "cancelled": counts.cancelled,
            "webhook_url": batch.webhook_url,
        }  # fmt: skip
        if cancelled:
            return events.BatchCancelled(**common, object_key=key, bytes=size)
        if counts.done == 0 or key is None:
            error = events.ErrorInfo(
                type=ErrorType.NO_DOCUMENTS,
                message=f"no item produced a document: {pack.first_error(items)}",
            )
            return events.BatchFailed(**common, error=error, object_key=key)
        return events.BatchDone(**common, object_key=key, bytes=size)

    async def forget(self, batch_id: str) -> None:
        """Drop the ended batch's bulk durable and its state."""
        with contextlib.suppress(NotFound), bus.map_bus_errors():
            await self.js.delete_consumer(subjects.STREAM, subjects.bulk_durable(batch_id))
        await self.states.forget(batch_id)


async def _settle(action: Awaitable[None]) -> None:
    """Nak or term, when NATS answers; if not, the ack wait brings the message back."""
    with contextlib.suppress(Exception):
        await action

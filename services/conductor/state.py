"""The `BATCH_STATE` bucket: which batches' items may start (`events.BatchState`).

The conductor is its only writer. Every change is a compare-and-set on the key's
revision, so a pause and a cancel handled at the same moment cannot undo each other, and
a cancelled batch never runs again.
"""

from __future__ import annotations

import logging

import msgspec
from nats.js import JetStreamContext
from nats.js.errors import KeyNotFoundError
from nats.js.kv import KeyValue

from services.core.log import bus
from services.core.model import events, subjects
from services.core.model.errors import Conflict, NotFound, Unavailable

log = logging.getLogger(__name__)

RUNNING = "running"
PAUSED = "paused"
CANCELLED = "cancelled"

_ATTEMPTS = 5
"""Compare-and-set rounds before giving up (`Unavailable`: the message is retried)."""


@bus.map_bus_errors("cannot open the batch state bucket")
async def open_states(js: JetStreamContext) -> BatchStates:
    return BatchStates(await js.key_value(subjects.BATCH_STATE))


class BatchStates:
    def __init__(self, kv: KeyValue) -> None:
        self.kv = kv

    async def start(self, batch_id: str, tenant: str) -> bool:
        """`running`, unless the batch already has a state: a pause (or cancel) handled
        before the expansion is kept. False if the batch has ended: a late copy of its
        submission must not start it again."""
        try:
            await self._entry(batch_id)
        except _Ended:
            return False
        try:
            with bus.map_bus_errors():
                await self.kv.create(batch_id, _encode(tenant, RUNNING))
        except Conflict:
            log.info("batch %s already has a state; keeping it", batch_id)
        return True

    async def ended(self, batch_id: str) -> bool:
        """Whether the batch has ended (its key was deleted)."""
        try:
            await self._entry(batch_id)
        except _Ended:
            return True
        return False

    async def get(self, batch_id: str) -> str | None:
        """The batch's state; None when it has none (not expanded, or ended)."""
        try:
            entry = await self._entry(batch_id)
        except _Ended:
            return None
        return None if entry is None else _decode(entry.value).state

    async def change(self, batch_id: str, tenant: str, state: str) -> bool:
        """Set `state`; a cancelled batch stays cancelled, and a batch that has ended
        (its key deleted) gets no key again. True if the batch is now in `state`."""
        for _ in range(_ATTEMPTS):
            try:
                entry = await self._entry(batch_id)
            except _Ended:
                log.info("batch %s has ended; not setting it %s", batch_id, state)
                return False
            if entry is not None and _decode(entry.value).state == CANCELLED:
                return state == CANCELLED
            try:
                with bus.map_bus_errors():
                    if entry is None:
                        await self.kv.create(batch_id, _encode(tenant, state))
                    else:
                        await self.kv.update(batch_id, _encode(tenant, state), last=entry.revision)
                return True
            except Conflict:
                continue  # another change came first: decide again on its value
        raise Unavailable(f"batch {batch_id}: its state kept changing under {state!r}")

    async def forget(self, batch_id: str) -> None:
        """Delete the key once the batch has ended (renderers drop it from their list)."""
        with bus.map_bus_errors():
            await self.kv.delete(batch_id)

    async def _entry(self, batch_id: str) -> KeyValue.Entry | None:
        try:
            with bus.map_bus_errors():
                try:
                    return await self.kv.get(batch_id)
                except KeyNotFoundError as exc:
                    if exc.op is not None:  # a delete marker: nats-py's sign of a deleted key
                        raise _Ended from None
                    raise
        except NotFound:
            return None


class _Ended(Exception):
    """The key was deleted: the batch has ended."""


def _encode(tenant: str, state: str) -> bytes:
    return msgspec.json.encode(events.BatchState(tenant, state))


def _decode(value: bytes | None) -> events.BatchState:
    return msgspec.json.decode(value or b"{}", type=events.BatchState)

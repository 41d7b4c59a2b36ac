"""Which batches may start items: the renderer's copy of the `BATCH_STATE` bucket.

The conductor writes a batch's state (`running`, `paused`, `cancelled`) under its id and
deletes the key when the batch has ended; a renderer watches the whole bucket, so a pause
reaches its scheduler (`lanes.py`) and its handler (`consumer.py`) within milliseconds,
without a read per item.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import msgspec
from nats.js import JetStreamContext

from services.core.log import bus
from services.core.model import events, subjects
from services.core.model.status import BatchStatus
from services.core.runtime import lifecycle

log = logging.getLogger(__name__)

REWATCH_DELAY = 1.0
"""Seconds before a watch that broke (NATS away, the bucket not there yet) starts again."""

_decoder = msgspec.json.Decoder(events.BatchState)

STATES = frozenset({BatchStatus.RUNNING, BatchStatus.PAUSED, BatchStatus.CANCELLED})
"""What the bucket may say about a batch."""


def parse(key: str, value: bytes | None, operation: str | None) -> events.BatchState | None:
    """The state one watched entry gives batch `key`; None when the batch is gone (the key
    was deleted or purged) or the value is not a `BatchState` (logged: never guessed)."""
    if operation in ("DEL", "PURGE") or not value:
        return None
    try:
        found = _decoder.decode(value)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        log.warning("%s: ignoring the value of %s: %s", subjects.BATCH_STATE, key, exc)
        return None
    if found.state not in STATES:
        log.warning("%s: ignoring %s's unknown state %r", subjects.BATCH_STATE, key, found.state)
        return None
    return found


class BatchStates:
    """Batch id -> `BatchState`, as last seen in the bucket; listeners hear every change."""

    def __init__(self) -> None:
        self._states: dict[str, events.BatchState] = {}
        self._listeners: list[Callable[[], None]] = []
        self._change = asyncio.Event()
        self.parked: set[asyncio.Task[Any]] = set()
        """The handlers holding an item, unstarted, while its batch is paused (or
        cancelling): they use no page, so the scheduler does not count them."""

    def listen(self, listener: Callable[[], None]) -> None:
        """Call `listener` (no arguments, no awaiting) after every change."""
        self._listeners.append(listener)

    def state(self, batch_id: str) -> BatchStatus | None:
        """The batch's state; None for a batch the bucket does not hold (ended, or unknown)."""
        found = self._states.get(batch_id)
        return None if found is None else BatchStatus(found.state)

    def running(self) -> dict[str, str]:
        """Batch id -> tenant of every batch whose items may start now."""
        return {
            batch_id: found.tenant
            for batch_id, found in self._states.items()
            if found.state == BatchStatus.RUNNING
        }

    def set(self, batch_id: str, found: events.BatchState | None) -> None:
        if found is None:
            self._states.pop(batch_id, None)
        else:
            self._states[batch_id] = found
        self._changed()

    def replace(self, states: dict[str, events.BatchState]) -> None:
        """Everything at once: what a (re)started watch found in the bucket."""
        self._states = states
        self._changed()

    def _changed(self) -> None:
        self._change.set()
        self._change = asyncio.Event()
        self._notify()

    def _notify(self) -> None:
        for listener in self._listeners:
            listener()

    async def changed(self, timeout: float) -> None:
        """Wait for the next change of any batch's state, or `timeout` seconds."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._change.wait(), timeout)

    @contextlib.contextmanager
    def parking(self) -> Iterator[None]:
        """The current task holds an item of a batch that may not start: not counted by
        the scheduler while inside (listeners hear both edges, so it refills the slot)."""
        task = asyncio.current_task()
        assert task is not None
        self.parked.add(task)
        self._notify()
        try:
            yield
        finally:
            self.parked.discard(task)
            self._notify()


async def follow(js: JetStreamContext, states: BatchStates) -> None:
    """Keep `states` equal to the bucket until cancelled, watching again after a failure.

    Each watch first delivers every key's current value, then changes: the map is replaced
    once the current values are in, so a key deleted while the watch was broken does not
    linger as a batch that runs forever.
    """
    while True:
        try:
            await _watch(js, states)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # anything: NATS away, a bucket not made yet
            log.warning("watching %s failed (%s); again in %g s", subjects.BATCH_STATE, exc,
                        REWATCH_DELAY)  # fmt: skip
        await asyncio.sleep(REWATCH_DELAY)


async def _watch(js: JetStreamContext, states: BatchStates) -> None:
    with bus.map_bus_errors(f"cannot watch {subjects.BATCH_STATE}"):
        kv = await js.key_value(subjects.BATCH_STATE)
        watcher = await kv.watchall()
    try:
        current: dict[str, events.BatchState] | None = {}
        async for entry in watcher:
            if entry is None:  # the current values are all in
                states.replace(current or {})
                current = None
                continue
            found = _parsed(entry)
            if current is None:
                states.set(entry.key, found)
            elif found is None:
                current.pop(entry.key, None)
            else:
                current[entry.key] = found
    finally:
        with contextlib.suppress(Exception):
            await watcher.stop()  # type: ignore[no-untyped-call]  # nats-py leaves it untyped


def _parsed(entry: Any) -> events.BatchState | None:
    return parse(entry.key, entry.value, entry.operation)


@contextlib.asynccontextmanager
async def watched(js: JetStreamContext) -> AsyncIterator[BatchStates]:
    """`BatchStates` kept up to date by a background watch, which stops on exit."""
    states = BatchStates()
    task = asyncio.create_task(follow(js, states))
    try:
        yield states
    finally:
        await lifecycle.cancelled(task)

"""Expansion: a batch's stored item list becomes one job submission per item.

Each item is a `JobSubmitted` whose job id is `<batch_id>.<index>`, its dedup id, so a
crash half-way simply expands again from the start and the log drops what it already
holds. Submissions go out `IN_FLIGHT` at a time: 10,000 items one round trip each would
take minutes.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import msgspec
from nats.js import JetStreamContext

from services.core.log import bus
from services.core.model import events, subjects
from services.core.model.errors import InvalidEvent
from services.core.objectstore.storage import Storage

IN_FLIGHT = 128
"""Publishes awaited together: enough to hide the round trip, few enough that a log that
refuses (full) stops the expansion after one chunk."""


_item_decoder = msgspec.json.Decoder(events.BatchItem)


async def items(storage: Storage, key: str) -> AsyncIterator[events.BatchItem]:
    """The stored item list, line by line, read in chunks (never whole in memory).
    `NotFound` if it is missing; `InvalidEvent` for a line that is not a `BatchItem`."""
    rest = b""
    number = 0
    async for chunk in storage.read(key):
        *lines, rest = (rest + chunk).split(b"\n")
        for line in lines:
            number += 1
            if line.strip():
                yield _decode(line, number)
    if rest.strip():
        yield _decode(rest, number + 1)


def _decode(line: bytes, number: int) -> events.BatchItem:
    try:
        return _item_decoder.decode(line)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise InvalidEvent(f"line {number} of the item list: {exc}") from exc


def submission(
    batch: events.BatchSubmitted, index: int, item: events.BatchItem
) -> events.JobSubmitted:
    """Item `index` as a job: its own data, file name, url or Markdown, the batch's
    options. Its
    template stays empty: the renderer reads the batch's once, not 10,000 copies."""
    return events.JobSubmitted(
        job_id=subjects.item_job_id(batch.batch_id, index),
        tenant=batch.tenant,
        batch_id=batch.batch_id,
        index=index,
        filename=item.filename,
        data=item.data,
        url=item.url,
        markdown=item.markdown,
        options=batch.options,
        template="",
        webhook_url=None,
    )


async def expand(js: JetStreamContext, storage: Storage, batch: events.BatchSubmitted) -> int:
    """Publish every item's submission; the number of items published."""
    pending: list[events.JobSubmitted] = []
    count = 0
    async for item in items(storage, batch.items_key):
        pending.append(submission(batch, count, item))
        count += 1
        if len(pending) >= IN_FLIGHT:
            await _publish(js, pending)
            pending.clear()
    await _publish(js, pending)
    return count


async def _publish(js: JetStreamContext, submissions: list[events.JobSubmitted]) -> None:
    await asyncio.gather(*(bus.publish(js, event) for event in submissions))

"""Packing: a finished batch's documents and manifest, streamed into one archive.

`zipfile` writes into a `Spool` it cannot seek (so it uses data descriptors), and after
each piece the spool's bytes are handed to a storage writer that uploads 8 MiB parts:
whatever the batch's size, the conductor holds about one part and one chunk. Documents
are stored, not deflated: PDFs are compressed already.
"""

from __future__ import annotations

import asyncio
import json
import logging
import zipfile
from dataclasses import dataclass
from typing import Any

import asyncpg
import msgspec

from services.conductor.merge import Merger, NotMergeable
from services.core.database import db
from services.core.model import filenames
from services.core.model.errors import NotFound
from services.core.model.errortypes import ErrorType
from services.core.model.status import JobStatus
from services.core.objectstore.storage import Sink, Storage

log = logging.getLogger(__name__)

MANIFEST = "manifest.json"


class Outcome(msgspec.Struct, kw_only=True, frozen=True):
    """One item as the projection holds it once the batch is complete."""

    id: str
    item_index: int
    status: JobStatus
    attempts: int
    error_type: str | None
    error_message: str | None
    object_key: str | None
    filename: str | None


@dataclass(frozen=True)
class Counts:
    total: int
    done: int
    failed: int
    cancelled: int

    @classmethod
    def of(cls, outcomes: list[Outcome]) -> Counts:
        statuses = [o.status for o in outcomes]
        return cls(
            total=len(outcomes),
            done=statuses.count(JobStatus.DONE),
            failed=statuses.count(JobStatus.FAILED),
            cancelled=statuses.count(JobStatus.CANCELLED),
        )


@db.map_db_errors()
async def outcomes(pool: asyncpg.Pool, batch_id: str) -> list[Outcome]:
    """The batch's items in index order (only those the projection holds so far)."""
    rows = await pool.fetch(
        """SELECT id, item_index, status, attempts, error_type, error_message, object_key,
                  input->>'filename' AS filename
           FROM jobs WHERE batch_id = $1 ORDER BY item_index""",
        batch_id,
    )
    return [msgspec.convert(dict(row), Outcome) for row in rows]


@db.map_db_errors()
async def ended_indexes(pool: asyncpg.Pool, batch_id: str) -> set[int]:
    """The indexes of the batch's items the projection knows have ended."""
    rows = await pool.fetch(
        "SELECT item_index FROM jobs WHERE batch_id = $1 AND status = ANY($2::job_status[])",
        batch_id,
        [JobStatus.DONE, JobStatus.FAILED, JobStatus.CANCELLED],
    )
    return {int(row["item_index"]) for row in rows}


def first_error(items: list[Outcome]) -> str:
    """The first failed item's error, for a batch that produced nothing."""
    for item in items:
        if item.error_type is not None:
            return f"item {item.item_index}: {item.error_type}: {item.error_message}"
    return "every item was cancelled"


class Spool:
    """The file `zipfile` writes to: it keeps what was written since the last `drain`.
    It has no `seek` or `tell`, so `zipfile` streams (data descriptors after each entry)."""

    def __init__(self) -> None:
        self.buffer = bytearray()
        self.written = 0

    def write(self, data: bytes) -> int:
        self.buffer += data
        self.written += len(data)
        return len(data)

    def flush(self) -> None:
        """Nothing to do: `drain` moves the bytes on."""

    def close(self) -> None:
        """Nothing to do: the storage writer ends the object."""

    async def drain(self, sink: Sink) -> None:
        if self.buffer:
            data = bytes(self.buffer)
            self.buffer.clear()
            await sink.write(data)


class Names:
    """Entry names safe to unpack anywhere (`core/model/filenames`: no path, drive, device,
    control or bidi character, at most 255 bytes) and unique ignoring case and
    normalisation: a document whose name is taken already (or is the manifest's) gets
    ` (2)`, ` (3)`… before its extension, so no document hides another on any disk. The
    gateway refused unsafe and clashing names; these rules still hold for an item list
    stored before they did."""

    def __init__(self) -> None:
        self.unique = filenames.Unique([MANIFEST])

    def of(self, item: Outcome) -> str:
        """The item's name in the archive; only documents take their name."""
        fallback = f"{item.item_index}.{_extension(item.object_key)}"
        if item.status != JobStatus.DONE:
            return filenames.safe_name(item.filename or fallback, fallback)
        return self.unique.take(item.filename or fallback, fallback)


def _extension(object_key: str | None) -> str:
    tail = (object_key or "").rsplit("/", 1)[-1]
    return tail.rsplit(".", 1)[1] if "." in tail else "pdf"


async def write_zip(storage: Storage, key: str, batch_id: str, items: list[Outcome]) -> int:
    """Store the archive of `items` under `key`; its size in bytes. Written again whole
    by a repack, under the same key."""
    spool = Spool()
    names = Names()
    entries: list[dict[str, Any]] = []
    async with storage.writer(key, "application/zip") as sink:
        with zipfile.ZipFile(spool, "w", zipfile.ZIP_STORED) as archive:
            for item in items:
                name = names.of(item)
                missing = item.status == JobStatus.DONE and not await _add(
                    storage, archive, spool, sink, name, item
                )
                entries.append(_entry(item, name, missing))
            manifest = _manifest(batch_id, items, entries)
            archive.writestr(MANIFEST, manifest, compress_type=zipfile.ZIP_DEFLATED)
        await spool.drain(sink)
    return spool.written


async def _add(
    storage: Storage,
    archive: zipfile.ZipFile,
    spool: Spool,
    sink: Sink,
    name: str,
    item: Outcome,
) -> bool:
    """Stream one document into the archive; False if its file is gone (deleted by its
    owner after it was made)."""
    chunks = storage.read(item.object_key or "")
    try:
        first = await anext(chunks, b"")
    except NotFound:
        return False
    with archive.open(name, "w") as entry:
        entry.write(first)
        await spool.drain(sink)
        async for chunk in chunks:
            entry.write(chunk)
            await spool.drain(sink)
    await spool.drain(sink)
    return True


def _entry(item: Outcome, name: str, missing: bool) -> dict[str, Any]:
    error = None
    if item.error_type is not None:
        error = {"type": item.error_type, "message": item.error_message or ""}
    elif missing:
        error = {
            "type": ErrorType.DOCUMENT_MISSING,
            "message": "the document was deleted before packing",
        }
    return {
        "index": item.item_index,
        "filename": name,
        "job_id": item.id,
        "status": str(item.status),
        "attempts": item.attempts,
        "error": error,
    }


def _manifest(batch_id: str, items: list[Outcome], entries: list[dict[str, Any]]) -> bytes:
    counts = Counts.of(items)
    body = {
        "batch_id": batch_id,
        "total": counts.total,
        "done": counts.done,
        "failed": counts.failed,
        "cancelled": counts.cancelled,
        "items": entries,
    }
    return json.dumps(body, indent=1).encode()


async def write_merged(storage: Storage, key: str, items: list[Outcome]) -> int:
    """Store one PDF of the done items' documents, in index order; its size in bytes.

    Like the archive it is written as it goes: each document is read whole (one is tens
    of KB), its pages copied into the output in a worker thread, and the bytes sent to
    the storage writer, so memory is one document plus 8 bytes per object and per page.
    A document that is not a PDF (an image output) or cannot be read is left out.
    """
    merger = Merger()
    async with storage.writer(key, "application/pdf") as sink:
        await sink.write(merger.start())
        for item in items:
            if item.status != JobStatus.DONE or item.object_key is None:
                continue
            try:
                data = b"".join([chunk async for chunk in storage.read(item.object_key)])
            except NotFound:
                continue
            try:
                await sink.write(await asyncio.to_thread(merger.add, data))
            except NotMergeable as exc:
                log.warning("item %s is left out of the merged PDF: %s", item.id, exc)
        for piece in merger.end():
            await sink.write(piece)
    return merger.size

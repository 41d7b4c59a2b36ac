"""The conductor, driven through the log: batch events in, item submissions, the state
bucket, the bulk durable, the archive and the batch's end out.

The real conductor runs against real NATS, PostgreSQL and storage; no renderer or
projector runs, so each test writes the items' `jobs` rows itself, as the projector would.
"""

from __future__ import annotations

import io
import json
import os
import tracemalloc
import uuid
import zipfile
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import asyncpg
import msgspec
import pypdf
import pytest
from nats.js import JetStreamContext
from nats.js.errors import NotFoundError

from services.conductor import pack
from services.core.database import db
from services.core.log import bus
from services.core.model import events, pageoptions, subjects
from services.core.model.errortypes import ErrorType
from services.core.model.status import JobStatus
from services.core.objectstore import storage
from services.core.objectstore.storage import Storage, open_storage
from services.core.runtime.settings import Settings
from tests.conftest import Stack, eventually
from tests.unit.conductor.test_merge import blank

TENANT = "t-acme"


@dataclass
class Conductor:
    """A running conductor and the clients a test drives and inspects it with."""

    js: JetStreamContext
    storage: Storage
    pool: asyncpg.Pool

    async def submit(self, items: list[dict[str, Any]], **fields: Any) -> events.BatchSubmitted:
        """Store an item list and publish its batch, as the gateway does."""
        batch_id = "b" + uuid.uuid4().hex[:31]
        key = subjects.batch_items_key(TENANT, batch_id)
        lines = b"".join(msgspec.json.encode(item) + b"\n" for item in items)
        await self.storage.put(key, lines, "application/x-ndjson")
        batch = events.BatchSubmitted(
            batch_id=batch_id, tenant=TENANT, total=len(items), items_key=key,
            template="<p>{{ n }}</p>", **fields,
        )  # fmt: skip
        await bus.publish_batch(self.js, batch)
        return batch

    async def submission(self, batch_id: str, index: int) -> events.JobSubmitted | None:
        subject = subjects.subject(subjects.item_job_id(batch_id, index), "submitted")
        try:
            raw = await self.js.get_last_msg(subjects.STREAM, subject)
        except NotFoundError:
            return None
        event = events.decode(raw.data or b"", subject=raw.subject or "")
        assert isinstance(event, events.JobSubmitted)
        return event

    async def expanded(self, batch: events.BatchSubmitted) -> list[events.JobSubmitted]:
        """Wait until every item's submission is in the log; they, in index order."""

        async def every() -> list[events.JobSubmitted] | None:
            found = [await self.submission(batch.batch_id, i) for i in range(batch.total)]
            return None if None in found else [s for s in found if s is not None]

        result: list[events.JobSubmitted] = await eventually(every, what="item submissions")
        return result

    async def state(self, batch_id: str) -> str | None:
        kv = await self.js.key_value(subjects.BATCH_STATE)
        try:
            entry = await kv.get(batch_id)
        except NotFoundError:  # never set, or deleted (KeyDeletedError)
            return None
        return msgspec.json.decode(entry.value or b"", type=events.BatchState).state

    async def state_becomes(self, batch_id: str, expected: str | None) -> None:
        async def reached() -> bool:
            return await self.state(batch_id) == expected

        await eventually(reached, what=f"batch state {expected}")

    async def pending_items(self, batch_id: str) -> int | None:
        """Submissions waiting in the batch's bulk durable; None if it does not exist."""
        try:
            info = await self.js.consumer_info(subjects.STREAM, subjects.bulk_durable(batch_id))
        except NotFoundError:
            return None
        return int(info.num_pending or 0)

    async def handled_all(self) -> bool:
        """Whether the conductor has acked everything published to it so far."""
        info = await self.js.consumer_info(subjects.STREAM, subjects.CONDUCTOR)
        return not info.num_pending and not info.num_ack_pending

    async def ended(self, batch_id: str, tag: str) -> events.BatchTerminal:
        async def get() -> events.BatchTerminal | None:
            try:
                raw = await self.js.get_last_msg(
                    subjects.STREAM, subjects.batch_subject(batch_id, tag)
                )
            except NotFoundError:
                return None
            event = events.decode_log(raw.data or b"", subject=raw.subject or "")
            assert isinstance(event, events.BATCH_TERMINAL)
            return event

        result: events.BatchTerminal = await eventually(get, what=f"batch {tag}")
        return result

    async def record(self, batch_id: str, index: int, status: str, **row: Any) -> None:
        """The item's `jobs` row as the projector writes it once the item has ended."""
        await self.pool.execute(
            """INSERT INTO jobs (id, tenant_id, status, attempts, error_type, error_message,
                                 object_key, input, created_at, batch_id, item_index)
               VALUES ($1, $2, $3, $4, $5, $6, $7, $8, now(), $9, $10)""",
            subjects.item_job_id(batch_id, index), TENANT, status, row.get("attempts", 1),
            row.get("error_type"), row.get("error_message"), row.get("object_key"),
            {"filename": row.get("filename")}, batch_id, index,
        )  # fmt: skip

    async def done(self, batch_id: str, index: int, filename: str, data: bytes) -> None:
        """A rendered item: its document stored where a renderer stores it."""
        key = storage.object_key(TENANT, subjects.item_job_id(batch_id, index))
        await self.storage.put(key, data, "application/pdf")
        await self.record(batch_id, index, "done", object_key=key, filename=filename)

    async def archive(self, key: str) -> bytes:
        return b"".join([chunk async for chunk in self.storage.read(key)])


@pytest.fixture
async def conductor(settings: Settings) -> AsyncIterator[Conductor]:
    stack = Stack(settings)
    await stack.start("conductor")
    async with (
        bus.open_bus(settings, name="test") as (_, js),
        open_storage(settings) as store,
        db.open_pool(settings, size=2) as pool,
    ):
        yield Conductor(js, store, pool)
    await stack.close()


def items(count: int) -> list[dict[str, Any]]:
    return [{"data": {"n": i}, "filename": f"invoice-{i}.pdf"} for i in range(count)]


async def test_a_submitted_batch_becomes_one_job_per_item_once(conductor: Conductor):
    """Every item is submitted as job `<batch>.<index>` with its own data and file name,
    the batch's options and no template; the batch runs (bulk durable, state `running`);
    a second copy of the batch's submission adds no item."""
    options = pageoptions.PageOptions(format="Letter", landscape=True)
    batch = await conductor.submit(items(300), options=options, webhook_url="http://x/h")
    submitted = await conductor.expanded(batch)
    assert [s.job_id for s in submitted] == [f"{batch.batch_id}.{i}" for i in range(300)]
    for index, item in enumerate(submitted):
        assert (item.batch_id, item.index, item.tenant) == (batch.batch_id, index, TENANT)
        assert (item.filename, item.data) == (f"invoice-{index}.pdf", {"n": index})
        assert item.template == "" and item.options == options
        assert item.webhook_url is None and item.url is None
    assert await conductor.state(batch.batch_id) == "running"
    assert await eventually(lambda: conductor.pending_items(batch.batch_id)) == 300

    await conductor.js.publish(
        subjects.batch_subject(batch.batch_id, "submitted"), events.encode_batch(batch),
        stream=subjects.STREAM, headers={"Nats-Msg-Id": "a-second-copy"},
    )  # fmt: skip
    await eventually(conductor.handled_all, what="the copy handled")
    assert await conductor.pending_items(batch.batch_id) == 300


async def test_items_with_their_own_url_are_submitted_with_it(conductor: Conductor):
    urls = [{"url": f"https://example.com/{i}", "filename": f"{i}.pdf"} for i in range(3)]
    batch = await conductor.submit(urls)
    submitted = await conductor.expanded(batch)
    assert [s.url for s in submitted] == [u["url"] for u in urls]


async def test_a_batch_paused_before_its_expansion_stays_paused(conductor: Conductor):
    batch_id = "b" + uuid.uuid4().hex[:31]
    await bus.publish_batch(conductor.js, events.BatchPaused(batch_id=batch_id, tenant=TENANT))
    assert await eventually(lambda: conductor.state(batch_id)) == "paused"
    key = subjects.batch_items_key(TENANT, batch_id)
    await conductor.storage.put(key, b'{"filename":"a.pdf"}\n', "application/x-ndjson")
    batch = events.BatchSubmitted(batch_id=batch_id, tenant=TENANT, total=1, items_key=key)
    await bus.publish_batch(conductor.js, batch)
    await conductor.expanded(batch)
    await eventually(conductor.handled_all, what="the submission handled")
    assert await conductor.state(batch_id) == "paused"
    await bus.publish_batch(conductor.js, events.BatchResumed(batch_id=batch_id, tenant=TENANT))
    await conductor.state_becomes(batch_id, "running")


async def test_a_batch_whose_item_list_is_missing_fails(conductor: Conductor):
    batch = events.BatchSubmitted(
        batch_id="b" + uuid.uuid4().hex[:31], tenant=TENANT, total=4,
        items_key="batches/t-acme/nowhere/items.jsonl", webhook_url="http://x/h",
    )  # fmt: skip
    await bus.publish_batch(conductor.js, batch)
    failed = await conductor.ended(batch.batch_id, "failed")
    assert isinstance(failed, events.BatchFailed)
    assert failed.error.type == "batch_items_missing"
    assert (failed.total, failed.done, failed.failed) == (4, 0, 4)
    assert failed.webhook_url == "http://x/h"
    # The conductor drops the durable and the state after it published the end.
    await conductor.state_becomes(batch.batch_id, None)
    assert await conductor.pending_items(batch.batch_id) is None


async def test_a_complete_batch_is_packed_with_every_document_and_a_manifest(
    conductor: Conductor,
):
    """The archive holds each done item's document byte for byte under its file name
    (one of them larger than a storage chunk), and a manifest naming both failures; the
    batch ends `done` with the archive's key and size, and its durable and state go."""
    batch = await conductor.submit(items(5), webhook_url="http://x/h")
    await conductor.expanded(batch)
    b = batch.batch_id
    documents = {0: b"%PDF-1.7 zero", 2: b"%PDF-1.7 " + bytes(3 * 2**20 + 7), 4: b"%PDF four"}
    for index, data in documents.items():
        await conductor.done(b, index, f"invoice-{index}.pdf", data)
    await conductor.record(
        b,
        1,
        "failed",
        attempts=3,
        error_type=ErrorType.TIMEOUT,
        error_message="took longer than 30s",
        filename="invoice-1.pdf",
    )
    await conductor.record(b, 3, "failed", error_type="template", error_message="undefined n",
                           filename="invoice-3.pdf")  # fmt: skip
    await bus.publish_batch(conductor.js, events.BatchComplete(batch_id=b, tenant=TENANT))

    done = await conductor.ended(b, "done")
    assert isinstance(done, events.BatchDone)
    assert done.object_key == subjects.batch_archive_key(TENANT, b)
    assert (done.total, done.done, done.failed, done.cancelled) == (5, 3, 2, 0)
    assert done.webhook_url == "http://x/h"
    archive = await conductor.archive(done.object_key)
    assert done.bytes == len(archive)
    with zipfile.ZipFile(io.BytesIO(archive)) as zf:
        assert sorted(zf.namelist()) == sorted(
            ["invoice-0.pdf", "invoice-2.pdf", "invoice-4.pdf", "manifest.json"]
        )
        for index, data in documents.items():
            assert zf.read(f"invoice-{index}.pdf") == data
        manifest = json.loads(zf.read("manifest.json"))
    assert (manifest["batch_id"], manifest["total"], manifest["done"]) == (b, 5, 3)
    assert (manifest["failed"], manifest["cancelled"]) == (2, 0)
    assert [item["status"] for item in manifest["items"]] == [
        "done", "failed", "done", "failed", "done"
    ]  # fmt: skip
    assert manifest["items"][1] == {
        "index": 1, "filename": "invoice-1.pdf", "job_id": f"{b}.1", "status": "failed",
        "attempts": 3, "error": {"type": "timeout", "message": "took longer than 30s"},
    }  # fmt: skip
    assert manifest["items"][3]["error"] == {"type": "template", "message": "undefined n"}
    assert manifest["items"][0]["error"] is None
    await conductor.state_becomes(b, None)
    await eventually(conductor.handled_all, what="the completion handled")
    assert await conductor.pending_items(b) is None
    # A pause, or a copy of the submission, after the end does not bring it back.
    await bus.publish_batch(conductor.js, events.BatchPaused(batch_id=b, tenant=TENANT))
    await conductor.js.publish(
        subjects.batch_subject(b, "submitted"), events.encode_batch(batch),
        stream=subjects.STREAM, headers={"Nats-Msg-Id": "a-late-copy"},
    )  # fmt: skip
    await eventually(conductor.handled_all, what="the late events handled")
    assert await conductor.state(b) is None
    assert await conductor.pending_items(b) is None


async def test_a_batch_where_every_item_failed_fails_with_a_manifest(conductor: Conductor):
    batch = await conductor.submit(items(2))
    await conductor.expanded(batch)
    for index in range(2):
        await conductor.record(batch.batch_id, index, "failed", error_type="source",
                               error_message=f"404 for item {index}")  # fmt: skip
    await bus.publish_batch(
        conductor.js, events.BatchComplete(batch_id=batch.batch_id, tenant=TENANT)
    )
    failed = await conductor.ended(batch.batch_id, "failed")
    assert isinstance(failed, events.BatchFailed)
    assert failed.error.type == "no_documents"
    assert "item 0: source: 404 for item 0" in failed.error.message
    assert (failed.done, failed.failed) == (0, 2)
    assert failed.object_key is not None
    with zipfile.ZipFile(io.BytesIO(await conductor.archive(failed.object_key))) as zf:
        assert zf.namelist() == ["manifest.json"]
        assert len(json.loads(zf.read("manifest.json"))["items"]) == 2


async def test_a_cancelled_batch_cancels_its_open_items_and_ends_cancelled(
    conductor: Conductor,
):
    """A cancel stops the batch for good (a resume does not restart it), ends every item
    that had not ended, and the batch ends `cancelled` with the archive of what was made."""
    batch = await conductor.submit(items(4))
    await conductor.expanded(batch)
    b = batch.batch_id
    await conductor.done(b, 0, "invoice-0.pdf", b"%PDF zero")
    await bus.publish_batch(conductor.js, events.BatchCancel(batch_id=b, tenant=TENANT))
    for index in (1, 2, 3):
        subject = subjects.subject(subjects.item_job_id(b, index), "cancelled")
        await eventually(lambda s=subject: _stored(conductor.js, s), what=subject)
    assert not await _stored(
        conductor.js, subjects.subject(subjects.item_job_id(b, 0), "cancelled")
    )
    assert await conductor.state(b) == "cancelled"
    await bus.publish_batch(conductor.js, events.BatchResumed(batch_id=b, tenant=TENANT))
    await eventually(conductor.handled_all, what="the resume handled")
    assert await conductor.state(b) == "cancelled"

    for index in (1, 2, 3):
        await conductor.record(b, index, "cancelled", filename=f"invoice-{index}.pdf")
    await bus.publish_batch(conductor.js, events.BatchComplete(batch_id=b, tenant=TENANT))
    cancelled = await conductor.ended(b, "cancelled")
    assert isinstance(cancelled, events.BatchCancelled)
    assert (cancelled.done, cancelled.cancelled) == (1, 3)
    assert cancelled.object_key is not None
    with zipfile.ZipFile(io.BytesIO(await conductor.archive(cancelled.object_key))) as zf:
        assert zf.read("invoice-0.pdf") == b"%PDF zero"


async def test_a_merged_batch_is_one_pdf_of_its_documents_in_order(conductor: Conductor):
    """Item 0 (two pages) then item 2 (one page); failed item 1 leaves no gap, and item 3,
    not a PDF, is left out. Page widths tell the pages apart."""
    batch = await conductor.submit(items(4), output="merged")
    await conductor.expanded(batch)
    await conductor.done(batch.batch_id, 0, "0.pdf", blank(100, 101))
    await conductor.record(
        batch.batch_id, 1, "failed", error_type=ErrorType.TEMPLATE, error_message="y"
    )
    await conductor.done(batch.batch_id, 2, "2.pdf", blank(102))
    await conductor.done(batch.batch_id, 3, "3.png", b"\x89PNG not a PDF")
    await bus.publish_batch(
        conductor.js, events.BatchComplete(batch_id=batch.batch_id, tenant=TENANT)
    )
    done = await conductor.ended(batch.batch_id, "done")
    assert isinstance(done, events.BatchDone)
    assert done.object_key == subjects.batch_archive_key(TENANT, batch.batch_id, "pdf")
    merged = pypdf.PdfReader(io.BytesIO(await conductor.archive(done.object_key)))
    assert [float(page.mediabox.width) for page in merged.pages] == [100, 101, 102]


async def _stored(js: JetStreamContext, subject: str) -> bool:
    try:
        await js.get_last_msg(subjects.STREAM, subject)
    except NotFoundError:
        return False
    return True


async def test_documents_with_the_same_file_name_both_reach_the_archive(
    conductor: Conductor,
):
    """A repeated name, in any case, or the manifest's own, gets ` (2)` before its
    extension."""
    batch = await conductor.submit(items(4))
    await conductor.expanded(batch)
    for index, name in enumerate(["same.pdf", "same.pdf", "SAME.pdf", "manifest.json"]):
        await conductor.done(batch.batch_id, index, name, f"%PDF {index}".encode())
    await bus.publish_batch(
        conductor.js, events.BatchComplete(batch_id=batch.batch_id, tenant=TENANT)
    )
    done = await conductor.ended(batch.batch_id, "done")
    names = ["same.pdf", "same (2).pdf", "SAME (3).pdf", "manifest (2).json"]
    with zipfile.ZipFile(io.BytesIO(await conductor.archive(done.object_key or ""))) as zf:
        assert [zf.read(n) for n in names] == [b"%PDF 0", b"%PDF 1", b"%PDF 2", b"%PDF 3"]
        listed = [item["filename"] for item in json.loads(zf.read("manifest.json"))["items"]]
    assert listed == names


HOSTILE_NAMES = [
    "../../../etc/cron.d/evil.pdf",
    "..\\..\\Windows\\evil.pdf",
    "C:\\evil.pdf",
    "/abs/evil.pdf",
    "CON.pdf",
    "com\u00b9.pdf",
    "invoice\u202efdp.exe",
    "a\uff0fb.pdf",
    "a\u2215b.pdf",
    "report.pdf. ",
    "..",
    "r\u00e9sum\u00e9.pdf",
    "re\u0301sume\u0301.pdf",  # the same name, decomposed
    "R\u00c9SUM\u00c9.pdf",  # and in capitals
    "a\u200bb\x01\x1b.pdf",
    "\u65e5" * 120 + ".pdf",
]


async def test_hostile_file_names_unpack_safely_and_apart(conductor: Conductor, tmp_path):
    """Names that reached the archive's item list unchecked (an item list stored before
    the gateway refused them) are unpacked by Python's zipfile inside its folder, under
    safe names, each document its own file, also on a case-insensitive disk."""
    batch = await conductor.submit(items(len(HOSTILE_NAMES)))
    await conductor.expanded(batch)
    for index, name in enumerate(HOSTILE_NAMES):
        await conductor.done(batch.batch_id, index, name, f"%PDF {index}".encode())
    await bus.publish_batch(
        conductor.js, events.BatchComplete(batch_id=batch.batch_id, tenant=TENANT)
    )
    done = await conductor.ended(batch.batch_id, "done")
    folder = tmp_path / "unpacked"
    with zipfile.ZipFile(io.BytesIO(await conductor.archive(done.object_key or ""))) as zf:
        names = zf.namelist()
        zf.extractall(folder)
        listed = [item["filename"] for item in json.loads(zf.read("manifest.json"))["items"]]
    assert names == [*listed, "manifest.json"]
    assert names[:10] == [
        "_.._.._etc_cron.d_evil.pdf",
        "_.._Windows_evil.pdf",
        "C__evil.pdf",
        "_abs_evil.pdf",
        "_CON.pdf",
        "_com\u00b9.pdf",
        "invoicefdp.exe",
        "a_b.pdf",
        "a_b (2).pdf",
        "report.pdf",
    ]
    assert names[10:14] == ["10.pdf", "r\u00e9sum\u00e9.pdf", "r\u00e9sum\u00e9 (2).pdf",
                            "R\u00c9SUM\u00c9 (3).pdf"]  # fmt: skip
    assert names[14] == "ab.pdf" and len(names[15].encode()) <= 255
    unpacked = sorted(path.name for path in folder.iterdir())
    assert unpacked == sorted(names)  # nothing outside the folder, nothing in a subfolder
    assert len({name.casefold() for name in names}) == len(names)
    for index, name in enumerate(listed):
        assert (folder / name).read_bytes() == f"%PDF {index}".encode()


@pytest.mark.parametrize("backend", ["local", "s3"])
async def test_packing_holds_about_one_part_whatever_the_documents_add_up_to(
    backend: str, request: pytest.FixtureRequest
):
    """48 MiB of documents are packed while the conductor's memory grows by well under
    their total: one storage part and a chunk or two, not the archive."""
    settings = request.getfixturevalue("s3_settings" if backend == "s3" else "settings")
    async with open_storage(settings) as store:
        outcomes = []
        for index in range(6):
            key = f"jobs/{TENANT}/big.{index}.pdf"
            await store.put(key, os.urandom(8 * 2**20), "application/pdf")
            outcomes.append(pack.Outcome(
                id=f"b.{index}", item_index=index, status=JobStatus.DONE, attempts=1,
                error_type=None, error_message=None, object_key=key, filename=f"{index}.pdf",
            ))  # fmt: skip

        tracemalloc.start()
        try:
            size = await pack.write_zip(store, "batches/t/b/big.zip", "b", outcomes)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    assert size > 48 * 2**20
    assert peak < 24 * 2**20, f"packing peaked at {peak / 2**20:.1f} MiB"

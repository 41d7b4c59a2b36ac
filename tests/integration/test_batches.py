"""Bulk runs end to end: one request, every item rendered once, one archive.

The whole stack runs (gateway, conductor, renderers, projector, notifier) over real NATS,
PostgreSQL and Chromium; what is asserted is what the client sees: the batch's status
document, the archive behind its signed URL, and the webhook.
"""

from __future__ import annotations

import io
import json
import zipfile
from typing import Any

import aiohttp
from pypdf import PdfReader

from tests.conftest import Receiver, Stack, eventually

INVOICE = "<h1>Invoice {{ number }}</h1><p>Bill to {{ customer }}</p>"


async def batch_status(stack: Stack, batch_id: str) -> dict[str, Any]:
    async with stack.client.get(f"{stack.url}/batches/{batch_id}") as response:
        assert response.status == 200, await response.text()
        result: dict[str, Any] = await response.json()
        return result


async def finished_batch(stack: Stack, batch_id: str, timeout: float = 120) -> dict[str, Any]:
    async def terminal() -> dict[str, Any] | None:
        batch = await batch_status(stack, batch_id)
        return batch if batch["status"] in {"done", "failed", "cancelled"} else None

    result: dict[str, Any] = await eventually(terminal, timeout)
    return result


async def submit_batch(stack: Stack, body: dict[str, Any]) -> str:
    async with stack.client.post(f"{stack.url}/batches", json=body) as response:
        assert response.status == 202, await response.text()
        batch_id: str = (await response.json())["id"]
        return batch_id


async def control(stack: Stack, batch_id: str, action: str) -> tuple[int, dict[str, Any]]:
    async with stack.client.post(f"{stack.url}/batches/{batch_id}/{action}") as response:
        return response.status, await response.json()


async def get_json(stack: Stack, path: str) -> dict[str, Any]:
    async with stack.client.get(f"{stack.url}{path}") as response:
        assert response.status == 200, await response.text()
        result: dict[str, Any] = await response.json()
        return result


async def all_items(stack: Stack, batch_id: str, status: str | None = None) -> list[Any]:
    """Every item of the batch (optionally in one status), following `next_offset`."""
    found: list[Any] = []
    offset: int | None = 0
    while offset is not None:
        query = f"limit=16&offset={offset}" + (f"&status={status}" if status else "")
        page = await get_json(stack, f"/batches/{batch_id}/items?{query}")
        found += page["items"]
        offset = page["next_offset"]
    return found


async def starts(stack: Stack, job_id: str) -> int:
    """How many attempts of the item started: one `started` event each."""
    timeline = await get_json(stack, f"/jobs/{job_id}/events")
    return sum(1 for event in timeline["events"] if event["type"] == "started")


def invoices(count: int) -> list[dict[str, Any]]:
    return [{"data": {"number": f"N-{i:03d}", "customer": f"C{i}"}} for i in range(count)]


async def download(url: str) -> bytes:
    async with aiohttp.ClientSession() as http, http.get(url) as response:
        assert response.status == 200, await response.text()
        return await response.read()


def text_of(pdf: bytes) -> str:
    return "".join(page.extract_text() for page in PdfReader(io.BytesIO(pdf)).pages)


async def test_a_batch_with_two_failing_items_ends_done_with_48_documents_and_a_manifest(
    stack: Stack, receiver: Receiver
) -> None:
    failing = {7, 31}  # these items lack `customer`: their template fails
    items = [
        {"data": {"number": f"N-{i:03d}"} | ({} if i in failing else {"customer": f"C{i}"})}
        for i in range(50)
    ]
    items[3]["filename"] = "special-three.pdf"
    body = {"template": INVOICE, "items": items, "webhook_url": receiver.url}
    async with stack.client.post(f"{stack.url}/batches", json=body) as response:
        assert response.status == 202, await response.text()
        accepted = await response.json()
    assert accepted["status"] == "queued" and accepted["total"] == 50
    batch_id = accepted["id"]

    batch = await finished_batch(stack, batch_id)
    assert batch["status"] == "done", batch
    assert (batch["total"], batch["done"], batch["failed"], batch["cancelled"]) == (50, 48, 2, 0)
    assert batch["progress"] == 1

    archive = zipfile.ZipFile(io.BytesIO(await download(batch["url"])))
    names = archive.namelist()
    assert names[-1] == "manifest.json"
    documents = [name for name in names if name.endswith(".pdf")]
    assert len(documents) == 48 and len(set(documents)) == 48
    assert "special-three.pdf" in documents
    manifest = json.loads(archive.read("manifest.json"))
    outcomes = {item["index"]: item for item in manifest["items"]}
    assert sorted(outcomes) == list(range(50))
    for index in failing:
        assert outcomes[index]["status"] == "failed"
        assert outcomes[index]["error"]["type"] == "template", outcomes[index]
        assert "customer" in outcomes[index]["error"]["message"]
        assert outcomes[index]["filename"] not in documents
    # Every document is its own item's: the file named in the manifest holds its number.
    for index in (0, 3, 49):
        assert f"N-{index:03d}" in text_of(archive.read(outcomes[index]["filename"]))
        assert outcomes[index]["job_id"] == f"{batch_id}.{index}"

    async def webhook() -> dict[str, Any] | None:
        calls = [r["json"] for r in receiver.requests if r["json"]["type"].startswith("batch.")]
        return calls[0] if calls else None

    hook = await eventually(webhook, 30)
    assert hook["type"] == "batch.done"
    assert (hook["data"]["id"], hook["data"]["done"], hook["data"]["failed"]) == (batch_id, 48, 2)
    assert len(receiver.requests) == 1  # no progress webhooks unless asked for
    # Items are jobs: each one's status is there, with the failure's root cause.
    async with stack.client.get(f"{stack.url}/jobs/{batch_id}.7") as response:
        item = await response.json()
    assert item["status"] == "failed" and "customer" in item["error"]["message"]

    # The batch in its tenant's list, its failed items, its own timeline.
    listed = await get_json(stack, "/batches?status=done")
    assert [b["id"] for b in listed["batches"]] == [batch_id]
    assert (await get_json(stack, "/batches?status=running"))["batches"] == []
    failed_items = await all_items(stack, batch_id, "failed")
    assert [item["index"] for item in failed_items] == sorted(failing)
    assert all("customer" in item["error"]["message"] for item in failed_items)
    every = await all_items(stack, batch_id)
    assert [item["index"] for item in every] == list(range(50))
    assert every[3]["filename"] == "special-three.pdf" and every[3]["status"] == "done"
    timeline = await get_json(stack, f"/batches/{batch_id}/events")
    assert [e["type"] for e in timeline["events"]] == ["submitted", "complete", "done"]
    assert "template" not in timeline["events"][0]
    # An ended batch cannot be paused or resumed.
    assert (await control(stack, batch_id, "pause"))[0] == 409
    assert (await control(stack, batch_id, "resume"))[0] == 409


async def test_a_paused_batch_starts_nothing_and_resumed_renders_no_item_twice(
    stack: Stack,
) -> None:
    batch_id = await submit_batch(stack, {"template": INVOICE, "items": invoices(40)})

    async def some_done() -> bool:
        return (await batch_status(stack, batch_id))["done"] >= 3

    await eventually(some_done, 60)
    status, answer = await control(stack, batch_id, "pause")
    assert (status, answer["status"]) == (202, "paused")
    assert (await control(stack, batch_id, "pause"))[0] == 202  # idempotent

    # Items already rendering finish; then nothing moves.
    async def settled() -> dict[str, Any] | None:
        batch = await batch_status(stack, batch_id)
        running = await all_items(stack, batch_id, "running")
        return batch if batch["status"] == "paused" and not running else None

    paused = await eventually(settled, 30)
    ended = paused["done"] + paused["failed"]
    assert ended < 40, "the batch finished before the pause could hold anything"
    # Renderers are busy with other work meanwhile, and still start no item of the batch.
    for _ in range(2):
        job = await stack.submit({"template": "<p>meanwhile</p>"})
        assert (await stack.finished(job["id"]))["status"] == "done"
    still = await batch_status(stack, batch_id)
    assert (still["status"], still["done"] + still["failed"]) == ("paused", ended)
    assert len(await all_items(stack, batch_id, "running")) == 0

    status, answer = await control(stack, batch_id, "resume")
    assert (status, answer["status"]) == (202, "running")
    batch = await finished_batch(stack, batch_id)
    assert (batch["status"], batch["done"]) == ("done", 40)
    # Every item was started exactly once: nothing finished was rendered again.
    counts = [await starts(stack, f"{batch_id}.{i}") for i in range(40)]
    assert counts == [1] * 40
    archive = zipfile.ZipFile(io.BytesIO(await download(batch["url"])))
    assert len([n for n in archive.namelist() if n.endswith(".pdf")]) == 40


async def test_a_cancelled_batch_ends_early_with_the_archive_of_what_finished(
    stack: Stack, receiver: Receiver
) -> None:
    body = {"template": INVOICE, "items": invoices(60), "webhook_url": receiver.url}
    batch_id = await submit_batch(stack, body)

    async def some_done() -> bool:
        return (await batch_status(stack, batch_id))["done"] >= 3

    await eventually(some_done, 60)
    status, answer = await control(stack, batch_id, "cancel")
    assert status == 202 and answer["cancelling"] is True
    assert (await control(stack, batch_id, "resume"))[0] == 409  # resume after cancel
    assert (await control(stack, batch_id, "pause"))[0] == 409

    batch = await finished_batch(stack, batch_id)
    assert batch["status"] == "cancelled", batch
    assert batch["done"] >= 3 and batch["cancelled"] > 0
    assert batch["done"] + batch["failed"] + batch["cancelled"] == 60
    assert (await control(stack, batch_id, "cancel"))[0] == 200  # idempotent once ended

    archive = zipfile.ZipFile(io.BytesIO(await download(batch["url"])))
    documents = [n for n in archive.namelist() if n.endswith(".pdf")]
    assert len(documents) == batch["done"]
    manifest = json.loads(archive.read("manifest.json"))
    statuses = [item["status"] for item in manifest["items"]]
    assert statuses.count("cancelled") == batch["cancelled"]
    cancelled_items = await all_items(stack, batch_id, "cancelled")
    assert len(cancelled_items) == batch["cancelled"]

    async def webhook() -> dict[str, Any] | None:
        calls = [r["json"] for r in receiver.requests if r["json"]["type"].startswith("batch.")]
        return calls[0] if calls else None

    hook = await eventually(webhook, 30)
    assert (hook["type"], hook["data"]["cancelled"]) == ("batch.cancelled", batch["cancelled"])


async def test_progress_webhooks_come_while_it_runs_then_its_end(
    stack: Stack, receiver: Receiver
) -> None:
    body = {
        "template": INVOICE, "items": invoices(60), "webhook_url": receiver.url,
        "progress_webhooks": True,
    }  # fmt: skip
    batch_id = await submit_batch(stack, body)
    batch = await finished_batch(stack, batch_id)
    assert batch["status"] == "done"

    async def ended() -> list[dict[str, Any]] | None:
        calls = [r["json"] for r in receiver.requests]
        return calls if calls and calls[-1]["type"] == "batch.done" else None

    calls = await eventually(ended, 30)
    progress = [call["data"] for call in calls[:-1]]
    assert progress, "no batch.progress webhook came before batch.done"
    assert all(call["type"] == "batch.progress" for call in calls[:-1])
    counts = [p["done"] + p["failed"] + p["cancelled"] for p in progress]
    assert counts == sorted(counts) and counts[0] > 0 and counts[-1] < 60
    assert all(p["id"] == batch_id and p["status"] == "running" for p in progress)
    assert progress[0]["progress"] == counts[0] / 60

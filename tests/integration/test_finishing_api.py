"""The finishing options through the whole stack: accepted or refused (400 naming the
option) by the gateway, carried by the log, done by the renderer's finishing workers, and
the stored file read back with pikepdf; a finishing limit exceeded fails the job at once.
Each step's output is checked in detail in test_finishing.py."""

from __future__ import annotations

import io
from dataclasses import replace
from pathlib import Path
from typing import Any

import pikepdf

from services.core.runtime.settings import Settings
from tests.conftest import Stack

ROOT = Path(__file__).resolve().parents[2]
INVOICE_XML = (ROOT / "examples" / "factur-x.xml").read_text()
INVOICE = {"html": "<title>Invoice</title><h1>Invoice INV-2026-004217</h1>"}


async def downloaded(stack: Stack, job: dict[str, Any]) -> bytes:
    assert job["status"] == "done", job
    async with stack.client.get(job["url"]) as response:
        assert response.status == 200
        return await response.read()


async def refused(stack: Stack, options: dict[str, Any]) -> dict[str, Any]:
    async with stack.client.post(f"{stack.url}/jobs", json={**INVOICE, "options": options}) as r:
        assert r.status == 400, await r.text()
        error: dict[str, Any] = (await r.json())["error"]
        return error


async def test_facturx_and_encrypted_jobs_are_done_beside_an_untouched_plain_job(
    stack: Stack,
) -> None:
    facturx = {"facturx": {"xml": INVOICE_XML, "profile": "EN 16931"}}
    crypt = {"encrypt": {"owner_password": "owner-pass-1", "permissions": ["print", "copy"]}}
    jobs = [await stack.submit({**INVOICE, "options": o}) for o in (facturx, crypt, {})]
    invoice, encrypted, plain = [await stack.finished(j["id"]) for j in jobs]
    with pikepdf.open(io.BytesIO(await downloaded(stack, invoice))) as doc:
        xml = doc.attachments["factur-x.xml"].get_file().read_bytes()
        assert xml == INVOICE_XML.encode()
        assert doc.open_metadata()["pdfaid:part"] == "3"
    data = await downloaded(stack, encrypted)
    with pikepdf.open(io.BytesIO(data)) as doc:  # no user password: opens, with limits
        assert doc.is_encrypted and doc.allow.extract and not doc.allow.modify_other
    with pikepdf.open(io.BytesIO(await downloaded(stack, plain))) as doc:
        assert "/OutputIntents" not in doc.Root and not doc.is_encrypted


async def test_bad_finishing_options_are_a_400_naming_the_option(stack: Stack) -> None:
    cases = {
        "options.facturx.xml": {"facturx": {"xml": "<Invoice>", "profile": "BASIC"}},
        "options.facturx.profile": {"facturx": {"xml": INVOICE_XML, "profile": "GOLD"}},
        "options.encrypt.owner_password": {"encrypt": {"owner_password": "short"}},
        "options.encrypt": {"pdfa": "3b", "encrypt": {"owner_password": "owner-pass-1"}},
        "options.encrypt.permissions[0]": {
            "encrypt": {"owner_password": "owner-pass-1", "permissions": ["everything"]}
        },
        "options.pdfa": {"pdfa": "1b"},
        "options.attachments[0].content": {
            "attachments": [{"name": "a.csv", "content": "text/csv,1,2"}]
        },
    }
    for field, options in cases.items():
        error = await refused(stack, options)
        assert (error["type"], error["field"]) == ("validation", field), (options, error)
    unknown = await refused(stack, {"encrypt": {"owner_password": "owner-pass-1", "aes": 1}})
    assert "aes" in unknown["message"]


async def test_finishing_over_its_time_limit_fails_the_job_at_once(settings: Settings) -> None:
    stack = Stack(replace(settings, finishing_timeout=0.01))
    await stack.start()
    try:
        job = await stack.finished(
            (await stack.submit({**INVOICE, "options": {"pdfa": "2b"}}))["id"]
        )
        # Untagged: a tagged print is compacted in a finishing worker, under the same limit.
        untagged = {**INVOICE, "options": {"tagged": False}}
        plain = await stack.finished((await stack.submit(untagged))["id"])
    finally:
        await stack.close()
    assert (job["status"], job["attempts"], job["error"]["type"]) == ("failed", 1, "finishing")
    assert "finishing the PDF took longer than 0.01 s" in job["error"]["message"]
    assert plain["status"] == "done"

"""Passwords of jobs through the whole stack: an encrypted input's password and an
`encrypt` step's (or `options.encrypt`'s) owner and user passwords reach neither the log
nor PostgreSQL in plain text, and the PDF made still opens with them (pikepdf, qpdf).

The log's message is read raw from JetStream, the job's row and its events raw from
PostgreSQL: what an operator with access to either could read.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import asyncpg
import nats
import pikepdf
import pytest

from tests.conftest import Stack
from tests.integration import hostile_pdfs
from tests.integration.pdf_inputs import TOOLS, qpdf_check
from tests.integration.test_batches import finished_batch, submit_batch
from tests.integration.test_pdf_jobs import download, posted

pytestmark = TOOLS

INPUT, OWNER, USER = "input-pw-Qx81", "owner-pw-Zr27", "user-pw-Kd44"


async def raw_records(stack: Stack, job_id: str, subject: str | None = None) -> bytes:
    """The job's submission as the log holds it (at `subject`; a single job's by
    default), its row and its events as PostgreSQL does."""
    nc = await nats.connect(stack.settings.nats_url)
    try:
        subject = subject or f"jobs.{job_id}.submitted.*"
        raw = await nc.jetstream().get_last_msg("JOBS", subject)
    finally:
        await nc.close()
    conn = await asyncpg.connect(stack.settings.database_url)
    try:
        row = await conn.fetchval("SELECT j::text FROM jobs AS j WHERE id = $1", job_id)
        timeline = await conn.fetchval(
            "SELECT string_agg(body::text, '') FROM job_events WHERE job_id = $1", job_id
        )
    finally:
        await conn.close()
    assert b"sealed2:" in raw.data and "sealed2:" in row
    return raw.data + row.encode() + timeline.encode()


def opened_with_user_password_only(data: bytes, tmp_path: Path) -> int:
    """The PDF's pages, opened with the user password (qpdf agrees); without any it
    does not open."""
    with pytest.raises(pikepdf.PasswordError):
        pikepdf.open(io.BytesIO(data))
    qpdf_check(data, tmp_path, f"--password={USER}")
    with pikepdf.open(io.BytesIO(data), password=USER) as pdf:
        assert pdf.is_encrypted
        return len(pdf.pages)


async def test_pdf_tools_passwords_are_sealed_on_the_log_and_in_postgres(
    stack: Stack, tmp_path: Path
) -> None:
    locked = hostile_pdfs.encrypted(INPUT)
    steps: list[dict[str, Any]] = [
        {"step": "merge"},
        {"step": "encrypt", "owner_password": OWNER, "user_password": USER},
    ]
    work = {"pdf": {"inputs": [{"file": "locked.pdf", "password": INPUT}], "steps": steps}}
    job_id = await posted(stack, {"locked.pdf": locked}, work)
    data, _ = await download(stack, await stack.finished(job_id, timeout=90))
    with pikepdf.open(io.BytesIO(locked), password=INPUT) as source:
        assert opened_with_user_password_only(data, tmp_path) == len(source.pages)
    with pikepdf.open(io.BytesIO(data), password=OWNER) as pdf:
        assert pdf.owner_password_matched
    records = await raw_records(stack, job_id)
    for secret in (INPUT, OWNER, USER):
        assert secret.encode() not in records, secret


async def test_a_rendering_jobs_encryption_passwords_are_sealed_too(
    stack: Stack, tmp_path: Path
) -> None:
    crypt = {"owner_password": OWNER, "user_password": USER}
    job = await stack.submit({"html": "<p>Sealed</p>", "options": {"encrypt": crypt}})
    data, _ = await download(stack, await stack.finished(job["id"], timeout=90))
    assert opened_with_user_password_only(data, tmp_path) == 1
    records = await raw_records(stack, job["id"])
    for secret in (OWNER, USER):
        assert secret.encode() not in records, secret


async def test_a_batchs_encryption_passwords_are_sealed_for_the_batch_and_its_items(
    stack: Stack, tmp_path: Path
) -> None:
    crypt = {"owner_password": OWNER, "user_password": USER}
    body = {
        "template": "<p>Item {{ n }}</p>",
        "items": [{"data": {"n": 1}}, {"data": {"n": 2}}],
        "options": {"encrypt": crypt},
    }
    batch_id = await submit_batch(stack, body)
    assert (await finished_batch(stack, batch_id))["status"] == "done"
    item = f"{batch_id}.0"
    data, _ = await download(stack, await stack.job(item))
    assert opened_with_user_password_only(data, tmp_path) == 1
    nc = await nats.connect(stack.settings.nats_url)
    try:
        batch = await nc.jetstream().get_last_msg("JOBS", f"batches.{batch_id}.submitted")
    finally:
        await nc.close()
    records = await raw_records(stack, item, f"jobs.{item}.submitted")
    assert b"sealed2:" in batch.data
    for secret in (OWNER, USER):
        assert secret.encode() not in records + batch.data, secret

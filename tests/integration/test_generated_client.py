"""A client generated from the live gateway's OpenAPI document, by a common generator
(`openapi-python-client`, offline), used against the real stack.

Verifies: the served document generates a client with no warning but the generator's two
known limits (an answer of several binary types, `GET /files/{key}`; a JSON Lines body,
`POST /batches`, whose JSON form is generated); that client submits a job with nested
print options, polls it to `done` through its typed models (the status an enum), downloads
the PDF from the signed link it reads, lists the job under a status filter, and reads a
404 as the documented error body whose `type` is the `ErrorType` enum.
"""

from __future__ import annotations

import asyncio
import importlib
import json
import re
import subprocess
import sys
import time
from pathlib import Path
from types import ModuleType
from typing import Any

import httpx

from tests.conftest import Stack

GENERATOR = Path(sys.executable).parent / "openapi-python-client"
PACKAGE = "pressroom_generated"
KNOWN_LIMITS = {"GET /files/{key}", "POST /batches", "POST /validate"}
"""Operations the generator warns about: several binary media types for one answer, a
JSON Lines body (it generates the JSON one), a body as a PDF or as a form."""


def generate(document: dict[str, Any], folder: Path) -> set[str]:
    """Generate the client into `folder` (importable as `PACKAGE`); the operations the
    generator warned about."""
    (folder / "openapi.json").write_text(json.dumps(document))
    config = f"post_hooks: []\nproject_name_override: {PACKAGE}\npackage_name_override: {PACKAGE}\n"
    (folder / "config.yaml").write_text(config)
    ran = subprocess.run(
        [str(GENERATOR), "generate", "--path", "openapi.json", "--output-path", PACKAGE,
         "--meta", "none", "--config", "config.yaml"],
        cwd=folder, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert ran.returncode == 0, ran.stdout + ran.stderr
    return set(re.findall(r"WARNING parsing (\w+ \S+) within", ran.stdout + ran.stderr))


def load(folder: Path, name: str) -> ModuleType:
    """`PACKAGE.<name>`, imported from `folder`."""
    sys.path.insert(0, str(folder))
    try:
        return importlib.import_module(f"{PACKAGE}.{name}")
    finally:
        sys.path.remove(str(folder))


def round_trip(folder: Path, base_url: str, key: str) -> dict[str, Any]:
    """What a person would write with the generated client (blocking: run in a thread, the
    stack shares this test's event loop)."""
    client_module, models = load(folder, "client"), load(folder, "models")
    post_jobs, get_job = load(folder, "api.jobs.post_jobs"), load(folder, "api.jobs.get_jobs_id")
    get_jobs = load(folder, "api.jobs.get_jobs")
    client = client_module.AuthenticatedClient(base_url=base_url, token=key)
    body = models.JobRequest.from_dict({
        "template": "<h1>Invoice {{ number }}</h1>", "data": {"number": "2026-0042"},
        "options": {"format": "A5", "margin": {"top": "15mm"}},
    })  # fmt: skip
    accepted = post_jobs.sync(client=client, body=body)
    assert isinstance(accepted, models.JobAccepted), accepted
    job = get_job.sync(id=accepted.id, client=client)
    deadline = time.monotonic() + 60
    while job.status not in (models.JobStatus.DONE, models.JobStatus.FAILED):
        assert time.monotonic() < deadline, f"job still {job.status}"
        time.sleep(0.1)  # polling as a client does, with a deadline
        job = get_job.sync(id=accepted.id, client=client)
    listed = get_jobs.sync(client=client, status=models.GetJobsStatus.DONE)
    missing = get_job.sync_detailed(id="0" * 32, client=client)
    return {
        "job": job, "pdf": httpx.get(job.url, timeout=30).content[:5],
        "listed": [j.id for j in listed.jobs], "missing": missing, "models": models,
    }  # fmt: skip


async def test_a_generated_client_submits_polls_downloads_and_reads_errors(
    stack: Stack, tmp_path: Path
):
    async with stack.client.get(f"{stack.url}/openapi.json") as response:
        document = await response.json()
    warned = await asyncio.to_thread(generate, document, tmp_path)
    # Gotenberg's door answers a PDF, an image or a ZIP from each form route: the
    # generator warns on each, and Gotenberg's own clients are what drive those routes.
    assert {op for op in warned if " /forms/" not in op} <= KNOWN_LIMITS, warned
    found = await asyncio.to_thread(round_trip, tmp_path, stack.url, stack.tenant.key)
    models, job = found["models"], found["job"]
    assert job.status == models.JobStatus.DONE and job.pages == 1, job
    assert found["pdf"] == b"%PDF-"
    assert job.id in found["listed"]
    missing = found["missing"]
    assert missing.status_code == 404
    assert missing.parsed.error.type_ == models.ErrorType.NOT_FOUND  # `type` is a builtin
    assert job.id not in str(missing.parsed.error.message)

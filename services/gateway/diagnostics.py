"""`GET /jobs/{id}/diagnostics`: what the page did on each attempt that kept a diagnosis.

The renderer stores one JSON per attempt beside the job's file
(`services.core.objectstore.diagnosis`);
the projected row says how many attempts there were, so each is read by its key, with no
listing of the bucket. Screenshots are answered as signed URLs, like the job's file.
"""

from __future__ import annotations

from aiohttp import web

from services.core.database import db
from services.core.model.errors import NoDiagnosis, NotFound
from services.core.objectstore import diagnosis
from services.core.objectstore.storage import Storage
from services.gateway import answers, jobanswers
from services.gateway.auth import guarded
from services.gateway.jobs import job_id_of, job_or_404
from services.gateway.keys import SETTINGS, STORAGE


async def _stored(storage: Storage, key: str) -> diagnosis.Diagnosis | None:
    """The diagnosis stored under `key`, or None if there is none."""
    try:
        data = b"".join([chunk async for chunk in storage.read(key)])
    except NotFound:
        return None
    return diagnosis.decode(data)


async def _answer(
    storage: Storage, found: diagnosis.Diagnosis, ttl: int
) -> jobanswers.DiagnosisAttempt:
    screenshot = await storage.url(found.screenshot, ttl) if found.screenshot else None
    return jobanswers.DiagnosisAttempt(
        attempt=found.attempt,
        at=found.at,
        error=found.error,
        console=found.console,
        errors=found.errors,
        requests=found.requests,
        pending_wait_for=found.pending_wait_for,
        screenshot=screenshot,
        dropped=found.dropped,
    )


async def get_diagnostics(request: web.Request) -> web.Response:
    """`GET /jobs/{id}/diagnostics`: every attempt's diagnosis, oldest first; 404
    `not_found` for an unknown (or another tenant's) job, `no_diagnosis` for one without."""
    job_id = job_id_of(request)
    row = await job_or_404(request, job_id)
    attempts = row.attempts if isinstance(row, db.JobRow) else 0  # else only queued yet
    storage, ttl = request.app[STORAGE], request.app[SETTINGS].url_ttl
    keys = [diagnosis.diagnosis_key(row.tenant_id, job_id, n) for n in range(1, attempts + 1)]
    found = [stored for key in keys if (stored := await _stored(storage, key)) is not None]
    if not found:
        raise NoDiagnosis(f"job {job_id} has no diagnosis: no attempt failed on a page")
    views = [await _answer(storage, each, ttl) for each in found]
    return answers.respond(jobanswers.Diagnostics(id=job_id, attempts=views))


def add_routes(app: web.Application) -> None:
    app.router.add_get("/jobs/{job_id}/diagnostics", guarded("jobs:read", get_diagnostics))

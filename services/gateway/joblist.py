"""`GET /jobs`: the caller tenant's single jobs, newest first, a page at a time.

Read from the projection (PostgreSQL): a job accepted a moment ago appears once the
projector has its `submitted` event. Each entry is what `GET /jobs/{id}` answers for it
(`jobs.job_answer`); batch items are not listed (`GET /batches/{id}/items` lists them).
"""

from __future__ import annotations

import re

from aiohttp import web

from services.core.database import db
from services.core.model.errors import RequestError
from services.core.model.status import JobStatus
from services.gateway import answers, jobanswers
from services.gateway.auth import caller_of, guarded
from services.gateway.jobs import job_answer
from services.gateway.keys import POOL
from services.gateway.postgres import unavailable_without_postgres
from services.gateway.requests import int_param

DEFAULT_LIMIT = 50
MAX_LIMIT = 200
MAX_OFFSET = 10_000_000
_STATUSES = sorted(str(status) for status in JobStatus)
_PREFIX = re.compile(r"[A-Za-z0-9_-]{1,64}")
"""What a prefix of a single job's id may be (`requests.JOB_ID` without an item's index)."""


def _status(request: web.Request) -> str | None:
    status = request.query.get("status")
    if status is not None and status not in _STATUSES:
        raise RequestError(f"status must be one of {', '.join(_STATUSES)}", field="status")
    return status


def _prefix(request: web.Request) -> str | None:
    """The `q` parameter: the start of a job id (empty means no search)."""
    q = request.query.get("q") or None
    if q is not None and not _PREFIX.fullmatch(q):
        raise RequestError("q must be 1 to 64 letters, digits, '-' or '_'", field="q")
    return q


async def list_jobs(request: web.Request) -> web.Response:
    """`GET /jobs?status=&limit=&offset=&q=`: `{"jobs", "limit", "offset", "next_offset"}`,
    `next_offset` null on the last page."""
    status, prefix = _status(request), _prefix(request)
    limit = int_param(request.query, "limit", 1, MAX_LIMIT) or DEFAULT_LIMIT
    offset = int_param(request.query, "offset", 0, MAX_OFFSET) or 0
    tenant = caller_of(request).tenant
    with unavailable_without_postgres("job list is unavailable"):
        rows = await db.list_jobs(request.app[POOL], tenant, status, prefix, limit, offset)
    listed = [await job_answer(request, row) for row in rows]
    next_offset = offset + len(listed) if len(listed) == limit else None
    page = jobanswers.JobPage(jobs=listed, limit=limit, offset=offset, next_offset=next_offset)
    return answers.respond(page)


def add_routes(app: web.Application) -> None:
    app.router.add_get("/jobs", guarded("jobs:read", list_jobs))

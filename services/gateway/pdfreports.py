"""`GET /jobs/{id}/report`: what a PDF-tools job's pipeline did and found
(`pdftools/report.Report`: steps, outputs, metadata read, validations, pages processed),
stored beside the job's document by the renderer."""

from __future__ import annotations

import msgspec
from aiohttp import web

from services.core.model.errors import Conflict, NotFound
from services.core.model.pdfwork import report_key
from services.core.model.status import JobStatus
from services.gateway import answers
from services.gateway.auth import guarded
from services.gateway.jobs import job_id_of, job_or_404
from services.gateway.keys import STORAGE
from services.pdftools.report import Report


class PdfReport(answers.Answer, kw_only=True):
    """A PDF-tools job's report."""

    id: str
    """The job's id."""
    report: Report
    """Each step run (with what it noted), the documents written, the metadata and
    validations asked for, and `pages_processed` (what usage counts)."""


async def get_report(request: web.Request) -> web.Response:
    """`GET /jobs/{id}/report`: the report of a done PDF-tools job."""
    job_id = job_id_of(request)
    row = await job_or_404(request, job_id)
    if row.status != JobStatus.DONE:
        raise Conflict(f"job {job_id} is {row.status}; a report is kept once it is done")
    chunks: list[bytes] = []
    try:
        async for chunk in request.app[STORAGE].read(report_key(row.tenant_id, job_id)):
            chunks.append(chunk)
    except NotFound:
        raise NotFound(f"job {job_id} has no report: it is not a PDF-tools job") from None
    report = msgspec.json.decode(b"".join(chunks), type=Report)
    return answers.respond(PdfReport(id=job_id, report=report))


def add_routes(app: web.Application) -> None:
    app.router.add_get("/jobs/{job_id}/report", guarded("jobs:read", get_report))

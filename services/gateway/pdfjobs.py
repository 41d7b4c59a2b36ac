"""PDF-tools jobs at the gateway: the `pdf` field of `POST /jobs` (checked by
`pdfrequests.py`) resolved for the caller's tenant (`pdfreports.py` serves what the
jobs report).

    {"pdf": {"inputs": [{"file": "a.pdf"}, {"job": "<id>"}, …], "steps": [{"step": "merge"}]}}

An input is one of the job's own files (a multipart part, by its name), a stored asset
(by name) or an earlier job's document (by id). An earlier job is the caller's own or
does not exist: another tenant's id is answered as an unknown one (404), so ids leak
nothing. Its document must be a PDF that is still stored.
"""

from __future__ import annotations

import msgspec
from aiohttp import web

from services.core.database import db
from services.core.model import events
from services.core.model.errors import AssetMissing, Conflict, NotFound, RequestError
from services.core.model.files import FileRef
from services.core.model.pdfwork import PdfInput, PdfWork
from services.core.model.status import JobStatus
from services.gateway import assets
from services.gateway.keys import POOL, SETTINGS
from services.gateway.pdfrequests import PdfWorkRequest, fail, steps_checked
from services.gateway.postgres import unavailable_without_postgres


async def resolved(
    request: web.Request, work: PdfWorkRequest, job: events.JobSubmitted
) -> events.JobSubmitted:
    """`job` with the work as the log carries it, checked against the job's files (its
    own parts) and the caller's earlier jobs; a named asset joins the job's files."""
    files = {ref.name: ref for ref in job.files}
    earlier = await _earlier_jobs(request, [g.job for g in work.inputs if g.job is not None])
    inputs = []
    for index, given in enumerate(work.inputs):
        where = f"pdf.inputs[{index}]"
        entry = PdfInput(**msgspec.structs.asdict(given))
        if given.asset is not None:
            stored = await _asset(request, job.tenant, given.asset, f"{where}.asset")
            if files.setdefault(stored.name, stored).digest != stored.digest:
                clash = f"is named like another of the job's files, {stored.name!r}"
                raise fail(f"{where}.asset", clash)
            entry.file = stored.name
        elif given.file is not None:
            own = files.get(given.file)
            if own is None:
                raise fail(f"{where}.file", f"{given.file!r} is not one of the job's files")
            if own.content_type != "application/pdf":
                raise fail(f"{where}.file", f"{given.file!r} is not a PDF ({own.content_type})")
        elif given.job is not None:
            _earlier_pdf(earlier.get(given.job), given.job, job.tenant, f"{where}.job", given.after)
        inputs.append(entry)
    steps_checked(work, files)
    steps = [msgspec.to_builtins(step) for step in work.steps]
    merged = assets.merged(request.app[SETTINGS], files.values())
    return msgspec.structs.replace(job, files=merged, pdf=PdfWork(inputs=inputs, steps=steps))


async def _asset(request: web.Request, tenant: str, name: str, field: str) -> FileRef:
    """The stored asset an input names (`terms.pdf`, `terms.pdf@2`), or a 404 naming
    the input's field."""
    try:
        (ref,) = await assets.named_assets(request, tenant, [name])
    except AssetMissing as exc:
        raise AssetMissing(exc.message.replace("assets[0]", field), field=field) from None
    except RequestError as exc:
        raise RequestError(exc.message.replace("assets[0]", field), field=field) from None
    if ref.content_type != "application/pdf":
        raise fail(field, f"{name!r} is not a PDF ({ref.content_type})")
    return ref


async def _earlier_jobs(request: web.Request, job_ids: list[str]) -> dict[str, db.JobRow]:
    """The rows of the earlier jobs the inputs name, in one query (a merge may name the
    same job a hundred times)."""
    if not job_ids:
        return {}
    with unavailable_without_postgres("earlier jobs cannot be looked up"):
        return await db.get_jobs(request.app[POOL], list(dict.fromkeys(job_ids)))


def _earlier_pdf(
    row: db.JobRow | None, job_id: str, tenant: str, field: str, after: bool = False
) -> None:
    """Refuse an input job that is not the tenant's, not done, or made no PDF (`after`:
    not yet done is allowed, the renderer waits for it)."""
    if row is None or row.tenant_id != tenant:
        raise NotFound(f"{field}: no job {job_id!r}", field=field)
    if after and row.status in (JobStatus.QUEUED, JobStatus.RUNNING):
        return
    if row.status != JobStatus.DONE or not row.object_key:
        raise Conflict(
            f"{field}: job {job_id} is {row.status}; only a done job's PDF can be used",
            field=field,
        )
    if not row.object_key.endswith(".pdf"):
        raise fail(field, f"job {job_id} made {row.object_key.rsplit('.', 1)[-1]}, not a PDF")

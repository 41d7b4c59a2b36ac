"""PDF-tools jobs at the gateway: the `pdf` field of `POST /jobs` checked (a 400 naming
the field) and its inputs resolved for the caller's tenant (`pdfreports.py` serves
what the jobs report).

    {"pdf": {"inputs": [{"file": "a.pdf"}, {"job": "<id>"}, …], "steps": [{"step": "merge"}]}}

An input is one of the job's own files (a multipart part, by its name), a stored asset
(by name) or an earlier job's document (by id). An earlier job is the caller's own or
does not exist: another tenant's id is answered as an unknown one (404), so ids leak
nothing. Its document must be a PDF that is still stored.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from typing import Annotated

import msgspec
from aiohttp import web

from services.core import db, events
from services.core.errors import Conflict, NotFound, RequestError
from services.core.files import name_problem
from services.core.pdfwork import PdfInput, PdfWork
from services.core.status import JobStatus
from services.gateway.keys import POOL
from services.gateway.postgres import unavailable_without_postgres
from services.pdftools.requests import StepRequest
from services.pdftools.rules import check_steps
from services.pdftools.steps import Attach, Stamp, Watermark

MAX_INPUTS = 500
"""Input PDFs one job may name (their pages and bytes have limits of their own)."""
MAX_PASSWORD = 1024
_LOOKS_LIKE_ID = re.compile(r"[A-Za-z0-9_.-]{1,80}")
"""What may be looked up as a job id (the rest names no job: a 404 without a query)."""


class PdfInputRequest(msgspec.Struct, forbid_unknown_fields=True):
    """One input PDF: exactly one of `file`, `asset` and `job`."""

    file: str | None = None
    """The name of one of the job's own files (a part of a multipart `POST /jobs`)."""
    asset: str | None = None
    """The name of a stored asset (`POST /assets`)."""
    job: str | None = None
    """The id of an earlier job of yours whose document is a PDF."""
    password: Annotated[str, msgspec.Meta(max_length=MAX_PASSWORD)] | None = None
    """The password that opens the input, if it is encrypted."""


class PdfWorkRequest(msgspec.Struct, forbid_unknown_fields=True):
    """`pdf`: the input PDFs and the steps run over them, in order."""

    inputs: Annotated[list[PdfInputRequest], msgspec.Meta(min_length=1, max_length=MAX_INPUTS)]
    """The PDFs, in order (merge keeps it)."""
    steps: list[StepRequest]
    """The pipeline: merge, split, rotate, flatten, metadata, read_metadata, pdfa, pdfua,
    encrypt, attach, facturx, watermark, stamp, sign, optimise, validate."""


def _fail(field: str, rule: str) -> RequestError:
    return RequestError(f"{field} {rule}", field=field)


def check_work(work: PdfWorkRequest) -> None:
    """The rules of the work that need nothing but the request: one source per input,
    sound names and ids, and the steps' own rules (`pdftools/rules.py`; which files
    they read is checked once the job's files are known, by `resolved`)."""
    for index, given in enumerate(work.inputs):
        where = f"pdf.inputs[{index}]"
        named = [n for n in ("file", "asset", "job") if getattr(given, n) is not None]
        if len(named) != 1:
            raise _fail(where, "needs exactly one of file, asset or job")
        for name in ("file", "asset"):
            value = getattr(given, name)
            problem = name_problem(value) if value is not None else None
            if problem is not None:
                raise _fail(f"{where}.{name}", problem)
        if given.job is not None and not _LOOKS_LIKE_ID.fullmatch(given.job):
            raise NotFound(f"{where}.job: no job {given.job!r}", field=f"{where}.job")
    _steps_checked(work, files=None)


def _steps_checked(work: PdfWorkRequest, files: Collection[str] | None) -> None:
    """`check_steps`, its field under `pdf.`; `files` None: any file name passes."""
    names = files if files is not None else _files_read(work)
    try:
        check_steps(work.steps, names)
    except RequestError as exc:
        field = f"pdf.{exc.field}" if exc.field else "pdf.steps"
        raise RequestError(f"pdf.{exc.message}", field=field) from None


def _files_read(work: PdfWorkRequest) -> set[str]:
    """The job files the steps read (attachments' sources, marks' pages)."""
    read: set[str] = set()
    for step in work.steps:
        if isinstance(step, Attach):
            read.update(file.source for file in step.files)
        elif isinstance(step, Watermark | Stamp) and step.pdf is not None:
            read.add(step.pdf)
    return read


async def resolved(request: web.Request, work: PdfWorkRequest, job: events.JobSubmitted) -> None:
    """Check the work against the job's files and the caller's earlier jobs, and put it
    on `job` (as the log carries it)."""
    files = {ref.name: ref for ref in job.files}
    _steps_checked(work, files)
    for index, given in enumerate(work.inputs):
        where = f"pdf.inputs[{index}]"
        if given.file is not None:
            ref = files.get(given.file)
            if ref is None:
                raise _fail(f"{where}.file", f"{given.file!r} is not one of the job's files")
            if ref.content_type != "application/pdf":
                raise _fail(f"{where}.file", f"{given.file!r} is not a PDF ({ref.content_type})")
        elif given.asset is not None:
            raise _fail(f"{where}.asset", "names a stored asset; this server stores none yet")
        elif given.job is not None:
            await _earlier_pdf(request, given.job, job.tenant, f"{where}.job")
    job.pdf = PdfWork(
        inputs=[PdfInput(**msgspec.structs.asdict(given)) for given in work.inputs],
        steps=[msgspec.to_builtins(step) for step in work.steps],
    )


async def _earlier_pdf(request: web.Request, job_id: str, tenant: str, field: str) -> None:
    """Refuse an input job that is not the tenant's, not done, or made no PDF."""
    with unavailable_without_postgres("earlier jobs cannot be looked up"):
        row = await db.get_job(request.app[POOL], job_id)
    if row is None or row.tenant_id != tenant:
        raise NotFound(f"{field}: no job {job_id!r}", field=field)
    if row.status != JobStatus.DONE or not row.object_key:
        raise Conflict(
            f"{field}: job {job_id} is {row.status}; only a done job's PDF can be used",
            field=field,
        )
    if not row.object_key.endswith(".pdf"):
        raise _fail(field, f"job {job_id} made {row.object_key.rsplit('.', 1)[-1]}, not a PDF")

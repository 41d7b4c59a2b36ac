"""The `pdf` field of `POST /jobs` as a request gives it, and the rules it must obey
before anything is looked up: one source per input, sound names and ids, the steps' own
rules (`pdftools/rules.py`). `pdfjobs.py` then resolves the inputs for the caller."""

from __future__ import annotations

import re
from collections.abc import Collection
from typing import Annotated

import msgspec

from services.core.model.errors import NotFound, RequestError
from services.core.model.files import name_problem
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
    after: bool = False
    """With `job`: a job that may not have ended yet (submitted just before this one); this
    job waits for its end, and fails with its failure."""


class PdfWorkRequest(msgspec.Struct, forbid_unknown_fields=True):
    """`pdf`: the input PDFs and the steps run over them, in order."""

    inputs: Annotated[list[PdfInputRequest], msgspec.Meta(min_length=1, max_length=MAX_INPUTS)]
    """The PDFs, in order (merge keeps it)."""
    steps: list[StepRequest]
    """The pipeline: merge, split, rotate, flatten, metadata, read_metadata, pdfa, pdfua,
    encrypt, attach, facturx, watermark, stamp, sign, optimise, validate."""


def fail(field: str, rule: str) -> RequestError:
    return RequestError(f"{field} {rule}", field=field)


def check_work(work: PdfWorkRequest) -> None:
    """The rules of the work that need nothing but the request: one source per input,
    sound names and ids, and the steps' own rules (`pdftools/rules.py`; which files
    they read is checked once the job's files are known, by `resolved`)."""
    for index, given in enumerate(work.inputs):
        where = f"pdf.inputs[{index}]"
        named = [n for n in ("file", "asset", "job") if getattr(given, n) is not None]
        if len(named) != 1:
            raise fail(where, "needs exactly one of file, asset or job")
        for name in ("file", "asset"):
            value = getattr(given, name)
            problem = name_problem(value) if value is not None else None
            if problem is not None:
                raise fail(f"{where}.{name}", problem)
        if given.after and given.job is None:
            raise fail(f"{where}.after", "needs job")
        if given.job is not None and not _LOOKS_LIKE_ID.fullmatch(given.job):
            raise NotFound(f"{where}.job: no job {given.job!r}", field=f"{where}.job")
    steps_checked(work, files=None)


def steps_checked(work: PdfWorkRequest, files: Collection[str] | None) -> None:
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

"""PDF-tools jobs on the renderer: a job whose `pdf` work names input PDFs and steps.

    read     each input's bytes from storage: a job file by its digest
             (`files.blob_key`, the digest checked), an earlier job's document under the
             same tenant (`storage.object_key`: another tenant's cannot be named)
    print    the text and image marks of `watermark` and `stamp` steps, by Chromium
             (`renderer/marks.py`, as finishing does)
    run      the pipeline in the PDF workers (`pdftools/worker.Tools`: processes with a
             memory and time limit, never this event loop)
    store    one document as `jobs/<tenant>/<id>.pdf`, several as a ZIP
             (`jobs/<tenant>/<id>.zip`), and the report beside them (`pdfwork.report_key`)

What cannot change on a later attempt fails the job at once (`InvalidEvent` for steps
the log cannot decode, `PdfInvalid` for an input no longer stored or not what its
digest says, the pipeline's own refusals); storage's failures are retried as any job's.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass

import msgspec

from services.core.model import events
from services.core.model.errors import InvalidEvent, NotFound, PayloadTooLarge, PdfInvalid
from services.core.model.files import FileRef, blob_key, digest_of
from services.core.model.pdfwork import PdfInput, PdfWork, report_key
from services.core.objectstore.storage import Storage, object_key
from services.pdftools import archive
from services.pdftools.pipeline import Input, mark_key
from services.pdftools.report import Report
from services.pdftools.steps import AnyStep, Attach, Stamp, Step, Watermark, name_of
from services.pdftools.worker import Tools
from services.renderer.browser import BrowserPool, Html
from services.renderer.marks import MARK_PRINT, mark_html


@dataclass(frozen=True)
class Made:
    """What a PDF-tools job stored."""

    key: str
    bytes: int
    pages_processed: int


def steps_of(work: PdfWork) -> list[Step]:
    """The work's steps as the PDF library's structs; `InvalidEvent` if the log holds
    steps this renderer cannot read (a gateway and renderer of different versions)."""
    try:
        return list(msgspec.convert(work.steps, list[AnyStep]))
    except msgspec.ValidationError as exc:
        raise InvalidEvent(f"pdf.steps cannot be read: {exc}") from None


class PdfJobs:
    """Runs PDF-tools jobs: reads their inputs from `storage`, prints their marks on
    `browser`, runs the pipeline on `tools`."""

    def __init__(self, storage: Storage, tools: Tools, browser: BrowserPool) -> None:
        self.storage = storage
        self.tools = tools
        self.browser = browser

    async def run(self, job: events.JobSubmitted) -> Made:
        """Do `job.pdf` and store what it makes; what was stored."""
        assert job.pdf is not None
        steps = steps_of(job.pdf)
        reader = _Reader(self.storage, _Budget(self.tools.limits.input_bytes))
        names = _files_read(steps)
        try:
            inputs = await asyncio.gather(*(self._input(job, g, reader) for g in job.pdf.inputs))
            read = await asyncio.gather(
                *(self._file(job, name, f"the file {name}", reader) for name in names)
            )
        finally:
            reader.close()
        files = dict(zip(names, read, strict=True))
        files.update(await self._marks(steps))
        result = await self.tools.run(inputs, steps, files)
        data, content_type, _ = archive.packaged(result.documents)
        key = object_key(job.tenant, job.job_id, "pdf" if content_type == archive.PDF else "zip")
        await asyncio.gather(  # one after the other, the job would wait on both uploads
            self._store_report(job, result.report), self.storage.put(key, data, content_type)
        )
        return Made(key, len(data), result.report.pages_processed)

    async def _input(self, job: events.JobSubmitted, given: PdfInput, reader: _Reader) -> Input:
        password = given.password or ""
        if given.job is not None:
            key = object_key(job.tenant, given.job, "pdf")  # the tenant's own, by construction
            data = await reader.read(key, f"the document of job {given.job}")
            return Input(f"{given.job}.pdf", data, password)
        name = given.file or given.asset or ""
        return Input(name, await self._file(job, name, name, reader), password)

    async def _file(self, job: events.JobSubmitted, name: str, what: str, reader: _Reader) -> bytes:
        ref = _ref(job.files, name)
        data = await reader.read(blob_key(job.tenant, ref.digest), what)
        if digest_of(data) != ref.digest:
            raise PdfInvalid(f"{what} is not the file that was uploaded (its digest differs)")
        return data

    async def _marks(self, steps: Sequence[Step]) -> dict[str, bytes]:
        """The pages of the text and image marks, printed by Chromium."""
        printed = {}
        for index, step in enumerate(steps):
            if isinstance(step, Watermark | Stamp) and step.pdf is None:
                page = mark_html(name_of(step), step)
                printed[mark_key(index)] = (await self.browser.render(Html(page), MARK_PRINT)).data
        return printed

    async def _store_report(self, job: events.JobSubmitted, report: Report) -> None:
        key = report_key(job.tenant, job.job_id)
        await self.storage.put(key, msgspec.json.encode(report), "application/json")


READS = 8
"""Inputs of one job read from storage at once."""


class _Reader:
    """Reads a job's inputs: `READS` at a time, each key once however often the job
    names it (a document merged with itself), within the job's byte budget."""

    def __init__(self, storage: Storage, budget: _Budget) -> None:
        self.storage = storage
        self.budget = budget
        self.slots = asyncio.Semaphore(READS)
        self.reads: dict[str, asyncio.Task[bytes]] = {}

    async def read(self, key: str, what: str) -> bytes:
        task = self.reads.get(key)
        if task is None:
            task = self.reads[key] = asyncio.ensure_future(self._read(key, what))
        return await task

    def close(self) -> None:
        """Cancel the reads still going (another one failed: the job fails)."""
        for task in self.reads.values():
            task.cancel()

    async def _read(self, key: str, what: str) -> bytes:
        chunks: list[bytes] = []
        async with self.slots:
            try:
                async for chunk in self.storage.read(key):
                    self.budget.take(len(chunk))
                    chunks.append(chunk)
            except NotFound:
                raise PdfInvalid(f"{what} is no longer stored") from None
        return b"".join(chunks)


class _Budget:
    """The bytes a job's inputs may still take (`PRESSROOM_PDF_MAX_INPUT_BYTES`): counted
    while they are read, so a huge input is refused before it is all in memory."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.left = limit

    def take(self, size: int) -> None:
        self.left -= size
        if self.left < 0:
            raise PayloadTooLarge(
                f"the job's files are over the limit of {self.limit} bytes "
                "(PRESSROOM_PDF_MAX_INPUT_BYTES)"
            )


def _ref(files: Sequence[FileRef], name: str) -> FileRef:
    for ref in files:
        if ref.name == name:
            return ref
    raise PdfInvalid(f"{name} is not one of the job's files")


def _files_read(steps: Sequence[Step]) -> list[str]:
    """The job files the steps read besides the inputs (attachments, PDF marks)."""
    read: list[str] = []
    for step in steps:
        if isinstance(step, Attach):
            read += [file.source for file in step.files]
        elif isinstance(step, Watermark | Stamp) and step.pdf is not None:
            read.append(step.pdf)
    return list(dict.fromkeys(read))

"""Answers as Gotenberg gives them: the file itself, or a status code with a plain-text
body; `Gotenberg-Trace` echoed and `Pressroom-Job-Id` naming the job behind it."""

from __future__ import annotations

import re
import uuid

from aiohttp import web

from services.core.model import events, filenames, hooks
from services.core.model.errors import PressroomError, RequestError
from services.core.objectstore.storage import Storage

TRACE = "Gotenberg-Trace"
OUTPUT_FILENAME = "Gotenberg-Output-Filename"
JOB_HEADER = "Pressroom-Job-Id"
"""The job a compatible answer came from: a client that gave up waiting finds it with
`GET /jobs/{id}`."""


_TRACE_HEX = re.compile(r"[0-9a-fA-F]{32}")


def trace_of(request: web.Request) -> str:
    """The request's `Gotenberg-Trace`, or a new one (a UUID, as Gotenberg makes)."""
    given = request.headers.get(TRACE, "").strip()
    if given and given.isprintable() and given.isascii() and len(given) <= 200:
        return given
    return str(uuid.uuid4())


def traceparent(trace: str) -> dict[str, str]:
    """A W3C `traceparent` whose trace id is the Gotenberg trace (a UUID's 32 hex
    digits; any other text hashed into 32), so the job's log lines carry it."""
    compact = trace.replace("-", "")
    trace_id = (
        compact.lower()
        if _TRACE_HEX.fullmatch(compact)
        else uuid.uuid5(uuid.NAMESPACE_URL, trace).hex
    )
    return {"traceparent": f"00-{trace_id}-{uuid.uuid4().hex[:16]}-01"}


def text(status: int, message: str, headers: dict[str, str]) -> web.Response:
    return web.Response(status=status, text=message + "\n", headers=headers)


def error(exc: PressroomError, headers: dict[str, str]) -> web.Response:
    """A refused request: its status, and what was wrong in words."""
    return text(exc.http_status, exc.message, {**headers, **exc.headers()})


def failed(end: events.AnyEvent, headers: dict[str, str]) -> web.Response:
    """The answer to a job that ended without a document."""
    if isinstance(end, events.JobFailed):
        return text(
            hooks.failure_status(end.error.type), f"{end.error.type}: {end.error.message}", headers
        )
    return text(409, "the job was cancelled", headers)


def output_filename(request: web.Request) -> str | None:
    """`Gotenberg-Output-Filename`, checked by the safe-name rule; None without it."""
    given = request.headers.get(OUTPUT_FILENAME, "").strip()
    if not given:
        return None
    problem = filenames.problem(f"{given}.pdf")
    if problem is not None:
        raise RequestError(f"{OUTPUT_FILENAME} {problem}", field=OUTPUT_FILENAME)
    return given


def output_name(request: web.Request, job_id: str, extension: str) -> str:
    """The downloaded file's name: `Gotenberg-Output-Filename` with the output's
    extension, else the job's id."""
    return f"{output_filename(request) or job_id}.{extension}"


async def document(
    request: web.Request, storage: Storage, done: events.JobDone, headers: dict[str, str]
) -> web.StreamResponse:
    """The job's file, streamed from storage."""
    extension = done.object_key.rsplit(".", 1)[-1].lower()
    name = output_name(request, done.job_id, extension)
    response = web.StreamResponse(
        status=200,
        headers={
            **headers,
            "Content-Type": hooks.content_type(done.object_key),
            "Content-Disposition": filenames.content_disposition(name),
        },
    )
    response.content_length = done.bytes
    await response.prepare(request)
    async for chunk in storage.read(done.object_key):
        await response.write(chunk)
    await response.write_eof()
    return response

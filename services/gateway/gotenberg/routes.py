"""The Gotenberg-compatible routes: each form becomes one Pressroom job (`jobs.enqueue`,
the door `POST /jobs` uses), and the request waits for its end (`waiting.job_end`) to
answer with the file, as Gotenberg does.

Auth as Gotenberg clients send it: `Authorization: Basic` with the API key as password
(any user name) or `Authorization: Bearer <API key>`. `/health` and `/version` are open,
as Gotenberg's are.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import datetime as dt
from collections.abc import Awaitable, Callable
from typing import Any

import msgspec
from aiohttp import web
from opentelemetry.trace import SpanKind

from services.core.model import events
from services.core.model.errors import (
    Conflict,
    Forbidden,
    NotFound,
    PressroomError,
    RequestError,
    Unauthorized,
)
from services.core.model.pdfwork import report_key
from services.core.objectstore import filestore
from services.core.runtime import tracing
from services.core.runtime.settings import Settings
from services.gateway import jobfiles, jobs, waiting
from services.gateway.auth import (
    API_KEY,
    AUTH_SETTINGS,
    CALLER_KEY,
    DIRECTORY,
    IMPLICIT,
    Caller,
    Guard,
    bearer_token,
    declared,
)
from services.gateway.gotenberg import (
    chromium,
    door,
    exiftool,
    forms,
    pagefields,
    pdfengines,
    pipe,
    postprocess,
    replies,
    signing,
    validating,
    webhooks,
)
from services.gateway.gotenberg.forms import Upload
from services.gateway.keys import COMPILER, JS, LOG_ROOM, NATS, SETTINGS, STORAGE
from services.gateway.requests import JobRequest, parse_job

VERSION = "8.36.0"
"""The newest Gotenberg version whose routes and fields these routes cover, each field
honoured or refused naming it (`GET /version`; docs/gotenberg.md says why this one)."""

SCOPE = "jobs:write"
SETTLE = (0.05, 3.0)
"""First and longest pause, s, before submitting post-processing again while the
projection has not yet seen the printed job's end."""
FORM_ROUTE = door.ROUTE_PREFIX
"""Prefix of the names of the compatible routes (`door` serves them by it)."""

Build = Callable[[forms.Form], chromium.Mapped]


def _basic_password(request: web.Request) -> str | None:
    """The password of an `Authorization: Basic` header (Gotenberg's basic auth)."""
    scheme, _, encoded = request.headers.get("Authorization", "").partition(" ")
    if scheme.lower() != "basic":
        return None
    try:
        decoded = base64.b64decode(encoded.strip(), validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        raise Unauthorized("the Basic credentials cannot be read") from None
    _, colon, password = decoded.partition(":")
    return password if colon and password else None


def authenticate(request: web.Request) -> Caller:
    """The caller of a form route: its API key as a Basic password, a Bearer token or
    an `X-Api-Key` header."""
    if not request.app[AUTH_SETTINGS].auth_enabled:
        caller = IMPLICIT
    else:
        token = _basic_password(request) or bearer_token(request)
        token = token or request.headers.get("X-Api-Key")  # chromiumly's apiKey
        caller = request.app[DIRECTORY].authenticate(token)
    request[CALLER_KEY] = caller
    if SCOPE not in caller.scopes:
        raise Forbidden(f"this API key lacks the scope {SCOPE}")
    return caller


def as_job(mapped: chromium.Mapped) -> JobRequest:
    """The mapped body through `parse_job`, its problems told by form field."""
    try:
        return parse_job(msgspec.json.encode(mapped.body))
    except RequestError as exc:
        source = mapped.field_of(exc.field)
        if source is None:
            raise
        raise RequestError(f"form field {source!r}: {exc.message}", field=source) from None


def own_files(uploads: list[Upload]) -> jobfiles.Own:
    """The form's files as a job's own (checked and typed; stored by `jobs.enqueue`)."""
    return [(filestore.file_ref(u.filename, u.data), u.data) for u in uploads]


async def run(request: web.Request, build: Build) -> web.StreamResponse:
    """Read the form, submit its job, wait for the job's end and answer as Gotenberg."""
    trace = replies.trace_of(request)
    headers = {replies.TRACE: trace}
    try:
        caller = authenticate(request)
        jobs.admit(request)
        form = await forms.read(request)
        if request.path.endswith("/markdown"):
            await chromium.convert_markdown(form, request.app[COMPILER], caller.tenant)
        mapped = build(form)
        filename = replies.output_filename(request)
        webhook = await webhooks.asked(request, trace, filename)
        chained = webhook if webhook is not None and mapped.later else None
        if chained is not None:  # the webhook goes with the post-processing job
            await webhooks.check_url(request, chained)
        elif webhook is not None:
            mapped.body["webhook_url"] = webhook.url
            mapped.origin["webhook_url"] = webhooks.URL
        job = as_job(mapped)
        own = own_files(mapped.files)
        prepare = _preparer(request.app[SETTINGS], None if chained else webhook, mapped)
        with tracing.span("gotenberg form", replies.traceparent(trace), SpanKind.INTERNAL):
            job_id = await jobs.enqueue(request, job, None, own, prepare)
        headers[replies.JOB_HEADER] = job_id
        if chained is not None:
            headers[replies.JOB_HEADER] = await _post_process_later(
                request, job_id, mapped, chained
            )
        if webhook is not None:
            return web.Response(status=204, headers=headers)
        return await answer(request, job_id, mapped, headers)
    except PressroomError as exc:
        return replies.error(exc, headers)


def _preparer(
    settings: Settings, webhook: webhooks.Webhook | None, mapped: chromium.Mapped
) -> Callable[[events.JobSubmitted], None] | None:
    """What is sealed into the job's submission: its webhook's extra headers, its page's
    cookies and headers."""
    steps = [webhooks.preparer(webhook, settings)] if webhook else []
    if mapped.secrets:
        steps.append(pagefields.preparer(mapped.secrets, settings))
    if not steps:
        return None

    def prepare(event: events.JobSubmitted) -> None:
        for step in steps:
            step(event)

    return prepare


async def answer(
    request: web.Request, job_id: str, mapped: chromium.Mapped, headers: dict[str, str]
) -> web.StreamResponse:
    app = request.app
    timeout = app[SETTINGS].gotenberg_timeout
    end = await waiting.job_end(app[NATS], app[JS], job_id, timeout)
    if end is None:
        return replies.text(
            503,
            f"the job {job_id} did not end within {timeout:g} s "
            f"(PRESSROOM_GOTENBERG_TIMEOUT); it goes on: GET /jobs/{job_id}",
            headers,
        )
    if not isinstance(end, events.JobDone):
        return replies.failed(end, headers)
    if mapped.report and mapped.bookmarks:
        read = (await _report(request, end)).get("bookmarks", [])
        found = {facts["document"]: facts.get("bookmarks", []) for facts in read}
        return web.json_response(found, headers=headers)
    if mapped.report:
        report = await _report(request, end)
        sizes = {upload.filename: len(upload.data) for upload in mapped.files}
        linear = {upload.filename: exiftool.linearized(upload.data) for upload in mapped.files}
        return web.json_response(exiftool.answer(report, sizes, linear), headers=headers)
    if mapped.fail_on_refused and end.refused:
        first = end.refused[0]
        return replies.text(
            409,
            f"a resource was refused: {first.get('url', '')}: {first.get('reason', '')}"
            " (failOnResourceLoadingFailed)",
            headers,
        )
    if mapped.later:
        return await _then(request, end, mapped, headers)
    return await replies.document(request, app[STORAGE], end, headers)


async def _then(
    request: web.Request, printed: events.JobDone, mapped: chromium.Mapped, headers: dict[str, str]
) -> web.StreamResponse:
    """Run the post-processing steps on the printed PDF as a second job, and answer as
    that one ends. The second job names the first, which must be `done` in PostgreSQL's
    projection: the log said so already, so a `Conflict` only means the projection is
    a moment behind, and the submission is tried again after a pause that doubles."""
    job = parse_job(msgspec.json.encode(postprocess.body(printed.job_id, mapped)))
    job_id = await _submitted_after(request, job, None)
    headers[replies.JOB_HEADER] = job_id
    later = chromium.Mapped(body={}, files=[])
    return await answer(request, job_id, later, headers)


async def _submitted_after(
    request: web.Request, job: JobRequest, prepare: Callable[[events.JobSubmitted], None] | None
) -> str:
    """Submit a job whose input is a job just submitted or just done: while PostgreSQL's
    projection has not seen that one (or its end), submission is tried again after a
    pause that doubles; the log has it already, so the projection is only a moment
    behind."""
    pause = SETTLE[0]
    while True:
        try:
            return await jobs.enqueue(request, job, None, None, prepare)
        except (Conflict, NotFound):
            if pause > SETTLE[1]:
                raise
            await asyncio.sleep(pause)
            pause *= 2


async def _post_process_later(
    request: web.Request, printed: str, mapped: chromium.Mapped, webhook: webhooks.Webhook
) -> str:
    """Webhook mode with post-processing: the second job is submitted at once, its input
    the printed job, which it waits for (`after`, `renderer/chains`); the webhook is the
    second job's, so the file it sends is the post-processed one, and a failure of either
    job reaches the error URL."""
    body = postprocess.body(printed, mapped, after=True)
    body["webhook_url"] = webhook.url
    job = parse_job(msgspec.json.encode(body))
    return await _submitted_after(request, job, webhooks.preparer(webhook, request.app[SETTINGS]))


async def _report(request: web.Request, done: events.JobDone) -> dict[str, Any]:
    """The report a done PDF-tools job stored beside its document."""
    key = report_key(done.tenant, done.job_id)
    data = bytearray()
    async for chunk in request.app[STORAGE].read(key):
        data += chunk
    report: dict[str, Any] = msgspec.json.decode(bytes(data))
    return report


def _route(build: Build) -> Callable[[web.Request], Awaitable[web.StreamResponse]]:
    async def handler(request: web.Request) -> web.StreamResponse:
        return await run(request, build)

    return declared(Guard(API_KEY, SCOPE), handler)


def _built(make: Callable[[forms.Form, str], chromium.Mapped], kind: str) -> Build:
    def build(form: forms.Form) -> chromium.Mapped:
        return make(form, kind)

    return build


async def _validate(request: web.Request) -> web.StreamResponse:
    return await validating.validate(request, authenticate)


async def health(request: web.Request) -> web.Response:
    """`GET /health`: Gotenberg's shape. Chromium and the PDF engines are up while jobs
    can be taken (NATS connected, the log not full): renderers take them from there."""
    now = dt.datetime.now(dt.UTC).isoformat()
    up = request.app[NATS].is_connected and not request.app[LOG_ROOM].full()
    word = "up" if up else "down"
    module = {"status": word, "timestamp": now}
    body = {"status": word, "details": {"chromium": module, "pdfengines": module}}
    return web.json_response(body, status=200 if up else 503)


async def version(request: web.Request) -> web.Response:
    """`GET /version`: the Gotenberg version these routes follow."""
    return web.Response(text=VERSION)


async def libreoffice(request: web.Request) -> web.Response:
    """`POST /forms/libreoffice/convert`: office files are not converted."""
    return replies.text(
        501,
        "Pressroom does not convert office files (no LibreOffice); convert them to PDF "
        "first and send them to /forms/pdfengines/merge or /forms/pdf/merge",
        {replies.TRACE: replies.trace_of(request)},
    )


def add_routes(app: web.Application) -> None:
    for prefix in ("pdfengines", "pdf"):  # Gotenberg 8's names, and 9's
        for name, mapping in pdfengines.ROUTES.items():
            app.router.add_post(
                f"/forms/{prefix}/{name}",
                _route(mapping),
                name=f"{FORM_ROUTE}{prefix}.{name.replace('/', '.')}",
            )
    app.router.add_post(
        "/forms/pdf/pipe", _route(pipe.pipe), name=f"{FORM_ROUTE}pdf.pipe"
    )  # Gotenberg 9's stages
    app.router.add_post(
        "/forms/pdf/sign", _route(signing.sign), name=f"{FORM_ROUTE}pdf.sign"
    )  # Gotenberg 9's alone, as validate
    app.router.add_post(
        "/forms/pdf/validate",
        declared(Guard(API_KEY, SCOPE), _validate),
        name=f"{FORM_ROUTE}pdf.validate",
    )
    for kind in ("html", "url", "markdown"):
        for action, make in (("convert", postprocess.convert), ("screenshot", chromium.screenshot)):
            app.router.add_post(
                f"/forms/chromium/{action}/{kind}",
                _route(_built(make, kind)),
                name=f"{FORM_ROUTE}chromium.{action}.{kind}",
            )
    app.router.add_post("/forms/libreoffice/convert", libreoffice, name=f"{FORM_ROUTE}libreoffice")
    # a HEAD is answered by the GET route
    app.router.add_get("/health", health, name=f"{FORM_ROUTE}health")
    app.router.add_get("/version", version, name=f"{FORM_ROUTE}version")

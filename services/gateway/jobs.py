"""HTTP routes: submit a job, read its status, health and readiness (a job's file is
downloaded through `downloads.py`).

Size: a job's routes over its life (submit, status, cancel, webhooks, events) share the row
loading and the log checks. Health and readiness (`healthz`, `readyz`) are the part that
would split out next.
"""

from __future__ import annotations

import datetime as dt
import logging
import uuid
from collections.abc import Callable
from typing import Any

import msgspec
from aiohttp import web

from services.core.database import db
from services.core.database.fileclaims import ClaimKind
from services.core.database.holds import HoldKind
from services.core.log import bus, jobsecrets, timeline
from services.core.log.pagesecrets import seal_secrets
from services.core.model import events
from services.core.model.errors import Conflict, NotFound, PressroomError, Unavailable
from services.core.model.errortypes import known_type
from services.core.model.pdfwork import report_key
from services.core.model.status import JobStatus
from services.core.objectstore import diagnosis
from services.core.runtime import metrics
from services.core.sandbox import netpolicy
from services.gateway import (
    answers,
    idempotency,
    jobanswers,
    jobfiles,
    pdfjobs,
    previews,
    templates,
)
from services.gateway.auth import caller_of, guarded
from services.gateway.headers import header
from services.gateway.ids import job_id_for
from services.gateway.keys import (
    IDEMPOTENCY,
    JS,
    LOG_ROOM,
    NATS,
    PG_WATCH,
    POOL,
    SETTINGS,
    SINGLES,
    STORAGE,
)
from services.gateway.limits import LIMITS
from services.gateway.postgres import unavailable_without_postgres
from services.gateway.requests import JOB_ID, JobRequest

log = logging.getLogger(__name__)


def _require_nats(request: web.Request) -> None:
    """Fail fast while NATS is away: a 503 now beats a client waiting on a publish."""
    if not request.app[NATS].is_connected:
        raise Unavailable("cannot accept jobs: NATS is not connected; retry shortly")


async def _check_addresses(job: JobRequest, allow_private: bool) -> None:
    """Refuse a `url` source or `webhook_url` the address policy forbids (400 naming it).

    The renderer checks every request of a page again when it loads it: this check only
    turns an obviously forbidden job into a 400 instead of a failed job.
    """
    for field, url in (("url", job.url), ("webhook_url", job.webhook_url)):
        if url is not None:
            await netpolicy.check_url(url, allow_private=allow_private, field=field)


async def _submitted_event(
    request: web.Request, job: JobRequest, tenant: str, job_id: str, key: str | None
) -> events.JobSubmitted:
    """The `submitted` event of a valid request: its tenant, a stored template resolved
    into it, and a per-job webhook secret and page secrets sealed (never in plain text on
    the log)."""
    secret = job.webhook_secret
    if secret is not None:
        secret = request.app[SETTINGS].server_keys().seal(secret, job_id)
    event = events.JobSubmitted(
        job_id=job_id,
        tenant=tenant,
        template=job.template or "",
        html=job.html,
        url=job.url,
        markdown=job.markdown,
        stylesheet=job.stylesheet,
        data=job.data,
        options=job.options,
        webhook_url=job.webhook_url,
        webhook_secret=secret,
        idempotency_key=key,
    )
    if job.page_secrets:
        keys = request.app[SETTINGS].server_keys()
        event.page_secrets = seal_secrets(job.page_secrets, keys, job_id)
    if job.template_name is not None:
        return await templates.resolve_named(
            request.app[POOL], event, tenant, job.template_name, job.template_version
        )
    if job.template_id is None:
        return event
    return await templates.resolve(
        request.app[POOL], event, tenant, job.template_id, job.template_version
    )


def _accepted(job_id: str) -> web.Response:
    location = f"/jobs/{job_id}"
    body = jobanswers.JobAccepted(id=job_id, status=JobStatus.QUEUED, url=location)
    return answers.respond(body, 202, {"Location": location})


async def _claimed(
    request: web.Request, fingerprint: str, tenant: str, key: str, job_id: str
) -> tuple[str, bool]:
    """The job this request is for, and whether the log holds it already: a request that
    repeats an earlier one with the same `Idempotency-Key` is for the first one's job
    (`IdempotencyConflict` if the key was used for another request)."""
    kv = request.app[IDEMPOTENCY]
    first = await idempotency.claim(kv, tenant, key, job_id, fingerprint)
    if first is None:
        return job_id, False
    # A repeat whose first request never reached the log (it failed) is submitted now.
    return first, await _in_log(request, first, tenant)


async def _hold_and_publish(request: web.Request, event: events.JobSubmitted) -> bool:
    """Hold the job's document in its tenant's monthly quota (if it has one), then
    publish its submission; True if the log took it now. The hold is given back if the
    log did not take it."""
    limits, pool = request.app[LIMITS], request.app[POOL]
    held = event.preview is None and await limits.hold(
        pool, event.tenant, event.job_id, HoldKind.JOB, 1
    )  # a preview is never billed: it takes no room in the quota
    try:
        await request.app[SINGLES].ensure(request.app[JS], event.tenant)
        return await bus.publish(request.app[JS], event)
    except PressroomError:
        if held:
            await limits.release(pool, event.job_id)
        raise


async def submit_job(request: web.Request) -> web.Response:
    """`POST /jobs`: 202 once the `submitted` event is durable in JetStream. The body is
    JSON, or multipart with the job's files (`jobfiles`).

    A `template_id` is resolved here, from PostgreSQL: such a job gets a 503 while
    PostgreSQL is down, where other jobs still get their 202. So does the job of a tenant
    with a monthly quota, whose document is held in PostgreSQL before it is published.
    """
    admit(request)
    job, own = await jobfiles.read_job(request)  # JSON, or multipart with files
    return _accepted(await enqueue(request, job, header(request, "Idempotency-Key"), own))


def admit(request: web.Request) -> None:
    """Refuse a submission at once while NATS is away, the log is full or the caller's
    tenant is over its rate: before its body is even read."""
    _require_nats(request)
    request.app[LOG_ROOM].admit()
    request.app[LIMITS].admit(caller_of(request).tenant)


async def _as_preview(
    request: web.Request, job: JobRequest, event: events.JobSubmitted
) -> tuple[events.JobSubmitted, list[str]]:
    """A preview's event marked as one, and the older previews it supersedes; any other
    job's as it is."""
    if not job.preview:
        return event, []
    kept = job.template_files  # an inline draft of a stored template, with its files
    previewed = event.template_id or (kept.template_id if kept is not None else None)
    event = msgspec.structs.replace(
        event, preview=previews.preview_of(caller_of(request), previewed)
    )
    limit = request.app[SETTINGS].preview_limit
    return event, await previews.admit(request.app[POOL], event, limit)


async def _supersede(request: web.Request, older: list[str], tenant: str) -> None:
    """Cancel the previews a newer one superseded; one admitted but not in the log yet
    (its request still on its way) is left to end by itself."""
    for job_id in older:
        if await _in_log(request, job_id, tenant):
            await _cancel(request, job_id, tenant)


async def _logged(
    request: web.Request, event: events.JobSubmitted, own: jobfiles.Own
) -> tuple[events.JobSubmitted, bool]:
    """Seal the event's secrets, claim its files and publish it: the event as logged, and
    whether the log took it now. An admitted preview the log did not take stops counting."""
    try:
        event = jobsecrets.sealed(event, request.app[SETTINGS].server_keys())  # no plain text
        owner = (ClaimKind.JOB, event.job_id)
        await jobfiles.keep_files(request, event.tenant, owner, event.files, own)
        return event, await _hold_and_publish(request, event)
    except PressroomError:
        if event.preview is not None:
            await previews.withdraw(request.app[POOL], event.job_id)
        raise


async def enqueue(
    request: web.Request,
    job: JobRequest,
    key: str | None,
    own: jobfiles.Own | None = None,
    prepare: Callable[[events.JobSubmitted], None] | None = None,
) -> str:
    """Publish a valid job request for the caller's tenant, with its own files (claimed
    and stored by `jobfiles.keep_files`); its id once the log holds it. Every door that makes a
    job (`POST /jobs`, the Gotenberg-compatible forms) comes through here, after
    `admit`; `prepare` completes the event once its id is known (a door's own fields)."""
    settings = request.app[SETTINGS]
    tenant = caller_of(request).tenant
    own = own or []
    await _check_addresses(job, settings.allow_private_networks)
    job_id = job_id_for(settings.server_key_bytes(), tenant, key)
    if key is not None:
        claim = jobfiles.job_fingerprint(job, own)
        job_id, logged = await _claimed(request, claim, tenant, key, job_id)
        if logged:
            return job_id
    try:
        event = await _submitted_event(request, job, tenant, job_id, key)
        event = await jobfiles.with_files(request, event, job, own)
        if job.pdf is not None:  # its inputs among the files, its earlier jobs the tenant's
            event = await pdfjobs.resolved(request, job.pdf, event)
        if prepare is not None:
            prepare(event)
        event, superseded = await _as_preview(request, job, event)
        event, fresh = await _logged(request, event, own)
    except PressroomError:  # not in the log: the key is free for the same request again
        if key is not None:
            await idempotency.release(request.app[IDEMPOTENCY], tenant, key)
        raise
    await _supersede(request, superseded, tenant)  # the newer preview is in the log
    if fresh:
        await bus.ring(request.app[NATS], tenant)
        request.app[LOG_ROOM].took(event)
        metrics.JOBS_SUBMITTED.inc()
    return job_id


async def _load_row(request: web.Request, job_id: str) -> db.JobRow | None:
    """The job's projected row if the caller's tenant owns it (another tenant's job does
    not exist for the caller)."""
    try:
        row = await db.get_job(request.app[POOL], job_id)
    except Unavailable as exc:
        raise Unavailable(f"job status is unavailable: {exc.message}") from exc
    if row is None or row.tenant_id != caller_of(request).tenant:
        return None
    return row


async def _in_log(request: web.Request, job_id: str, tenant: str) -> bool:
    """Whether the log holds `tenant`'s submission of the job (the projection may lag
    behind it)."""
    try:
        submitted = await timeline.last_event(request.app[JS], job_id, "submitted")
    except Unavailable as exc:
        raise Unavailable(f"job status is unavailable: {exc.message}") from exc
    return submitted is not None and submitted.tenant == tenant


def failure(error_type: str | None, message: str | None) -> jobanswers.Failure | None:
    """A row's error as answers show it; None if it has none."""
    if message is None:
        return None
    return jobanswers.Failure(type=known_type(error_type), message=message)


async def job_answer(request: web.Request, row: db.JobRow) -> jobanswers.Job:
    """One projected job as `GET /jobs/{id}` shows it (and each entry of `GET /jobs`)."""
    url = None
    if row.status == JobStatus.DONE and row.object_key:
        url = await request.app[STORAGE].url(row.object_key, request.app[SETTINGS].url_ttl)
    return jobanswers.Job(
        id=row.id,
        status=row.status,
        attempts=row.attempts,
        error=failure(row.error_type, row.error_message),
        url=url,
        pages=row.pages,
        bytes=row.bytes,
        render_ms=row.render_ms,
        webhook_url=row.webhook_url,
        created_at=answers.iso(row.created_at),
        started_at=answers.iso(row.started_at),
        finished_at=answers.iso(row.finished_at),
    )


def job_id_of(request: web.Request) -> str:
    job_id = request.match_info["job_id"]
    if not JOB_ID.fullmatch(job_id):
        raise NotFound(f"no job {job_id!r}")
    return job_id


async def get_job(request: web.Request) -> web.Response:
    """`GET /jobs/{id}`: the projection, or `queued` if only the log knows it yet."""
    job_id = job_id_of(request)
    row = await _load_row(request, job_id)
    if row is not None:
        return answers.respond(await job_answer(request, row))
    if await _in_log(request, job_id, caller_of(request).tenant):
        return answers.respond(jobanswers.Job(id=job_id, status=JobStatus.QUEUED, attempts=0))
    raise NotFound(f"no job {job_id!r}")


async def redeliver_webhook(request: web.Request) -> web.Response:
    """`POST /jobs/{id}/webhooks/redeliver`: send the finished job's webhook again, with
    the same `webhook-id` and the retry schedule; each attempt joins the delivery log."""
    job_id = job_id_of(request)
    _require_nats(request)
    row = await job_or_404(request, job_id)
    if not row.status.terminal:
        raise Conflict(f"job {job_id} has not finished; its webhook is sent when it does")
    if not row.webhook_url:
        raise Conflict(f"job {job_id} has no webhook_url")
    event = events.WebhookRedeliver(job_id=job_id, tenant=row.tenant_id, request=uuid.uuid4().hex)
    await bus.publish(request.app[JS], event)
    return answers.respond(jobanswers.Redelivery(id=job_id), 202)


async def get_webhooks(request: web.Request) -> web.Response:
    """`GET /jobs/{id}/webhooks`: every recorded webhook delivery attempt."""
    job_id = job_id_of(request)
    await job_or_404(request, job_id)
    with unavailable_without_postgres("webhook log is unavailable"):
        rows = await db.webhook_deliveries(request.app[POOL], job_id)
    return answers.respond(
        jobanswers.WebhookAttempts(id=job_id, attempts=[attempt_view(r) for r in rows])
    )


def attempt_view(row: db.WebhookDelivery | db.BatchWebhookDelivery) -> jobanswers.WebhookAttempt:
    """One recorded webhook attempt as `GET /jobs/{id}/webhooks` and
    `GET /batches/{id}/webhooks` show it (a batch's also names its event)."""
    event = row.event if isinstance(row, db.BatchWebhookDelivery) else msgspec.UNSET
    return jobanswers.WebhookAttempt(
        webhook_id=row.webhook_id,
        event=event,
        attempt=row.attempt,
        url=row.url,
        outcome=row.outcome,
        status_code=row.status_code,
        error=row.error,
        latency_ms=row.latency_ms,
        at=answers.iso(row.at),
    )


async def healthz(request: web.Request) -> web.Response:
    return answers.respond(answers.Health())


async def readyz(request: web.Request) -> web.Response:
    """Ready while the gateway can take jobs: NATS connected. PostgreSQL's state is
    reported (the watch's, `core/database/pgwatch`) but not required: submissions need only NATS,
    and what needs PostgreSQL answers 503 with `Retry-After` by itself. No I/O, so the
    probe answers at once whatever either server does."""
    checks = answers.Checks(nats=request.app[NATS].is_connected, postgres=request.app[PG_WATCH].up)
    return answers.respond(
        answers.Readiness(ready=checks.nats, checks=checks), 200 if checks.nats else 503
    )


async def job_or_404(request: web.Request, job_id: str) -> db.JobState:
    """The job's row, a minimal `queued` row if only the log knows it, else `NotFound`."""
    row = await _load_row(request, job_id)
    if row is not None:
        return row
    tenant = caller_of(request).tenant
    if await _in_log(request, job_id, tenant):
        return db.JobState(id=job_id, tenant_id=tenant, status=JobStatus.QUEUED)
    raise NotFound(f"no job {job_id!r}")


async def _cancel(request: web.Request, job_id: str, tenant: str) -> events.AnyEvent | None:
    """Publish `cancelled` for an unfinished job; the job's terminal event after that:
    this `cancelled`, or the end that reached the log first."""
    js = request.app[JS]
    submitted = await timeline.last_event(js, job_id, "submitted")
    webhook = submitted.webhook_url if isinstance(submitted, events.JobSubmitted) else None
    cancelled = events.JobCancelled(job_id=job_id, tenant=tenant, webhook_url=webhook)
    await bus.publish_terminal(js, cancelled)
    return await timeline.terminal_event(js, job_id)


async def cancel_job(request: web.Request) -> web.Response:
    """`DELETE /jobs/{id}`: cancel an unfinished job, or delete a finished job's file.

    Idempotent. A cancel that races a render yields one terminal event: whichever of
    `cancelled` and `done` reached the log first (they share a dedup id).
    """
    job_id = job_id_of(request)
    _require_nats(request)
    row = await job_or_404(request, job_id)
    js = request.app[JS]
    if not row.status.terminal:
        terminal = await _cancel(request, job_id, row.tenant_id)
        if not isinstance(terminal, events.JobDone):
            status = events.event_name(terminal) if terminal is not None else JobStatus.CANCELLED
            return answers.respond(jobanswers.JobRemoved(id=job_id, status=JobStatus(status)))
        # The render ended first and the projection has not caught up: the job is
        # finished, so its file goes as any finished job's does. Otherwise what a DELETE
        # does would depend on the projector's lag, and its `"url": null` would be untrue.
        row = msgspec.structs.replace(row, status=JobStatus.DONE, object_key=terminal.object_key)
    if row.status == JobStatus.DONE and row.object_key:
        await request.app[STORAGE].delete(row.object_key)
        await request.app[STORAGE].delete(report_key(row.tenant_id, job_id))  # a PDF job's
        deleted = events.JobDeleted(job_id=job_id, tenant=row.tenant_id, object_key=row.object_key)
        await bus.publish(js, deleted)
    if row.status.terminal:  # its attempts' diagnoses go with it, done or failed
        await _forget_diagnoses(request, row)
    return answers.respond(jobanswers.JobRemoved(id=job_id, status=row.status))


async def _forget_diagnoses(request: web.Request, row: db.JobState) -> None:
    """Delete the diagnoses of every attempt the job may have had."""
    attempts = row.attempts if isinstance(row, db.JobRow) else request.app[SETTINGS].max_attempts
    await diagnosis.forget(request.app[STORAGE], row.tenant_id, row.id, attempts)


def timeline_entry(seq: int, at: dt.datetime, event: events.AnyEvent) -> dict[str, Any]:
    entry: dict[str, Any] = {"seq": seq, **event.public_view()}
    entry.pop("tenant", None)  # the caller's own
    entry["at"] = at.isoformat()  # when the log stored it, the clock of the job's rows
    return entry


async def get_events(request: web.Request) -> web.Response:
    """`GET /jobs/{id}/events`: the job's timeline, read from the log itself."""
    job_id = job_id_of(request)
    try:
        found = await timeline.job_events(request.app[JS], job_id)
    except Unavailable as exc:
        raise Unavailable(f"job history is unavailable: {exc.message}") from exc
    if not found or found[0][2].tenant != caller_of(request).tenant:
        raise NotFound(f"no job {job_id!r}")
    return answers.respond(
        jobanswers.Timeline(id=job_id, events=[timeline_entry(*stored) for stored in found])
    )


def add_routes(app: web.Application) -> None:
    app.router.add_post("/jobs", guarded("jobs:write", submit_job))
    app.router.add_get("/jobs/{job_id}", guarded("jobs:read", get_job))
    app.router.add_delete("/jobs/{job_id}", guarded("jobs:write", cancel_job))
    app.router.add_get("/jobs/{job_id}/events", guarded("jobs:read", get_events))
    app.router.add_get("/jobs/{job_id}/webhooks", guarded("jobs:read", get_webhooks))
    app.router.add_post(
        "/jobs/{job_id}/webhooks/redeliver", guarded("jobs:write", redeliver_webhook)
    )
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)

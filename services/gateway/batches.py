"""HTTP routes of bulk runs: submit a batch, read its progress and its webhook attempts.

`POST /batches` validates the whole request, stores its item list as JSON Lines (never on
the log: 10,000 items are far more than one message may hold) and publishes one
`BatchSubmitted` naming it; the conductor expands it into one job per item. Its body may
be up to `PRESSROOM_MAX_BATCH_BYTES` (the app's middleware applies that limit to the
route named `SUBMIT_ROUTE`).

Size: a batch's routes (submit, progress, listing, items, events, webhooks, pause, resume,
cancel) share the row loading and the log checks. The control routes (`pause_batch`,
`resume_batch`, `cancel_batch`) are the part that would split out next.
"""

from __future__ import annotations

import asyncio
import datetime as dt
from typing import Any, Literal

import msgspec
from aiohttp import web

from services.core.database import db
from services.core.database.fileclaims import ClaimKind
from services.core.database.holds import HoldKind
from services.core.log import bus, jobsecrets, timeline
from services.core.model import events, subjects
from services.core.model.errors import (
    Conflict,
    EventTooLarge,
    NotFound,
    PressroomError,
    RequestError,
    Unavailable,
)
from services.core.model.status import BatchStatus, JobStatus
from services.core.sandbox import netpolicy
from services.gateway import answers, idempotency, jobanswers, jobfiles, templates
from services.gateway.auth import caller_of, guarded
from services.gateway.headers import header
from services.gateway.ids import batch_id_for
from services.gateway.jobs import attempt_view, failure
from services.gateway.keys import IDEMPOTENCY, JS, LOG_ROOM, NATS, POOL, SETTINGS, STORAGE
from services.gateway.limits import LIMITS
from services.gateway.postgres import unavailable_without_postgres
from services.gateway.requests import (
    BATCH_ID,
    BatchRequest,
    fingerprint,
    int_param,
    is_json_lines,
    parse_batch,
    parse_batch_lines,
    read_json_body,
)

SUBMIT_ROUTE = "submit_batch"
"""The name of `POST /batches`' route: the one whose body limit is `max_batch_bytes`."""

LOOKUPS_AT_ONCE = 16
"""Hosts of a url batch resolved concurrently: one lookup per distinct host, never one per
item, and never so many at once that a resolver starts dropping them."""

ITEM_OVERHEAD = 1024
"""Bytes an item's submission event adds to its data, filename and options (ids, tenant,
tags, timestamps): a generous bound."""

_item_encoder = msgspec.json.Encoder()


def _require_nats(request: web.Request) -> None:
    """Fail fast while NATS is away: a 503 now beats a client waiting on a publish."""
    if not request.app[NATS].is_connected:
        raise Unavailable("cannot accept batches: NATS is not connected; retry shortly")


def _key_entry(key: str) -> str:
    """The idempotency bucket's key for a batch: apart from every job's, since a header
    value never holds a newline."""
    return f"batch\n{key}"


async def check_addresses(batch: BatchRequest, allow_private: bool) -> None:
    """Refuse item urls or a `webhook_url` the address policy forbids (400 naming the
    field). Each url is parsed, but each distinct host is resolved once, a few at a time;
    the first forbidden one, in item order, is named. The renderer checks every request
    of a page again when it loads it."""
    firsts: dict[tuple[str, int | None], tuple[str, str]] = {}
    named = [(f"items[{i}].url", item.url) for i, item in enumerate(batch.items)]
    for field, url in [*named, ("webhook_url", batch.webhook_url)]:
        if url is not None:
            parts = netpolicy.parse_http_url(url, field)
            firsts.setdefault((parts.hostname or "", parts.port), (url, field))
    if allow_private:
        return
    room = asyncio.Semaphore(LOOKUPS_AT_ONCE)

    async def check(url: str, field: str) -> None:
        async with room:
            await netpolicy.check_url(url, allow_private=False, field=field)

    checks = [check(url, field) for url, field in firsts.values()]
    for outcome in await asyncio.gather(*checks, return_exceptions=True):
        if isinstance(outcome, BaseException):
            raise outcome


def _item_lines(batch: BatchRequest, max_message: int) -> list[bytes]:
    """The stored item list, one JSON line per item; `EventTooLarge` naming the first
    item too large to become one job's submission on the log."""
    options = len(msgspec.json.encode(batch.options))
    lines = [_item_encoder.encode(item) + b"\n" for item in batch.items]
    for index, line in enumerate(lines):
        if len(line) + options + ITEM_OVERHEAD > max_message:
            raise EventTooLarge(
                f"items[{index}] is {len(line)} bytes, too large for one job on the log "
                "(PRESSROOM_STREAM_MAX_MSG_SIZE)",
                field=f"items[{index}].data",
            )
    return lines


async def _submitted_event(
    request: web.Request,
    batch: BatchRequest,
    ids: tuple[str, str],
    key: str | None,
) -> events.BatchSubmitted:
    """The batch's `submitted` event: a stored template resolved into it, and its webhook
    secret sealed for the batch (never in plain text on the log)."""
    tenant, batch_id = ids
    secret = batch.webhook_secret
    if secret is not None:
        secret = request.app[SETTINGS].server_keys().seal(secret, batch_id)
    event = events.BatchSubmitted(
        batch_id=batch_id,
        tenant=tenant,
        total=len(batch.items),
        items_key=subjects.batch_items_key(tenant, batch_id),
        template=batch.template or "",
        options=batch.options,
        output=batch.output,
        webhook_url=batch.webhook_url,
        webhook_secret=secret,
        idempotency_key=key,
        progress_webhooks=batch.progress_webhooks,
    )
    if batch.template_name is not None:
        event = await templates.resolve_named(
            request.app[POOL], event, tenant, batch.template_name, batch.template_version
        )
    if batch.template_id is not None:
        event = await templates.resolve(
            request.app[POOL], event, tenant, batch.template_id, batch.template_version
        )
    event = await jobfiles.batch_files(request, event, batch.assets)
    event = jobsecrets.sealed_batch(event, request.app[SETTINGS].server_keys())
    size = len(events.encode_batch(event))
    if size > request.app[SETTINGS].stream_max_msg_size:
        raise EventTooLarge(
            f"the batch's template and options are {size} bytes as an event, over the "
            "log's limit for one message (PRESSROOM_STREAM_MAX_MSG_SIZE)",
            field="template",
        )
    return event


def _accepted(batch_id: str, total: int) -> web.Response:
    location = f"/batches/{batch_id}"
    body = jobanswers.BatchAccepted(
        id=batch_id, status=BatchStatus.QUEUED, total=total, url=location
    )
    return answers.respond(body, 202, {"Location": location})


def _admit(request: web.Request, total: int, lines: list[bytes]) -> int:
    """Refuse the batch (503) if the log's room cannot take its items; the bytes its
    items' submissions will add to the log."""
    size = sum(len(line) for line in lines) + total * ITEM_OVERHEAD
    request.app[LOG_ROOM].admit_batch(total, size)
    return size


async def _claimed(
    request: web.Request, batch: BatchRequest, tenant: str, key: str, batch_id: str
) -> tuple[str, bool]:
    """The batch this request is for, and whether the log holds it already: a request
    that repeats an earlier one with the same `Idempotency-Key` is for the first one's
    batch (`IdempotencyConflict` if the key was used for another request)."""
    kv = request.app[IDEMPOTENCY]
    entry = _key_entry(key)
    first = await idempotency.claim(kv, tenant, entry, batch_id, fingerprint(batch))
    if first is None:
        return batch_id, False
    return first, await _in_log(request, first, tenant)


async def _store_and_publish(
    request: web.Request, batch: BatchRequest, ids: tuple[str, str], key: str | None
) -> bool:
    """Hold every item's document in the tenant's monthly quota (if it has one), store
    the item list, then publish the batch; True if the log took it now. The hold is
    given back if the log did not take the batch."""
    tenant, batch_id = ids
    lines = _item_lines(batch, request.app[SETTINGS].stream_max_msg_size)
    size = _admit(request, len(lines), lines)
    event = await _submitted_event(request, batch, ids, key)
    limits, pool = request.app[LIMITS], request.app[POOL]
    held = await limits.hold(pool, tenant, batch_id, HoldKind.BATCH, len(lines))
    try:
        await jobfiles.keep_files(request, tenant, (ClaimKind.BATCH, batch_id), event.files)
        items = b"".join(lines)
        await request.app[STORAGE].put(event.items_key, items, "application/x-ndjson")
        fresh = await bus.publish_batch(request.app[JS], event)
    except PressroomError:
        if held:
            await limits.release(pool, batch_id)
        raise
    if fresh:
        request.app[LOG_ROOM].took_batch(len(lines), size)
    return fresh


async def submit_batch(request: web.Request) -> web.Response:
    """`POST /batches`: 202 once the item list is stored and the batch's `submitted`
    event is durable in JetStream. The same checks as `POST /jobs` apply (rate limit,
    log room), and the tenant's monthly quota must have room for every item: they are
    held in it before the batch is published."""
    settings = request.app[SETTINGS]
    tenant = caller_of(request).tenant
    _require_nats(request)
    request.app[LOG_ROOM].admit()
    request.app[LIMITS].admit(tenant)
    if is_json_lines(header(request, "Content-Type") or ""):
        batch = parse_batch_lines(await request.read(), settings.max_batch_items)
    else:
        batch = parse_batch(await read_json_body(request), settings.max_batch_items)
    await check_addresses(batch, settings.allow_private_networks)
    key = header(request, "Idempotency-Key")
    batch_id = batch_id_for(settings.server_key_bytes(), tenant, key)
    total = len(batch.items)
    if key is not None:
        batch_id, logged = await _claimed(request, batch, tenant, key, batch_id)
        if logged:
            return _accepted(batch_id, total)
    try:
        await _store_and_publish(request, batch, (tenant, batch_id), key)
    except PressroomError:  # not in the log: the key is free for the same request again
        if key is not None:
            await idempotency.release(request.app[IDEMPOTENCY], tenant, _key_entry(key))
        raise
    return _accepted(batch_id, total)


async def _in_log(request: web.Request, batch_id: str, tenant: str) -> bool:
    """Whether the log holds `tenant`'s submission of the batch (the projection may lag
    behind it)."""
    try:
        submitted = await timeline.batch_submission(request.app[JS], batch_id)
    except Unavailable as exc:
        raise Unavailable(f"batch status is unavailable: {exc.message}") from exc
    return submitted is not None and submitted.tenant == tenant


async def _load_row(request: web.Request, batch_id: str) -> db.BatchRow | None:
    """The batch's projected row if the caller's tenant owns it."""
    try:
        row = await db.get_batch(request.app[POOL], batch_id)
    except Unavailable as exc:
        raise Unavailable(f"batch status is unavailable: {exc.message}") from exc
    if row is None or row.tenant_id != caller_of(request).tenant:
        return None
    return row


def _pace(row: db.BatchRow, now: dt.datetime) -> tuple[float | None, str | None]:
    """Items ended per second since the batch started, and when the rest will have
    ended at that pace; both None unless it is running and has ended some."""
    ended = row.done + row.failed + row.cancelled
    if row.status != BatchStatus.RUNNING or row.started_at is None:
        return None, None
    seconds = (now - row.started_at).total_seconds()
    if seconds <= 0:
        return None, None
    rate = ended / seconds
    if rate <= 0:
        return rate, None
    eta = now + dt.timedelta(seconds=(row.total - ended) / rate)
    return rate, eta.isoformat()


async def batch_view(request: web.Request, row: db.BatchRow) -> jobanswers.Batch:
    url = None
    if row.status.terminal and row.object_key:
        url = await request.app[STORAGE].url(row.object_key, request.app[SETTINGS].url_ttl)
    ended = row.done + row.failed + row.cancelled
    rate, eta = _pace(row, dt.datetime.now(dt.UTC))
    return jobanswers.Batch(
        id=row.id,
        status=row.status,
        total=row.total,
        done=row.done,
        failed=row.failed,
        cancelled=row.cancelled,
        progress=min(1.0, ended / row.total) if row.total else 0.0,
        rate=rate,
        eta=eta,
        output=_output(row.output),
        error=failure(row.error_type, row.error_message),
        url=url,
        bytes=row.bytes,
        webhook_url=row.webhook_url,
        created_at=answers.iso(row.created_at),
        started_at=answers.iso(row.started_at),
        finished_at=answers.iso(row.finished_at),
    )


def _output(output: str) -> Literal["zip", "merged"]:
    return "merged" if output == "merged" else "zip"


def queued_view(submitted: events.BatchSubmitted) -> jobanswers.Batch:
    """What a batch only the log knows yet looks like: queued, nothing ended."""
    return jobanswers.Batch(
        id=submitted.batch_id,
        status=BatchStatus.QUEUED,
        total=submitted.total,
        done=0,
        failed=0,
        cancelled=0,
        progress=0.0,
        rate=None,
        eta=None,
        output=_output(submitted.output),
        error=None,
        url=None,
        bytes=None,
        webhook_url=submitted.webhook_url,
        created_at=dt.datetime.fromtimestamp(submitted.at, dt.UTC).isoformat(),
        started_at=None,
        finished_at=None,
    )


async def get_batch(request: web.Request) -> web.Response:
    """`GET /batches/{id}`: the projection, or `queued` if only the log knows it yet (a
    batch just accepted is never a 404)."""
    batch_id = request.match_info["batch_id"]
    if not BATCH_ID.fullmatch(batch_id):
        raise NotFound(f"no batch {batch_id!r}")
    row = await _load_row(request, batch_id)
    if row is not None:
        return answers.respond(await batch_view(request, row))
    try:
        submitted = await timeline.batch_submission(request.app[JS], batch_id)
    except Unavailable as exc:
        raise Unavailable(f"batch status is unavailable: {exc.message}") from exc
    if submitted is None or submitted.tenant != caller_of(request).tenant:
        raise NotFound(f"no batch {batch_id!r}")
    return answers.respond(queued_view(submitted))


LIST_LIMIT = 50
MAX_LIST_LIMIT = 1000
MAX_OFFSET = 10_000_000
_STATUSES = {str(status) for status in BatchStatus}
_ITEM_STATUSES = {str(status) for status in JobStatus}


def _status_param(request: web.Request, allowed: set[str]) -> str | None:
    status = request.query.get("status")
    if status is not None and status not in allowed:
        raise RequestError(f"status must be one of {', '.join(sorted(allowed))}", field="status")
    return status


def _page(request: web.Request) -> tuple[int, int]:
    limit = int_param(request.query, "limit", 1, MAX_LIST_LIMIT) or LIST_LIMIT
    offset = int_param(request.query, "offset", 0, MAX_OFFSET) or 0
    return limit, offset


def _next_offset(listed: list[Any], limit: int, offset: int) -> int | None:
    """Where the next page starts: a full page may have a successor, a short one is last."""
    return offset + len(listed) if len(listed) == limit else None


async def list_batches(request: web.Request) -> web.Response:
    """`GET /batches?status=&limit=&offset=`: the caller's batches, newest first."""
    status = _status_param(request, _STATUSES)
    limit, offset = _page(request)
    tenant = caller_of(request).tenant
    try:
        rows = await db.list_batches(request.app[POOL], tenant, status, limit, offset)
    except Unavailable as exc:
        raise Unavailable(f"batches are unavailable: {exc.message}") from exc
    listed = [await batch_view(request, row) for row in rows]
    next_offset = _next_offset(listed, limit, offset)
    page = jobanswers.BatchPage(batches=listed, limit=limit, offset=offset, next_offset=next_offset)
    return answers.respond(page)


async def _batch_or_404(request: web.Request) -> db.BatchRow:
    """The caller's projected batch; 404 for another tenant's or an unknown one, and for
    one so new that only the log knows it (its items do not exist yet either)."""
    batch_id = request.match_info["batch_id"]
    row = await _load_row(request, batch_id) if BATCH_ID.fullmatch(batch_id) else None
    if row is None:
        raise NotFound(f"no batch {batch_id!r}")
    return row


async def get_items(request: web.Request) -> web.Response:
    """`GET /batches/{id}/items?status=&limit=&offset=`: every item's outcome, by index."""
    status = _status_param(request, _ITEM_STATUSES)
    limit, offset = _page(request)
    row = await _batch_or_404(request)
    try:
        items = await db.batch_items(request.app[POOL], row, status, limit, offset)
    except Unavailable as exc:
        raise Unavailable(f"batch items are unavailable: {exc.message}") from exc
    listed = [
        jobanswers.BatchItem(
            index=item.index,
            filename=item.filename,
            job_id=item.job_id,
            status=item.status,
            attempts=item.attempts,
            error=failure(item.error_type, item.error_message),
        )
        for item in items
    ]
    next_offset = _next_offset(listed, limit, offset)
    return answers.respond(
        jobanswers.ItemPage(items=listed, limit=limit, offset=offset, next_offset=next_offset)
    )


async def get_batch_events(request: web.Request) -> web.Response:
    """`GET /batches/{id}/events`: the batch's own timeline (submitted, paused, resumed,
    cancel, complete, its end), read from the log like a job's."""
    batch_id = request.match_info["batch_id"]
    if not BATCH_ID.fullmatch(batch_id):
        raise NotFound(f"no batch {batch_id!r}")
    try:
        found = await timeline.batch_events(request.app[JS], batch_id)
    except Unavailable as exc:
        raise Unavailable(f"batch history is unavailable: {exc.message}") from exc
    if not found or found[0][2].tenant != caller_of(request).tenant:
        raise NotFound(f"no batch {batch_id!r}")
    listed = []
    for seq, at, event in found:
        entry: dict[str, Any] = {"seq": seq, **event.public_view()}
        entry["type"] = events.batch_event_name(event)
        entry.pop("tenant", None)
        entry["at"] = at.isoformat()
        listed.append(entry)
    return answers.respond(jobanswers.Timeline(id=batch_id, events=listed))


async def get_webhooks(request: web.Request) -> web.Response:
    """`GET /batches/{id}/webhooks`: every recorded attempt of the batch's webhooks (its
    end's, and `batch.progress` ones), oldest first. A batch only the log knows yet has
    none; another tenant's, or an unknown one, is a 404."""
    batch_id = request.match_info["batch_id"]
    if not BATCH_ID.fullmatch(batch_id):
        raise NotFound(f"no batch {batch_id!r}")
    tenant = caller_of(request).tenant
    row = await _load_row(request, batch_id)
    if row is None and not await _in_log(request, batch_id, tenant):
        raise NotFound(f"no batch {batch_id!r}")
    with unavailable_without_postgres("webhook log is unavailable"):
        rows = await db.batch_webhook_deliveries(request.app[POOL], tenant, batch_id)
    return answers.respond(
        jobanswers.WebhookAttempts(id=batch_id, attempts=[attempt_view(r) for r in rows])
    )


async def _state_of(request: web.Request, batch_id: str) -> tuple[str, BatchStatus, bool]:
    """(tenant, status, whether a cancel was asked) of the caller's batch; 404 otherwise.
    The log answers for a batch the projection does not hold yet."""
    if not BATCH_ID.fullmatch(batch_id):
        raise NotFound(f"no batch {batch_id!r}")
    js = request.app[JS]
    tenant = caller_of(request).tenant
    row = await _load_row(request, batch_id)
    if row is None and not await _in_log(request, batch_id, tenant):
        raise NotFound(f"no batch {batch_id!r}")
    status = row.status if row is not None else BatchStatus.QUEUED
    try:
        with bus.map_bus_errors():
            await js.get_last_msg(subjects.STREAM, subjects.batch_subject(batch_id, "cancel"))
        cancelling = True
    except NotFound:
        cancelling = False
    except Unavailable as exc:
        raise Unavailable(f"batch status is unavailable: {exc.message}") from exc
    return tenant, status, cancelling


async def _control(request: web.Request, action: str) -> web.Response:
    """Pause, resume or cancel: idempotent; 409 where the batch's state does not allow it
    (anything after it ended; pause or resume once a cancel was asked)."""
    batch_id = request.match_info["batch_id"]
    _require_nats(request)
    tenant, status, cancelling = await _state_of(request, batch_id)
    if status.terminal and not (action == "cancel" and status == BatchStatus.CANCELLED):
        raise Conflict(f"batch {batch_id} has ended ({status}); it cannot be {action}d")
    if cancelling and action != "cancel":
        raise Conflict(f"batch {batch_id} was cancelled; it cannot be {action}d")
    event: events.AnyBatchEvent
    if action == "pause":
        event, answer = events.BatchPaused(batch_id=batch_id, tenant=tenant), BatchStatus.PAUSED
    elif action == "resume":
        event = events.BatchResumed(batch_id=batch_id, tenant=tenant)
        answer = BatchStatus.QUEUED if status == BatchStatus.QUEUED else BatchStatus.RUNNING
    else:
        event, answer = events.BatchCancel(batch_id=batch_id, tenant=tenant), status
        if cancelling or status.terminal:
            return answers.respond(
                jobanswers.BatchControl(id=batch_id, status=status, cancelling=True)
            )
    await bus.publish_batch(request.app[JS], event)
    body = jobanswers.BatchControl(id=batch_id, status=answer)
    if action == "cancel":
        body.cancelling = True
    return answers.respond(body, 202)


async def pause_batch(request: web.Request) -> web.Response:
    """`POST /batches/{id}/pause`: no item starts from about a second on (renderers learn
    it through the `BATCH_STATE` bucket); items rendering finish."""
    return await _control(request, "pause")


async def resume_batch(request: web.Request) -> web.Response:
    """`POST /batches/{id}/resume`: items start again where they stopped; a finished item
    is never rendered again (its message was acked)."""
    return await _control(request, "resume")


async def cancel_batch(request: web.Request) -> web.Response:
    """`POST /batches/{id}/cancel`: no item starts again, unfinished items are cancelled,
    and the batch ends `cancelled` with the archive of what finished."""
    return await _control(request, "cancel")


def add_routes(app: web.Application) -> None:
    app.router.add_post("/batches", guarded("jobs:write", submit_batch), name=SUBMIT_ROUTE)
    app.router.add_get("/batches", guarded("jobs:read", list_batches))
    app.router.add_get("/batches/{batch_id}", guarded("jobs:read", get_batch))
    app.router.add_get("/batches/{batch_id}/items", guarded("jobs:read", get_items))
    app.router.add_get("/batches/{batch_id}/events", guarded("jobs:read", get_batch_events))
    app.router.add_get("/batches/{batch_id}/webhooks", guarded("jobs:read", get_webhooks))
    app.router.add_post("/batches/{batch_id}/pause", guarded("jobs:write", pause_batch))
    app.router.add_post("/batches/{batch_id}/resume", guarded("jobs:write", resume_batch))
    app.router.add_post("/batches/{batch_id}/cancel", guarded("jobs:write", cancel_batch))

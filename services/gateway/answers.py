"""What the gateway answers: one msgspec Struct per JSON answer.

The handlers build these and `respond` encodes them, and `GET /openapi.json` describes
its response schemas from the very same classes (`openapi.py`), so the contract and the
answers cannot drift apart. A field that some answers leave out (a job only the log knows
yet has no `pages`) is `UNSET` there: msgspec omits it from the JSON, and the schema marks
it as optional; a field that is present but empty is `None` (`null`).

Timestamps are the `isoformat()` of an aware datetime (`2026-11-03T10:00:00.123456+00:00`),
as the answers always gave them: `Timestamp` keeps them strings and says `date-time`.
"""

from __future__ import annotations

import datetime as dt
from typing import Annotated, Any, Literal

import msgspec
from aiohttp import web

from services.core import diagnosis
from services.core.errors import ErrorType
from services.core.status import BatchStatus, JobStatus

Timestamp = Annotated[str, msgspec.Meta(extra_json_schema={"format": "date-time"})]
Count = Annotated[int, msgspec.Meta(ge=0)]
Unset = msgspec.UnsetType
UNSET = msgspec.UNSET

TimelineEntry = Annotated[
    dict[str, Any],
    msgspec.Meta(
        title="TimelineEntry",
        description="One event of the log: its stream sequence `seq`, its `type`, when the "
        "log stored it (`at`), and the event's own fields (never a secret or the input).",
        extra_json_schema={
            "required": ["seq", "type", "at"],
            "properties": {
                "seq": {"type": "integer", "minimum": 1},
                "type": {"type": "string"},
                "at": {"type": "string", "format": "date-time"},
            },
        },
    ),
]

_encoder = msgspec.json.Encoder()


def iso(value: dt.datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


def respond(
    answer: msgspec.Struct, status: int = 200, headers: dict[str, str] | None = None
) -> web.Response:
    """`answer` as a JSON response: the one way a handler sends a JSON body."""
    return web.Response(
        body=_encoder.encode(answer),
        status=status,
        headers=headers,
        content_type="application/json",
    )


class Answer(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """Base of every answer. Each subclass says `kw_only=True` (msgspec does not inherit
    it), so optional fields may come before required ones."""


# Errors ------------------------------------------------------------------------------


class ErrorDetail(Answer, kw_only=True):
    """What went wrong: a stable `type` (`validation`, `not_found`, `rate_limited`, ...),
    a message for people, and the `field` (body field, parameter or header) it is about."""

    type: ErrorType
    message: str
    field: str | Unset = UNSET


class ErrorBody(Answer, kw_only=True):
    """Every error answer: `{"error": {"type", "message", "field"?}}`."""

    error: ErrorDetail


class Failure(Answer, kw_only=True):
    """Why a job, an item or a batch failed: the error's type and root-cause message."""

    type: ErrorType | None
    message: str


# Jobs --------------------------------------------------------------------------------


class JobAccepted(Answer, kw_only=True):
    """`POST /jobs`: the job is durable in the log; poll `url` for its status."""

    id: str
    status: JobStatus
    url: str


class Job(Answer, kw_only=True):
    """A job's status. A job only the log knows yet (the projection has not caught up)
    has only `id`, `status` (`queued`) and `attempts`."""

    id: str
    status: JobStatus
    attempts: Count
    error: Failure | Unset | None = UNSET
    url: str | Unset | None = UNSET
    pages: int | Unset | None = UNSET
    bytes: int | Unset | None = UNSET
    render_ms: int | Unset | None = UNSET
    webhook_url: str | Unset | None = UNSET
    created_at: Timestamp | Unset | None = UNSET
    started_at: Timestamp | Unset | None = UNSET
    finished_at: Timestamp | Unset | None = UNSET


class JobPage(Answer, kw_only=True):
    """`GET /jobs`: a page of the tenant's jobs, newest first; `next_offset` is null on the
    last page."""

    jobs: list[Job]
    limit: int
    offset: int
    next_offset: int | None


class JobRemoved(Answer, kw_only=True):
    """`DELETE /jobs/{id}`: the job's status after the cancel (or its end, if it ended
    first); a finished job's file is deleted, so `url` is always null."""

    id: str
    status: JobStatus
    url: None = None


class Timeline(Answer, kw_only=True):
    """`GET /jobs/{id}/events`, `GET /batches/{id}/events`: the timeline, oldest first."""

    id: str
    events: list[TimelineEntry]


class WebhookAttempt(Answer, kw_only=True):
    """One recorded attempt to deliver a webhook (a batch's also names its `event`)."""

    webhook_id: str
    event: str | Unset = UNSET
    attempt: int
    url: str
    outcome: str
    status_code: int | None
    error: str | None
    latency_ms: int
    at: Timestamp | None


class WebhookAttempts(Answer, kw_only=True):
    """`GET /jobs/{id}/webhooks`, `GET /batches/{id}/webhooks`: every attempt, oldest
    first."""

    id: str
    attempts: list[WebhookAttempt]


class Redelivery(Answer, kw_only=True):
    """`POST /jobs/{id}/webhooks/redeliver`: the redelivery is on the log."""

    id: str
    redelivery: Literal["queued"] = "queued"


class DiagnosisAttempt(Answer, kw_only=True):
    """One attempt's diagnosis: when it ended and with which `error` (null for a
    successful attempt that asked for one), the page's `console` lines and uncaught
    `errors` (text, level, source location), every request (URL, status, `ms`, Chromium's
    `error`, the egress policy's `refused` reason), the `wait_for` condition still
    `pending_wait_for`, and a signed `screenshot` URL of the page (PNG; null if the page
    could not be captured). `dropped` counts what went over the caps."""

    attempt: int
    at: Timestamp
    error: diagnosis.AttemptFailure | None
    console: list[diagnosis.ConsoleLine]
    errors: list[diagnosis.PageError]
    requests: list[diagnosis.RequestLine]
    pending_wait_for: diagnosis.WaitPending | None
    screenshot: str | None
    dropped: Count


class Diagnostics(Answer, kw_only=True):
    """`GET /jobs/{id}/diagnostics`: the diagnosis of each attempt that kept one, oldest
    first."""

    id: str
    attempts: list[DiagnosisAttempt]


# Batches -----------------------------------------------------------------------------


class BatchAccepted(Answer, kw_only=True):
    """`POST /batches`: the item list is stored and the batch is durable in the log."""

    id: str
    status: BatchStatus
    total: int
    url: str


class Batch(Answer, kw_only=True):
    """A batch's progress: counts, `progress` from 0 to 1, `rate` (items ended per second)
    and `eta` while it runs, the archive's signed `url` once it has ended."""

    id: str
    status: BatchStatus
    total: Count
    done: Count
    failed: Count
    cancelled: Count
    progress: Annotated[float, msgspec.Meta(ge=0, le=1)]
    rate: float | None
    eta: Timestamp | None
    output: Literal["zip", "merged"]
    error: Failure | None
    url: str | None
    bytes: int | None
    webhook_url: str | None
    created_at: Timestamp | None
    started_at: Timestamp | None
    finished_at: Timestamp | None


class BatchPage(Answer, kw_only=True):
    """`GET /batches`: a page of the tenant's batches, newest first."""

    batches: list[Batch]
    limit: int
    offset: int
    next_offset: int | None


class BatchItem(Answer, kw_only=True):
    """One item's outcome, by its index in the request."""

    index: Count
    filename: str | None  # None while the item is not expanded yet
    job_id: str
    status: JobStatus
    attempts: Count
    error: Failure | None


class ItemPage(Answer, kw_only=True):
    """`GET /batches/{id}/items`: a page of the batch's items, by index."""

    items: list[BatchItem]
    limit: int
    offset: int
    next_offset: int | None


class BatchControl(Answer, kw_only=True):
    """`POST /batches/{id}/pause|resume|cancel`: the batch's status as the request leaves
    it; a cancel also says `cancelling`."""

    id: str
    status: BatchStatus
    cancelling: bool | Unset = UNSET


# Templates ---------------------------------------------------------------------------


class TemplateCreated(Answer, kw_only=True):
    """`POST /templates`: the version just stored."""

    id: str
    name: str
    version: int
    created_at: Timestamp


class TemplateSummary(Answer, kw_only=True):
    id: str
    name: str
    latest_version: int
    updated_at: Timestamp


class TemplatePage(Answer, kw_only=True):
    """`GET /templates`: most recently updated first."""

    templates: list[TemplateSummary]
    limit: int
    offset: int
    next_offset: int | None


class VersionStamp(Answer, kw_only=True):
    version: int
    created_at: Timestamp


class Template(Answer, kw_only=True):
    """`GET /templates/{id}`: one version, and the list of every version."""

    id: str
    name: str
    version: int
    body: str
    header: str | None
    footer: str | None
    created_at: Timestamp
    versions: list[VersionStamp]


# Account -----------------------------------------------------------------------------


class Usage(Answer, kw_only=True):
    """A month's documents; `billable` is what exceeds the free tier (failed and
    cancelled jobs never count)."""

    succeeded: Count
    failed: Count
    cancelled: Count
    pages: Count
    bytes: Count
    render_seconds: float
    free_tier: int
    billable: Count


class TenantUsage(Usage, kw_only=True):
    """`GET /usage`: the caller's tenant's usage of `month` (`YYYY-MM`)."""

    month: str
    tenant: str


class SecretCreated(Answer, kw_only=True):
    """A new signing secret: `secret` is shown this once (never for one the tenant chose)."""

    id: str
    created_at: Timestamp
    secret: str | Unset = UNSET


class SecretSummary(Answer, kw_only=True):
    id: str
    created_at: Timestamp


class SecretList(Answer, kw_only=True):
    """`GET /webhook-secrets`: ids and times, never the secrets."""

    secrets: list[SecretSummary]


# Admin -------------------------------------------------------------------------------


class RateLimit(Answer, kw_only=True):
    per_second: float
    burst: int | None


class Tenant(Answer, kw_only=True):
    """A tenant; a limit that is null follows the installation's default."""

    id: str
    name: str
    rate_limit: RateLimit | None
    monthly_quota: int | None
    created_at: Timestamp | None


class TenantCreated(Tenant, kw_only=True):
    """`POST /admin/tenants`: the tenant and its first signing secret, shown once."""

    webhook_secret: SecretCreated


class TenantList(Answer, kw_only=True):
    tenants: list[Tenant]


class Key(Answer, kw_only=True):
    """An API key as listings show it: never the key, only its first characters."""

    id: str
    tenant_id: str
    prefix: str
    scopes: list[str]
    created_at: Timestamp | None
    revoked_at: Timestamp | None
    last_used_at: Timestamp | None


class KeyList(Answer, kw_only=True):
    keys: list[Key]


class KeyCreated(Answer, kw_only=True):
    """`POST /admin/tenants/{id}/keys`: the key, shown this once."""

    id: str
    key: str
    tenant_id: str
    scopes: list[str]
    created_at: Timestamp | None


class UsageOfTenant(Usage, kw_only=True):
    tenant_id: str
    name: str | None


class AllUsage(Answer, kw_only=True):
    """`GET /admin/usage`: every tenant's usage of `month`."""

    month: str
    tenants: list[UsageOfTenant]


# Health ------------------------------------------------------------------------------


class Health(Answer, kw_only=True):
    status: Literal["ok"] = "ok"


class Checks(Answer, kw_only=True):
    nats: bool
    postgres: bool


class Readiness(Answer, kw_only=True):
    """`200` once every check passes, else `503` with the same body."""

    ready: bool
    checks: Checks

"""What the gateway answers: one msgspec Struct per JSON answer.

The handlers build these and `respond` encodes them, and `GET /openapi.json` describes
its response schemas from the very same classes (`openapi.py`), so the contract and the
answers cannot drift apart. A field that some answers leave out (a job only the log knows
yet has no `pages`) is `UNSET` there: msgspec omits it from the JSON, and the schema marks
it as optional; a field that is present but empty is `None` (`null`).

Timestamps are the `isoformat()` of an aware datetime (`2026-11-03T10:00:00.123456+00:00`),
as the answers always gave them: `Timestamp` keeps them strings and says `date-time`.

Each field is described by the string under it, which the OpenAPI document shows
(`schemadocs.py`): that doubles the lines, so besides what every answer shares (the base,
`respond`, the error body, health) this module holds the templates' and the account's
answers, and the routes of the work have modules of their own: jobs and batches
(`jobanswers.py`), assets (`assetanswers.py`), the admin routes (`adminanswers.py`).
"""

from __future__ import annotations

import datetime as dt
from typing import Annotated, Literal, overload

import msgspec
from aiohttp import web

from services.core.model.errortypes import ErrorType

Timestamp = Annotated[str, msgspec.Meta(extra_json_schema={"format": "date-time"})]
Count = Annotated[int, msgspec.Meta(ge=0)]
Unset = msgspec.UnsetType
UNSET = msgspec.UNSET

_encoder = msgspec.json.Encoder()


@overload
def iso(value: dt.datetime) -> str: ...
@overload
def iso(value: dt.datetime | None) -> str | None: ...
def iso(value: dt.datetime | None) -> str | None:
    """A time as an answer shows it (ISO 8601 with its offset); None stays None."""
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
    """What kind of error: stable, for code to branch on."""
    message: str
    """What went wrong, for people; it may change between versions."""
    field: str | Unset = UNSET
    """The body field (dotted, `options.margin.top`, `items[3].filename`), query parameter or header
    the error is about; left out when it concerns none."""


class ErrorBody(Answer, kw_only=True):
    """Every error answer: `{"error": {"type", "message", "field"?}}`."""

    error: ErrorDetail
    """The error."""


# Templates ---------------------------------------------------------------------------


class TemplateCreated(Answer, kw_only=True):
    """`POST /templates`: the version just stored."""

    id: str
    """The template's id: the same for every version of one name."""
    name: str
    """The template's name."""
    version: int
    """The version just stored, from 1."""
    created_at: Timestamp
    """When it was stored."""


class TemplateSummary(Answer, kw_only=True):
    """A stored template as listings show it: its newest version, not its body."""

    id: str
    """The template's id."""
    name: str
    """The template's name."""
    latest_version: int
    """Its newest version."""
    updated_at: Timestamp
    """When its newest version was stored."""


class TemplatePage(Answer, kw_only=True):
    """`GET /templates`: most recently updated first."""

    templates: list[TemplateSummary]
    """The templates, most recently updated first."""
    limit: int
    """How many were asked for at most."""
    offset: int
    """How many were skipped."""
    next_offset: int | None
    """The `offset` of the next page; null on the last page."""


class VersionStamp(Answer, kw_only=True):
    """One stored version of a template."""

    version: int
    """The version's number."""
    created_at: Timestamp
    """When it was stored."""


class Template(Answer, kw_only=True):
    """`GET /templates/{id}`: one version, and the list of every version."""

    id: str
    """The template's id."""
    name: str
    """The template's name."""
    version: int
    """The version shown."""
    body: str
    """The version's Jinja2 body."""
    header: str | None
    """Its page header template; null without one."""
    footer: str | None
    """Its page footer template; null without one."""
    created_at: Timestamp
    """When this version was stored."""
    versions: list[VersionStamp]
    """Every version, oldest first."""
    files: list[BundledFile] = msgspec.field(default_factory=list)
    """The files this version bundles, which its jobs' pages refer to by name."""


class BundledFile(Answer, kw_only=True):
    """A file a template version bundles (as a job's file: name, digest, size, type)."""

    name: str
    """Its name, as pages refer to it."""
    digest: str
    """The SHA-256 of its bytes, in hex."""
    size: Count
    """Its size in bytes."""
    content_type: str
    """Its type, sniffed from its bytes."""
    url: str | None = None
    """A signed link to its bytes, valid for `PRESSROOM_URL_TTL` seconds (`GET
    /templates/{id}` only)."""


# Account -----------------------------------------------------------------------------


class Usage(Answer, kw_only=True):
    """A month's documents; `billable` is what exceeds the free tier (failed and
    cancelled jobs never count)."""

    succeeded: Count
    """Documents made (jobs and batch items that ended `done`)."""
    failed: Count
    """Jobs and items that failed (never billed)."""
    cancelled: Count
    """Jobs and items cancelled (never billed)."""
    pages: Count
    """Pages of the documents made."""
    bytes: Count
    """Bytes of the documents made."""
    render_seconds: float
    """Seconds spent rendering the documents made."""
    free_tier: int
    """Documents a month free of charge (`PRESSROOM_FREE_TIER`)."""
    billable: Count
    """Documents made beyond the free tier."""


class QuotaUsage(Usage, kw_only=True):
    """A tenant's month's documents and what is left of its monthly quota."""

    monthly_quota: int | None
    """Successful documents a month the tenant may have (its own limit, or
    `PRESSROOM_MONTHLY_QUOTA`); null for none."""
    held: Count
    """Documents held against the quota now by accepted work that has not finished yet
    (one per job, one per batch item not ended); they turn into `succeeded` or come back
    when the work fails or is cancelled. 0 without a quota (nothing is held) and for any
    month but this one."""
    quota_left: Count | None
    """Documents that can still be accepted this month: the quota less `succeeded` and
    `held`; null without a quota and for any month but this one."""


class TenantUsage(QuotaUsage, kw_only=True):
    """`GET /usage`: the caller's tenant's usage of `month` (`YYYY-MM`)."""

    month: str
    """The month, `YYYY-MM` (UTC)."""
    tenant: str
    """The tenant's id."""


class SecretCreated(Answer, kw_only=True):
    """A new signing secret: `secret` is shown this once (never for one the tenant chose)."""

    id: str
    """The secret's id (`whs_...`)."""
    created_at: Timestamp
    """When it was made."""
    secret: str | Unset = UNSET
    """The secret (`whsec_...`), shown this once; left out for one the tenant chose."""
    others_expire_at: Timestamp | Unset = UNSET
    """With `retire_others_after`: when the tenant's other secrets stop signing."""


class SecretSummary(Answer, kw_only=True):
    """A webhook signing secret as listings show it: never the secret."""

    id: str
    """The secret's id."""
    created_at: Timestamp
    """When it was made."""
    expires_at: Timestamp | None = None
    """When a secret retired by a rotation stops signing; null for one that does not."""


class SecretList(Answer, kw_only=True):
    """`GET /webhook-secrets`: ids and times, never the secrets."""

    secrets: list[SecretSummary]
    """Every signing secret of the tenant, oldest first."""


# Health ------------------------------------------------------------------------------


class Health(Answer, kw_only=True):
    """`GET /healthz`: the gateway's event loop answers."""

    status: Literal["ok"] = "ok"
    """Always `ok`: the event loop answers."""


class Checks(Answer, kw_only=True):
    """What readiness checked, each true when it passed."""

    nats: bool
    """Whether NATS is connected."""
    postgres: bool
    """Whether PostgreSQL answers."""


class Readiness(Answer, kw_only=True):
    """`200` while the gateway can take jobs (NATS connected), else `503` with the same
    body. `postgres` says whether PostgreSQL answers: reads and stored templates need it,
    submissions with their own source do not, so it does not decide readiness."""

    ready: bool
    """Whether every check passed."""
    checks: Checks
    """Each check's result."""

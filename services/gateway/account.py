"""A tenant's own account: its usage and its webhook signing secrets.

Signing secrets are sealed with the server key (`core/secrets/crypto`) before they are stored,
shown once when created, and every one that exists signs the tenant's webhooks, so a
receiver can move to a new secret before the old one is deleted. A rotation in one call:
`POST /webhook-secrets` with `retire_others_after` makes the new secret and lets the
others sign only that many more seconds (both signatures are sent meanwhile), after which
they are gone.
"""

from __future__ import annotations

import datetime as dt
import re
from typing import Annotated, Any

import msgspec
from aiohttp import web

from services.core.database import tenancy
from services.core.model.errors import Conflict, NotFound, RequestError
from services.core.secrets import crypto
from services.core.secrets.signing import new_secret, parse_secrets
from services.gateway import answers
from services.gateway.auth import caller_of, guarded
from services.gateway.keys import POOL, SETTINGS
from services.gateway.limits import LIMITS
from services.gateway.postgres import unavailable_without_postgres
from services.gateway.requests import parse_struct, read_json_body

_MONTH = re.compile(r"([0-9]{4})-([0-9]{2})")  # ASCII digits: \d takes any script's
MAX_SECRETS = 10
"""Secrets a tenant may have at once: enough for any rotation."""


def month_param(request: web.Request) -> dt.date:
    """The `month=YYYY-MM` query parameter as its first day (UTC); this month by default."""
    raw = request.query.get("month")
    if raw is None:
        return dt.datetime.now(dt.UTC).date().replace(day=1)
    match = _MONTH.fullmatch(raw)
    if match is None or not 1 <= int(match.group(2)) <= 12 or int(match.group(1)) < 1970:
        raise RequestError(f"month must look like 2026-11, got {raw!r}", field="month")
    return dt.date(int(match.group(1)), int(match.group(2)), 1)


def this_month() -> dt.date:
    """The first day of the current month (UTC)."""
    return dt.datetime.now(dt.UTC).date().replace(day=1)


def usage_view(
    used: tenancy.MonthUsage | None, free_tier: int, quota: int | None, current: bool
) -> dict[str, Any]:
    """One tenant's usage of a month (nothing used: zeros), the fields of `answers.QuotaUsage`
    that `GET /usage` and `GET /admin/usage` both show. `billable` is what exceeds the free
    tier (failed and cancelled jobs never count); `quota` is the tenant's (None: none);
    for the `current` month, `held` is what its unfinished work holds of it and
    `quota_left` what can still be accepted (otherwise 0 and None)."""
    used = used or tenancy.MonthUsage("", None, 0, 0, 0, 0, 0, 0)
    left = None if quota is None or not current else quota - used.succeeded
    held = used.held if left is not None else 0
    return {
        "succeeded": used.succeeded,
        "failed": used.failed,
        "cancelled": used.cancelled,
        "pages": used.pages,
        "bytes": used.bytes,
        "render_seconds": round(used.render_ms / 1000, 3),
        "free_tier": free_tier,
        "billable": max(0, used.succeeded - free_tier),
        "monthly_quota": quota,
        "held": held,
        "quota_left": None if left is None else max(0, left - held),
    }


async def get_usage(request: web.Request) -> web.Response:
    """`GET /usage?month=YYYY-MM`: the caller's tenant's usage of that month, and for this
    month what its unfinished work holds of its quota (`core/database/holds`)."""
    month = month_param(request)
    tenant = caller_of(request).tenant
    quota = request.app[LIMITS].quota_of(tenant) or None
    current = month == this_month()
    with unavailable_without_postgres("usage is unavailable"):
        rows = await tenancy.usage(request.app[POOL], month, tenant, holds=current)
    view = usage_view(rows[0] if rows else None, request.app[SETTINGS].free_tier, quota, current)
    answer = answers.TenantUsage(month=month.strftime("%Y-%m"), tenant=tenant, **view)
    return answers.respond(answer)


MAX_GRACE = 30 * 86400
"""The longest a rotated-out secret may go on signing, s."""


class SecretRequest(msgspec.Struct, forbid_unknown_fields=True):
    """`POST /webhook-secrets`: a secret of the tenant's own choosing (`whsec_…`), or none
    for a new random one; with `retire_others_after`, the tenant's other secrets sign
    only that many more seconds (a rotation)."""

    secret: str | None = None
    """A secret of the tenant's own: `whsec_` and the base64 of 24 bytes or more; a new random
    one when left out."""
    retire_others_after: Annotated[int, msgspec.Meta(ge=0, le=MAX_GRACE)] | None = None
    """A rotation: the tenant's other secrets sign beside this one that many more seconds
    (at most 30 days), then stop."""


async def _secret_request(request: web.Request) -> SecretRequest:
    """The body, checked; an empty body asks for a new random secret."""
    if not (await request.read()).strip():
        return SecretRequest()
    body = parse_struct(await read_json_body(request), SecretRequest)
    if body.secret is not None:
        _check_chosen(body.secret)
    return body


def _check_chosen(secret: str) -> None:
    try:
        keys = parse_secrets(secret)
    except ValueError as exc:
        raise RequestError(f"secret is invalid: {exc}", field="secret") from None
    if len(keys) != 1 or len(keys[0]) < 24:
        raise RequestError("secret must be one whsec_ secret of 24 bytes or more", field="secret")


async def add_secret(
    request: web.Request, tenant_id: str, chosen: str | None = None
) -> answers.SecretCreated:
    """Seal and store a signing secret for `tenant_id`: `chosen`, else a new random one.
    Returns `{"id","secret","created_at"}` for a new one (the only time it is shown) and
    `{"id","created_at"}` for a chosen one (never echoed)."""
    secret = chosen or new_secret()
    secret_id = crypto.new_id("whs")
    sealed = request.app[SETTINGS].server_keys().seal(secret, tenant_id)
    created = await tenancy.add_webhook_secret(request.app[POOL], secret_id, tenant_id, sealed)
    made = answers.SecretCreated(id=secret_id, created_at=created.isoformat())
    if not chosen:
        made.secret = secret
    return made


async def create_secret(request: web.Request) -> web.Response:
    """`POST /webhook-secrets`: 201 with a new secret (or the id of the one given); from
    now on it signs too, and with `retire_others_after` the others stop after that long."""
    tenant = caller_of(request).tenant
    body = await _secret_request(request)
    pool = request.app[POOL]
    with unavailable_without_postgres("cannot store the secret"):
        now = dt.datetime.now(dt.UTC)
        signing = [r for r in await tenancy.webhook_secrets(pool, tenant) if r.signs(now)]
        if len(signing) >= MAX_SECRETS:
            raise RequestError(
                f"a tenant has at most {MAX_SECRETS} secrets; delete an old one first",
                field="webhook_secrets",
            )
        created = await add_secret(request, tenant, body.secret)
        if body.retire_others_after is not None:
            until = await tenancy.retire_webhook_secrets(
                pool, tenant, created.id, body.retire_others_after
            )
            created.others_expire_at = until.isoformat()
    return answers.respond(created, 201)


async def list_secrets(request: web.Request) -> web.Response:
    """`GET /webhook-secrets`: ids and times (never the secrets); a secret retired by a
    rotation shows when it stops signing."""
    tenant = caller_of(request).tenant
    with unavailable_without_postgres("secrets are unavailable"):
        rows = await tenancy.webhook_secrets(request.app[POOL], tenant)
    now = dt.datetime.now(dt.UTC)
    listed = [
        answers.SecretSummary(
            id=r.id,
            created_at=r.created_at.isoformat(),
            expires_at=r.expires_at.isoformat() if r.expires_at else None,
        )
        for r in rows
        if r.signs(now)
    ]
    return answers.respond(answers.SecretList(secrets=listed))


async def delete_secret(request: web.Request) -> web.Response:
    """`DELETE /webhook-secrets/{id}`: 204; it signs no more webhooks."""
    tenant, secret_id = caller_of(request).tenant, request.match_info["secret_id"]
    pool = request.app[POOL]
    with unavailable_without_postgres("cannot delete the secret"):
        now = dt.datetime.now(dt.UTC)
        existing = {r.id for r in await tenancy.webhook_secrets(pool, tenant) if r.signs(now)}
        if secret_id not in existing:
            raise NotFound(f"no webhook secret {secret_id!r}")
        if len(existing) == 1:
            raise Conflict("the last webhook secret cannot be deleted; create its successor first")
        await tenancy.delete_webhook_secret(pool, tenant, secret_id)
    return web.Response(status=204)


def add_routes(app: web.Application) -> None:
    app.router.add_get("/usage", guarded("usage:read", get_usage))
    app.router.add_post("/webhook-secrets", guarded("webhooks:write", create_secret))
    app.router.add_get("/webhook-secrets", guarded("webhooks:write", list_secrets))
    app.router.add_delete("/webhook-secrets/{secret_id}", guarded("webhooks:write", delete_secret))

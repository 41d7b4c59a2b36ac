"""The admin API: tenants, their API keys and everyone's usage, for `PRESSROOM_ADMIN_KEY`.

A key is shown once, in the answer that creates it; only its hash and first characters
are stored. A new tenant gets a webhook signing secret, also shown once (more can be
added and rotated by the tenant through `/webhook-secrets`).
"""

from __future__ import annotations

import logging
import re
from typing import Annotated, Any

import msgspec
from aiohttp import web

from services.core.database import tenancy
from services.core.model.errors import Conflict, NotFound, RequestError
from services.core.secrets import crypto
from services.gateway import account, adminanswers, answers, keynews
from services.gateway.auth import DIRECTORY, SCOPES, admin_only
from services.gateway.keys import POOL, SETTINGS
from services.gateway.limits import LIMITS
from services.gateway.postgres import unavailable_without_postgres
from services.gateway.requests import parse_struct, read_json_body

log = logging.getLogger(__name__)

TenantName = Annotated[
    str, msgspec.Meta(min_length=1, max_length=100, pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
]


ID = re.compile(r"[A-Za-z0-9_.-]{1,100}")
"""What a tenant's or a key's id may be (`crypto.new_id`'s, and the tenant `default`)."""


class RateLimitRequest(msgspec.Struct, forbid_unknown_fields=True):
    """A submission rate: a token bucket of `burst` filled at `per_second`."""

    per_second: Annotated[float, msgspec.Meta(gt=0, le=1_000_000)]
    """Job submissions a second, on average (more than 0)."""
    burst: Annotated[int, msgspec.Meta(ge=1, le=10_000_000)]
    """Submissions at once above that pace."""


class TenantRequest(msgspec.Struct, forbid_unknown_fields=True):
    """`POST /admin/tenants`: a unique name (letters, digits, `.`, `_`, `-`) and optional
    limits that replace the installation's defaults."""

    name: TenantName
    """A unique name: letters, digits, `.`, `_`, `-`."""
    rate_limit: RateLimitRequest | None = None
    """Its submission rate; the installation's default without it."""
    monthly_quota: Annotated[int, msgspec.Meta(ge=0, le=2**62)] | None = None
    """Documents it may make a month; the installation's default without it."""


class TenantChange(msgspec.Struct, forbid_unknown_fields=True):
    """`PATCH /admin/tenants/{id}`: the limits to change; `null` returns one to the
    installation's default, a field left out stays as it is."""

    rate_limit: RateLimitRequest | msgspec.UnsetType | None = msgspec.UNSET
    """A new submission rate; null: back to the default; left out: unchanged."""
    monthly_quota: Annotated[int, msgspec.Meta(ge=0, le=2**62)] | msgspec.UnsetType | None = (
        msgspec.UNSET
    )
    """A new monthly quota; null: back to the default; left out: unchanged."""


class KeyRequest(msgspec.Struct, forbid_unknown_fields=True):
    """`POST /admin/tenants/{id}/keys`: the key's scopes (all of them by default)."""

    scopes: list[str] | None = None
    """What the key may do; every scope when left out."""


def _rate(tenant: tenancy.Tenant) -> adminanswers.RateLimit | None:
    if tenant.rate_per_second is None:
        return None
    return adminanswers.RateLimit(per_second=tenant.rate_per_second, burst=tenant.rate_burst)


def tenant_view(tenant: tenancy.Tenant) -> adminanswers.Tenant:
    return adminanswers.Tenant(
        id=tenant.id,
        name=tenant.name,
        rate_limit=_rate(tenant),
        monthly_quota=tenant.monthly_quota,
        created_at=answers.iso(tenant.created_at),
    )


def key_view(key: tenancy.ApiKey) -> adminanswers.Key:
    """A key as listings show it: never the key itself, only its first characters."""
    return adminanswers.Key(
        id=key.id,
        tenant_id=key.tenant_id,
        prefix=key.prefix,
        scopes=list(key.scopes),
        created_at=answers.iso(key.created_at),
        revoked_at=answers.iso(key.revoked_at),
        last_used_at=answers.iso(key.last_used_at),
    )


async def create_tenant(request: web.Request) -> web.Response:
    """`POST /admin/tenants`: 201 with the tenant and its first webhook signing secret."""
    body = parse_struct(await read_json_body(request), TenantRequest)
    rate = (body.rate_limit.per_second, body.rate_limit.burst) if body.rate_limit else None
    pool = request.app[POOL]
    with unavailable_without_postgres("cannot create the tenant"):
        tenant = await tenancy.create_tenant(
            pool, crypto.new_id("ten"), body.name, rate, body.monthly_quota
        )
        if tenant is None:
            raise Conflict(f"a tenant named {body.name!r} exists already")
        secret = await account.add_secret(request, tenant.id)
    request.app[DIRECTORY].add_tenants([tenant])
    await keynews.tell(request.app)
    log.info("tenant %s (%s) created", tenant.id, tenant.name)
    view = msgspec.structs.asdict(tenant_view(tenant))
    return answers.respond(adminanswers.TenantCreated(**view, webhook_secret=secret), 201)


async def list_tenants(request: web.Request) -> web.Response:
    with unavailable_without_postgres("tenants are unavailable"):
        tenants = await tenancy.list_tenants(request.app[POOL])
    return answers.respond(adminanswers.TenantList(tenants=[tenant_view(t) for t in tenants]))


def _id_of(request: web.Request, name: str, what: str) -> str:
    """The path's id `name`; `NotFound` for one no tenant or key can have (so PostgreSQL
    never sees a NUL, which it refuses)."""
    value = request.match_info[name]
    if not ID.fullmatch(value):
        raise NotFound(f"no {what} {value!r}")
    return value


async def _tenant_or_404(request: web.Request) -> tenancy.Tenant:
    tenant_id = _id_of(request, "tenant_id", "tenant")
    with unavailable_without_postgres("tenants are unavailable"):
        tenant = await tenancy.get_tenant(request.app[POOL], tenant_id)
    if tenant is None:
        raise NotFound(f"no tenant {tenant_id!r}")
    return tenant


async def get_tenant(request: web.Request) -> web.Response:
    return answers.respond(tenant_view(await _tenant_or_404(request)))


def _limits(change: TenantChange) -> dict[str, Any]:
    """The columns a change sets (see `tenancy.update_tenant`)."""
    limits: dict[str, Any] = {}
    if change.rate_limit is not msgspec.UNSET:
        rate = change.rate_limit
        limits["rate_per_second"] = rate.per_second if rate is not None else None
        limits["rate_burst"] = rate.burst if rate is not None else None
    if change.monthly_quota is not msgspec.UNSET:
        limits["monthly_quota"] = change.monthly_quota
    return limits


async def change_tenant(request: web.Request) -> web.Response:
    """`PATCH /admin/tenants/{id}`: new limits, in force on every gateway at once (told
    over NATS; within `PRESSROOM_AUTH_REFRESH` seconds if that notice is lost)."""
    tenant = await _tenant_or_404(request)
    limits = _limits(parse_struct(await read_json_body(request), TenantChange))
    if limits:
        with unavailable_without_postgres("cannot change the tenant"):
            changed = await tenancy.update_tenant(request.app[POOL], tenant.id, limits)
        tenant = changed or tenant
        request.app[DIRECTORY].add_tenants([tenant])
        await keynews.tell(request.app)
    return answers.respond(tenant_view(tenant))


def _scopes(body: KeyRequest) -> list[str]:
    if body.scopes is None:
        return list(SCOPES)
    unknown = sorted(set(body.scopes) - set(SCOPES))
    if unknown or not body.scopes:
        raise RequestError(
            f"scopes must be a non-empty list of {', '.join(SCOPES)}; unknown: {unknown}",
            field="scopes",
        )
    return [scope for scope in SCOPES if scope in body.scopes]


async def _key_request(request: web.Request) -> KeyRequest:
    """The body of a key creation; an empty body means every scope."""
    if not await request.read():
        return KeyRequest()
    return parse_struct(await read_json_body(request), KeyRequest)


async def create_key(request: web.Request) -> web.Response:
    """`POST /admin/tenants/{id}/keys`: 201 with the key, shown this once."""
    tenant = await _tenant_or_404(request)
    scopes = _scopes(await _key_request(request))
    key = crypto.new_api_key()
    with unavailable_without_postgres("cannot create the key"):
        stored = await tenancy.create_key(
            request.app[POOL], crypto.new_id("key"), tenant.id, crypto.hash_key(key),
            key[: len(crypto.KEY_PREFIX) + 6], scopes,
        )  # fmt: skip
    request.app[DIRECTORY].add_keys([stored])
    await keynews.tell(request.app)
    log.info("key %s for tenant %s created", stored.id, tenant.id)
    created = adminanswers.KeyCreated(
        id=stored.id,
        key=key,
        tenant_id=tenant.id,
        scopes=scopes,
        created_at=answers.iso(stored.created_at),
    )
    return answers.respond(created, 201)


async def list_keys(request: web.Request) -> web.Response:
    tenant = await _tenant_or_404(request)
    with unavailable_without_postgres("keys are unavailable"):
        keys = await tenancy.list_keys(request.app[POOL], tenant.id)
    return answers.respond(adminanswers.KeyList(keys=[key_view(k) for k in keys]))


async def revoke_key(request: web.Request) -> web.Response:
    """`DELETE /admin/keys/{key_id}`: 204; the key is refused from now on, on every
    gateway at once (told over NATS; within `PRESSROOM_AUTH_REFRESH` seconds if that
    notice is lost)."""
    key_id = _id_of(request, "key_id", "key")
    with unavailable_without_postgres("cannot revoke the key"):
        key = await tenancy.revoke_key(request.app[POOL], key_id)
    if key is None:
        raise NotFound(f"no key {key_id!r}")
    request.app[DIRECTORY].add_keys([key])
    await keynews.tell(request.app, revoked=[key.id])
    log.info("key %s of tenant %s revoked", key.id, key.tenant_id)
    return web.Response(status=204)


async def all_usage(request: web.Request) -> web.Response:
    """`GET /admin/usage?month=YYYY-MM`: every tenant's usage of that month, with what each
    one's unfinished work holds of its quota this month, as `GET /usage` shows it."""
    month = account.month_param(request)
    current = month == account.this_month()
    with unavailable_without_postgres("usage is unavailable"):
        rows = await tenancy.usage(request.app[POOL], month, None, holds=current)
    free = request.app[SETTINGS].free_tier
    quota_of = request.app[LIMITS].quota_of
    listed = [
        adminanswers.UsageOfTenant(
            tenant_id=row.tenant_id,
            name=row.name,
            **account.usage_view(row, free, quota_of(row.tenant_id) or None, current),
        )
        for row in rows
    ]
    return answers.respond(adminanswers.AllUsage(month=month.strftime("%Y-%m"), tenants=listed))


def add_routes(app: web.Application) -> None:
    router = app.router
    router.add_post("/admin/tenants", admin_only(create_tenant))
    router.add_get("/admin/tenants", admin_only(list_tenants))
    router.add_get("/admin/tenants/{tenant_id}", admin_only(get_tenant))
    router.add_patch("/admin/tenants/{tenant_id}", admin_only(change_tenant))
    router.add_post("/admin/tenants/{tenant_id}/keys", admin_only(create_key))
    router.add_get("/admin/tenants/{tenant_id}/keys", admin_only(list_keys))
    router.add_delete("/admin/keys/{key_id}", admin_only(revoke_key))
    router.add_get("/admin/usage", admin_only(all_usage))

"""PostgreSQL queries about tenants: the tenants, their API keys, their webhook signing
secrets, and their usage.

Tenants, keys and secrets are configuration written by the gateway's admin API (not job
events; a rebuild of the projection leaves them alone). Usage is a projection the
projector writes from terminal events (`projector/apply.py`); this module only reads it.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

import asyncpg

from services.core.database.db import map_db_errors

CHANGE_OVERLAP = dt.timedelta(seconds=5)
"""A refresh asks again for rows changed this long before the newest change it saw: a
write that committed late, behind a newer one, is still picked up."""


@dataclass(frozen=True)
class Tenant:
    """A tenant; a limit left None follows the installation's default."""

    id: str
    name: str
    rate_per_second: float | None
    rate_burst: int | None
    monthly_quota: int | None
    created_at: dt.datetime
    updated_at: dt.datetime


@dataclass(frozen=True)
class ApiKey:
    """What is stored of an API key: never the key, only its hash and first characters."""

    id: str
    tenant_id: str
    hash: bytes
    prefix: str
    scopes: tuple[str, ...]
    created_at: dt.datetime
    revoked_at: dt.datetime | None
    last_used_at: dt.datetime | None
    updated_at: dt.datetime


@dataclass(frozen=True)
class WebhookSecret:
    """One of a tenant's signing secrets, sealed with the server key (`core/secrets/crypto`);
    one retired by a rotation signs until `expires_at`."""

    id: str
    secret: str
    created_at: dt.datetime
    expires_at: dt.datetime | None = None

    def signs(self, now: dt.datetime) -> bool:
        return self.expires_at is None or self.expires_at > now


@dataclass(frozen=True)
class MonthUsage:
    """A tenant's documents of one month (`usage_months`), with its name if it has one."""

    tenant_id: str
    name: str | None
    succeeded: int
    failed: int
    cancelled: int
    pages: int
    bytes: int
    render_ms: int
    held: int = 0
    """Units it holds of its quota now (`core/database/holds`); 0 when not asked."""


def _tenant(row: asyncpg.Record) -> Tenant:
    return Tenant(**dict(row))


def _key(row: asyncpg.Record) -> ApiKey:
    return ApiKey(**{**dict(row), "scopes": tuple(row["scopes"])})


_TENANT_COLUMNS = "id, name, rate_per_second, rate_burst, monthly_quota, created_at, updated_at"
_KEY_COLUMNS = (
    "id, tenant_id, hash, prefix, scopes, created_at, revoked_at, last_used_at, updated_at"
)


@map_db_errors()
async def create_tenant(
    pool: asyncpg.Pool,
    tenant_id: str,
    name: str,
    rate: tuple[float, int] | None,
    monthly_quota: int | None,
) -> Tenant | None:
    """Store a new tenant; None if the name is taken."""
    per_second, burst = rate if rate is not None else (None, None)
    row = await pool.fetchrow(
        f"INSERT INTO tenants (id, name, rate_per_second, rate_burst, monthly_quota) "
        f"VALUES ($1, $2, $3, $4, $5) ON CONFLICT (name) DO NOTHING RETURNING {_TENANT_COLUMNS}",
        tenant_id,
        name,
        per_second,
        burst,
        monthly_quota,
    )
    return _tenant(row) if row is not None else None


_LIMIT_COLUMNS = ("rate_per_second", "rate_burst", "monthly_quota")


@map_db_errors()
async def update_tenant(
    pool: asyncpg.Pool, tenant_id: str, limits: dict[str, Any]
) -> Tenant | None:
    """Set some of a tenant's limits (`rate_per_second`, `rate_burst`, `monthly_quota`; None
    means the installation's default); None if there is no such tenant."""
    names = [name for name in _LIMIT_COLUMNS if name in limits]
    sets = [f"{name} = ${n}" for n, name in enumerate(names, start=2)]
    row = await pool.fetchrow(
        f"UPDATE tenants SET {', '.join([*sets, 'updated_at = clock_timestamp()'])} "
        f"WHERE id = $1 RETURNING {_TENANT_COLUMNS}",
        tenant_id,
        *(limits[name] for name in names),
    )
    return _tenant(row) if row is not None else None


@map_db_errors()
async def list_tenants(pool: asyncpg.Pool) -> list[Tenant]:
    rows = await pool.fetch(f"SELECT {_TENANT_COLUMNS} FROM tenants ORDER BY created_at, id")
    return [_tenant(r) for r in rows]


@map_db_errors()
async def get_tenant(pool: asyncpg.Pool, tenant_id: str) -> Tenant | None:
    row = await pool.fetchrow(f"SELECT {_TENANT_COLUMNS} FROM tenants WHERE id = $1", tenant_id)
    return _tenant(row) if row is not None else None


@map_db_errors()
async def create_key(
    pool: asyncpg.Pool, key_id: str, tenant_id: str, key_hash: bytes, prefix: str, scopes: list[str]
) -> ApiKey:
    row = await pool.fetchrow(
        f"INSERT INTO api_keys (id, tenant_id, hash, prefix, scopes) "
        f"VALUES ($1, $2, $3, $4, $5) RETURNING {_KEY_COLUMNS}",
        key_id,
        tenant_id,
        key_hash,
        prefix,
        scopes,
    )
    return _key(row)


@map_db_errors()
async def list_keys(pool: asyncpg.Pool, tenant_id: str) -> list[ApiKey]:
    rows = await pool.fetch(
        f"SELECT {_KEY_COLUMNS} FROM api_keys WHERE tenant_id = $1 ORDER BY created_at, id",
        tenant_id,
    )
    return [_key(r) for r in rows]


@map_db_errors()
async def revoke_key(pool: asyncpg.Pool, key_id: str) -> ApiKey | None:
    """Revoke a key (a second revocation keeps the first time); None if there is no such
    key."""
    row = await pool.fetchrow(
        f"UPDATE api_keys SET revoked_at = COALESCE(revoked_at, clock_timestamp()), "
        f"updated_at = clock_timestamp() WHERE id = $1 RETURNING {_KEY_COLUMNS}",
        key_id,
    )
    return _key(row) if row is not None else None


async def _changed(
    pool: asyncpg.Pool, table: str, columns: str, since: dt.datetime | None
) -> list[asyncpg.Record]:
    """Rows of `table` created or changed since `since` (all if None), oldest change first."""
    where = "" if since is None else "WHERE updated_at > $1"
    args = () if since is None else (since - CHANGE_OVERLAP,)
    return list(
        await pool.fetch(f"SELECT {columns} FROM {table} {where} ORDER BY updated_at", *args)
    )


@map_db_errors()
async def keys_changed(pool: asyncpg.Pool, since: dt.datetime | None) -> list[ApiKey]:
    """Every key created or revoked since `since` (all keys if None)."""
    return [_key(r) for r in await _changed(pool, "api_keys", _KEY_COLUMNS, since)]


@map_db_errors()
async def tenants_changed(pool: asyncpg.Pool, since: dt.datetime | None) -> list[Tenant]:
    """Every tenant created or changed since `since` (all if None)."""
    return [_tenant(r) for r in await _changed(pool, "tenants", _TENANT_COLUMNS, since)]


@map_db_errors()
async def record_key_use(pool: asyncpg.Pool, ago: dict[str, float]) -> None:
    """Move each key's `last_used_at` forward to its last use, `ago` seconds before now by
    the database's clock (not `updated_at`: using a key is not a change the gateways need
    to reload). The gateway measures the seconds, so its own clock never reaches a row."""
    if not ago:
        return
    await pool.execute(
        "UPDATE api_keys k SET last_used_at = GREATEST(k.last_used_at, "
        "clock_timestamp() - make_interval(secs => u.ago)) "
        "FROM unnest($1::text[], $2::float8[]) AS u(id, ago) WHERE k.id = u.id",
        list(ago),
        list(ago.values()),
    )


@map_db_errors()
async def add_webhook_secret(
    pool: asyncpg.Pool, secret_id: str, tenant_id: str, sealed: str
) -> dt.datetime:
    """Store a sealed signing secret; returns its creation time."""
    created: dt.datetime = await pool.fetchval(
        "INSERT INTO webhook_secrets (id, tenant_id, secret) VALUES ($1, $2, $3) "
        "RETURNING created_at",
        secret_id,
        tenant_id,
        sealed,
    )
    return created


@map_db_errors()
async def webhook_secrets(pool: asyncpg.Pool, tenant_id: str) -> list[WebhookSecret]:
    """A tenant's signing secrets, oldest first."""
    rows = await pool.fetch(
        "SELECT id, secret, created_at, expires_at FROM webhook_secrets WHERE tenant_id = $1 "
        "ORDER BY created_at, id",
        tenant_id,
    )
    return [WebhookSecret(**dict(r)) for r in rows]


@map_db_errors()
async def retire_webhook_secrets(
    pool: asyncpg.Pool, tenant_id: str, keep: str, after: float
) -> dt.datetime:
    """Let every secret of the tenant but `keep` sign for `after` more seconds (one that
    expires sooner keeps its time), and delete those that no longer sign; returns when
    the retired ones stop."""
    async with pool.acquire() as conn, conn.transaction():
        await conn.execute(
            "DELETE FROM webhook_secrets WHERE tenant_id = $1 AND expires_at <= clock_timestamp()",
            tenant_id,
        )
        until: dt.datetime = await conn.fetchval(
            "SELECT clock_timestamp() + make_interval(secs => $1)", after
        )
        await conn.execute(
            "UPDATE webhook_secrets SET expires_at = LEAST(COALESCE(expires_at, $3), $3) "
            "WHERE tenant_id = $1 AND id <> $2",
            tenant_id,
            keep,
            until,
        )
    return until


@map_db_errors()
async def delete_webhook_secret(pool: asyncpg.Pool, tenant_id: str, secret_id: str) -> bool:
    """Delete one of a tenant's secrets; False if the tenant has no such secret."""
    status = await pool.execute(
        "DELETE FROM webhook_secrets WHERE tenant_id = $1 AND id = $2", tenant_id, secret_id
    )
    return bool(status != "DELETE 0")


@map_db_errors()
async def usage(
    pool: asyncpg.Pool, month: dt.date, tenant_id: str | None, *, holds: bool = False
) -> list[MonthUsage]:
    """Usage of one month: one row per tenant (only `tenant_id`'s if given), with the
    tenant's name where it has one; with `holds` (this month), the units each tenant
    holds now (`core/database/holds`), a tenant that holds some and made nothing yet
    included."""
    rows = await pool.fetch(
        """
        SELECT COALESCE(u.tenant_id, q.tenant_id) AS tenant_id, t.name,
               COALESCE(u.succeeded, 0) AS succeeded, COALESCE(u.failed, 0) AS failed,
               COALESCE(u.cancelled, 0) AS cancelled, COALESCE(u.pages, 0) AS pages,
               COALESCE(u.bytes, 0) AS bytes, COALESCE(u.render_ms, 0) AS render_ms,
               COALESCE(q.units, 0) AS held
        FROM (SELECT * FROM usage_months
              WHERE month = $1 AND ($2::text IS NULL OR tenant_id = $2)) AS u
        FULL JOIN (SELECT tenant_id, units FROM quota_held
                   WHERE $3::boolean AND units > 0 AND ($2::text IS NULL OR tenant_id = $2))
            AS q ON q.tenant_id = u.tenant_id
        LEFT JOIN tenants t ON t.id = COALESCE(u.tenant_id, q.tenant_id)
        ORDER BY 1
        """,
        month,
        tenant_id,
        holds,
    )
    return [MonthUsage(**dict(r)) for r in rows]

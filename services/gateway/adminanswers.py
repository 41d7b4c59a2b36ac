"""What the admin routes answer (`admin.py`): tenants, their keys and everyone's usage.

Apart from `answers.py`, whose conventions these follow (an `Answer` each, `UNSET` for a
field left out, fields described by the string under them), so that the tenant-facing
answers stay one module of readable size.
"""

from __future__ import annotations

from services.gateway.answers import Answer, QuotaUsage, SecretCreated, Timestamp


class RateLimit(Answer, kw_only=True):
    """A tenant's submission rate: a token bucket of `burst` filled at `per_second`."""

    per_second: float
    """Job submissions a second, on average."""
    burst: int | None
    """Submissions at once above that pace; null: the installation's default."""


class Tenant(Answer, kw_only=True):
    """A tenant; a limit that is null follows the installation's default."""

    id: str
    """The tenant's id."""
    name: str
    """Its unique name."""
    rate_limit: RateLimit | None
    """Its submission rate; null: the installation's default."""
    monthly_quota: int | None
    """Documents it may make a month; null: the installation's default."""
    created_at: Timestamp | None
    """When it was created."""


class TenantCreated(Tenant, kw_only=True):
    """`POST /admin/tenants`: the tenant and its first signing secret, shown once."""

    webhook_secret: SecretCreated
    """Its first webhook signing secret, shown this once."""


class TenantList(Answer, kw_only=True):
    """`GET /admin/tenants`: every tenant."""

    tenants: list[Tenant]
    """Every tenant."""


class Key(Answer, kw_only=True):
    """An API key as listings show it: never the key, only its first characters."""

    id: str
    """The key's id (for `DELETE /admin/keys/{key_id}`)."""
    tenant_id: str
    """The tenant it acts for."""
    prefix: str
    """The key's first characters, to recognise it."""
    scopes: list[str]
    """What it may do."""
    created_at: Timestamp | None
    """When it was made."""
    revoked_at: Timestamp | None
    """When it was revoked; null while valid."""
    last_used_at: Timestamp | None
    """When it was last used (written every few seconds, not at once); null if never."""


class KeyList(Answer, kw_only=True):
    """`GET /admin/tenants/{id}/keys`: a tenant's keys, never a key itself."""

    keys: list[Key]
    """The tenant's keys, revoked ones included."""


class KeyCreated(Answer, kw_only=True):
    """`POST /admin/tenants/{id}/keys`: the key, shown this once."""

    id: str
    """The key's id."""
    key: str
    """The key (`prk_...`), shown this once: send it as `Authorization: Bearer <key>`."""
    tenant_id: str
    """The tenant it acts for."""
    scopes: list[str]
    """What it may do."""
    created_at: Timestamp | None
    """When it was made."""


class UsageOfTenant(QuotaUsage, kw_only=True):
    """One tenant's usage of the month, and its quota, as `GET /usage` shows them."""

    tenant_id: str
    """The tenant's id."""
    name: str | None
    """The tenant's name; null for a tenant since deleted."""


class AllUsage(Answer, kw_only=True):
    """`GET /admin/usage`: every tenant's usage of `month`."""

    month: str
    """The month, `YYYY-MM` (UTC)."""
    tenants: list[UsageOfTenant]
    """Each tenant's usage of it."""

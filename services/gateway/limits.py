"""Per-tenant limits on submissions: a token bucket (rate and burst) and a monthly quota
of successful documents.

Both are decided in memory. Buckets belong to one gateway: with N gateways behind a
load balancer a tenant can submit up to N times its rate. Quotas compare against the
usage the projector counted, reloaded with the key directory (every
`PRESSROOM_AUTH_REFRESH` seconds), so documents still rendering when the quota is reached
can take a tenant slightly past it.
"""

from __future__ import annotations

import datetime as dt
import math
import time
from dataclasses import dataclass, field

import asyncpg
from aiohttp import web

from services.core import tenancy
from services.core.errors import QuotaExceeded, RateLimited
from services.core.settings import Settings
from services.gateway.auth import Directory


@dataclass
class Bucket:
    """A token bucket: `burst` tokens at most, refilled at `rate` per second."""

    rate: float
    burst: int
    tokens: float = -1.0
    stamp: float = field(default_factory=time.monotonic)

    def __post_init__(self) -> None:
        if self.tokens < 0:
            self.tokens = float(self.burst)

    def _refill(self, now: float) -> None:
        self.tokens = min(float(self.burst), self.tokens + (now - self.stamp) * self.rate)
        self.stamp = now

    def take(self) -> float:
        """Take one token; 0 if it was there, else the seconds until one will be."""
        self._refill(time.monotonic())
        if self.tokens >= 1:
            self.tokens -= 1
            return 0.0
        return (1 - self.tokens) / self.rate

    def headers(self) -> dict[str, str]:
        """`RateLimit-*` headers: the burst, what is left now, seconds until full again."""
        self._refill(time.monotonic())
        full_in = (self.burst - self.tokens) / self.rate
        return {
            "RateLimit-Limit": str(self.burst),
            "RateLimit-Remaining": str(math.floor(self.tokens)),
            "RateLimit-Reset": str(math.ceil(full_in)),
        }


def month_start(now: dt.datetime) -> dt.date:
    return now.date().replace(day=1)


def _next_month(now: dt.datetime) -> dt.datetime:
    first = now.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    return (first + dt.timedelta(days=32)).replace(day=1)


class Limits:
    """Every tenant's bucket and this month's successful documents."""

    def __init__(self, settings: Settings, directory: Directory) -> None:
        self.settings = settings
        self.directory = directory
        self.buckets: dict[str, Bucket] = {}
        self.succeeded: dict[str, int] = {}

    def _limits_of(self, tenant_id: str) -> tuple[float, int]:
        tenant = self.directory.tenants.get(tenant_id)
        rate = tenant.rate_per_second if tenant is not None else None
        burst = tenant.rate_burst if tenant is not None else None
        return rate or self.settings.rate_limit, burst or self.settings.rate_burst

    def bucket(self, tenant_id: str) -> Bucket:
        """The tenant's bucket, made anew when its limits changed."""
        rate, burst = self._limits_of(tenant_id)
        bucket = self.buckets.get(tenant_id)
        if bucket is None or (bucket.rate, bucket.burst) != (rate, burst):
            bucket = self.buckets[tenant_id] = Bucket(rate, burst)
        return bucket

    def quota_of(self, tenant_id: str) -> int:
        tenant = self.directory.tenants.get(tenant_id)
        quota = tenant.monthly_quota if tenant is not None else None
        return quota if quota is not None else self.settings.monthly_quota

    def admit(self, tenant_id: str) -> None:
        """Count one submission; `RateLimited` or `QuotaExceeded` if it is one too many."""
        quota = self.quota_of(tenant_id)
        if quota and self.succeeded.get(tenant_id, 0) >= quota:
            now = dt.datetime.now(dt.UTC)
            raise QuotaExceeded(
                f"the monthly quota of {quota} successful documents is used up; "
                f"it renews on {_next_month(now).date().isoformat()}",
                retry_after=math.ceil((_next_month(now) - now).total_seconds()),
            )
        wait = self.bucket(tenant_id).take()
        if wait:
            rate, _ = self._limits_of(tenant_id)
            raise RateLimited(
                f"too many submissions: the limit is {rate:g} per second",
                retry_after=max(1, math.ceil(wait)),
            )

    def admit_many(self, tenant_id: str, count: int) -> None:
        """`QuotaExceeded` if `count` more documents (a batch's items) would take the
        tenant past what is left of its monthly quota; no token is taken (`admit` takes
        the one the request costs)."""
        quota = self.quota_of(tenant_id)
        left = quota - self.succeeded.get(tenant_id, 0)
        if quota and count > left:
            now = dt.datetime.now(dt.UTC)
            raise QuotaExceeded(
                f"a batch of {count} documents is more than the {max(left, 0)} left of the "
                f"monthly quota of {quota}; it renews on {_next_month(now).date().isoformat()}",
                retry_after=math.ceil((_next_month(now) - now).total_seconds()),
            )

    async def refresh(self, pool: asyncpg.Pool) -> None:
        """Reload this month's successful documents of every tenant that has a quota."""
        tenants = list(self.directory.tenants)
        if self.settings.monthly_quota:
            tenants = [*tenants, *self.buckets]  # tenants known only by their submissions
        with_quota = [t for t in set(tenants) if self.quota_of(t)]
        if with_quota:
            month = month_start(dt.datetime.now(dt.UTC))
            self.succeeded = await tenancy.succeeded_this_month(pool, month, with_quota)


LIMITS = web.AppKey("limits", Limits)

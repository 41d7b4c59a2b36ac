"""Per-tenant limits on submissions: a token bucket (rate and burst), decided in memory,
and a monthly quota of successful documents, decided in PostgreSQL.

Buckets belong to one gateway: with N gateways behind a load balancer a tenant can submit
up to N times its rate. The quota is one ledger for every gateway: a submission of a
tenant with a quota holds its documents (`core/database/holds.py`) before it is published, and is
refused if this month's successes and the tenant's unfinished work leave no room for
them. A tenant without a quota costs no PostgreSQL round trip, so its submissions go on
while PostgreSQL is away; one with a quota then gets a 503 saying why.
"""

from __future__ import annotations

import datetime as dt
import logging
import math
import time
from dataclasses import dataclass, field

import asyncpg
from aiohttp import web

from services.core.database import holds
from services.core.database.holds import Committed, HoldKind
from services.core.model.errors import QuotaExceeded, RateLimited, RetryLater, Unavailable
from services.core.runtime.settings import Settings
from services.gateway.auth import Directory

log = logging.getLogger(__name__)

HELD_RETRY = 30
"""Retry-After, s, when the quota is full of unfinished work: units held by work that
then fails or is cancelled come back."""

QUOTA_UNKNOWN_RETRY = 5
"""Retry-After, s, when PostgreSQL cannot say whether the quota has room."""


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


def _next_month(now: dt.datetime) -> dt.datetime:
    first = now.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    return (first + dt.timedelta(days=32)).replace(day=1)


def _exceeded(quota: int, kind: HoldKind, units: int, committed: Committed) -> QuotaExceeded:
    """Why `units` more documents do not fit, and when to try again: next month if this
    month's successes alone leave no room, else once unfinished work has ended."""
    left = max(0, quota - committed.succeeded - committed.held)
    noun = "document" if units == 1 else "documents"
    asked = "a job" if kind == HoldKind.JOB else f"a batch of {units} {noun}"
    message = (
        f"{asked} does not fit in the monthly quota of {quota} successful documents: "
        f"{committed.succeeded} succeeded this month and {committed.held} are held by "
        f"accepted work that has not finished, {left} left"
    )
    if committed.succeeded + units > quota:
        now = dt.datetime.now(dt.UTC)
        renews = _next_month(now)
        return QuotaExceeded(
            f"{message}; it renews on {renews.date().isoformat()}",
            retry_after=math.ceil((renews - now).total_seconds()),
        )
    return QuotaExceeded(
        f"{message}; held documents come back when their work fails or is cancelled",
        retry_after=HELD_RETRY,
    )


class Limits:
    """Every tenant's bucket, and its quota's holds."""

    def __init__(self, settings: Settings, directory: Directory) -> None:
        self.settings = settings
        self.directory = directory
        self.buckets: dict[str, Bucket] = {}

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
        """Count one submission; `RateLimited` if it is one too many."""
        wait = self.bucket(tenant_id).take()
        if wait:
            rate, _ = self._limits_of(tenant_id)
            raise RateLimited(
                f"too many submissions: the limit is {rate:g} per second",
                retry_after=max(1, math.ceil(wait)),
            )

    async def hold(
        self, pool: asyncpg.Pool, tenant_id: str, hold_id: str, kind: HoldKind, units: int
    ) -> bool:
        """Hold `units` documents of the tenant's monthly quota for its job or batch
        `hold_id`, before it is published; False if the tenant has no quota (nothing is
        held, PostgreSQL is not asked). `QuotaExceeded` if they do not fit, `RetryLater`
        if PostgreSQL cannot say."""
        quota = self.quota_of(tenant_id)
        if not quota:
            return False
        try:
            committed = await holds.take(pool, tenant_id, hold_id, kind, units, quota)
        except Unavailable as exc:
            raise RetryLater(
                f"cannot check the tenant's monthly quota: {exc.message}",
                retry_after=QUOTA_UNKNOWN_RETRY,
            ) from exc
        if not committed.taken:
            raise _exceeded(quota, kind, units, committed)
        return True

    async def release(self, pool: asyncpg.Pool, hold_id: str) -> None:
        """Give back the hold of a submission that did not reach the log. If PostgreSQL
        cannot be reached now, the projector's sweep releases it later."""
        try:
            await holds.release(pool, hold_id)
        except Unavailable as exc:
            log.warning("quota hold of %s not released now (the sweep will): %s", hold_id, exc)


LIMITS = web.AppKey("limits", Limits)

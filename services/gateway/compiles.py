"""Fair template compiling on the gateway: one pool of jail workers shared by every
tenant, and each tenant's share of it decided before any work is queued there.

Every compile of a tenant's template on the gateway (`POST /templates` today) goes
through `Compiler.check`, which first admits the request, in memory and at once:

- a tenant that already has `PRESSROOM_TEMPLATE_CONCURRENCY` requests compiling (running
  or waiting for a worker) gets `429 compile_limited`, and so does one over its template
  rate (`PRESSROOM_TEMPLATE_RATE` per second, bursts of `PRESSROOM_TEMPLATE_BURST`);
- once `PRESSROOM_TEMPLATE_QUEUE` admitted requests wait for a worker, whoever asks next
  gets `503` (the pool is full, not the tenant over its share);

each with `Retry-After`. A refused request has taken no worker and waited for none. So a
tenant posting heavy templates in a loop keeps at most its share of the
`PRESSROOM_TEMPLATE_WORKERS` workers busy, and other tenants' compiles start on the rest.
Like the submission buckets, these limits belong to one gateway.

`FairJail` is that mechanism for any pool of workers, with its own `Share` of them:
`POST /validate` runs PDFs in one (`validation.py`) the same way.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

from services.core.model.errors import CompileLimited, RequestError, RetryLater, TemplateError
from services.core.runtime.settings import Settings
from services.core.sandbox.jail import Jail
from services.core.sandbox.templating import check_jinja
from services.gateway.limits import Bucket

T = TypeVar("T")

BUSY_RETRY = 1
"""Retry-After, s, for a tenant at its concurrency: its own work is in flight, and
most takes milliseconds."""


@dataclass(frozen=True)
class Share:
    """How a pool of workers is shared: per tenant, `concurrency` requests in flight and
    `rate` per second (bursts of `burst`); `queue` admitted requests waiting for one of
    `workers` at most; `what` and `variables` name them in refusals."""

    what: str
    concurrency: int
    rate: float
    burst: int
    workers: int
    queue: int
    timeout: float
    prefix: str  # of the variables: PRESSROOM_TEMPLATE

    @classmethod
    def of_templates(cls, settings: Settings) -> Share:
        return cls(
            "template compiles",
            settings.template_concurrency,
            settings.template_rate,
            settings.template_burst,
            settings.template_workers,
            settings.template_queue,
            settings.template_timeout,
            "PRESSROOM_TEMPLATE",
        )

    @classmethod
    def of_validations(cls, settings: Settings) -> Share:
        """`POST /validate`: its own workers, and each tenant's share of them set by the
        template compiles' variables (one fairness policy for a gateway's CPU work)."""
        return cls(
            "validations",
            settings.template_concurrency,
            settings.template_rate,
            settings.template_burst,
            settings.validate_workers,
            settings.template_queue,
            settings.finishing_timeout,
            "PRESSROOM_TEMPLATE",
        )


class FairJail:
    """A pool of jail workers (`jail`) shared by every tenant, each within its `share`:
    `call` admits a request (see the module docstring) or refuses it at once."""

    def __init__(self, jail: Jail, share: Share) -> None:
        self.jail = jail
        self.share = share
        self.in_flight: dict[str, int] = {}
        self.buckets: dict[str, Bucket] = {}

    @property
    def admitted(self) -> int:
        """Requests admitted and not finished, every tenant's."""
        return sum(self.in_flight.values())

    async def call(self, tenant: str, function: Callable[..., T], *args: Any) -> T:
        """`function(*args)` in a worker, for `tenant`, once admitted."""
        with self._admitted(tenant):
            return await self.jail.call(function, *args)

    @contextlib.contextmanager
    def _admitted(self, tenant: str) -> Iterator[None]:
        """Count the request in its tenant's while the block runs; refuse it first if
        there is no room (see the module docstring)."""
        self._admit(tenant)
        self.in_flight[tenant] = self.in_flight.get(tenant, 0) + 1
        try:
            yield
        finally:
            left = self.in_flight[tenant] - 1
            if left:
                self.in_flight[tenant] = left
            else:
                del self.in_flight[tenant]

    def _admit(self, tenant: str) -> None:
        share = self.share
        if self.in_flight.get(tenant, 0) >= share.concurrency:
            raise CompileLimited(
                f"this tenant is at its limit of {share.concurrency} {share.what} at once "
                f"({share.prefix}_CONCURRENCY); retry once one has ended",
                retry_after=BUSY_RETRY,
            )
        if self.admitted >= share.workers + share.queue:
            raise RetryLater(
                f"every worker is busy and {share.queue} {share.what} wait for one "
                f"({share.prefix}_QUEUE)",
                retry_after=max(1, math.ceil(share.timeout)),
            )
        wait = self._bucket(tenant).take()
        if wait:
            raise CompileLimited(
                f"too many {share.what}: the limit is {share.rate:g} per second "
                f"({share.prefix}_RATE)",
                retry_after=max(1, math.ceil(wait)),
            )

    def _bucket(self, tenant: str) -> Bucket:
        bucket = self.buckets.get(tenant)
        if bucket is None:
            bucket = self.buckets[tenant] = Bucket(self.share.rate, self.share.burst)
        return bucket


class Compiler(FairJail):
    """The gateway's template workers and who may use them now."""

    def __init__(self, jail: Jail, settings: Settings) -> None:
        super().__init__(jail, Share.of_templates(settings))
        self.settings = settings

    async def check(self, tenant: str, texts: dict[str, str | None]) -> None:
        """Compile each of `texts` ({field: Jinja2 source}, None skipped) for `tenant`;
        `RequestError` naming the first field that does not compile (or not within the
        jail's time and memory limits). Refused at once, before any work is queued, if
        the tenant is over its share (`CompileLimited`) or the pool is full
        (`RetryLater`)."""
        with self._admitted(tenant):
            for field, text in texts.items():
                if text is None:
                    continue
                try:
                    await self.jail.call(check_jinja, text, field)
                except TemplateError as exc:
                    raise RequestError(f"{field}: {exc.message}", field=field) from None

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
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator

from services.core.errors import CompileLimited, RequestError, RetryLater, TemplateError
from services.core.jail import Jail
from services.core.settings import Settings
from services.core.templating import check_jinja
from services.gateway.limits import Bucket

BUSY_RETRY = 1
"""Retry-After, s, for a tenant at its concurrency: its own compile is in flight, and
most take milliseconds."""


class Compiler:
    """The gateway's template workers (`jail`) and who may use them now."""

    def __init__(self, jail: Jail, settings: Settings) -> None:
        self.jail = jail
        self.settings = settings
        self.in_flight: dict[str, int] = {}
        self.buckets: dict[str, Bucket] = {}

    @property
    def admitted(self) -> int:
        """Requests admitted and not finished, every tenant's."""
        return sum(self.in_flight.values())

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

    @contextlib.contextmanager
    def _admitted(self, tenant: str) -> Iterator[None]:
        """Count the request in its tenant's compiles while the block runs; refuse it
        first if there is no room (see the module docstring)."""
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
        settings = self.settings
        if self.in_flight.get(tenant, 0) >= settings.template_concurrency:
            raise CompileLimited(
                f"this tenant is at its limit of {settings.template_concurrency} template "
                "compiles at once (PRESSROOM_TEMPLATE_CONCURRENCY); retry once one has ended",
                retry_after=BUSY_RETRY,
            )
        if self.admitted >= settings.template_workers + settings.template_queue:
            raise RetryLater(
                f"every template worker is busy and {settings.template_queue} compiles wait "
                "for one (PRESSROOM_TEMPLATE_QUEUE)",
                retry_after=max(1, math.ceil(settings.template_timeout)),
            )
        wait = self._bucket(tenant).take()
        if wait:
            raise CompileLimited(
                f"too many template compiles: the limit is {settings.template_rate:g} per "
                "second (PRESSROOM_TEMPLATE_RATE)",
                retry_after=max(1, math.ceil(wait)),
            )

    def _bucket(self, tenant: str) -> Bucket:
        bucket = self.buckets.get(tenant)
        if bucket is None:
            bucket = self.buckets[tenant] = Bucket(
                self.settings.template_rate, self.settings.template_burst
            )
        return bucket

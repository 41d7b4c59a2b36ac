"""One webhook HTTP request, under the address policy, with a timeout and no redirects;
and what its outcome means for the webhook (`verdict`, a pure function)."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

import aiohttp

from services.core.sandbox import netpolicy

SNIPPET_BYTES = 1024
"""Only this much of a receiver's response is read: enough for a log, not a memory bomb."""


@dataclass(frozen=True)
class Outcome:
    """What one attempt got back: a status code, or the error that prevented one."""

    status_code: int | None
    error: str | None
    latency_ms: int

    @property
    def ok(self) -> bool:
        return self.status_code is not None and 200 <= self.status_code < 300

    @property
    def gone(self) -> bool:
        """410 Gone: the receiver asks never to be sent this again."""
        return self.status_code == 410


@dataclass(frozen=True)
class Delivered:
    """The receiver took the webhook (2xx)."""

    name: ClassVar[str] = "delivered"


@dataclass(frozen=True)
class Retrying:
    """Not taken yet: the next attempt comes after `delay` seconds."""

    delay: float
    name: ClassVar[str] = "retrying"


@dataclass(frozen=True)
class GaveUp:
    """Never sent again: the schedule is used up, or the receiver answered 410 Gone."""

    name: ClassVar[str] = "gave_up"


Verdict = Delivered | Retrying | GaveUp


def verdict(outcome: Outcome, attempt: int, schedule: Sequence[float]) -> Verdict:
    """What attempt number `attempt` (1 for the first) with `outcome` means. `schedule[n]`
    is the delay before attempt n + 1, so there are `len(schedule)` attempts in all."""
    if outcome.ok:
        return Delivered()
    if outcome.gone or attempt >= len(schedule):
        return GaveUp()
    return Retrying(schedule[attempt])


def open_session(*, allow_private: bool) -> aiohttp.ClientSession:
    connector = aiohttp.TCPConnector(
        resolver=netpolicy.PolicyResolver(allow_private=allow_private), limit=0
    )
    return aiohttp.ClientSession(connector=connector, auto_decompress=False)


async def post(
    session: aiohttp.ClientSession,
    url: str,
    body: bytes,
    headers: dict[str, str],
    timeout: float,
    *,
    allow_private: bool,
    method: str = "POST",
) -> Outcome:
    """POST (or `method`) `body` to `url`; redirects are reported as errors, never
    followed."""
    started = time.perf_counter()
    if not allow_private and (literal := netpolicy.literal_address_forbidden(url)):
        return Outcome(None, f"{literal} is a forbidden address", 0)
    try:
        async with session.request(
            method,
            url,
            data=body,
            headers=headers,
            allow_redirects=False,
            timeout=aiohttp.ClientTimeout(total=timeout),
        ) as response:
            await response.content.read(SNIPPET_BYTES)
            status, error = response.status, None
            if 300 <= status < 400:
                error = f"redirect to {response.headers.get('Location', '?')} not followed"
    except TimeoutError:  # before ClientError: aiohttp's timeouts are both
        status, error = None, f"no response within {timeout:g}s"
    except netpolicy.ForbiddenAddress as exc:
        status, error = None, str(exc)
    except aiohttp.ClientConnectorError as exc:
        status, error = None, f"cannot connect: {exc.os_error or exc}"
    except (aiohttp.ClientError, OSError) as exc:
        status, error = None, f"{type(exc).__name__}: {exc}"
    latency = round((time.perf_counter() - started) * 1000)
    return Outcome(status, error, latency)

"""Whether PostgreSQL answers, known without asking it on a request's path.

A `Watch` asks PostgreSQL `SELECT 1` every `INTERVAL` seconds on a connection of its own,
outside the pool (a pool busy with slow statements is not a dead server), each time within
`TIMEOUT` seconds. Readiness reads its state at no cost, so a readiness probe answers at
once whatever PostgreSQL does (a stopped server refuses, a frozen one never answers), and
the pool (`db.Pool`) refuses at once while it is down: a request that needs PostgreSQL gets
its `503` with `Retry-After` in microseconds instead of waiting out a timeout in a queue
behind the pool's other waiters. One failed probe is down, one answered probe is up again.

A process that starts while PostgreSQL is down (the gateway: `db.open_pool(lazy=True)`)
starts its watch down, with what must be done before the first query (`prepare`: the
migrations, the keyring's check) run on the probe's connection at the first answer: the
pool stays refused until that has succeeded.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable

import asyncpg

from services.core.model.errors import Unavailable
from services.core.runtime import lifecycle, metrics
from services.core.runtime.boundary import describe

log = logging.getLogger(__name__)

INTERVAL = 1.0
"""Seconds between two probes: an outage is noticed within `INTERVAL + TIMEOUT`."""
TIMEOUT = 1.0
"""Seconds a probe (connecting included) may take before PostgreSQL counts as down."""
PREPARE_TIMEOUT = 60.0
"""Seconds `prepare` may take (migrations wait for another process's) before it is tried
again at the next probe."""

Prepare = Callable[[asyncpg.Connection], Awaitable[None]]

DOWN = (
    OSError,
    asyncpg.PostgresError,
    asyncpg.InterfaceError,
    asyncpg.InternalClientError,
    TimeoutError,
)
"""What a probe of a down, restarting or frozen server raises (`db.DB_DOWN`'s kinds)."""


class Watch:
    """PostgreSQL's state as this process last saw it: `up`, since when, and why not."""

    def __init__(self, dsn: str, prepare: Prepare | None = None) -> None:
        """Up (the pool it watches has just connected and migrated), or, with `prepare`,
        down until a probe is answered and `prepare` has run on its connection."""
        self.dsn = dsn
        self.up = prepare is None
        self.since = time.monotonic()
        self.error = "" if self.up else "not reached since this process started"
        self._prepare = prepare
        self._conn: asyncpg.Connection | None = None
        metrics.POSTGRES_UP.set(1 if self.up else 0)

    def require(self) -> None:
        """`Unavailable` (a 503 with `Retry-After`) while PostgreSQL is down."""
        if not self.up:
            down = time.monotonic() - self.since
            raise Unavailable(f"PostgreSQL is not answering (for {down:.0f} s: {self.error})")

    async def run(self, stop: asyncio.Event) -> None:
        """Probe until `stop` is set; the probe's connection is closed at the end."""
        try:
            while not stop.is_set():
                await self.probe()
                await lifecycle.pause(stop, INTERVAL)
        finally:
            self._drop()

    async def probe(self) -> None:
        """Ask once, and record the answer."""
        try:
            async with asyncio.timeout(TIMEOUT):
                if self._conn is None or self._conn.is_closed():
                    self._conn = await asyncpg.connect(self.dsn, timeout=TIMEOUT)
                await self._conn.fetchval("SELECT 1")
            if self._prepare is not None:
                async with asyncio.timeout(PREPARE_TIMEOUT):
                    await self._prepare(self._conn)
                self._prepare = None
        except DOWN as exc:
            self._drop()
            silent = isinstance(exc, TimeoutError)
            self._record(False, f"no answer within {TIMEOUT:g} s" if silent else describe(exc))
        except Unavailable as exc:  # `prepare`'s, already translated
            self._drop()
            self._record(False, exc.message)
        else:
            self._record(True, "")

    def _record(self, up: bool, error: str) -> None:
        if up != self.up:
            held = time.monotonic() - self.since
            if up:
                log.warning("PostgreSQL answers again, after %.1f s", held)
            else:
                log.error(
                    "PostgreSQL is not answering (%s): what needs it gets 503 until it does",
                    error,
                )
            self.up, self.since = up, time.monotonic()
            metrics.POSTGRES_UP.set(1 if up else 0)
        self.error = error

    def _drop(self) -> None:
        """Forget the probe's connection without waiting on the server (`terminate`
        closes the socket at once; a polite close would wait on a frozen server)."""
        if self._conn is not None:
            self._conn.terminate()
            self._conn = None

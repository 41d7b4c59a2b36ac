"""`pressroom server-keys new|status|rotate`: the server key's rotation.

    pressroom server-keys new      a fresh key (32 random bytes, base64) and its id
    pressroom server-keys status   the keyring's ids, what PostgreSQL holds sealed with
                                   each key (exit 1 if a key it needs is missing), and
                                   the log's oldest message (what it may still need)
    pressroom server-keys rotate   seal again, with the first key, everything another key
                                   sealed (an ended job's passwords and page secrets are
                                   removed instead); exit 1 if something did not open

They read `PRESSROOM_SERVER_KEY`, `PRESSROOM_DATABASE_URL` and (`status`) NATS's settings
(or their `_FILE` forms) as the services do. The steps of a rotation
(docs/operations.md, "Rotating keys"):
put the new key *after* the current one everywhere (it opens, nothing seals with it
yet); then *first* everywhere (it seals, the old one still opens); run `rotate`; after
`PRESSROOM_STREAM_MAX_AGE`, when the log no longer holds what the old key sealed (its
oldest message is newer than the moment the new key became first) and `status` shows
PostgreSQL needs it no more, remove it.
"""

from __future__ import annotations

import asyncio
import base64
import datetime as dt
import logging
import os
import secrets
import sys
from collections.abc import Sequence

from services.core.database import db, sealed
from services.core.log import bus
from services.core.model.errors import PressroomError
from services.core.runtime.settings import Settings, SettingsError
from services.core.secrets import crypto

USAGE = "usage: pressroom server-keys new|status|rotate"
LOG_TIMEOUT = 15.0
"""Seconds `status` waits for NATS before saying it cannot tell what the log holds."""


def new() -> int:
    key = secrets.token_bytes(crypto.KEY_BYTES)
    print(base64.b64encode(key).decode())
    print(f"key id {crypto.key_id(key)}", file=sys.stderr)
    return 0


def _ring_lines(keys: crypto.ServerKeys) -> list[str]:
    return [
        f"key {kid}: {'seals new values and opens' if n == 0 else 'opens only'}"
        for n, kid in enumerate(keys.ids)
    ]


async def status(settings: Settings) -> int:
    keys = settings.server_keys()
    async with db.open_pool(settings, size=1) as pool:
        counts = await sealed.needed(pool)
    lines = _ring_lines(keys)
    for kid, n in sorted(counts.items()):
        where = "in the keyring" if kid in keys.ids else "MISSING from the keyring"
        lines.append(f"sealed with {kid}: {n} value(s) in PostgreSQL ({where})")
    unused = [kid for kid in keys.ids[1:] if kid not in counts]
    if unused:
        lines.append(f"not needed by PostgreSQL: {', '.join(unused)}")
    if keys.ids[1:]:
        lines.append(await _log_line(settings, keys))
    print("\n".join(lines))
    known = {*keys.ids, sealed.BEFORE_KEY_IDS}
    return 1 if set(counts) - known else 0


async def _log_line(settings: Settings, keys: crypto.ServerKeys) -> str:
    """When the log no longer needs the retiring keys: its messages cannot be re-sealed,
    so a submission sealed before `keys.primary` became first stays until it ages out."""
    # the client's own notices ("disconnected, reconnecting" when it closes) are a
    # service's; a failure here is said once, below
    logging.getLogger(bus.__name__).setLevel(logging.ERROR)
    try:
        async with asyncio.timeout(LOG_TIMEOUT):
            nc = await bus.connect(settings, name="server-keys")
            try:
                oldest = await bus.oldest_message_at(nc.jetstream(timeout=5))
            finally:
                await nc.close()
    except (TimeoutError, PressroomError) as exc:
        return f"the log: cannot tell what it still holds ({exc or 'NATS did not answer'})"
    retiring = ", ".join(keys.ids[1:])
    if oldest is None:
        return f"the log: holds no message, so needs none of {retiring}"
    leaves = oldest + dt.timedelta(seconds=settings.stream_max_age)
    return (
        f"the log: its oldest message was published at {oldest:%Y-%m-%dT%H:%M:%SZ} "
        f"(it leaves the log by {leaves:%Y-%m-%dT%H:%M:%SZ}, PRESSROOM_STREAM_MAX_AGE); "
        f"keep {retiring} until the oldest message is newer than the moment "
        f"{crypto.key_id(keys.primary)} became first (at the latest that moment + "
        "PRESSROOM_STREAM_MAX_AGE), then remove them if PostgreSQL needs them no more"
    )


async def rotate(settings: Settings) -> int:
    keys = settings.server_keys()
    async with db.open_pool(settings, size=1) as pool:
        result = await sealed.reseal(pool, keys)
    primary = crypto.key_id(keys.primary)
    for where, n in result.done.items():
        print(f"{where}: {n} value(s) sealed again with {primary}")
    if result.dropped:
        print(f"jobs: {result.dropped} password(s) and page secret(s) of ended jobs removed")
    if result.hidden:
        print(f"job_events: sealed passwords hidden in {result.hidden} submission(s)")
    bad = {where: n for where, n in result.unreadable.items() if n}
    if bad:
        listed = ", ".join(f"{where}: {n}" for where, n in bad.items())
        print(f"did not open (left as they were; a key is missing): {listed}", file=sys.stderr)
        return 1
    return 0


def run(argv: Sequence[str], environ: dict[str, str]) -> int:
    command = argv[0] if argv else ""
    if command == "new":
        return new()
    if command not in {"status", "rotate"}:
        print(USAGE, file=sys.stderr)
        return 0 if command in {"-h", "--help"} else 2
    try:
        settings = Settings.from_env(environ)
        return asyncio.run(status(settings) if command == "status" else rotate(settings))
    except (SettingsError, PressroomError) as exc:
        print(f"pressroom: {exc}", file=sys.stderr)
        return 2


def main() -> None:
    # `pressroom server-keys …`: the CLI leaves sys.argv as it was.
    raise SystemExit(run(sys.argv[2:], dict(os.environ)))

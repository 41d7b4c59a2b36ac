"""The values PostgreSQL holds sealed with the server key (`crypto.ServerKeys`): which
keys they need, the check the services that open them make at start, and their
re-sealing with the primary key (`pressroom server-keys`).

Two places hold them: tenants' webhook signing secrets (`webhook_secrets.secret`, sealed
for the tenant) and the input of jobs (`jobs.input`, what the reconciler re-drives): a
job's own webhook secret, its passwords and its page secrets (`sealedinput`; a batch's
options live in its items' rows). Re-sealing seals them again, except an ended job's
passwords and page secrets, which nothing opens any more: those are removed from its
row. The log holds the submissions as they were sealed and cannot be rewritten: a
retired key stays in the keyring until the log no longer holds what it sealed
(`PRESSROOM_STREAM_MAX_AGE` after the rotation).
"""

from __future__ import annotations

import logging
import signal
from dataclasses import dataclass, field

import asyncpg

from services.core.database.db import map_db_errors
from services.core.database.pgwatch import Prepare
from services.core.database.sealedinput import resealed, values_sql
from services.core.model.errors import Unavailable
from services.core.model.status import TERMINAL
from services.core.runtime.settings import SettingsError
from services.core.secrets import crypto

log = logging.getLogger(__name__)

BEFORE_KEY_IDS = "(no id)"
"""How `needed` names values sealed before sealed values named their key."""

PAGE = 500
"""Job rows re-sealed per statement."""

_KID = "CASE WHEN {v} LIKE 'sealed2:%' THEN split_part({v}, ':', 2) ELSE '' END"
_ENDED = ", ".join(f"'{status}'" for status in sorted(TERMINAL))


@map_db_errors()
async def needed(pool: asyncpg.Pool, *, jobs: bool = True) -> dict[str, int]:
    """How many stored values each key sealed, by key id; `BEFORE_KEY_IDS` for values
    sealed before key ids. `jobs=False` counts tenants' secrets only (no scan of jobs)."""
    parts = [f"SELECT {_KID.format(v='secret')} AS kid FROM webhook_secrets"]
    if jobs:
        parts.append(f"SELECT {_KID.format(v='s.value')} FROM ({values_sql()}) s")
    rows = await pool.fetch(
        f"SELECT kid, count(*) AS n FROM ({' UNION ALL '.join(parts)}) s GROUP BY kid"
    )
    return {r["kid"] or BEFORE_KEY_IDS: int(r["n"]) for r in rows}


async def check_keyring(pool: asyncpg.Pool, keys: crypto.ServerKeys) -> None:
    """`SettingsError` naming `PRESSROOM_SERVER_KEY` if it cannot open the tenants'
    webhook secrets: a wrong key, or a retired one dropped before its secrets were
    re-sealed, then stops the service at start instead of failing every webhook later."""
    missing = sorted(set(await needed(pool, jobs=False)) - {*keys.ids, BEFORE_KEY_IDS})
    if not missing and not await _legacy_opens(pool, keys):
        missing = [BEFORE_KEY_IDS]
    if missing:
        raise SettingsError(
            f"PRESSROOM_SERVER_KEY (keys {', '.join(keys.ids)}) lacks the key(s) "
            f"{', '.join(missing)} that sealed webhook secrets in PostgreSQL: a wrong key, "
            "or a retired key removed before `pressroom server-keys rotate` re-sealed what it "
            "held; put it back (after the new one)"
        )


def check_keyring_later(keys: crypto.ServerKeys) -> Prepare:
    """`check_keyring` for a service that started while PostgreSQL was down, run when it
    first answers (`db.watched`): a wrong keyring then stops the service (SIGTERM to
    itself, so work in flight finishes), as it would have at start."""

    async def check(conn: asyncpg.Connection) -> None:
        try:
            await check_keyring(conn, keys)
        except SettingsError as exc:
            log.critical("stopping: %s", exc)
            signal.raise_signal(signal.SIGTERM)
            raise Unavailable(f"stopping: {exc}") from exc

    return check


@map_db_errors()
async def _legacy_opens(pool: asyncpg.Pool, keys: crypto.ServerKeys) -> bool:
    """Whether a secret sealed before key ids (if any) opens with the keyring."""
    row = await pool.fetchrow(
        "SELECT tenant_id, secret FROM webhook_secrets WHERE secret LIKE 'sealed1:%' LIMIT 1"
    )
    if row is None:
        return True
    try:
        keys.unseal(row["secret"], row["tenant_id"])
    except ValueError:
        return False
    return True


@dataclass
class Resealed:
    """What `reseal` did: values re-sealed with the primary key, and those that did not
    open (left as they were), each by where they are."""

    done: dict[str, int] = field(default_factory=lambda: {"webhook_secrets": 0, "jobs": 0})
    unreadable: dict[str, int] = field(default_factory=lambda: {"webhook_secrets": 0, "jobs": 0})
    dropped: int = 0
    """Passwords and page secrets removed from ended jobs' rows."""
    hidden: int = 0
    """Submissions in `job_events` whose sealed passwords were replaced by `(hidden)`."""


async def reseal(pool: asyncpg.Pool, keys: crypto.ServerKeys) -> Resealed:
    """Seal every stored value again with the primary key, where another key sealed it.
    Each row is rewritten only if it still holds what was read (a concurrent change
    wins), so it is safe while the services run, and running it again does nothing."""
    result = Resealed()
    await _reseal_secrets(pool, keys, result)
    await _reseal_jobs(pool, keys, result)
    result.hidden = await _hide_in_timelines(pool)
    return result


@map_db_errors()
async def _hide_in_timelines(pool: asyncpg.Pool) -> int:
    """Replace by `(hidden)` the sealed `options.encrypt` passwords that submissions
    recorded in `job_events` before timelines hid them (nothing opens them there)."""
    status = await pool.execute(
        "UPDATE job_events SET body = jsonb_set(body, '{options,encrypt}', ("
        "SELECT jsonb_object_agg(k, CASE WHEN k IN ('owner_password', 'user_password') "
        "THEN to_jsonb('(hidden)'::text) ELSE v END) "
        "FROM jsonb_each(body -> 'options' -> 'encrypt') AS e(k, v))) "
        "WHERE type = 'submitted' AND jsonb_path_exists(body, "
        '\'$.options.encrypt.* ? (@.type() == "string" && @ starts with "sealed")\')'
    )
    return int(status.split()[-1])


def _other_key(value: str, keys: crypto.ServerKeys) -> str:
    return f"{value} LIKE 'sealed%' AND {value} NOT LIKE 'sealed2:{crypto.key_id(keys.primary)}:%'"


@map_db_errors()
async def _reseal_secrets(pool: asyncpg.Pool, keys: crypto.ServerKeys, result: Resealed) -> None:
    rows = await pool.fetch(
        f"SELECT id, tenant_id, secret FROM webhook_secrets WHERE {_other_key('secret', keys)}"
    )
    for row in rows:
        fresh = _sealed_again(keys, row["secret"], row["tenant_id"])
        if fresh is None:
            result.unreadable["webhook_secrets"] += 1
            continue
        await pool.execute(
            "UPDATE webhook_secrets SET secret = $3 WHERE id = $1 AND secret = $2",
            row["id"], row["secret"], fresh,
        )  # fmt: skip
        result.done["webhook_secrets"] += 1


@map_db_errors()
async def _reseal_jobs(pool: asyncpg.Pool, keys: crypto.ServerKeys, result: Resealed) -> None:
    last = ""
    while True:
        rows = await pool.fetch(
            f"SELECT id, input, status::text IN ({_ENDED}) AS ended FROM jobs WHERE id IN ("
            f"SELECT DISTINCT s.id FROM ({values_sql()}) s WHERE s.id > $1 "
            f"AND {_other_key('s.value', keys)} ORDER BY s.id LIMIT {PAGE}) ORDER BY id",
            last,
        )
        for row in rows:
            fresh, changed = resealed(row["id"], row["input"], keys, ended=row["ended"])
            result.unreadable["jobs"] += changed.unreadable
            if changed.done or changed.dropped:
                await pool.execute(
                    "UPDATE jobs SET input = $3::jsonb WHERE id = $1 AND input = $2::jsonb",
                    row["id"], row["input"], fresh,
                )  # fmt: skip
                result.done["jobs"] += changed.done
                result.dropped += changed.dropped
        if len(rows) < PAGE:
            return
        last = rows[-1]["id"]


def _sealed_again(keys: crypto.ServerKeys, value: str, owner: str) -> str | None:
    try:
        return keys.seal(keys.unseal(value, owner), owner)
    except ValueError:
        return None

"""Who still needs a stored file: claims on a tenant's blob (`files.blob_key`), so its
bytes are deleted only once nothing needs them.

Blobs are content-addressed, so one blob may be a job's upload, a stored asset's version,
a template's bundled file and another job's upload at once, and a new job may upload the
same bytes at the very moment the conductor's sweep (`conductor/filesweep.py`) decides
they are unused. A blob is needed while any of these exists:

- an `assets` or `template_files` row with its digest;
- a claim that is live (`live`): kind `job` while the job is unfinished and for
  `PRESSROOM_JOB_FILES_RETENTION` after it ended (a job the projection does not show
  yet, for as long as the log can still hold its submission, `PRESSROOM_STREAM_MAX_AGE`);
  kind `batch` likewise for a batch (its items carry its files); kind `store` (an
  upload of assets or a template version being written) for the retention after it was
  made. Kind `release` is never live: it marks a deleted asset's digest for the sweep.

The race is closed by one lock per (tenant, digest) (`lock`), taken in transactions:
every writer first commits its claim under the lock and only then writes the bytes;
every user of bytes it did not write (a job naming an asset) commits its claim and then
checks that an asset or template still has them (`claim`). The sweep takes the same lock,
drops the claims that are no longer live, and deletes the bytes before it lets go of the
lock, only if no row and no live claim is left. So whichever of the two comes first, the
other sees it: a sweep that came first deleted bytes the writer then writes again; a
claim that came first keeps the bytes.
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import StrEnum

import asyncpg

from services.core.database.db import map_db_errors
from services.core.model.status import BATCH_TERMINAL, TERMINAL

FILE_LOCK_CLASS = 0x666C65  # "fle": with hashtext(tenant/digest), one lock per blob


class ClaimKind(StrEnum):
    """What a claim stands for (`file_claims.kind`)."""

    JOB = "job"
    BATCH = "batch"
    STORE = "store"
    RELEASE = "release"


_JOB_ENDED = ", ".join(f"'{status}'" for status in sorted(TERMINAL))
_BATCH_ENDED = ", ".join(f"'{status}'" for status in sorted(BATCH_TERMINAL))


def live(retention: str, age: str) -> str:
    """SQL: whether claim `c` still holds its blob. `retention` and `age` name the
    statement's parameters: the retention after an end, and how long an owner the
    projection does not show may still appear (the log's age), both in seconds."""
    kept = f"> now() - make_interval(secs => {retention})"
    young = f"c.created_at > now() - make_interval(secs => {age})"
    return f"""(
    (c.kind = '{ClaimKind.JOB}' AND (
        EXISTS (SELECT 1 FROM jobs j WHERE j.id = c.owner AND (
            j.status NOT IN ({_JOB_ENDED}) OR COALESCE(j.finished_at, j.updated_at) {kept}))
        OR (NOT EXISTS (SELECT 1 FROM jobs j WHERE j.id = c.owner) AND {young})))
    OR (c.kind = '{ClaimKind.BATCH}' AND (
        EXISTS (SELECT 1 FROM batches b WHERE b.id = c.owner AND (
            b.status NOT IN ({_BATCH_ENDED}) OR COALESCE(b.finished_at, b.updated_at) {kept}))
        OR (NOT EXISTS (SELECT 1 FROM batches b WHERE b.id = c.owner) AND {young})))
    OR (c.kind = '{ClaimKind.STORE}' AND c.created_at {kept})
)"""


_LOCK = "SELECT pg_advisory_xact_lock($1, hashtext($2 || '/' || $3))"

_CLAIM = """
INSERT INTO file_claims (tenant_id, digest, kind, owner, created_at)
SELECT $1, d, $3, $4, clock_timestamp() FROM unnest($2::text[]) AS d
ON CONFLICT (tenant_id, digest, kind, owner) DO UPDATE SET created_at = EXCLUDED.created_at
"""

_KEPT = """
SELECT digest FROM assets WHERE tenant_id = $1 AND digest = ANY($2::text[])
UNION
SELECT digest FROM template_files WHERE tenant_id = $1 AND digest = ANY($2::text[])
"""


async def lock(conn: asyncpg.Connection, tenant: str, digest: str) -> None:
    """Take the blob's lock until the end of the caller's transaction."""
    await conn.execute(_LOCK, FILE_LOCK_CLASS, tenant, digest)


@map_db_errors()
async def claim(
    pool: asyncpg.Pool,
    tenant: str,
    kind: ClaimKind,
    owner: str,
    digests: Iterable[str],
    stored: Iterable[str] = (),
) -> list[str]:
    """Claim the tenant's blobs `digests` for `owner` (committed when this returns, so a
    sweep from now on keeps them). `stored` are digests the caller did not write itself
    (named assets, a template's bundle): those that no asset or template has any more
    are returned, their bytes may be gone, and the caller must refuse its request."""
    wanted = sorted(set(digests))
    if not wanted:
        return []
    async with pool.acquire() as conn, conn.transaction():
        for digest in wanted:  # in order: two claimers never wait on each other in a cycle
            await lock(conn, tenant, digest)
        await conn.execute(_CLAIM, tenant, wanted, kind, owner)
        checked = sorted(set(stored))
        kept = {row["digest"] for row in await conn.fetch(_KEPT, tenant, checked)}
    return [digest for digest in checked if digest not in kept]


async def release(conn: asyncpg.Connection, tenant: str, digests: Iterable[str]) -> None:
    """Mark `digests` for the next sweep (a deleted asset's), in the caller's transaction."""
    await conn.execute(_CLAIM, tenant, sorted(set(digests)), ClaimKind.RELEASE, "")

"""The sweep of stored files nothing needs any more: a job's uploads once the job ended
`PRESSROOM_JOB_FILES_RETENTION` ago, a deleted asset's bytes once no unfinished job
named it, every `PRESSROOM_FILE_SWEEP_INTERVAL` seconds.

What "needs" means, and why a new job uploading the same bytes at the same moment is
safe, is `core/database/fileclaims.py`'s contract: each candidate blob is judged and deleted in
one transaction under its lock. Several conductors may sweep at once: they take turns
on each blob's lock, and deleting a blob twice is harmless.

The conductor sweeps because it already owns storage work that outlives a request
(packing archives) and holds both a PostgreSQL pool and the storage client; the
projector has no storage client, and the gateway answers requests.
"""

from __future__ import annotations

import asyncio
import logging

import asyncpg

from services.core.database import fileclaims
from services.core.database.db import map_db_errors
from services.core.model.errors import PressroomError
from services.core.model.files import blob_key
from services.core.objectstore.storage import Storage
from services.core.runtime import lifecycle, metrics
from services.core.runtime.settings import Settings

log = logging.getLogger(__name__)

SWEEP_LIMIT = 500
"""Blobs judged per sweep; the rest wait for the next one."""

_CANDIDATES = f"""
SELECT DISTINCT c.tenant_id, c.digest FROM file_claims c
WHERE NOT {fileclaims.live("$1", "$2")}
LIMIT {SWEEP_LIMIT}
"""

_DROP_DEAD = f"""
DELETE FROM file_claims c
WHERE c.tenant_id = $1 AND c.digest = $2 AND NOT {fileclaims.live("$3", "$4")}
"""

_NEEDED = """
SELECT EXISTS (SELECT 1 FROM file_claims WHERE tenant_id = $1 AND digest = $2)
    OR EXISTS (SELECT 1 FROM assets WHERE tenant_id = $1 AND digest = $2)
    OR EXISTS (SELECT 1 FROM template_files WHERE tenant_id = $1 AND digest = $2)
"""


async def run(
    pool: asyncpg.Pool, storage: Storage, settings: Settings, stop: asyncio.Event
) -> None:
    """Sweep every `file_sweep_interval` seconds until `stop` is set; PostgreSQL or
    storage trouble only skips a sweep (what it would have deleted is found again)."""
    while True:
        await lifecycle.pause(stop, settings.file_sweep_interval)
        if stop.is_set():
            return
        try:
            deleted = await sweep(pool, storage, settings)
        except PressroomError as exc:
            log.warning("file sweep skipped: %s", exc)
            continue
        if deleted:
            log.info("file sweep: deleted %d unused file(s)", deleted)


def _ages(settings: Settings) -> tuple[float, float]:
    return settings.job_files_retention, max(settings.stream_max_age, settings.job_files_retention)


@map_db_errors("file sweep")
async def sweep(pool: asyncpg.Pool, storage: Storage, settings: Settings) -> int:
    """Judge every blob with a claim that is no longer live; delete those nothing needs.
    How many blobs were deleted."""
    retention, orphan_age = _ages(settings)
    rows = await pool.fetch(_CANDIDATES, retention, orphan_age)
    deleted = 0
    for row in rows:
        deleted += await _judge(pool, storage, row["tenant_id"], row["digest"], settings)
    return deleted


async def _judge(
    pool: asyncpg.Pool, storage: Storage, tenant: str, digest: str, settings: Settings
) -> int:
    """Under the blob's lock: drop its dead claims, and delete its bytes if nothing is
    left that needs them (before the lock goes, so a claimer waiting on it writes them
    again). 1 if deleted."""
    retention, orphan_age = _ages(settings)
    async with pool.acquire() as conn, conn.transaction():
        await fileclaims.lock(conn, tenant, digest)
        await conn.execute(_DROP_DEAD, tenant, digest, retention, orphan_age)
        if await conn.fetchval(_NEEDED, tenant, digest):
            return 0
        await storage.delete(blob_key(tenant, digest))
    metrics.FILES_SWEPT.inc()
    return 1

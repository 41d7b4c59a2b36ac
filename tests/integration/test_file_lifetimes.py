"""How long stored files live, through the whole stack: a job renders with the bytes it
was accepted with even if the asset it named is deleted before it runs; a job's uploads
are deleted by the conductor's sweep once the job ended `PRESSROOM_JOB_FILES_RETENTION`
ago, unless an asset still has the same bytes; and a new job uploading the same bytes
while the sweep deletes them still renders, whichever of the two takes the blob first.

Files are read where the local storage keeps them; sweeps are watched in `file_claims`.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path

import asyncpg
import pytest

from services.conductor import filesweep
from services.core.database import db, fileclaims
from services.core.model.files import blob_key, digest_of
from services.core.objectstore.storage import open_storage
from services.core.runtime.settings import Settings
from tests.conftest import Stack, eventually
from tests.integration.test_assets import call, finished, form, pdf_of, submit
from tests.integration.test_job_files import images, png

PAGE = '<p>Hello</p><img src="logo.png">'


def blob(settings: Settings, tenant: str, data: bytes) -> Path:
    return Path(settings.storage_dir) / blob_key(tenant, digest_of(data))


async def claims(settings: Settings, data: bytes) -> list[str]:
    """The kinds of the claims on these bytes (any tenant)."""
    conn = await asyncpg.connect(settings.database_url)
    try:
        rows = await conn.fetch(
            "SELECT kind FROM file_claims WHERE digest = $1 ORDER BY kind", digest_of(data)
        )
    finally:
        await conn.close()
    return [row["kind"] for row in rows]


@pytest.fixture
async def sweeping(settings: Settings) -> AsyncIterator[Stack]:
    """The stack without its renderer (a test starts it), sweeping often, keeping a
    job's files one second after it ended."""
    stack = Stack(replace(settings, file_sweep_interval=0.1, job_files_retention=1.0))
    await stack.start("gateway", "projector", "conductor")
    yield stack
    await stack.close()


async def test_a_queued_job_renders_the_asset_it_named_though_deleted_before_it_ran(
    sweeping: Stack, tmp_path: Path
) -> None:
    stack, tenant, logo = sweeping, sweeping.tenant, png(7, 5)
    status, _ = await call(
        tenant.http, "POST", f"{stack.url}/assets", data=form({"logo.png": logo})
    )
    assert status == 201
    status, job = await submit(stack, tenant, json={"html": PAGE, "assets": ["logo.png"]})
    assert status == 202, job
    status, removed = await call(tenant.http, "DELETE", f"{stack.url}/assets/logo.png")
    assert (status, removed) == (200, {"name": "logo.png", "versions": 1})
    status, _ = await call(tenant.http, "GET", f"{stack.url}/assets/logo.png")
    assert status == 404  # the record is gone at once
    # a sweep has judged the deleted asset's bytes (its mark is gone) while the job waits
    await eventually(lambda: claims(stack.settings, logo), 30, "the job's claim")
    await eventually(
        lambda: _only_job(stack.settings, logo), 30, "a sweep judging the deleted asset"
    )
    assert blob(stack.settings, tenant.id, logo).exists()
    await stack.start("renderer")
    assert images(await pdf_of(stack, tenant, job["id"]), tmp_path) == [(7, 5)]
    # the job ended: its bytes go after the retention, nothing else needing them
    await eventually(
        lambda: not blob(stack.settings, tenant.id, logo).exists(), 30, "the bytes deleted"
    )


async def _only_job(settings: Settings, data: bytes) -> bool:
    return await claims(settings, data) == ["job"]


async def test_a_jobs_uploads_are_deleted_after_the_retention_unless_an_asset_has_them(
    sweeping: Stack, tmp_path: Path
) -> None:
    stack, tenant = sweeping, sweeping.tenant
    own, shared = png(3, 2), png(4, 2, (10, 200, 10))
    status, _ = await call(
        tenant.http, "POST", f"{stack.url}/assets", data=form({"kept.png": shared})
    )
    assert status == 201
    await stack.start("renderer")
    page = PAGE + '<img src="kept.png">'
    status, job = await submit(
        stack, tenant, data=form({"logo.png": own, "kept.png": shared}, {"html": page})
    )
    assert status == 202, job
    assert sorted(images(await pdf_of(stack, tenant, job["id"]), tmp_path)) == [(3, 2), (4, 2)]
    await eventually(
        lambda: not blob(stack.settings, tenant.id, own).exists(), 30, "the upload deleted"
    )
    assert await claims(stack.settings, own) == []
    await eventually(lambda: _none(stack.settings, shared), 30, "the shared bytes judged")
    assert blob(stack.settings, tenant.id, shared).exists()  # the asset kept them


async def _none(settings: Settings, data: bytes) -> bool:
    return await claims(settings, data) == []


async def test_deleting_an_asset_nothing_else_needs_deletes_its_bytes_soon_after(
    sweeping: Stack,
) -> None:
    stack, tenant, data = sweeping, sweeping.tenant, png(3, 3)
    status, _ = await call(tenant.http, "POST", f"{stack.url}/assets", data=form({"a.png": data}))
    assert status == 201
    assert blob(stack.settings, tenant.id, data).exists()
    status, removed = await call(tenant.http, "DELETE", f"{stack.url}/assets/a.png")
    assert (status, removed) == (200, {"name": "a.png", "versions": 1})
    await eventually(
        lambda: not blob(stack.settings, tenant.id, data).exists(), 30, "the bytes deleted"
    )


@pytest.fixture
async def quiet(settings: Settings) -> AsyncIterator[Stack]:
    """The whole stack, its own sweeps far apart (the test sweeps), keeping nothing
    after a job ended, caching no file in the renderer."""
    stack = Stack(
        replace(settings, file_sweep_interval=3600, job_files_retention=0, asset_cache_bytes=0)
    )
    await stack.start()
    yield stack
    await stack.close()


async def _waiting_on_blob_locks(conn: asyncpg.Connection, count: int) -> bool:
    waiting = await conn.fetchval(
        "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted "
        "AND classid = $1 AND database = (SELECT oid FROM pg_database "
        "WHERE datname = current_database())",
        fileclaims.FILE_LOCK_CLASS,
    )
    return bool(waiting == count)


@pytest.mark.parametrize("first", ["sweep", "upload"])
async def test_a_job_uploading_bytes_the_sweep_is_deleting_still_renders(
    quiet: Stack, tmp_path: Path, first: str
) -> None:
    """Verifies, for either order in which the sweep and a new job's upload of the same
    bytes reach the blob's lock: the new job renders with its file, and the bytes are
    stored once it is done."""
    stack, tenant, logo = quiet, quiet.tenant, png(9, 4)
    status, job = await submit(stack, tenant, data=form({"logo.png": logo}, {"html": PAGE}))
    assert status == 202, job
    assert (await finished(stack, tenant, job["id"]))["status"] == "done"
    settings = stack.settings
    async with db.open_pool(settings, size=2) as pool, open_storage(settings) as storage:
        holder = await asyncpg.connect(settings.database_url)
        try:
            async with holder.transaction():  # hold the blob's lock: both must queue on it
                await fileclaims.lock(holder, tenant.id, digest_of(logo))
                again = form({"logo.png": logo}, {"html": PAGE})
                steps = {
                    "sweep": lambda: filesweep.sweep(pool, storage, settings),
                    "upload": lambda: submit(stack, tenant, data=again),
                }
                order = [first, "upload" if first == "sweep" else "sweep"]
                tasks = {}
                for waiting, name in enumerate(order, start=1):
                    tasks[name] = asyncio.create_task(steps[name]())
                    await eventually(
                        lambda n=waiting: _waiting_on_blob_locks(holder, n), 30, f"{name} waits"
                    )
            swept = await tasks["sweep"]
            status, second = await tasks["upload"]
        finally:
            await holder.close()
    assert status == 202, second
    assert swept == (1 if first == "sweep" else 0)
    assert images(await pdf_of(stack, tenant, second["id"]), tmp_path) == [(9, 4)]
    assert blob(settings, tenant.id, logo).exists()

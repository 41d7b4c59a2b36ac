"""`GET /jobs`: the caller tenant's single jobs, newest first, a page at a time.

Verifies: every entry is exactly what `GET /jobs/{id}` answers; jobs come newest first and
`next_offset` walks the pages to a null; `status` filters and `q` finds jobs by the start of
their id; batch items and another tenant's jobs never appear; a bad `status`, `limit`,
`offset` or `q` is a 400 naming it; a rendered job is listed `done` with its download URL.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import asyncpg
import pytest

from services.core.runtime.settings import Settings
from tests.conftest import Stack, eventually


@pytest.fixture
async def api(settings: Settings) -> AsyncIterator[Stack]:
    """Gateway, projector and conductor: jobs are projected (and a batch expanded into
    items) but nothing renders, so every job stays `queued`."""
    stack = Stack(settings)
    await stack.start("gateway", "projector", "conductor")
    yield stack
    await stack.close()


async def listing(
    stack: Stack, query: str = "", http: aiohttp.ClientSession | None = None
) -> dict[str, Any]:
    async with (http or stack.client).get(f"{stack.url}/jobs{query}") as response:
        assert response.status == 200, await response.text()
        result: dict[str, Any] = await response.json()
        return result


async def listed_ids(stack: Stack, query: str = "") -> list[str]:
    return [job["id"] for job in (await listing(stack, query))["jobs"]]


async def submit_many(stack: Stack, count: int) -> list[str]:
    """`count` jobs, submitted one after another (so their creation times are ordered)."""
    return [(await stack.submit({"html": f"<p>{i}</p>"}))["id"] for i in range(count)]


async def all_listed(stack: Stack, wanted: list[str]) -> list[str]:
    """The first page once every one of `wanted` is projected."""

    async def ready() -> list[str] | None:
        ids = await listed_ids(stack, "?limit=200")
        return ids if set(wanted) <= set(ids) else None

    result: list[str] = await eventually(ready, 30, "jobs listed")
    return result


async def test_jobs_are_listed_newest_first_as_get_job_shows_them_page_by_page(api: Stack):
    submitted = await submit_many(api, 5)
    assert await all_listed(api, submitted) == submitted[::-1]
    first = await listing(api)
    assert first["limit"] == 50 and first["offset"] == 0 and first["next_offset"] is None
    for entry in first["jobs"]:
        assert entry == await api.job(entry["id"])
    seen, query = [], "?limit=2"
    while query:
        page = await listing(api, query)
        seen += [job["id"] for job in page["jobs"]]
        nxt = page["next_offset"]
        query = f"?limit=2&offset={nxt}" if nxt is not None else ""
    assert seen == submitted[::-1]


async def test_status_and_id_prefix_narrow_the_list(api: Stack):
    submitted = await submit_many(api, 3)
    await all_listed(api, submitted)
    assert await listed_ids(api, "?status=queued") == submitted[::-1]
    assert await listed_ids(api, "?status=done") == []
    assert await listed_ids(api, f"?q={submitted[1][:12]}") == [submitted[1]]
    assert await listed_ids(api, "?q=") == submitted[::-1]  # an empty search is no search
    assert await listed_ids(api, "?q=zzzz") == []


async def test_batch_items_and_another_tenants_jobs_are_never_listed(api: Stack):
    mine = await submit_many(api, 2)
    body = {"template": "<p>{{ n }}</p>", "items": [{"data": {"n": i}} for i in range(3)]}
    async with api.client.post(f"{api.url}/batches", json=body) as response:
        assert response.status == 202, await response.text()
        batch_id = (await response.json())["id"]

    async def items_projected() -> bool:
        conn = await asyncpg.connect(api.settings.database_url)
        try:
            count = await conn.fetchval("SELECT count(*) FROM jobs WHERE batch_id = $1", batch_id)
        finally:
            await conn.close()
        return bool(count == 3)

    await eventually(items_projected, 30, "batch items projected as jobs")
    other = await api.new_tenant()
    theirs = (await listing(api, "", other.http))["jobs"]
    assert await all_listed(api, mine) == mine[::-1]
    assert theirs == []
    async with other.http.post(f"{api.url}/jobs", json={"html": "<p>x</p>"}) as response:
        their_job = (await response.json())["id"]

    async def theirs_listed() -> list[Any]:
        return (await listing(api, "", other.http))["jobs"]

    assert [job["id"] for job in await eventually(theirs_listed, 30)] == [their_job]
    assert await listed_ids(api) == mine[::-1]


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ("?status=finished", "status"),
        ("?limit=0", "limit"),
        ("?limit=201", "limit"),
        ("?limit=ten", "limit"),
        ("?offset=-1", "offset"),
        ("?q=a%25b", "q"),
        ("?q=" + "a" * 65, "q"),
    ],
)
async def test_a_bad_parameter_is_a_400_naming_it(api: Stack, query: str, field: str):
    async with api.client.get(f"{api.url}/jobs{query}") as response:
        assert response.status == 400
        error = (await response.json())["error"]
    assert error["type"] == "validation" and error["field"] == field


async def test_rendered_jobs_are_listed_done_with_their_download_url(stack: Stack):
    ids = [(await stack.submit({"html": f"<h1>Job {i}</h1>"}))["id"] for i in range(2)]
    for job_id in ids:
        await stack.finished(job_id)
    listed = (await listing(stack, "?status=done"))["jobs"]
    assert [job["id"] for job in listed] == ids[::-1]
    for entry in listed:
        single = await stack.job(entry["id"])
        assert entry["url"] and single["url"]
        assert {**entry, "url": None} == {**single, "url": None}  # links are signed per call
        async with stack.client.get(entry["url"]) as response:
            assert response.status == 200
            assert (await response.read()).startswith(b"%PDF")

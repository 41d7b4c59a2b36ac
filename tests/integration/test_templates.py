"""Stored templates: versioned by name, read back, and rendered by jobs that name them.

Verifies: creating a template gives version 1 and a Location; posting the same name again
gives the next version under the same id, also when many posts race, unless it asks for a
new template (`"new": true`: a 409 naming `name`, and of racing new posts of one name one
is 201 and the others 409); listing is newest
first and paginated; a template reads back at its latest or any given version; a body that
does not compile is a 400 naming the field and line; unknown ids and versions are 404 (or
400 inside a job); a job naming a template renders its latest version, or the version it
asks for, and records both in its events and in the input kept for re-drives; a stored
header and footer reach the job's PDF page options unless the job sets its own; a body
over the limit is 413; while PostgreSQL is away, template routes and jobs naming a stored
template are 503 and other jobs are still accepted (the API key is checked in memory, so
it keeps working while PostgreSQL is away).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import urllib.parse
from collections.abc import AsyncIterator
from dataclasses import replace
from typing import Any

import asyncpg
import pytest

from services.core.runtime.settings import Settings
from tests.conftest import Postgres, Stack, eventually
from tests.integration.test_pipeline import pdf_text


@pytest.fixture
async def api(settings: Settings) -> AsyncIterator[Stack]:
    """The gateway alone, its template limits never the bottleneck (racing creates of one
    name post 16 at once; test_template_fairness.py tests the limits)."""
    stack = Stack(replace(settings, template_concurrency=64, template_burst=1000))
    await stack.start("gateway")
    yield stack
    await stack.close()


async def post_template(stack: Stack, body: Any) -> tuple[int, dict[str, Any], str | None]:
    async with stack.client.post(f"{stack.url}/templates", json=body) as response:
        assert response.content_type == "application/json"
        return response.status, await response.json(), response.headers.get("Location")


async def create(stack: Stack, **body: Any) -> dict[str, Any]:
    status, answer, _ = await post_template(stack, body)
    assert status == 201, answer
    return answer


async def get(stack: Stack, path: str) -> tuple[int, dict[str, Any]]:
    async with stack.client.get(f"{stack.url}{path}") as response:
        assert response.content_type == "application/json"
        return response.status, await response.json()


async def submitted_event(stack: Stack, job_id: str) -> dict[str, Any]:
    """The job's `submitted` entry in `GET /jobs/{id}/events` (read from the log)."""
    status, timeline = await get(stack, f"/jobs/{job_id}/events")
    assert status == 200, timeline
    submitted = [e for e in timeline["events"] if e["type"] == "submitted"]
    assert len(submitted) == 1, timeline
    return submitted[0]


async def test_create_gives_version_1_and_a_location(api: Stack):
    status, created, location = await post_template(
        api, {"name": "invoice", "body": "<h1>{{ number }}</h1>"}
    )
    assert status == 201
    assert created["name"] == "invoice"
    assert created["version"] == 1
    assert len(created["id"]) == 32 and created["created_at"]
    assert location == f"/templates/{created['id']}?version=1"
    status, read = await get(api, location)
    assert status == 200
    assert (read["id"], read["version"]) == (created["id"], 1)
    assert read["body"] == "<h1>{{ number }}</h1>"
    assert read["header"] is None and read["footer"] is None


async def test_same_name_makes_the_next_version_under_the_same_id(api: Stack):
    first = await create(api, name="letter", body="v1 {{ a }}")
    second = await create(api, name="letter", body="v2 {{ a }}", footer="<span>f</span>")
    other = await create(api, name="letter-b", body="other")
    assert second["id"] == first["id"] != other["id"]
    assert (first["version"], second["version"], other["version"]) == (1, 2, 1)

    status, latest = await get(api, f"/templates/{first['id']}")
    assert status == 200
    assert (latest["name"], latest["version"], latest["body"]) == ("letter", 2, "v2 {{ a }}")
    assert latest["footer"] == "<span>f</span>"
    assert [v["version"] for v in latest["versions"]] == [1, 2]
    assert latest["versions"][1]["created_at"] == second["created_at"]

    status, old = await get(api, f"/templates/{first['id']}?version=1")
    assert status == 200
    assert (old["version"], old["body"], old["footer"]) == (1, "v1 {{ a }}", None)
    assert [v["version"] for v in old["versions"]] == [1, 2]


async def test_concurrent_creates_of_one_name_get_consecutive_versions(api: Stack):
    """Two waves: racing creators of a new name (the first insert), then of a known one."""
    n = 16
    bodies = [f"body {i}" for i in range(2 * n)]
    created = await asyncio.gather(*(create(api, name="race", body=b) for b in bodies[:n]))
    created += await asyncio.gather(*(create(api, name="race", body=b) for b in bodies[n:]))
    assert sorted(c["version"] for c in created[:n]) == list(range(1, n + 1))
    assert sorted(c["version"] for c in created[n:]) == list(range(n + 1, 2 * n + 1))
    assert len({c["id"] for c in created}) == 1
    status, latest = await get(api, f"/templates/{created[0]['id']}")
    assert status == 200
    assert latest["version"] == 2 * n
    assert [v["version"] for v in latest["versions"]] == list(range(1, 2 * n + 1))
    # Each version holds the body of the request that got that number.
    by_version = {c["version"]: body for c, body in zip(created, bodies, strict=True)}
    for version in (1, n, n + 1, 2 * n):
        _, read = await get(api, f"/templates/{created[0]['id']}?version={version}")
        assert read["body"] == by_version[version]


async def test_a_new_template_only_takes_a_free_name(api: Stack):
    first = await create(api, name="fresh", body="<p>1</p>", new=True)
    assert first["version"] == 1
    status, answer, _ = await post_template(api, {"name": "fresh", "body": "<p>2</p>", "new": True})
    assert status == 409, answer
    assert (answer["error"]["type"], answer["error"]["field"]) == ("conflict", "name")
    assert (await get(api, f"/templates/{first['id']}"))[1]["version"] == 1

    body = {"name": "raced", "body": "<p>x</p>", "new": True}
    answers = await asyncio.gather(*(post_template(api, body) for _ in range(8)))
    assert sorted(status for status, _, _ in answers) == [201] + [409] * 7


async def test_list_is_newest_first_and_paginated(api: Stack):
    a = await create(api, name="a", body="a")
    b = await create(api, name="b", body="b")
    c = await create(api, name="c", body="c")
    await create(api, name="a", body="a2")  # a new version makes `a` the newest

    status, listed = await get(api, "/templates")
    assert status == 200
    assert [(t["id"], t["name"], t["latest_version"]) for t in listed["templates"]] == [
        (a["id"], "a", 2),
        (c["id"], "c", 1),
        (b["id"], "b", 1),
    ]
    assert all(t["updated_at"] for t in listed["templates"])
    assert (listed["limit"], listed["offset"], listed["next_offset"]) == (50, 0, None)

    _, page1 = await get(api, "/templates?limit=2")
    assert [t["name"] for t in page1["templates"]] == ["a", "c"]
    assert page1["next_offset"] == 2
    _, page2 = await get(api, "/templates?limit=2&offset=2")
    assert [t["name"] for t in page2["templates"]] == ["b"]
    assert page2["next_offset"] is None


@pytest.mark.parametrize(
    ("query", "field"),
    [("limit=0", "limit"), ("limit=101", "limit"), ("limit=x", "limit"), ("offset=-1", "offset")],
)
async def test_bad_list_parameters_are_400(api: Stack, query: str, field: str):
    status, answer = await get(api, f"/templates?{query}")
    assert status == 400
    assert answer["error"]["field"] == field


@pytest.mark.parametrize(
    ("body", "field", "words"),
    [
        ({"name": "t", "body": "<p>\n{{ total }\n</p>"}, "body",
         "template syntax error at line 2: unexpected '}'"),
        ({"name": "t", "body": "{% for x in xs %}\n{{ x }}"}, "body", "at line 2"),
        ({"name": "t", "body": "{{ x | no_such_filter }}"}, "body", "No filter named"),
        ({"name": "t", "body": "ok", "header": "{% if %}"}, "header", "at line 1"),
        ({"name": "t", "body": "ok", "footer": "{{"}, "footer", "template syntax error"),
        ({"body": "ok"}, "name", "missing required field `name`"),
        ({"name": "t"}, "body", "missing required field `body`"),
        ({"name": "", "body": "ok"}, "name", "length >= 1"),
        ({"name": "   ", "body": "ok"}, "name", "must not be empty"),
        ({"name": "n" * 201, "body": "ok"}, "name", "length <= 200"),
        ({"name": "t", "body": " \n"}, "body", "must not be empty"),
        ({"name": "t", "body": "a\u0000b"}, "body", "NUL"),
        ({"name": "t", "body": "ok", "colour": "red"}, "colour", "unknown field `colour`"),
        ({"name": 7, "body": "ok"}, "name", "Expected `str`"),
        ([1], "body", "must be a JSON object"),
    ],
)  # fmt: skip
async def test_invalid_template_is_400_naming_the_field(
    api: Stack, body: Any, field: str, words: str
):
    status, answer, _ = await post_template(api, body)
    assert status == 400, answer
    assert answer["error"]["type"] == "validation"
    assert answer["error"]["field"] == field
    assert words in answer["error"]["message"]
    _, listed = await get(api, "/templates")
    assert listed["templates"] == []


async def test_template_over_the_body_limit_is_413(settings: Settings):
    stack = Stack(replace(settings, max_body_bytes=4096))
    await stack.start("gateway")
    try:
        status, answer, _ = await post_template(stack, {"name": "big", "body": "x" * 5000})
        _, listed = await get(stack, "/templates")
    finally:
        await stack.close()
    assert status == 413
    assert "4096" in answer["error"]["message"]
    assert listed["templates"] == []


async def test_name_of_200_characters_is_accepted(api: Stack):
    created = await create(api, name="é" * 200, body="ok")
    assert created["name"] == "é" * 200


async def test_unknown_template_or_version_is_404_json(api: Stack):
    known = await create(api, name="known", body="ok")
    for path in (
        f"/templates/{'0' * 32}",
        "/templates/no-such-template",
        f"/templates/{known['id']}?version=2",
    ):
        status, answer = await get(api, path)
        assert status == 404, path
        assert answer["error"]["type"] == "not_found"
    status, answer = await get(api, f"/templates/{known['id']}?version=first")
    assert status == 400
    assert answer["error"]["field"] == "version"


async def test_job_naming_an_unknown_template_or_version_is_400(api: Stack):
    known = await create(api, name="known", body="ok")
    for body, field, words in (
        ({"template_id": "0" * 32}, "template_id", "no stored template has id"),
        ({"template_id": "0" * 32, "template_version": 1}, "template_id", "no stored template"),
        ({"template_id": known["id"], "template_version": 2}, "template_version",
         "has no version 2"),
    ):  # fmt: skip
        async with api.client.post(f"{api.url}/jobs", json=body) as response:
            answer = await response.json()
        assert response.status == 400, answer
        assert answer["error"]["field"] == field
        assert words in answer["error"]["message"]


async def test_stored_header_and_footer_reach_the_page_options(api: Stack):
    header = '<div style="font-size:8px">Acme</div>'
    footer = '<div style="font-size:8px"><span class="pageNumber"></span></div>'
    stored = await create(api, name="with-chrome", body="<p>x</p>", header=header, footer=footer)

    job = await api.submit({"template_id": stored["id"]})
    event = await submitted_event(api, job["id"])
    assert event["options"]["header_template"] == header
    assert event["options"]["footer_template"] == footer

    own = "<div>own header</div>"
    options = {"header_template": own, "format": "A5"}
    job = await api.submit({"template_id": stored["id"], "options": options})
    event = await submitted_event(api, job["id"])
    assert event["options"]["header_template"] == own
    assert event["options"]["footer_template"] == footer
    assert event["options"]["format"] == "A5"

    # A PNG has no printed pages: the stored header and footer are left out, not refused.
    job = await api.submit({"template_id": stored["id"], "options": {"output": "png"}})
    event = await submitted_event(api, job["id"])
    assert event["options"] == {"output": "png"}


async def recorded_input(stack: Stack, job_id: str) -> dict[str, Any]:
    """The job's input as the projection keeps it for re-drives (`jobs.input`)."""
    conn = await asyncpg.connect(stack.settings.database_url)
    try:
        raw = await conn.fetchval("SELECT input FROM jobs WHERE id = $1", job_id)
    finally:
        await conn.close()
    assert raw is not None
    recorded: dict[str, Any] = json.loads(raw)  # a plain connection returns jsonb as text
    return recorded


async def test_job_with_template_id_renders_the_latest_version(stack: Stack):
    await create(stack, name="greeting", body="<h1>Version one for {{ who }}</h1>")
    latest = await create(stack, name="greeting", body="<h1>Version two for {{ who }}</h1>")

    accepted = await stack.submit({"template_id": latest["id"], "data": {"who": "Ana"}})
    job = await stack.finished(accepted["id"])
    assert job["status"] == "done", job
    assert "Version two for Ana" in await pdf_text(stack, job["url"])

    event = await submitted_event(stack, accepted["id"])
    assert (event["template_id"], event["template_version"]) == (latest["id"], 2)
    # A re-drive renders the resolved body, whatever versions were added since.
    recorded = await recorded_input(stack, accepted["id"])
    assert recorded["template"] == "<h1>Version two for {{ who }}</h1>"
    assert (recorded["template_id"], recorded["template_version"]) == (latest["id"], 2)


async def test_job_with_template_version_renders_that_version(stack: Stack):
    first = await create(stack, name="greeting", body="<h1>Version one for {{ who }}</h1>")
    await create(stack, name="greeting", body="<h1>Version two for {{ who }}</h1>")

    body = {"template_id": first["id"], "template_version": 1, "data": {"who": "Bo"}}
    accepted = await stack.submit(body)
    job = await stack.finished(accepted["id"])
    assert job["status"] == "done", job
    text = await pdf_text(stack, job["url"])
    assert "Version one for Bo" in text and "Version two" not in text
    event = await submitted_event(stack, accepted["id"])
    assert (event["template_id"], event["template_version"]) == (first["id"], 1)


@contextlib.asynccontextmanager
async def database_refusing_connections(postgres: Postgres, url: str) -> AsyncIterator[None]:
    """The test's database refuses new connections and its open ones are dropped: to its
    clients, PostgreSQL is down. Connections are allowed again on exit."""
    name = urllib.parse.urlsplit(url).path.lstrip("/")
    admin = await asyncpg.connect(postgres.server.get_uri("postgres"))
    try:
        await admin.execute(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS false')
        await admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1", name
        )
        yield
    finally:
        await admin.execute(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS true')
        await admin.close()


async def test_template_routes_and_stored_template_jobs_are_503_without_postgres(
    api: Stack, postgres: Postgres
):
    """Templates cannot be read, stored or resolved while PostgreSQL is away (503); a job
    that needs no stored template is still accepted; all works again afterwards."""
    stored = await create(api, name="needs-db", body="<p>x</p>")
    async with database_refusing_connections(postgres, api.settings.database_url):
        status, answer = await get(api, f"/templates/{stored['id']}")
        assert (status, answer["error"]["type"]) == (503, "unavailable")
        status, answer, _ = await post_template(api, {"name": "needs-db", "body": "v2"})
        assert (status, answer["error"]["type"]) == (503, "unavailable")
        async with api.client.post(f"{api.url}/jobs", json={"template_id": stored["id"]}) as r:
            assert r.status == 503
            assert "cannot resolve template_id" in (await r.json())["error"]["message"]
        await api.submit({"template": "<p>no stored template needed</p>"})
    await eventually(lambda: _listed_versions(api, [1]))
    job = await api.submit({"template_id": stored["id"]})
    assert (await submitted_event(api, job["id"]))["template_version"] == 1


async def _listed_versions(stack: Stack, expected: list[int]) -> bool:
    status, listed = await get(stack, "/templates")
    return status == 200 and [t["latest_version"] for t in listed["templates"]] == expected

"""Template previews (`"preview": true`): renders for an editor, not work to pay for.

Verifies: a preview renders and reads back by id like a job, but is not listed by
`GET /jobs` and not counted in usage (a job beside it is); a newer preview of the same
template through the same key cancels the older one still rendering, and a preview of
another template does not, nor does an inline draft of another stored template (its
`template_files.template_id`: two editor tabs); a tenant with `PRESSROOM_PREVIEW_LIMIT`
previews rendering (2 here, set as a setting; the default is 4) gets a 429 for the next
while its jobs are still accepted, and so does a burst of concurrent previews before any
is projected (two of eight admitted); `preview` with an html source is a 400 naming the
field.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace
from typing import Any

import asyncpg
import pytest

from services.core.runtime.settings import Settings
from tests.conftest import Stack, eventually
from tests.integration.test_templates import create

SLOW = {"wait_for": {"selector": "#never", "timeout": 30}}
"""Print options that keep a preview rendering for 30 s."""


@pytest.fixture
def settings(settings: Settings) -> Settings:
    """Previews still rendering at a test's end are given 1 s, not 5."""
    return replace(settings, shutdown_grace=1.0)


async def post_job(stack: Stack, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    async with stack.client.post(f"{stack.url}/jobs", json=body) as response:
        return response.status, await response.json()


async def projected(stack: Stack, job_id: str) -> str | None:
    """The job's status in the projection, None until it is there."""
    conn = await asyncpg.connect(stack.settings.database_url)
    try:
        status: str | None = await conn.fetchval("SELECT status FROM jobs WHERE id = $1", job_id)
    finally:
        await conn.close()
    return status


async def test_a_preview_renders_but_is_neither_listed_nor_billed(stack: Stack):
    status, preview = await post_job(
        stack, {"template": "<p>Preview {{ n }}</p>", "data": {"n": 1}, "preview": True}
    )
    assert status == 202, preview
    job = await stack.submit({"template": "<p>Job</p>"})
    assert (await stack.finished(preview["id"]))["status"] == "done"
    assert (await stack.finished(job["id"]))["status"] == "done"

    async with stack.client.get(f"{stack.url}/jobs") as response:
        listed = [j["id"] for j in (await response.json())["jobs"]]
    assert listed == [job["id"]]

    async def counted() -> dict[str, Any] | None:
        async with stack.client.get(f"{stack.url}/usage") as response:
            usage: dict[str, Any] = await response.json()
        return usage if usage["succeeded"] >= 1 else None

    usage = await eventually(counted, 30, "the job counted")
    assert usage["succeeded"] == 1  # the job; the preview is not


async def test_a_newer_preview_of_the_same_template_cancels_the_older(stack: Stack):
    await create(stack, name="invoice", body="<p>Invoice</p>")
    await create(stack, name="letter", body="<p>Letter</p>")
    body = {"template_name": "invoice", "options": SLOW, "preview": True}
    status, older = await post_job(stack, body)
    assert status == 202, older
    status, other = await post_job(stack, {**body, "template_name": "letter"})
    assert status == 202, other
    await eventually(lambda: projected(stack, older["id"]), 30, "the older preview projected")
    await eventually(lambda: projected(stack, other["id"]), 30, "the other preview projected")

    status, newer = await post_job(stack, body)
    assert status == 202, newer
    cancelled = await stack.finished(older["id"])
    assert cancelled["status"] == "cancelled", cancelled
    assert (await stack.job(other["id"]))["status"] in {"queued", "running"}
    assert (await stack.job(newer["id"]))["status"] in {"queued", "running"}


def late(seconds: int) -> str:
    """A body whose page shows `#late` after `seconds` (with `LATE`: a preview that
    renders, and ends done, that long after it starts)."""
    return (
        "<p>Draft</p><script>setTimeout(() => { const p = document.createElement('p');"
        f" p.id = 'late'; document.body.append(p); }}, {seconds * 1000});</script>"
    )


LATE = {"wait_for": {"selector": "#late", "timeout": 60}}


def draft(template_id: str, body: str, options: dict[str, Any]) -> dict[str, Any]:
    """An editor's preview of a stored template's unsaved text: inline, with the
    template's files (none here) by reference."""
    kept = {"template_id": template_id, "names": []}
    return {"template": body, "template_files": kept, "options": options, "preview": True}


async def test_drafts_of_two_templates_through_one_key_do_not_supersede(stack: Stack):
    """Two editor tabs, one key: each template's draft previews supersede only that
    template's own."""
    invoice = await create(stack, name="invoice", body="<p>Invoice</p>")
    letter = await create(stack, name="letter", body="<p>Letter</p>")
    status, first = await post_job(stack, draft(invoice["id"], late(8), LATE))
    assert status == 202, first
    unfinished = await eventually(lambda: projected(stack, first["id"]), 30, "projected")
    assert unfinished in {"queued", "running"}  # so the next one could supersede it
    status, second = await post_job(stack, draft(letter["id"], late(1), LATE))
    assert status == 202, second
    assert (await stack.finished(first["id"]))["status"] == "done"
    assert (await stack.finished(second["id"]))["status"] == "done"

    status, older = await post_job(stack, draft(invoice["id"], "<p>a</p>", SLOW))
    assert status == 202, older
    await eventually(lambda: projected(stack, older["id"]), 30, "the older draft projected")
    status, newer = await post_job(stack, draft(invoice["id"], "<p>b</p>", {}))
    assert status == 202, newer
    assert (await stack.finished(older["id"]))["status"] == "cancelled"
    assert (await stack.finished(newer["id"]))["status"] == "done"


async def test_a_tenant_has_a_few_previews_rendering_at_most(settings: Settings):
    assert Settings.from_env({}).preview_limit == 4
    assert Settings.from_env({"PRESSROOM_PREVIEW_LIMIT": "2"}).preview_limit == 2
    stack = Stack(replace(settings, preview_limit=2))
    await stack.start()
    try:
        await two_previews_then_a_429(stack)
    finally:
        await stack.close()


async def two_previews_then_a_429(stack: Stack) -> None:
    ids = []
    for index in range(2):
        stored = await create(stack, name=f"t{index}", body="<p>x</p>")
        body = {"template_id": stored["id"], "options": SLOW, "preview": True}
        status, accepted = await post_job(stack, body)
        assert status == 202, accepted
        ids.append(accepted["id"])
    for job_id in ids:
        await eventually(lambda job_id=job_id: projected(stack, job_id), 30, "projected")

    status, refused = await post_job(stack, {"template": "<p>one more</p>", "preview": True})
    assert status == 429, refused
    assert refused["error"]["type"] == "rate_limited"
    assert refused["error"]["message"].startswith("2 previews are still rendering")
    assert (await post_job(stack, {"template": "<p>a job</p>"}))[0] == 202


async def test_a_burst_of_previews_is_admitted_up_to_the_limit(settings: Settings):
    """Eight previews of eight templates at once, none projected yet when the others
    come: two are admitted, six refused, and the two end."""
    stack = Stack(replace(settings, preview_limit=2))
    await stack.start()
    try:
        await a_burst_of_eight(stack)
    finally:
        await stack.close()


async def a_burst_of_eight(stack: Stack) -> None:
    stored = [await create(stack, name=f"t{index}", body=late(3)) for index in range(8)]

    async def post(template_id: str) -> tuple[int, str | None, dict[str, Any]]:
        body = {"template_id": template_id, "options": LATE, "preview": True}
        async with stack.client.post(f"{stack.url}/jobs", json=body) as response:
            return response.status, response.headers.get("Retry-After"), await response.json()

    answers = await asyncio.gather(*(post(template["id"]) for template in stored))
    accepted = [answer["id"] for status, _, answer in answers if status == 202]
    refused = [(status, retry, answer) for status, retry, answer in answers if status != 202]
    assert len(accepted) == 2, answers
    for status, retry, answer in refused:
        assert (status, retry) == (429, "1"), answer
        assert answer["error"]["type"] == "rate_limited", answer
    for job_id in accepted:  # nothing admitted is lost
        assert (await stack.finished(job_id))["status"] == "done"
    # Once they have ended (their rows written), their admissions count no more.
    status, _, after = await post(stored[0]["id"])
    assert status == 202, after
    assert (await stack.finished(after["id"]))["status"] == "done"


async def test_preview_needs_a_template_source(stack: Stack):
    status, answer = await post_job(stack, {"html": "<p>x</p>", "preview": True})
    assert (status, answer["error"]["field"]) == (400, "preview"), answer

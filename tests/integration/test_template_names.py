"""Jobs and batches naming a stored template by its name (`template_name`).

Verifies: a job by name renders the latest version, or the `template_version` it asks
for, and records the template's stable id and version; a batch by name resolves the same
way; an unknown name is a 400 naming `template_name`, an unknown version one naming
`template_version`, and `template_id` with `template_name` is refused; another tenant's
template of a name never resolves, also when the caller has one of the same name (each
renders its own).
"""

from __future__ import annotations

from typing import Any

from tests.conftest import Stack, eventually
from tests.integration.test_batches_api import submission
from tests.integration.test_pipeline import pdf_text
from tests.integration.test_templates import api, create, submitted_event
from tests.integration.test_tenants import _status, call

__all__ = ["api"]  # the fixture, used by name


async def test_a_job_by_name_renders_the_latest_or_the_asked_version(stack: Stack):
    first = await create(stack, name="invoice", body="<h1>One for {{ who }}</h1>")
    await create(stack, name="invoice", body="<h1>Two for {{ who }}</h1>")

    accepted = await stack.submit({"template_name": "invoice", "data": {"who": "Ana"}})
    job = await stack.finished(accepted["id"])
    assert job["status"] == "done", job
    assert "Two for Ana" in await pdf_text(stack, job["url"])
    event = await submitted_event(stack, accepted["id"])
    assert (event["template_id"], event["template_version"]) == (first["id"], 2)

    body = {"template_name": "invoice", "template_version": 1, "data": {"who": "Bo"}}
    accepted = await stack.submit(body)
    job = await stack.finished(accepted["id"])
    text = await pdf_text(stack, job["url"])
    assert "One for Bo" in text and "Two" not in text


async def test_a_batch_by_name_resolves_the_stored_version(api: Stack):
    stored = await create(api, name="letter", body="<p>{{ n }}</p>")
    body = {"template_name": "letter", "items": [{"data": {"n": 1}}, {"data": {"n": 2}}]}
    async with api.client.post(f"{api.url}/batches", json=body) as response:
        accepted = await response.json()
    assert response.status == 202, accepted
    event = await submission(api.settings, accepted["id"])
    assert event is not None
    assert (event.template_id, event.template_version) == (stored["id"], 1)
    assert event.template == "<p>{{ n }}</p>"


async def test_bad_names_and_versions_are_400_naming_the_field(api: Stack):
    stored = await create(api, name="known", body="ok")
    cases: list[tuple[dict[str, Any], str, str]] = [
        ({"template_name": "unknown"}, "template_name", "no stored template is named 'unknown'"),
        ({"template_name": "known", "template_version": 2}, "template_version", "no version 2"),
        ({"template_name": "known", "template_id": stored["id"]}, "template_name", "not both"),
        ({"template_name": "  "}, "template_name", "must not be empty"),
        ({"template_name": ""}, "template_name", ""),
        ({"template_name": "x" * 201}, "template_name", ""),
        ({"template_name": "known", "html": "<p>"}, "html", "give exactly one of"),
    ]
    for body, field, words in cases:
        async with api.client.post(f"{api.url}/jobs", json=body) as response:
            answer = await response.json()
        assert response.status == 400, (body, answer)
        assert answer["error"]["field"] == field, (body, answer)
        assert words in answer["error"]["message"], (body, answer)
    batch = {"template_name": "unknown", "items": [{"data": {}}]}
    async with api.client.post(f"{api.url}/batches", json=batch) as response:
        answer = await response.json()
    assert (response.status, answer["error"]["field"]) == (400, "template_name")


async def test_another_tenants_name_never_resolves(stack: Stack):
    owner, other = stack.tenant, await stack.new_tenant()
    body = {"name": "secret-invoice", "body": "<p>Other's {{ n }}</p>"}
    status, _, _ = await call(other.http, "POST", f"{stack.url}/templates", json=body)
    assert status == 201
    job = {"template_name": "secret-invoice", "data": {"n": 1}}
    status, answer, _ = await call(owner.http, "POST", f"{stack.url}/jobs", json=job)
    assert (status, answer["error"]["field"]) == (400, "template_name"), answer

    # With a template of that name of its own, each tenant renders its own.
    mine = {"name": "secret-invoice", "body": "<p>Owner's {{ n }}</p>"}
    status, _, _ = await call(owner.http, "POST", f"{stack.url}/templates", json=mine)
    assert status == 201
    status, accepted, _ = await call(owner.http, "POST", f"{stack.url}/jobs", json=job)
    assert status == 202, accepted
    await eventually(lambda: _status(stack, owner, accepted["id"], "done"), 60)
    done = await stack.job(accepted["id"])
    text = await pdf_text(stack, done["url"])
    assert "Owner's 1" in text and "Other's" not in text

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


async def patch(stack: Stack, template_id: str, body: Any) -> tuple[int, dict[str, Any]]:
    url = f"{stack.url}/templates/{template_id}"
    async with stack.client.patch(url, json=body) as response:
        return response.status, await response.json()


async def test_renaming_keeps_the_id_and_every_version(api: Stack):
    first = await create(api, name="invoice", body="<p>one</p>")
    await create(api, name="invoice", body="<p>two</p>")
    status, renamed = await patch(api, first["id"], {"name": "invoice-2027"})
    assert status == 200, renamed
    assert (renamed["id"], renamed["name"], renamed["latest_version"]) == (
        first["id"],
        "invoice-2027",
        2,
    )
    async with api.client.get(f"{api.url}/templates/{first['id']}?version=1") as response:
        kept = await response.json()
    assert (kept["name"], kept["body"], [v["version"] for v in kept["versions"]]) == (
        "invoice-2027",
        "<p>one</p>",
        [1, 2],
    )
    accepted = await api.submit({"template_name": "invoice-2027", "template_version": 1})
    event = await submitted_event(api, accepted["id"])
    assert (event["template_id"], event["template_version"]) == (first["id"], 1)
    async with api.client.post(f"{api.url}/jobs", json={"template_name": "invoice"}) as response:
        assert (response.status, (await response.json())["error"]["field"]) == (
            400,
            "template_name",
        )

    # The old name is free: a new template, with an id of its own; the renamed one is
    # left as it was.
    again = await create(api, name="invoice", body="<p>new</p>")
    assert again["version"] == 1 and again["id"] != first["id"]
    more = await create(api, name="invoice-2027", body="<p>three</p>")
    assert (more["id"], more["version"]) == (first["id"], 3)


async def test_a_rename_refuses_a_taken_name_and_another_tenants_template(stack: Stack):
    one = await create(stack, name="one", body="1")
    await create(stack, name="two", body="2")
    status, answer = await patch(stack, one["id"], {"name": "two"})
    assert (status, answer["error"]["type"], answer["error"]["field"]) == (409, "conflict", "name")
    for body in ({"name": " "}, {"name": ""}, {}, {"name": "x", "body": "y"}):
        status, answer = await patch(stack, one["id"], body)
        assert status == 400, (body, answer)
    status, answer = await patch(stack, "0" * 32, {"name": "three"})
    assert status == 404, answer
    other = await stack.new_tenant()
    status, answer, _ = await call(
        other.http, "PATCH", f"{stack.url}/templates/{one['id']}", json={"name": "mine"}
    )
    assert status == 404, answer
    status, shown, _ = await call(stack.tenant.http, "GET", f"{stack.url}/templates/{one['id']}")
    assert shown["name"] == "one"

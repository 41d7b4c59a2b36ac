"""A template version's files taken by reference through the whole stack: a new version
keeping an earlier one's (`keep_files` of `POST /templates`, JSON: no bytes sent again),
and a job of an inline template getting a version's (`template_files`: an editor's
preview of unsaved text).

Verifies:
- a JSON `POST /templates` with `keep_files` bundles the earlier version's files (all, or
  the ones named), and a job rendering the new version draws the kept image (poppler's
  `pdfimages`); without `keep_files` a new version bundles none (as before);
- an inline template job with `template_files` draws the version's image;
- another tenant can keep or preview none of a tenant's files: `404`, nothing stored;
- bad references are 4xx naming the field.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import aiohttp

from tests.conftest import Stack, Tenant
from tests.integration.test_assets import call, pdf_of, submit
from tests.integration.test_job_files import images, png

STYLE = b"p { color: rgb(10, 120, 10) }"


async def first_version(stack: Stack, tenant: Tenant, name: str = "letter") -> dict[str, Any]:
    """Version 1 of `name`, bundling `logo.png` (40 x 20) and `style.css` sent with it."""
    data = aiohttp.FormData()
    template = {"name": name, "body": '<img src="logo.png"><p>{{ who }}</p>'}
    data.add_field("template", json.dumps(template), content_type="application/json")
    data.add_field("file", png(40, 20), filename="logo.png")
    data.add_field("file", STYLE, filename="style.css")
    status, created = await call(tenant.http, "POST", f"{stack.url}/templates", data=data)
    assert status == 201, created
    return created


async def files_of(stack: Stack, tenant: Tenant, template_id: str, version: int) -> dict[str, str]:
    url = f"{stack.url}/templates/{template_id}?version={version}"
    status, shown = await call(tenant.http, "GET", url)
    assert status == 200, shown
    return {f["name"]: f["digest"] for f in shown["files"]}


async def test_a_new_version_keeps_an_earlier_versions_files_by_reference(
    stack: Stack, tmp_path: Path
) -> None:
    tenant = stack.tenant
    created = await first_version(stack, tenant)
    first = await files_of(stack, tenant, created["id"], 1)
    body = '<link rel="stylesheet" href="style.css"><img src="logo.png"><p>v2 {{ who }}</p>'
    template = {"name": "letter", "body": body, "keep_files": {"version": 1}}
    status, second = await call(tenant.http, "POST", f"{stack.url}/templates", json=template)
    assert (status, second["version"]) == (201, 2), second
    assert await files_of(stack, tenant, created["id"], 2) == first  # the same digests

    job = {"template_id": created["id"], "data": {"who": "reader"}}
    status, accepted = await submit(stack, tenant, json=job)
    assert status == 202, accepted
    assert images(await pdf_of(stack, tenant, accepted["id"]), tmp_path) == [(40, 20)]

    some = {"name": "letter", "body": body, "keep_files": {"names": ["logo.png"]}}
    status, third = await call(tenant.http, "POST", f"{stack.url}/templates", json=some)
    assert (status, third["version"]) == (201, 3), third
    assert await files_of(stack, tenant, created["id"], 3) == {"logo.png": first["logo.png"]}

    status, _ = await call(tenant.http, "POST", f"{stack.url}/templates",
                                json={"name": "letter", "body": body})  # fmt: skip
    assert status == 201 and await files_of(stack, tenant, created["id"], 4) == {}


async def test_an_inline_template_job_gets_a_versions_files_by_template_files(
    stack: Stack, tmp_path: Path
) -> None:
    tenant = stack.tenant
    created = await first_version(stack, tenant)
    job = {
        "template": '<p>unsaved</p><img src="logo.png">',
        "template_files": {"template_id": created["id"], "version": 1},
        "preview": True,
    }
    status, accepted = await submit(stack, tenant, json=job)
    assert status == 202, accepted
    assert images(await pdf_of(stack, tenant, accepted["id"]), tmp_path) == [(40, 20)]


async def test_another_tenants_template_files_can_be_neither_kept_nor_previewed(
    stack: Stack,
) -> None:
    owner, other = stack.tenant, await stack.new_tenant()
    created = await first_version(stack, owner)
    kept = {"template_id": created["id"], "version": 1}
    template = {"name": "mine", "body": '<img src="logo.png">', "keep_files": kept}
    status, body = await call(other.http, "POST", f"{stack.url}/templates", json=template)
    assert (status, body["error"]["field"]) == (404, "keep_files.template_id"), body
    same_name = {"name": "letter", "body": "<p>", "keep_files": {"version": 1}}
    status, body = await call(other.http, "POST", f"{stack.url}/templates", json=same_name)
    assert (status, body["error"]["type"]) == (404, "not_found"), body
    _, listed = await call(other.http, "GET", f"{stack.url}/templates")
    assert listed["templates"] == []  # nothing stored

    job = {"template": '<img src="logo.png">', "template_files": kept, "preview": True}
    status, body = await submit(stack, other, json=job)
    assert (status, body["error"]["field"]) == (404, "template_files.template_id"), body


async def test_bad_references_are_4xx_naming_the_field(stack: Stack) -> None:
    tenant = stack.tenant
    created = await first_version(stack, tenant)
    cases = [
        ("templates", {"keep_files": {"names": ["nope.png"]}}, 400, "keep_files.names[0]"),
        ("templates", {"keep_files": {"version": 9}}, 404, "keep_files.version"),
        ("templates", {"keep_files": {"template_id": "0" * 32}}, 404, "keep_files.template_id"),
        ("templates", {"keep_files": {"template_id": "x"}}, 404, "keep_files.template_id"),
        ("jobs", {"template_files": {"version": 1}}, 400, "template_files.template_id"),
        ("jobs", {"html": "<p>", "template_files": {"template_id": created["id"]}},
         400, "template_files"),
        ("jobs", {"template_files": {"template_id": created["id"], "names": ["x.css"]}},
         400, "template_files.names[0]"),
    ]  # fmt: skip
    for route, fields, code, field in cases:
        base = {"name": "letter", "body": "<p>"} if route == "templates" else {"template": "<p>"}
        if "html" in fields:
            base = {}
        request = {**base, **fields}
        status, body = await call(tenant.http, "POST", f"{stack.url}/{route}", json=request)
        assert (status, body["error"]["field"]) == (code, field), (request, body)


async def test_a_new_template_refused_for_its_taken_name_keeps_none_of_its_files(
    stack: Stack,
) -> None:
    """`"new": true` with a name the tenant has: a `409` naming `name`, and the files sent
    with it are neither claimed nor written (they would outlive the refusal in storage)."""
    from tests.integration.test_file_lifetimes import blob, claims

    tenant = stack.tenant
    await first_version(stack, tenant)
    other = png(41, 21)
    data = aiohttp.FormData()
    template = {"name": "letter", "body": '<img src="logo.png">', "new": True}
    data.add_field("template", json.dumps(template), content_type="application/json")
    data.add_field("file", other, filename="logo.png")
    status, answer = await call(tenant.http, "POST", f"{stack.url}/templates", data=data)
    assert (status, answer["error"]["field"]) == (409, "name"), answer
    assert await claims(stack.settings, other) == []
    assert not blob(stack.settings, tenant.id, other).exists()

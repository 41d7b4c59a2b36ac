"""Tenants on the real stack: who is asking, and what each one may see.

Verifies: without a key, with an unknown key or a revoked one the gateway answers 401
with `WWW-Authenticate: Bearer`; a key without the route's scope gets 403; every route
that names a job, template or secret answers 404 for another tenant's (never 403), and a
download link cannot be bent to another tenant's file; two tenants' templates of one name
are two templates; a revocation reaches a second gateway within 5 s; the admin API needs
an admin key and never shows a key after creating it; keys record their last use.
"""

from __future__ import annotations

import asyncio
import base64
import json
import time
import urllib.parse
from collections.abc import AsyncIterator
from dataclasses import replace
from typing import Any

import aiohttp
import pytest

from services.core.runtime.settings import Settings
from tests.conftest import ADMIN, ADMIN_KEY, Stack, Tenant, admin_call, eventually, free_port

HELLO = {"template": "<h1>Hi {{name}}</h1>", "data": {"name": "Ana"}}


@pytest.fixture
async def stack(settings: Settings) -> AsyncIterator[Stack]:
    stack = Stack(replace(settings, auth_refresh=0.2))
    await stack.start()
    yield stack
    await stack.close()


async def call(
    http: aiohttp.ClientSession, method: str, url: str, **kwargs: Any
) -> tuple[int, Any, Any]:
    """(status, JSON body or None, headers) of one request."""
    async with http.request(method, url, **kwargs) as response:
        body = await response.json() if response.content_type == "application/json" else None
        return response.status, body, response.headers


async def test_requests_without_a_valid_key_are_401_and_without_the_scope_403(stack: Stack):
    url = f"{stack.url}/jobs"
    async with aiohttp.ClientSession() as anonymous:
        for headers, words in [
            ({}, "missing API key"),
            ({"Authorization": "Bearer prk_not-a-key"}, "unknown API key"),
            ({"Authorization": "Basic dXNlcjpwYXNz"}, "missing API key"),
        ]:
            status, body, answer = await call(anonymous, "POST", url, json=HELLO, headers=headers)
            assert status == 401, body
            assert body["error"]["type"] == "unauthorized"
            assert words in body["error"]["message"]
            assert answer["WWW-Authenticate"].startswith("Bearer")
        reader = await stack.new_tenant(scopes=["jobs:read"])
        status, body, _ = await call(reader.http, "POST", url, json=HELLO)
        assert (status, body["error"]["type"]) == (403, "forbidden")
        assert "jobs:write" in body["error"]["message"]
        status, _, _ = await call(reader.http, "GET", f"{stack.url}/templates")
        assert status == 403


async def test_every_route_answers_404_for_another_tenants_job(stack: Stack, receiver):
    owner, other = stack.tenant, await stack.new_tenant()
    job = await stack.submit({**HELLO, "webhook_url": receiver.url})
    done = await stack.finished(job["id"])
    assert done["status"] == "done"
    base = f"{stack.url}/jobs/{job['id']}"
    for method, path in [
        ("GET", ""),
        ("GET", "/events"),
        ("GET", "/webhooks"),
        ("POST", "/webhooks/redeliver"),
        ("DELETE", ""),
    ]:
        status, body, _ = await call(other.http, method, base + path)
        assert status == 404, (method, path, body)
        assert body["error"]["type"] == "not_found"
    # The owner still sees it all, and the other tenant's DELETE changed nothing.
    status, body, _ = await call(owner.http, "GET", base)
    assert (status, body["status"]) == (200, "done")
    async with aiohttp.ClientSession() as anonymous, anonymous.get(body["url"]) as response:
        assert response.status == 200
        assert (await response.read()).startswith(b"%PDF")
        # A file to save, never a page to render or sniff, and not for shared caches.
        name = f"{job['id']}.pdf"
        assert response.headers["Content-Disposition"] == (
            f"attachment; filename=\"{name}\"; filename*=UTF-8''{name}"
        )
        assert response.headers["X-Content-Type-Options"] == "nosniff"
        assert response.headers["Cache-Control"].startswith("private")


async def test_a_download_link_cannot_be_bent_to_another_tenants_file(stack: Stack):
    other = await stack.new_tenant()
    mine = await stack.finished((await stack.submit(HELLO))["id"])
    status, theirs, _ = await call(other.http, "POST", f"{stack.url}/jobs", json=HELLO)
    assert status == 202
    await eventually(lambda: _status(stack, other, theirs["id"], "done"), 60)
    link = urllib.parse.urlsplit(mine["url"])
    assert f"/files/jobs/{stack.tenant.id}/{mine['id']}.pdf" == link.path
    bent = link.path.replace(
        f"jobs/{stack.tenant.id}/{mine['id']}", f"jobs/{other.id}/{theirs['id']}"
    )
    async with aiohttp.ClientSession() as anonymous:
        async with anonymous.get(f"{stack.url}{bent}?{link.query}") as response:
            assert response.status == 404
        async with anonymous.get(mine["url"]) as response:
            assert response.status == 200


async def _status(stack: Stack, tenant: Tenant, job_id: str, wanted: str) -> bool:
    status, body, _ = await call(tenant.http, "GET", f"{stack.url}/jobs/{job_id}")
    return status == 200 and body["status"] == wanted


async def test_two_tenants_templates_of_one_name_stay_apart(stack: Stack):
    owner, other = stack.tenant, await stack.new_tenant()
    made = {}
    for tenant, text in [(owner, "Owner's {{n}}"), (other, "Other's {{n}}")]:
        body = {"name": "invoice", "body": f"<p>{text}</p>"}
        status, answer, _ = await call(tenant.http, "POST", f"{stack.url}/templates", json=body)
        assert (status, answer["version"]) == (201, 1), answer
        made[tenant.id] = answer["id"]
    assert made[owner.id] != made[other.id]
    for tenant in (owner, other):
        status, listed, _ = await call(tenant.http, "GET", f"{stack.url}/templates")
        assert [t["id"] for t in listed["templates"]] == [made[tenant.id]]
        foreign = made[other.id if tenant is owner else owner.id]
        status, body, _ = await call(tenant.http, "GET", f"{stack.url}/templates/{foreign}")
        assert status == 404, body
        job = {"template_id": foreign, "data": {"n": 1}}
        status, body, _ = await call(tenant.http, "POST", f"{stack.url}/jobs", json=job)
        assert (status, body["error"]["field"]) == (400, "template_id")
    job = {"template_id": made[other.id], "data": {"n": 7}}
    status, accepted, _ = await call(other.http, "POST", f"{stack.url}/jobs", json=job)
    assert status == 202
    await eventually(lambda: _status(stack, other, accepted["id"], "done"), 60)
    status, timeline, _ = await call(other.http, "GET", f"{stack.url}/jobs/{accepted['id']}/events")
    assert timeline["events"][0]["template_id"] == made[other.id]


async def test_webhook_secrets_are_per_tenant_shown_once_and_rotated(stack: Stack):
    owner, other = stack.tenant, await stack.new_tenant()
    url = f"{stack.url}/webhook-secrets"
    status, listed, _ = await call(owner.http, "GET", url)
    assert status == 200 and len(listed["secrets"]) == 1
    assert "secret" not in listed["secrets"][0]
    first = listed["secrets"][0]["id"]
    status, body, _ = await call(owner.http, "DELETE", f"{url}/{first}")
    assert status == 409, body  # the last one stays until its successor exists
    status, made, _ = await call(owner.http, "POST", url)
    assert status == 201 and made["secret"].startswith("whsec_")
    status, body, _ = await call(other.http, "DELETE", f"{url}/{first}")
    assert status == 404, body
    status, _, _ = await call(owner.http, "DELETE", f"{url}/{first}")
    assert status == 204
    status, listed, _ = await call(owner.http, "GET", url)
    assert [s["id"] for s in listed["secrets"]] == [made["id"]]
    # A secret of the tenant's own choosing: stored, never echoed; a bad one is a 400.
    chosen = "whsec_" + base64.b64encode(b"k" * 32).decode()
    status, body, _ = await call(owner.http, "POST", url, json={"secret": chosen})
    assert status == 201 and set(body) == {"id", "created_at"}, body
    status, body, _ = await call(owner.http, "POST", url, json={"secret": "whsec_c2hvcnQ="})
    assert (status, body["error"]["field"]) == (400, "secret")


async def test_a_revoked_key_is_refused_by_every_gateway_within_5_seconds(stack: Stack):
    second = Stack(replace(stack.settings, port=free_port(), auth_refresh=1.0))
    await second.start("gateway")
    try:
        tenant = await stack.new_tenant()
        probe = f"{second.url}/usage"

        async def accepted_by_second() -> bool:
            status, _, _ = await call(tenant.http, "GET", probe)
            return status == 200

        await eventually(accepted_by_second, 10, "the second gateway learns the new key")
        await admin_call(
            tenant.http, "DELETE", f"{stack.url}/admin/keys/{tenant.key_id}", None, 204
        )
        revoked = time.monotonic()

        async def refused_by_second() -> bool:
            status, body, _ = await call(tenant.http, "GET", probe)
            return status == 401 and "revoked" in body["error"]["message"]

        await eventually(refused_by_second, 5, "the second gateway refuses the revoked key")
        print(f"\n[tenants] revocation seen by a second gateway after "
              f"{time.monotonic() - revoked:.2f}s")  # fmt: skip
        status, _, _ = await call(tenant.http, "GET", f"{stack.url}/usage")
        assert status == 401  # and at once by the gateway that revoked it
    finally:
        await second.close()


async def test_admin_api_needs_an_admin_key_and_never_shows_a_key_again(stack: Stack):
    admin_url = f"{stack.url}/admin/tenants"
    async with aiohttp.ClientSession() as anonymous:
        status, body, headers = await call(anonymous, "GET", admin_url)
        assert status == 401 and "WWW-Authenticate" in headers
        status, body, _ = await call(stack.tenant.http, "GET", admin_url)
        assert status == 403, body
        status, body, _ = await call(
            anonymous, "POST", admin_url, json={"name": "x y"}, headers=ADMIN
        )
        assert (status, body["error"]["field"]) == (400, "name")
        status, body, _ = await call(
            anonymous, "POST", admin_url, json={"name": stack.tenant.name}, headers=ADMIN
        )
        assert status == 409, body
        keys_url = f"{admin_url}/{stack.tenant.id}/keys"
        status, body, _ = await call(
            anonymous, "POST", keys_url, json={"scopes": ["nope"]}, headers=ADMIN
        )
        assert (status, body["error"]["field"]) == (400, "scopes")
        listed = await admin_call(anonymous, "GET", admin_url)
        assert stack.tenant.id in {t["id"] for t in listed["tenants"]}
        status, body, _ = await call(
            anonymous, "GET", f"{admin_url}/ten_nobody/keys", headers=ADMIN
        )
        assert status == 404

        async def used() -> dict[str, Any] | None:
            keys = (await admin_call(anonymous, "GET", keys_url))["keys"]
            return keys[0] if keys[0]["last_used_at"] else None

        await stack.submit(HELLO)
        key = await eventually(used, 15, "last_used_at recorded")
        assert stack.tenant.key not in str(key)
        assert key["prefix"] == stack.tenant.key[:10]
        assert key["scopes"] == [
            "jobs:read", "jobs:write", "templates:read", "templates:write", "webhooks:write",
            "usage:read",
        ]  # fmt: skip


async def test_without_auth_every_request_is_the_implicit_tenant(
    settings: Settings, caplog: pytest.LogCaptureFixture
):
    stack = Stack(replace(settings, auth="disabled"))
    await stack.start()
    warned = [r for r in caplog.records if "PRESSROOM_AUTH=disabled" in r.getMessage()]
    assert warned and warned[0].levelname == "WARNING"
    try:
        job = await stack.submit(HELLO)
        done = await stack.finished(job["id"])
        assert f"/files/jobs/default/{job['id']}.pdf" in done["url"]
        status, usage, _ = await call(stack.client, "GET", f"{stack.url}/usage")
        assert (status, usage["tenant"], usage["succeeded"]) == (200, "default", 1)
    finally:
        await stack.close()


async def test_a_job_only_the_log_knows_yet_is_404_for_another_tenant(settings: Settings):
    """Before the projector has its row, the gateway answers from the log: still scoped."""
    stack = Stack(settings)
    await stack.start("gateway")  # no projector: the job stays in the log only
    try:
        other = await stack.new_tenant()
        job = await stack.submit(HELLO)
        status, body, _ = await call(stack.client, "GET", f"{stack.url}/jobs/{job['id']}")
        assert (status, body["status"]) == (200, "queued")
        for method in ("GET", "DELETE"):
            status, body, _ = await call(other.http, method, f"{stack.url}/jobs/{job['id']}")
            assert status == 404, body
    finally:
        await stack.close()


async def test_the_cli_changes_a_tenants_limits(stack: Stack, capsys: pytest.CaptureFixture[str]):
    """`pressroom tenants update` against a real gateway, then `show --json` reads it back."""
    from services import admin_cli

    env = {"PRESSROOM_PORT": str(stack.settings.port), "PRESSROOM_ADMIN_KEY": ADMIN_KEY}

    async def cli(*argv: str) -> tuple[int, str, str]:
        status = await asyncio.to_thread(admin_cli.run, argv, env)
        out, err = capsys.readouterr()
        return status, out, err

    name = stack.tenant.name
    status, out, _ = await cli("tenants", "update", name, "--rate", "5", "--burst", "9")
    assert status == 0 and "5/s, burst 9" in out, out
    status, out, _ = await cli("tenants", "update", name, "--quota", "3")
    status, out, _ = await cli("tenants", "show", name, "--json")
    shown = json.loads(out)
    assert (shown["rate_limit"], shown["monthly_quota"]) == ({"per_second": 5, "burst": 9}, 3)
    status, out, _ = await cli("tenants", "update", name, "--default-rate", "--default-quota")
    assert status == 0 and "default" in out
    status, _, err = await cli("tenants", "update", name)
    assert status == 2 and "nothing to change" in err

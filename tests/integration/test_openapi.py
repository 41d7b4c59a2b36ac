"""The OpenAPI document and /docs at a live gateway, and the gateway held to the document
by property-based requests (Schemathesis).

Verifies: `/openapi.json` is valid OpenAPI 3.1 and lists every route the gateway serves;
`/docs` and its files carry the strict Content-Security-Policy, and its script sets no
markup from the document; then, for every operation of the document, generated requests
(valid and invalid parameters and bodies, with a tenant's key or the admin key) get no
5xx and no answer that breaks the document: undocumented status, content type, headers
or body. Only the gateway and the projector run (no renderer, no Chromium).
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
import requests
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis.errors import Unsatisfiable
from openapi_spec_validator import OpenAPIV31SpecValidator
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from services.core.runtime.settings import Settings
from services.gateway.templates import template_id_for
from tests import csp
from tests.conftest import ADMIN, Stack


def assert_docs_policy(header: str) -> None:
    """`/docs` and its files (docs/api.md: no network but this gateway, a strict policy):
    the gateway's strict policy, images from itself and data: URLs, requests to itself.
    `form-action` is not promised there (the page has no form)."""
    csp.assert_strict(header, images={"'self'", "data:"}, connects={"'self'"}, closed_forms=False)


EXAMPLES = int(os.environ.get("PRESSROOM_TEST_EXAMPLES", "40"))
"""Generated requests per operation and mode (valid, invalid): 80 per route, some 3,000 in
all, in about a minute on two cores. `PRESSROOM_TEST_EXAMPLES=150` (300 per route, some
11,000 in all, about four minutes) is the longer hunt that found the `/files` 500."""

CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
]


@schemathesis.serializer("application/x-ndjson")
def _json_lines(context: Any, value: Any) -> dict[str, Any]:
    """A JSON Lines body is sent as the text generated for it (anything else, in invalid
    requests, as JSON)."""
    text = value if isinstance(value, str) else json.dumps(value)
    return {"data": text.encode("utf-8", "surrogatepass")}


@pytest.fixture
async def api(settings: Settings) -> AsyncIterator[Stack]:
    stack = Stack(settings)
    await stack.start("gateway", "projector")
    yield stack
    await stack.close()


async def fetch(stack: Stack, path: str) -> tuple[int, dict[str, str], bytes]:
    async with aiohttp.ClientSession() as http, http.get(f"{stack.url}{path}") as response:
        return response.status, dict(response.headers), await response.read()


async def test_the_served_document_is_valid_and_lists_every_route(api):
    status, headers, _ = await fetch(api, "/openapi.json")
    assert status == 200 and headers["Content-Type"].startswith("application/json")
    doc = await asyncio.to_thread(requests.get, f"{api.url}/openapi.json")
    document = doc.json()
    OpenAPIV31SpecValidator(document).validate()
    assert [server["url"] for server in document["servers"]] == [api.url]
    for path in ("/jobs/{id}", "/batches/{id}", "/docs", "/admin/tenants/{id}/keys"):
        assert path in document["paths"]


async def test_docs_page_and_its_files_carry_a_strict_policy_and_set_no_markup(api):
    status, headers, page = await fetch(api, "/docs")
    assert status == 200 and headers["Content-Type"].startswith("text/html")
    assert_docs_policy(headers["Content-Security-Policy"])
    assert b'src="/docs/apidocs.js"' in page and b"<script>" not in page
    status, headers, script = await fetch(api, "/docs/apidocs.js")
    assert status == 200 and headers["Content-Type"].startswith("text/javascript")
    assert_docs_policy(headers["Content-Security-Policy"])
    assert b"innerHTML" not in script.replace(b"no innerHTML anywhere", b"")
    assert b"http://" not in script and b"https://" not in script  # no CDN, no network
    status, headers, _ = await fetch(api, "/docs/apidocs.css")
    assert status == 200 and headers["Content-Type"].startswith("text/css")
    status, headers, body = await fetch(api, "/docs/..%2Fopenapi.py")
    assert status == 404 and b'"not_found"' in body


async def test_docs_page_renders_the_document_in_chromium_under_its_policy(api, chromium):
    """The page's script runs under the CSP (a blocked script would render nothing), draws
    every operation and schema, and shows the document's `<key>` as text, not markup."""
    browser = await asyncio.create_subprocess_exec(
        chromium, "--headless", "--no-sandbox", "--disable-gpu", "--virtual-time-budget=10000",
        "--dump-dom", f"{api.url}/docs",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL,
    )  # fmt: skip
    dom, _ = await asyncio.wait_for(browser.communicate(), 60)
    page = dom.decode()
    document = (await asyncio.to_thread(requests.get, f"{api.url}/openapi.json")).json()
    assert page.count('<details id="op-') == sum(len(i) for i in document["paths"].values())
    for name in document["components"]["schemas"]:
        assert f'id="schema-{name}"' in page, name
    assert "Submit a job" in page and "Loading the document" not in page
    assert "Bearer &lt;key&gt;" in page and "<key>" not in page


async def test_every_request_example_of_the_document_is_accepted_by_the_live_gateway(api):
    """What the reference shows is what works: each body's example (JSON, JSON Lines for a
    batch, multipart for files), sent as it stands, gets a 2xx. Admin routes use the
    tenant the example of `POST /admin/tenants` creates."""
    document = (await asyncio.to_thread(requests.get, f"{api.url}/openapi.json")).json()
    tenant = {"Authorization": f"Bearer {api.tenant.key}"}
    sent: list[str] = []
    tenant_id = ""
    bodies = sorted(
        ((path, method, operation["requestBody"]["content"])
         for path, item in document["paths"].items() for method, operation in item.items()
         if "requestBody" in operation),
        # /admin/tenants makes the tenant the rest use, /templates the template jobs name
        # (and the rename, last, renames)
        key=lambda found: (
            found[0] != "/admin/tenants", found[0] != "/templates", found[0] == "/templates/{id}"
        ),
    )  # fmt: skip
    for path, method, content in bodies:
        for kind, media in content.items():
            named = media.get("examples", {}).values()
            for data in [media["example"]] if "example" in media else [n["value"] for n in named]:
                tenant_id = await _send_example(api, tenant, path, method, kind, data, tenant_id)
                sent.append(f"{method.upper()} {path} {kind}")
    assert len(sent) == 16, sent


async def _send_example(
    api: Stack, tenant: dict[str, str], path: str, method: str, kind: str, data: Any, tenant_id: str
) -> str:
    """Send one example body as `kind`; the tenant id the admin example made, if it is that."""
    raw: Any = data.encode() if isinstance(data, str) else json.dumps(data).encode()
    headers = {**(ADMIN if path.startswith("/admin/") else tenant), "Content-Type": kind}
    if kind == "multipart/form-data":  # its files as parts, each named for its text
        raw, _ = aiohttp.FormData(), headers.pop("Content-Type")
        for name, value in data.items():
            for index, text in enumerate(value if name == "files" else []):
                raw.add_field("file", text.encode(), filename=f"example-{index}.txt")
            if name != "files":
                raw.add_field(name, value)
    url = f"{api.url}{path.replace('{id}', tenant_id)}"
    if path == "/templates/{id}":  # the template the example of POST /templates stored
        url = f"{api.url}/templates/{template_id_for(api.tenant.id, 'invoice')}"
    async with api.client.request(method, url, data=raw, headers=headers) as response:
        assert response.status < 300, (method, path, kind, await response.text())
        answer = await response.json()
    return str(answer["id"]) if path == "/admin/tenants" else tenant_id


async def test_a_forged_download_link_with_any_characters_is_a_404_not_a_500(api):
    """Found by the generated requests: a `sig` with non-ASCII characters made
    `hmac.compare_digest` raise (a 500)."""
    for query in ("expires=3&sig=%C3%A9", "expires=9999999999&sig=%F0%90%A9%B4", "sig=%00"):
        status, _, body = await fetch(api, f"/files/a%C3%AB%3D/x.pdf?{query}")
        assert status == 404 and b'"not_found"' in body, query


@schemathesis.serializer("application/pdf")
def _pdf(ctx: Any, value: Any) -> bytes:
    """`POST /validate`'s body is the file itself: generated strings sent as bytes."""
    return value if isinstance(value, bytes) else str(value).encode("utf-8", "surrogatepass")


def _run(operation: Any, base_url: str, auth: dict[str, str]) -> int:
    """Send `EXAMPLES` valid and `EXAMPLES` invalid requests of one operation, checking
    each answer; how many were sent."""
    sent = 0
    session = requests.Session()
    # The one route whose documented answer is a 501 (office files are not converted):
    # every other check still holds it to the document.
    unbuilt = operation.path == "/forms/libreoffice/convert"
    checks = [check for check in CHECKS if not (unbuilt and check is not_a_server_error)]
    modes = (schemathesis.GenerationMode.POSITIVE, schemathesis.GenerationMode.NEGATIVE)
    for mode in modes:

        @settings(
            max_examples=EXAMPLES,
            deadline=None,
            derandomize=True,
            database=None,
            suppress_health_check=list(HealthCheck),
        )
        @given(case=operation.as_strategy(generation_mode=mode))
        def check(case: Any) -> None:
            nonlocal sent
            sent += 1
            response = case.call(base_url=base_url, session=session, headers=auth, timeout=10)
            case.validate_response(response, checks=checks, headers=auth)

        try:
            check()
        except Unsatisfiable:  # nothing of the operation can be made invalid (no input)
            assert mode == schemathesis.GenerationMode.NEGATIVE
    session.close()
    return sent


async def test_generated_requests_get_no_5xx_and_no_answer_off_the_document(api):
    document = (await asyncio.to_thread(requests.get, f"{api.url}/openapi.json")).json()
    schema = schemathesis.openapi.from_dict(document)
    tenant = {"Authorization": f"Bearer {api.tenant.key}"}
    sent: dict[str, int] = {}
    for result in schema.get_all_operations():
        operation = result.ok()
        auth = ADMIN if operation.path.startswith("/admin/") else tenant
        sent[operation.label] = await asyncio.to_thread(_run, operation, api.url, auth)
    assert len(sent) == sum(len(item) for item in document["paths"].values())
    # An operation without input has one request to send; every other one had them all.
    assert all(count >= EXAMPLES for count in sent.values() if count > 1), sent
    assert sum(sent.values()) > 2000

"""`POST /validate` on the real gateway: what a PDF claims and whether it holds, for
PDFs the service made (a Factur-X invoice, encrypted files) and hostile ones; every bad
input a 4xx naming its cause; each tenant within its share of the validation workers."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import aiohttp

from services.core.runtime.settings import Settings
from tests.conftest import Stack, Tenant
from tests.integration import hostile_pdfs
from tests.integration.test_tenants import call

ROOT = Path(__file__).resolve().parents[2]
INVOICE_XML = (ROOT / "examples" / "factur-x.xml").read_text()
PDF = {"Content-Type": "application/pdf"}


async def validated(
    stack: Stack, data: bytes, status: int = 200, tenant: Tenant | None = None, **headers: str
) -> tuple[Any, Any]:
    http = tenant.http if tenant is not None else stack.client
    answer, body, seen = await call(
        http, "POST", f"{stack.url}/validate", data=data, headers={**PDF, **headers}
    )
    assert answer == status, body
    return body, seen


async def made(stack: Stack, options: dict[str, Any]) -> bytes:
    job = await stack.finished(
        (await stack.submit({"html": "<title>T</title><p>x", "options": options}))["id"]
    )
    assert job["status"] == "done", job
    async with stack.client.get(job["url"]) as response:
        return await response.read()


async def test_what_a_pdf_claims_and_whether_it_holds(stack: Stack) -> None:
    invoice = await made(stack, {"facturx": {"xml": INVOICE_XML, "profile": "EN 16931"}})
    body, _ = await validated(stack, invoice)
    found = body["validation"]
    assert (found["pdfa"], found["facturx"]["xsd_valid"]) == ("3B", True), found
    assert found["facturx"]["declared_profile"] == "EN 16931"
    checks = {check["name"]: check["status"] for check in found["checks"]}
    assert checks["pdfa_rules"] == checks["facturx_xsd"] == checks["facturx_profile"] == "passed"

    locked = await made(
        stack, {"encrypt": {"owner_password": "owner-pass-1", "user_password": "user-pass-1"}}
    )
    refused, _ = await validated(stack, locked, 422)
    assert refused["error"]["type"] == "pdf_encrypted"
    body, _ = await validated(stack, locked, **{"Pdf-Password": "user-pass-1"})
    assert body["validation"]["encryption"]["bits"] == 256
    assert body["validation"]["encryption"]["needs_user_password"] is True

    script, _ = await validated(stack, hostile_pdfs.javascript_open_action())
    assert script["validation"]["pages"] == 1  # reported, not refused: nothing is run
    broken, _ = await validated(stack, hostile_pdfs.broken_xref())
    assert broken["validation"]["pages"] == 3 and broken["warnings"], broken
    for data, kind in [
        (hostile_pdfs.truncated(), "pdf_invalid"),
        (hostile_pdfs.looping_page_tree(), "pdf_invalid"),
        (hostile_pdfs.deep_nesting(), "pdf_invalid"),
    ]:
        refused, _ = await validated(stack, data, 422)
        assert refused["error"]["type"] == kind, refused
    plain, _ = await validated(stack, hostile_pdfs.plain(2))  # the service goes on
    assert (plain["validation"]["pages"], plain["validation"].get("pdfa")) == (2, None)

    form = aiohttp.FormData()  # the same as a form's one file, its password a field
    form.add_field("password", "user-pass-1")
    form.add_field("file", locked, filename="locked.pdf", content_type="application/pdf")
    status, body, _ = await call(stack.client, "POST", f"{stack.url}/validate", data=form)
    assert status == 200, body
    assert (body["validation"]["document"], body["validation"]["pages"]) == ("locked.pdf", 1)


async def test_bad_bodies_are_4xx_naming_the_cause_and_tenants_keep_their_share(
    settings: Settings,
) -> None:
    stack = Stack(replace(settings, validate_max_bytes=64 * 1024, template_rate=0.01,
                          template_burst=2))  # fmt: skip
    await stack.start("gateway")
    try:
        heavy, light = await stack.new_tenant(), await stack.new_tenant()
        cases = [
            (b"", 400, "body", PDF),
            (b"<html>not a pdf</html>", 400, "body", PDF),
            (hostile_pdfs.plain(1), 400, "Content-Type", {"Content-Type": "text/plain"}),
            (hostile_pdfs.plain(1000), 413, "body", PDF),
        ]
        for data, status, field, headers in cases:
            answer, body, _ = await call(
                light.http, "POST", f"{stack.url}/validate", data=data, headers=headers
            )
            assert (answer, body["error"]["field"]) == (status, field), body
        assert "PRESSROOM_VALIDATE_MAX_BYTES" in body["error"]["message"]
        answer, body, _ = await call(
            light.http, "POST", f"{stack.url}/validate?name=a%2Fb.pdf", data=hostile_pdfs.plain(1),
            headers=PDF,
        )  # fmt: skip
        assert (answer, body["error"]["field"]) == (400, "name"), body
        two = aiohttp.FormData()
        for name in ("a.pdf", "b.pdf"):
            two.add_field("file", hostile_pdfs.plain(1), filename=name)
        answer, body, _ = await call(light.http, "POST", f"{stack.url}/validate", data=two)
        assert (answer, body["error"]["field"]) == (400, "files"), body
        big = aiohttp.FormData()
        big.add_field("file", hostile_pdfs.plain(1000), filename="big.pdf")
        answer, body, _ = await call(light.http, "POST", f"{stack.url}/validate", data=big)
        assert (answer, body["error"]["field"]) == (413, "big.pdf"), body
        assert "PRESSROOM_VALIDATE_MAX_BYTES" in body["error"]["message"]
        await validated(stack, hostile_pdfs.plain(1), tenant=heavy)
        await validated(stack, hostile_pdfs.plain(1), tenant=heavy)
        limited, seen = await validated(stack, hostile_pdfs.plain(1), 429, tenant=heavy)
        assert limited["error"]["type"] == "compile_limited" and int(seen["Retry-After"]) >= 1
        await validated(stack, hostile_pdfs.plain(1), tenant=light)  # its own share is whole
    finally:
        await stack.close()

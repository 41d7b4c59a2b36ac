"""Files with jobs through the whole stack: multipart `POST /jobs`, stored assets
(`POST/GET/DELETE /assets`) named by jobs, and what an attacker tries.

The PDF is downloaded and read with poppler: the image drawn, the font embedded, the
stylesheet applied. Tenants are real (admin API keys); each asks for what is another's.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from services.core.runtime.settings import Settings
from tests.conftest import Stack, Tenant
from tests.integration.test_job_files import brand_font, images, png, poppler

STYLE = (
    b"@font-face { font-family: Brand; src: url(fonts/brand.woff) }\n"
    b"p { font-family: Brand } .gone { display: none }"
)
PAGE = (
    '<link rel="stylesheet" href="style.css"><p>Hello <span class="gone">HIDDEN</span></p>'
    '<img src="logo.png">'
)


def form(files: dict[str, bytes], job: dict[str, Any] | None = None) -> aiohttp.FormData:
    data = aiohttp.FormData()
    if job is not None:
        data.add_field("job", json.dumps(job), content_type="application/json")
    for name, content in files.items():
        data.add_field("file", content, filename=name, content_type="application/octet-stream")
    return data


async def call(
    http: aiohttp.ClientSession, method: str, url: str, **kwargs: Any
) -> tuple[int, dict[str, Any]]:
    async with http.request(method, url, **kwargs) as response:
        return response.status, await response.json()


async def finished(stack: Stack, tenant: Tenant, job_id: str) -> dict[str, Any]:
    async def ended() -> dict[str, Any] | None:
        _, job = await call(tenant.http, "GET", f"{stack.url}/jobs/{job_id}")
        return job if job["status"] in {"done", "failed", "cancelled"} else None

    from tests.conftest import eventually

    result: dict[str, Any] = await eventually(ended, 60)
    return result


async def pdf_of(stack: Stack, tenant: Tenant, job_id: str) -> bytes:
    job = await finished(stack, tenant, job_id)
    assert job["status"] == "done", job
    async with tenant.http.get(job["url"]) as response:
        return await response.read()


async def submit(stack: Stack, tenant: Tenant, **kwargs: Any) -> tuple[int, dict[str, Any]]:
    return await call(tenant.http, "POST", f"{stack.url}/jobs", **kwargs)


async def test_a_multipart_job_gets_its_image_stylesheet_and_font(
    stack: Stack, tmp_path: Path
) -> None:
    tenant = stack.tenant
    files = {"logo.png": png(40, 20), "style.css": STYLE, "fonts/brand.woff": brand_font()}
    status, accepted = await submit(stack, tenant, data=form(files, {"html": PAGE}))
    assert status == 202, accepted
    pdf = await pdf_of(stack, tenant, accepted["id"])
    assert "BrandTestSans" in poppler("pdffonts", pdf, tmp_path)
    assert images(pdf, tmp_path) == [(40, 20)]
    assert "HIDDEN" not in poppler("pdftotext", pdf, tmp_path)
    _, events = await call(tenant.http, "GET", f"{stack.url}/jobs/{accepted['id']}/events")
    submitted = events["events"][0]
    assert "html" not in submitted  # the input is kept on the job's row, never shown here
    assert sorted(f["name"] for f in submitted["files"]) == sorted(files)  # refs, no bytes


async def test_stored_assets_are_named_by_jobs_by_version_and_lose_to_the_jobs_own(
    stack: Stack, tmp_path: Path
) -> None:
    tenant = stack.tenant
    status, stored = await call(
        tenant.http, "POST", f"{stack.url}/assets", data=form({"logo.png": png(10, 10)})
    )
    assert status == 201 and stored["assets"][0]["version"] == 1, stored
    _, again = await call(
        tenant.http, "POST", f"{stack.url}/assets", data=form({"logo.png": png(10, 10)})
    )
    assert (again["assets"][0]["version"], again["assets"][0]["new"]) == (1, False)
    _, second = await call(
        tenant.http, "POST", f"{stack.url}/assets", data=form({"logo.png": png(20, 20)})
    )
    assert (second["assets"][0]["version"], second["assets"][0]["new"]) == (2, True)

    sizes = {}
    for name in ("logo.png", "logo.png@1"):
        status, accepted = await submit(
            stack, tenant, json={"html": '<img src="logo.png">', "assets": [name]}
        )
        assert status == 202, accepted
        sizes[name] = images(await pdf_of(stack, tenant, accepted["id"]), tmp_path)
    assert sizes == {"logo.png": [(20, 20)], "logo.png@1": [(10, 10)]}
    own = form({"logo.png": png(30, 30)}, {"html": '<img src="logo.png">', "assets": ["logo.png"]})
    status, accepted = await submit(stack, tenant, data=own)
    assert images(await pdf_of(stack, tenant, accepted["id"]), tmp_path) == [(30, 30)]

    _, listed = await call(tenant.http, "GET", f"{stack.url}/assets")
    assert [(a["name"], a["latest_version"], a["versions"]) for a in listed["assets"]] == [
        ("logo.png", 2, 2)
    ]
    assert listed["files"] == 2
    _, versions = await call(tenant.http, "GET", f"{stack.url}/assets/logo.png")
    assert [v["version"] for v in versions["versions"]] == [1, 2]


async def test_a_page_asking_for_a_file_the_job_lacks_fails_naming_it(stack: Stack) -> None:
    tenant = stack.tenant
    job = {"html": '<img src="logo.png"><img src="fonts/absent.woff">'}
    status, accepted = await submit(stack, tenant, data=form({"logo.png": png(4, 4)}, job))
    assert status == 202
    failed = await finished(stack, tenant, accepted["id"])
    assert failed["status"] == "failed" and failed["attempts"] == 1
    assert failed["error"]["type"] == "asset_missing"
    assert "fonts/absent.woff" in failed["error"]["message"]


async def test_a_job_naming_an_asset_the_tenant_lacks_is_a_400(stack: Stack) -> None:
    status, body = await submit(
        stack, stack.tenant, json={"html": "<p>", "assets": ["logo.png", "nope.png"]}
    )
    assert status == 400
    assert (body["error"]["type"], body["error"]["field"]) == ("asset_missing", "assets[0]")


async def test_one_tenant_can_never_list_use_or_delete_anothers_assets(stack: Stack) -> None:
    owner, other = stack.tenant, await stack.new_tenant()
    status, _ = await call(
        owner.http, "POST", f"{stack.url}/assets", data=form({"fonts/a.woff": brand_font()})
    )
    assert status == 201
    _, listed = await call(other.http, "GET", f"{stack.url}/assets")
    assert listed["assets"] == [] and listed["files"] == 0
    for method in ("GET", "DELETE"):
        status, body = await call(other.http, method, f"{stack.url}/assets/fonts/a.woff")
        assert (status, body["error"]["type"]) == (404, "not_found")
    status, body = await submit(stack, other, json={"html": "<p>", "assets": ["fonts/a.woff"]})
    assert (status, body["error"]["field"]) == (400, "assets[0]")
    _, mine = await call(owner.http, "GET", f"{stack.url}/assets/fonts/a.woff")
    assert len(mine["versions"]) == 1  # still there


@pytest.mark.parametrize(
    ("name", "data", "words"),
    [
        ("logo.png", b"<html><script>alert(1)</script></html>", "image/png"),
        ("../escape.css", b"p{}", "dot"),
        ("a\u202egnp.css", b"p{}", "bidirectional"),
        ("logo.png@2", png(2, 2), "@"),
    ],
)
async def test_bad_files_are_400s_naming_them_and_store_nothing(
    stack: Stack, name: str, data: bytes, words: str
) -> None:
    tenant = stack.tenant
    files = {"ok.png": png(2, 2), name: data}
    status, body = await call(tenant.http, "POST", f"{stack.url}/assets", data=form(files))
    assert status == 400 and words in body["error"]["message"], body
    assert body["error"]["field"] == name
    _, listed = await call(tenant.http, "GET", f"{stack.url}/assets")
    assert listed["assets"] == []


async def test_files_are_refused_with_a_url_source(stack: Stack) -> None:
    job = {"url": "https://example.com/", "assets": ["logo.png"]}
    status, body = await submit(stack, stack.tenant, json=job)
    assert (status, body["error"]["field"]) == (400, "assets")


async def test_an_idempotency_key_reused_with_other_files_is_a_422(stack: Stack) -> None:
    tenant, job = stack.tenant, {"html": '<img src="a.png">'}
    headers = {"Idempotency-Key": "files-1"}
    first = await submit(stack, tenant, data=form({"a.png": png(2, 2)}, job), headers=headers)
    again = await submit(stack, tenant, data=form({"a.png": png(2, 2)}, job), headers=headers)
    other = await submit(stack, tenant, data=form({"a.png": png(3, 3)}, job), headers=headers)
    assert first[0] == again[0] == 202 and first[1]["id"] == again[1]["id"]
    assert (other[0], other[1]["error"]["type"]) == (422, "idempotency_conflict")


@pytest.fixture
async def small(settings: Settings) -> AsyncIterator[Stack]:
    limited = replace(settings, asset_quota_files=2, max_file_bytes=5000, max_files=3)
    stack = Stack(limited)
    await stack.start("gateway", "projector")
    yield stack
    await stack.close()


async def test_quotas_and_limits_are_413s_naming_the_cause(small: Stack) -> None:
    tenant = small.tenant
    status, _ = await call(
        tenant.http,
        "POST",
        f"{small.url}/assets",
        data=form({"a.png": png(2, 2), "b.png": png(3, 3)}),
    )
    assert status == 201
    status, body = await call(
        tenant.http, "POST", f"{small.url}/assets", data=form({"c.png": png(4, 4)})
    )
    assert status == 413 and "PRESSROOM_ASSET_QUOTA_FILES" in body["error"]["message"]
    big = {"big.css": b"p{}" + b" " * 6000}
    status, body = await call(tenant.http, "POST", f"{small.url}/assets", data=form(big))
    assert (status, body["error"]["field"]) == (413, "big.css")
    many = {f"f{n}.css": b"p{}" for n in range(4)}
    status, body = await submit(small, tenant, data=form(many, {"html": "<p>"}))
    assert (status, body["error"]["field"]) == (413, "files")
    named = form({"x.css": b"p{}", "y.css": b"p{}"}, {"html": "<p>", "assets": ["a.png", "b.png"]})
    status, body = await submit(small, tenant, data=named)
    assert (status, body["error"]["field"]) == (413, "assets")


async def test_a_stored_template_bundles_its_files_and_a_jobs_own_win_by_name(
    stack: Stack, tmp_path: Path
) -> None:
    tenant = stack.tenant
    await call(
        tenant.http, "POST", f"{stack.url}/assets", data=form({"fonts/brand.woff": brand_font()})
    )
    template = {
        "name": "letter",
        "body": PAGE.replace("Hello", "{{ greeting }}"),
        "header": '<img src="logo.png" style="height: 12px">',
        "assets": ["fonts/brand.woff"],
    }
    files = {"logo.png": png(40, 20), "style.css": STYLE}
    data = aiohttp.FormData()
    data.add_field("template", json.dumps(template), content_type="application/json")
    for name, content in files.items():
        data.add_field("file", content, filename=name)
    status, created = await call(tenant.http, "POST", f"{stack.url}/templates", data=data)
    assert status == 201, created
    _, shown = await call(tenant.http, "GET", f"{stack.url}/templates/{created['id']}")
    assert sorted(f["name"] for f in shown["files"]) == [
        "fonts/brand.woff",
        "logo.png",
        "style.css",
    ]

    job = {"template_id": created["id"], "data": {"greeting": "Dear reader"},
           "options": {"margin": {"top": "2cm"}}}  # fmt: skip
    status, accepted = await submit(stack, tenant, json=job)
    assert status == 202, accepted
    pdf = await pdf_of(stack, tenant, accepted["id"])
    assert "BrandTestSans" in poppler("pdffonts", pdf, tmp_path)
    assert sorted(images(pdf, tmp_path)) == [(40, 20), (40, 20)]  # the page's and the header's
    assert "Dear reader" in poppler("pdftotext", pdf, tmp_path)

    status, accepted = await submit(stack, tenant, data=form({"logo.png": png(7, 7)}, job))
    assert status == 202, accepted
    assert sorted(images(await pdf_of(stack, tenant, accepted["id"]), tmp_path)) == [(7, 7), (7, 7)]


async def test_a_template_naming_an_asset_the_tenant_lacks_is_a_400(stack: Stack) -> None:
    template = {"name": "t", "body": "<p>", "assets": ["nope.png"]}
    status, body = await call(stack.tenant.http, "POST", f"{stack.url}/templates", json=template)
    assert (status, body["error"]["type"], body["error"]["field"]) == (
        400,
        "asset_missing",
        "assets[0]",
    )


async def test_every_item_of_a_batch_gets_its_template_bundle_and_named_assets(
    stack: Stack, tmp_path: Path
) -> None:
    from tests.integration.test_batches import finished_batch, submit_batch

    tenant = stack.tenant
    await call(tenant.http, "POST", f"{stack.url}/assets", data=form({"stamp.png": png(9, 9)}))
    data = aiohttp.FormData()
    body = '<img src="logo.png"><img src="stamp.png"><p>{{ n }}</p>'
    data.add_field("template", json.dumps({"name": "item", "body": body}))
    data.add_field("file", png(30, 15), filename="logo.png")
    _, created = await call(tenant.http, "POST", f"{stack.url}/templates", data=data)
    batch = {
        "template_id": created["id"],
        "assets": ["stamp.png"],
        "items": [{"data": {"n": n}} for n in range(3)],
        "output": "merged",
    }
    done = await finished_batch(stack, await submit_batch(stack, batch))
    assert done["status"] == "done", done
    async with tenant.http.get(done["url"]) as response:
        pdf = await response.read()
    assert sorted(images(pdf, tmp_path)) == [(9, 9)] * 3 + [(30, 15)] * 3
    status, body_ = await call(
        tenant.http, "POST", f"{stack.url}/batches",
        json={"items": [{"url": "https://example.com/"}], "assets": ["stamp.png"]},
    )  # fmt: skip
    assert (status, body_["error"]["field"]) == (400, "assets")


async def test_a_markdown_job_gets_its_images_by_name(stack: Stack, tmp_path: Path) -> None:
    job = {"markdown": "# Note\n\n![logo](img/logo.png)\n\n| a | b |\n|---|---|\n| 1 | 2 |\n"}
    status, accepted = await submit(
        stack, stack.tenant, data=form({"img/logo.png": png(12, 6)}, job)
    )
    assert status == 202, accepted
    assert images(await pdf_of(stack, stack.tenant, accepted["id"]), tmp_path) == [(12, 6)]


async def test_names_are_looked_up_in_nfc_whatever_the_client_sent(stack: Stack) -> None:
    import unicodedata
    import urllib.parse

    tenant = stack.tenant
    decomposed = unicodedata.normalize("NFD", "café.png")
    await call(tenant.http, "POST", f"{stack.url}/assets", data=form({decomposed: png(2, 2)}))
    _, listed = await call(tenant.http, "GET", f"{stack.url}/assets")
    assert [a["name"] for a in listed["assets"]] == [unicodedata.normalize("NFC", "café.png")]
    path = urllib.parse.quote(decomposed)
    status, versions = await call(tenant.http, "GET", f"{stack.url}/assets/{path}")
    assert status == 200 and len(versions["versions"]) == 1
    status, _ = await submit(stack, tenant, json={"html": "<p>", "assets": [decomposed]})
    assert status == 202


async def test_a_huge_file_is_a_413_naming_it_and_the_gateway_goes_on(stack: Stack) -> None:
    tenant, huge = stack.tenant, b"x" * (stack.settings.max_file_bytes + 1)
    status, body = await submit(stack, tenant, data=form({"huge.css": huge}, {"html": "<p>"}))
    assert (status, body["error"]["type"], body["error"]["field"]) == (413, "too_large", "huge.css")
    status, _ = await call(tenant.http, "GET", f"{stack.url}/assets")
    assert status == 200

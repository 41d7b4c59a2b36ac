"""When a page's resources fail a job (`failOnResourceHttpStatusCodes`,
`options.fail_on_resource_status`), which CSS media features it sees
(`emulatedMediaFeatures`, `options.media_features`), and `downloadFrom`'s refusal: on the
whole stack, against a real HTTP server the page reaches."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from aiohttp import web

from tests.conftest import Stack, serving
from tests.integration.gotenberg_forms import PNG, settings  # noqa: F401  (a fixture)
from tests.integration.test_gotenberg import curl, pdftotext


@pytest.fixture
async def site() -> AsyncIterator[str]:
    """A page whose logo answers 404 and whose stylesheet answers 500 (both with a body,
    so Chromium still gets a response); the base URL."""

    async def page(request: web.Request) -> web.Response:
        return web.Response(
            content_type="text/html",
            text="<!doctype html><link rel=stylesheet href=/broken.css>"
            "<h1>Quarterly 31</h1><img src=/missing.png><img src=/fine.png>",
        )

    async def missing(request: web.Request) -> web.Response:
        return web.Response(status=404, text="no such logo")

    async def broken(request: web.Request) -> web.Response:
        return web.Response(status=500, content_type="text/css", text="/* down */")

    async def fine(request: web.Request) -> web.Response:
        return web.Response(body=PNG, content_type="image/png")

    app = web.Application()
    app.router.add_get("/page", page)
    app.router.add_get("/missing.png", missing)
    app.router.add_get("/broken.css", broken)
    app.router.add_get("/fine.png", fine)
    async with serving(app) as base:
        yield base


async def _convert_url(stack: Stack, url: str, *fields: str) -> tuple[int, dict[str, str], bytes]:
    args = ["--form", f"url={url}"]
    for field in fields:
        args += ["--form-string", field]
    return await asyncio.to_thread(curl, stack, "/forms/chromium/convert/url", *args)


async def test_a_resource_answering_a_listed_status_fails_the_form_naming_it(
    stack: Stack, site: str
) -> None:
    status, _, body = await _convert_url(
        stack, f"{site}/page", "failOnResourceHttpStatusCodes=[404]"
    )
    assert status == 409, body
    assert b"404" in body and f"{site}/missing.png".encode() in body, body
    status, _, body = await _convert_url(
        stack, f"{site}/page", "failOnResourceHttpStatusCodes=[599]"
    )  # X99: the whole class, as Gotenberg reads it
    assert status == 409, body
    assert b"500" in body and f"{site}/broken.css".encode() in body, body
    assert b"missing.png" not in body  # a 404 is no 5xx


async def test_statuses_not_listed_ignored_hosts_or_no_list_print_the_page(
    stack: Stack, site: str
) -> None:
    ignored = ("failOnResourceHttpStatusCodes=[499, 599]",
               'ignoreResourceHttpStatusDomains=["HTTP://127.0.0.1:1/"]')  # fmt: skip
    for fields in (("failOnResourceHttpStatusCodes=[403, 502]",), ignored, ()):
        status, _, body = await _convert_url(stack, f"{site}/page", *fields)
        assert status == 200, body
        assert "Quarterly 31" in pdftotext(body)


async def test_a_native_job_fails_naming_the_resource_and_its_status(
    stack: Stack, site: str
) -> None:
    accepted = await stack.submit(
        {"url": f"{site}/page", "options": {"fail_on_resource_status": [499]}}
    )
    job = await stack.finished(accepted["id"], timeout=300)
    assert job["status"] == "failed", job
    text = json.dumps(job["error"])
    assert "HTTP 404" in text and f"{site}/missing.png" in text, job


DARK_OR_LIGHT = (
    "<!doctype html><style>"
    ".dark { display: none }"
    "@media (prefers-color-scheme: dark) { .dark { display: block } .light { display: none } }"
    "</style><p class=dark>Night edition</p><p class=light>Day edition</p>"
)


async def test_emulated_media_features_change_what_the_pdf_shows(
    stack: Stack, tmp_path: Path
) -> None:
    index = tmp_path / "index.html"
    index.write_text(DARK_OR_LIGHT)
    route = "/forms/chromium/convert/html"
    dark = json.dumps([{"name": "prefers-color-scheme", "value": "dark"}])
    status, _, body = await asyncio.to_thread(
        curl, stack, route, "--form", f"files=@{index}",
        "--form-string", f"emulatedMediaFeatures={dark}",
    )  # fmt: skip
    assert status == 200, body
    text = pdftotext(body)
    assert "Night edition" in text and "Day edition" not in text, text
    status, _, body = await asyncio.to_thread(curl, stack, route, "--form", f"files=@{index}")
    assert status == 200, body
    text = pdftotext(body)
    assert "Day edition" in text and "Night edition" not in text, text


async def test_a_native_job_sees_its_media_features_in_screen_media_too(
    stack: Stack, tmp_path: Path
) -> None:
    """The page writes what `matchMedia` says into its text: the feature holds with
    `emulate_media` `screen` as in print."""
    html = (
        "<!doctype html><p id=out>?</p><script>document.getElementById('out').textContent ="
        " matchMedia('(prefers-reduced-motion: reduce)').matches ? 'Calm page' : 'Busy page'"
        "</script>"
    )
    features = [{"name": "prefers-reduced-motion", "value": "reduce"}]
    path = await stack.rendered(
        {"html": html, "options": {"media_features": features, "emulate_media": "screen"}},
        tmp_path,
    )
    assert "Calm page" in pdftotext(path.read_bytes())


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("failOnResourceHttpStatusCodes", "[700]"),
        ("failOnResourceHttpStatusCodes", '["404"]'),
        ("failOnResourceHttpStatusCodes", "404"),
        ("failOnResourceHttpStatusCodes", "[404"),
        ("emulatedMediaFeatures", '[{"name": "prefers-colour-scheme", "value": "dark"}]'),
        ("emulatedMediaFeatures", '[{"name": "prefers-color-scheme", "value": "dim"}]'),
        ("emulatedMediaFeatures", '[{"name": "prefers-color-scheme"}]'),
        ("emulatedMediaFeatures", '{"name": "prefers-color-scheme", "value": "dark"}'),
        ("ignoreResourceHttpStatusDomains", '["bad host!"]'),
        ("ignoreResourceHttpStatusDomains", '"cdn.example"'),
        ("downloadFrom", '[{"url": "http://169.254.169.254/latest/meta-data"}]'),
    ],
)
async def test_a_bad_or_refused_field_is_a_400_naming_it(
    stack: Stack, tmp_path: Path, field: str, value: str
) -> None:
    index = tmp_path / "index.html"
    index.write_text("<!doctype html><p>x</p>")
    codes = ("--form-string", "failOnResourceHttpStatusCodes=[404]")
    status, _, body = await asyncio.to_thread(
        curl, stack, "/forms/chromium/convert/html", "--form", f"files=@{index}",
        *(codes if field == "ignoreResourceHttpStatusDomains" else ()),
        "--form-string", f"{field}={value}",
    )  # fmt: skip
    assert status == 400, body
    assert field.encode() in body, body
    if field == "downloadFrom":
        assert b"SSRF" in body, body


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({"fail_on_resource_status": [99]}, "options.fail_on_resource_status"),
        ({"fail_on_resource_status": [True]}, "options.fail_on_resource_status"),
        ({"media_features": [{"name": "hover", "value": "none"}]}, "options.media_features"),
        ({"ignore_resource_status_hosts": ["cdn.example"]}, "options.ignore_resource_status"),
        (
            {"fail_on_resource_status": [404], "ignore_resource_status_hosts": ["a b"]},
            "options.ignore_resource_status_hosts",
        ),
        (
            {"media_features": [{"name": "forced-colors", "value": "active", "x": 1}]},
            "options.media_features",
        ),
        (
            {"media_features": [{"name": "forced-colors", "value": "none"}] * 2},
            "options.media_features",
        ),
    ],
)
async def test_a_bad_native_option_is_a_400_naming_it(
    stack: Stack, options: dict[str, object], named: str
) -> None:
    body = {"html": "<p>x</p>", "options": options}
    async with stack.client.post(f"{stack.url}/jobs", json=body) as reply:
        assert reply.status == 400, await reply.text()
        error = (await reply.json())["error"]
    assert str(error["field"]).startswith(named), error


async def test_a_table_of_contents_is_built_in_the_media_features_asked_for(
    stack: Stack, tmp_path: Path
) -> None:
    """The table of contents judges headings visible in print media with the job's
    features kept: a heading only a dark page shows is listed."""
    html = (
        "<style>.night { display: none }"
        "@media (prefers-color-scheme: dark) { .night { display: block } }</style>"
        "<nav data-toc></nav><h1>Morning</h1><h1 class=night>Midnight</h1>"
    )
    features = [{"name": "prefers-color-scheme", "value": "dark"}]
    path = await stack.rendered(
        {"html": html, "options": {"toc": True, "media_features": features}}, tmp_path
    )
    text = pdftotext(path.read_bytes())
    assert text.count("Midnight") == 2, text  # the heading and its entry

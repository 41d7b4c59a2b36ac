"""The console and `/docs` as a person sees them, in real Chromium against the real stack
(`tests/browser.py`: the renderer's own DevTools client over a pipe).

Verifies, each against what was broken before (issue 32):
- `/docs` shows a request body's fields, nested ones included (`items` → `filename`),
  and never an object's default text (`[object HTMLDivElement]`); the error types are a
  list, each with its meaning;
- on a 390 px phone the console's header keeps every part on screen, none overlapping
  another, and no page scrolls sideways;
- a batch's bar is coloured by its outcome: never green for a failed or cancelled batch
  (the colour of its status word), green for one whose items were all rendered;
- the jobs list rides out a gateway that stops answering: it says so, keeps the rows,
  and shows what changed meanwhile once the gateway answers again, without a reload;
- a download link that expired while the page was open is replaced by a fresh one when
  clicked, and the PDF is downloaded.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import replace
from typing import Any

import pytest

from services.core.runtime.settings import Settings
from tests.browser import Page, open_page
from tests.conftest import Stack, eventually


@pytest.fixture
async def api(settings: Settings) -> AsyncIterator[Stack]:
    """The gateway and the projector: jobs are accepted and listed, none is rendered."""
    stack = Stack(settings)
    await stack.start("gateway", "projector")
    yield stack
    await stack.close()


async def signed_in(page: Page, stack: Stack, fragment: str = "#/jobs") -> None:
    await page.goto(f"{stack.url}/console")
    await page.until("document.getElementById('api-key')", "the sign-in form")
    await page.type("#api-key", stack.tenant.key)
    await page.press_enter()
    await page.until("location.hash.startsWith('#/jobs')", "the jobs view after sign-in")
    await page.js(f"location.hash = {json.dumps(fragment)}")
    await page.js("window.loadedOnce = true")  # gone if the page reloads


async def test_docs_show_a_bodys_nested_fields_and_never_an_objects_default_text(api, chromium):
    async with open_page(chromium) as page:
        await page.goto(f"{api.url}/docs")
        await page.until("document.getElementById('op-post_batches')", "the operations drawn")
        await page.js("document.querySelectorAll('details').forEach((d) => { d.open = true })")
        assert "[object" not in await page.js("document.body.innerText")
        body = "document.querySelector('#op-post_batches .body ul.fields')"
        nested = await page.js(
            f"[...{body}.children].find((li) => li.querySelector('.field-name').textContent"
            " === 'items')?.querySelector('ul.fields')?.innerText"
        )
        assert nested is not None, "the items' own fields are not shown"
        assert "filename" in nested and "url" in nested and "data" in nested
        lines = await page.js("document.querySelector('#op-post_batches').innerText")
        assert "application/x-ndjson" in lines and '"filename": "invoice-1.pdf"' in lines
        jobs = await page.js("document.querySelector('#op-post_jobs .body').innerText")
        assert "A Markdown document with a table" in jobs and '"markdown": "# Delivery' in jobs
        assert '"template": "<h1>Invoice {{ number }}</h1>' in jobs  # the default one too
        types = await page.js("document.querySelectorAll('#schema-ErrorType li').length")
        async with api.client.get(f"{api.url}/openapi.json") as response:
            document = await response.json()
        assert types == len(document["components"]["schemas"]["ErrorType"]["enum"])  # a list


HEADER = (
    "[document.querySelector('.brand'), ...document.querySelectorAll('#nav a'),"
    " document.getElementById('sign-out')]"
)


async def header_boxes(page: Page) -> list[dict[str, float]]:
    return await page.js(
        f"{HEADER}.map((e) => {{ const r = e.getBoundingClientRect();"
        " return {name: e.textContent.trim(), left: r.left, right: r.right, top: r.top,"
        " bottom: r.bottom}; })"
    )


def overlapping(a: dict[str, Any], b: dict[str, Any]) -> bool:
    return (
        a["left"] < b["right"]
        and b["left"] < a["right"]
        and a["top"] < b["bottom"]
        and (b["top"] < a["bottom"])
    )


async def test_the_header_fits_a_390_px_phone_with_nothing_overlapping(api, chromium):
    await api.submit({"html": "<p>a job to list</p>"})
    async with open_page(chromium, width=390, height=844) as page:
        await signed_in(page, api)
        for view in ("#/jobs", "#/batches", "#/templates", "#/usage"):
            await page.js(f"location.hash = {json.dumps(view)}")
            await page.until("document.querySelector('main h1') && !document.querySelector("
                             "'main p')?.textContent.startsWith('Loading')", view)  # fmt: skip
            width = await page.js("window.innerWidth")
            boxes = await header_boxes(page)
            assert width == 390 and len(boxes) == 6
            outside = [b["name"] for b in boxes if b["left"] < 0 or b["right"] > width]
            assert outside == [], (view, boxes)
            pairs = [(a["name"], b["name"]) for i, a in enumerate(boxes) for b in boxes[i + 1 :]
                     if overlapping(a, b)]  # fmt: skip
            assert pairs == [], (view, boxes)
            assert await page.js("document.documentElement.scrollWidth") <= width, view


async def test_a_batch_bar_is_coloured_by_its_outcome_never_green_when_it_failed(
    stack: Stack, chromium: str
):
    async def batch(body: dict[str, Any]) -> str:
        async with stack.client.post(f"{stack.url}/batches", json=body) as response:
            assert response.status == 202, await response.text()
            return str((await response.json())["id"])

    async def ended(batch_id: str) -> str | None:
        async with stack.client.get(f"{stack.url}/batches/{batch_id}") as response:
            status = (await response.json())["status"]
        return status if status in {"done", "failed", "cancelled"} else None

    items = [{"data": {"n": 1}}, {"data": {"n": 2}}]
    ids = {
        "failed": await batch({"template": "{{ missing.name }}", "items": items}),
        "done": await batch({"template": "<p>{{ n }}</p>", "items": items}),
    }
    slow = {"wait_for": {"selector": "#never", "timeout": 30}}
    ids["cancelled"] = await batch({"template": "<p>{{ n }}</p>", "items": items, "options": slow})
    async with stack.client.post(f"{stack.url}/batches/{ids['cancelled']}/cancel") as response:
        assert response.status in (200, 202), await response.text()
    for status, batch_id in ids.items():
        assert await eventually(lambda b=batch_id: ended(b), 60, f"the {status} batch") == status

    colour = "getComputedStyle({}).accentColor"
    async with open_page(chromium) as page:
        await signed_in(page, stack, "#/batches")
        await page.until("document.querySelectorAll('#batches progress').length === 3", "bars")
        green = await page.js(
            "getComputedStyle(document.querySelector('#batches [data-status=done]')).color"
        )
        for status, batch_id in ids.items():
            row = (
                f"document.querySelector('#batches a[href=\"#/batches/{batch_id}\"]').closest('tr')"
            )
            bar = await page.js(colour.format(f"{row}.querySelector('progress')"))
            word = await page.js(f"getComputedStyle({row}.querySelector('.status')).color")
            assert bar == word, (status, bar, word)  # the bar says what the word says
            assert (bar == green) == (status == "done"), (status, bar)
        await page.js(f"location.hash = '#/batches/{ids['failed']}'")
        await page.until("document.querySelector('#batch-summary [data-status=failed]')", "it")
        bar = await page.js(colour.format("document.getElementById('batch-progress')"))
        assert bar != green and await page.js(
            "document.getElementById('batch-progress').value === 2"
        )  # full, as every item ended: only its colour tells it failed


async def test_the_jobs_list_rides_out_an_unreachable_gateway_without_a_reload(api, chromium):
    first = await api.submit({"html": "<p>first</p>"})  # queued: no renderer runs
    note = "document.getElementById('jobs-outage')"
    async with open_page(chromium) as page:
        await signed_in(page, api)
        await page.until(f"document.querySelector('#jobs a[href=\"#/jobs/{first['id']}\"]')", "row")
        await page.block("*/jobs*")
        said = await page.until(f"{note}?.textContent", "the outage shown")
        assert "cannot be reached" in said
        assert await page.js(f"!!document.querySelector('#jobs a[href=\"#/jobs/{first['id']}\"]')")
        second = await api.submit({"html": "<p>second</p>"})  # while the page cannot see
        await page.unblock()
        row = f"document.querySelector('#jobs a[href=\"#/jobs/{second['id']}\"]')"
        await page.until(row, "the job submitted during the outage, listed", 15)
        await page.until(f"!{note}", "the outage note gone")
        assert await page.js("window.loadedOnce === true"), "the page was reloaded"


async def test_an_expired_download_link_is_refreshed_before_the_download(
    settings: Settings, chromium: str
):
    stack = Stack(replace(settings, url_ttl=10))  # the shortest lifetime a link may have
    await stack.start("gateway", "projector", "renderer")
    try:
        job = await stack.finished((await stack.submit({"html": "<p>keep me</p>"}))["id"])
        assert job["status"] == "done", job
        async with open_page(chromium) as page:
            await signed_in(page, stack, f"#/jobs/{job['id']}")
            link = "document.getElementById('job-download')"
            stale = await page.until(f"{link}.checkVisibility() && {link}.href", "the link")
            expires = f"Number(new URL({link}.href).searchParams.get('expires')) * 1000"
            await page.until(f"{expires} < Date.now()", "the link expired", 30)
            await page.click("#job-download")
            done = await eventually(
                lambda: next((d for d in page.downloads.values() if d.state != "inProgress"), None),
                30, "the download",
            )  # fmt: skip
            assert done.state == "completed" and done.url != stale
            assert done.path.read_bytes()[:5] == b"%PDF-"
            assert await page.js(f"{expires} > Date.now()"), "the link shown is the fresh one"
    finally:
        await stack.close()


async def test_outage_detection_does_not_hide_a_refusal(api, chromium):
    """A list refused for good (a bad key's 401 aside: an invalid filter is a 400) is shown
    as an error, not as an outage to wait out."""
    async with open_page(chromium) as page:
        await signed_in(page, api, "#/jobs?q=not%20an%20id")
        said = await page.until("document.querySelector('#jobs .error')?.textContent", "error")
        assert "q" in said and not await page.js("!!document.getElementById('jobs-outage')")

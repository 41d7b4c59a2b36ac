"""The web console at `/console`, driven in real Chromium as a person would, against the
real stack.

Verifies: the console's files are served without a key, each with a strict
Content-Security-Policy, `nosniff` and `no-referrer`, and nothing outside its folder is
served; a wrong key shows the API's error and signs no one in, the right one typed and
sent with Enter does, and is kept in `sessionStorage` only; a job submitted from the form
turns `done` on screen without a reload, with its download link, and its row in the list
reads `done`; a failed job shows its error type and message, and a message holding
`<img src=x onerror=…>` is shown as text (no element made, no script run), and its
webhook redelivered from its button shows a second attempt without a reload; a stored
template's preview is rendered and shown as an image through its signed link; a batch
paused from its button (with the keyboard) stops moving on screen (the counts shown stay
put while paused), the focus moves to Resume, and after resume it moves again until the
archive link appears; item file names holding markup show as text; sign out forgets the
key, and so does a revocation while the console watches a job (signed out within
seconds, saying why); with S3 storage the policy also admits images from the bucket's
origin, nothing more; a job that failed on its page shows its diagnosis (console lines
as text, the pending `wait_for`, the screenshot).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from dataclasses import replace
from typing import Any

import pyppeteer
import pyppeteer.connection
import pytest
from websockets.legacy.client import connect as websocket_connect

from services.core.runtime.settings import Settings
from tests import csp
from tests.conftest import Receiver, Stack, admin_call, eventually

HOSTILE = "<img src=x onerror=window.pwned=1>"
ENTITY_NAME = "&lt;img src=x onerror=window.pwned=1&gt;"
"""A batch item's file name that markup would turn into an element once its entities were
decoded (file names cannot hold `<` itself: `core/model/filenames.py`); shown as text, it keeps
its `&lt;` as typed."""

CONSOLE_IMAGES = {"'self'", "data:", "blob:"}
"""Where the console's images may come from (docs/console.md): its own files, and the
previews it draws (data: and blob: URLs it makes itself); with S3, the bucket too."""


def assert_console_policy(header: str, *storage: str) -> None:
    """The console's policy as docs/console.md promises it, images and requests also
    from `storage` (the S3 origin the signed URLs name) and from nowhere else."""
    csp.assert_strict(header, images=CONSOLE_IMAGES | set(storage), connects={"'self'", *storage})


SLOW_ITEM = (
    "<p>Invoice {{ number }}</p>"
    "<script>setTimeout(() => { document.body.dataset.ready = '1' }, 300)</script>"
)
"""A batch item that takes 300 ms or more, so a batch of 20 runs long enough to pause."""


@pytest.fixture
async def browser(chromium: str) -> AsyncIterator[Any]:
    # pyppeteer's own websocket import is for an older `websockets`: the legacy client is
    # the same protocol under its current name.
    # The swap lasts the launch alone (the websocket is opened there): pyppeteer's own
    # name is put back for whatever else runs in this process.
    own, pyppeteer.connection.ws_connect = pyppeteer.connection.ws_connect, websocket_connect
    try:
        launched = await pyppeteer.launch(
            executablePath=chromium, args=["--no-sandbox"], headless=True,
            handleSIGINT=False, handleSIGTERM=False, handleSIGHUP=False,
        )  # fmt: skip
    finally:
        pyppeteer.connection.ws_connect = own
    yield launched
    await launched.close()


class Console:
    """One tab on the console: open it, sign in, and read the page with deadlines."""

    def __init__(self, stack: Stack, page: Any) -> None:
        self.stack, self.page = stack, page
        self.response: Any = None

    async def open(self, fragment: str = "") -> None:
        self.response = await self.page.goto(f"{self.stack.url}/console{fragment}")
        await self.until("document.querySelector('main h1')", "the console's first view")
        await self.js("window.loadedOnce = true")  # gone if the page reloads

    async def sign_in(self, key: str) -> None:
        await self.page.type("#api-key", key)
        await self.page.keyboard.press("Enter")

    async def until(self, expression: str, what: str, timeout: float = 30) -> Any:
        """Poll a JavaScript expression in the page until it is truthy; its value (an
        element found is `True`: a DOM node does not cross to Python)."""
        wrapped = f"(() => {{ const v = ({expression}); return v instanceof Node || v }})()"
        return await eventually(lambda: self.js(wrapped), timeout, what)

    async def shown(self, element_id: str) -> bool:
        """Whether the element is on screen (not `hidden`, nor hidden by a style)."""
        found = f"document.getElementById({json.dumps(element_id)})"
        return bool(await self.js(f"{found}?.checkVisibility()"))

    async def js(self, expression: str) -> Any:
        """The value of a JavaScript expression in the page."""
        return await self.page.evaluate(expression, force_expr=True)

    async def text(self, selector: str) -> str:
        found = await self.page.querySelector(selector)
        return "" if found is None else await self.page.evaluate("(e) => e.textContent", found)

    async def go(self, fragment: str) -> None:
        await self.js(f"location.hash = {json.dumps(fragment)}")

    async def replace_value(self, selector: str, text: str) -> None:
        """Select what a field holds and type `text` over it."""
        await self.page.focus(selector)
        await self.page.keyboard.down("Control")
        await self.page.keyboard.press("a")
        await self.page.keyboard.up("Control")
        await self.page.keyboard.press("Backspace")
        await self.page.type(selector, text)


@pytest.fixture
async def console(stack: Stack, browser: Any) -> Console:
    page = await browser.newPage()
    # what the page logs, printed with a failing test's output
    page.on("console", lambda message: print("console:", message.type, message.text))
    page.on("pageerror", lambda error: print("page error:", error))
    return Console(stack, page)


async def signed_in(console: Console) -> Console:
    await console.open()
    await console.sign_in(console.stack.tenant.key)
    await console.until("location.hash.startsWith('#/jobs')", "the jobs view after sign-in")
    return console


async def test_console_files_are_served_with_a_strict_policy_and_nothing_else(
    settings: Settings,
) -> None:
    stack = Stack(settings)
    await stack.start("gateway")
    try:
        served = [("/console", "text/html"), ("/console/console.js", "text/javascript"),
                  ("/console/console.css", "text/css"), ("/console/nope.js", None),
                  ("/console/..%2Fapp.py", None), ("/console/console.py", None)]  # fmt: skip
        for path, kind in served:
            async with stack.client.get(f"{stack.url}{path}", headers={}) as response:
                assert_console_policy(response.headers["Content-Security-Policy"])
                assert response.headers["X-Content-Type-Options"] == "nosniff"
                assert response.headers["Referrer-Policy"] == "no-referrer"
                if kind is None:
                    assert response.status == 404, path
                    assert (await response.json())["error"]["type"] == "not_found"
                else:
                    assert response.status == 200, path
                    assert response.content_type == kind
    finally:
        await stack.close()


async def test_with_s3_storage_the_policy_lets_images_come_from_the_bucket_only(
    s3_settings: Settings,
) -> None:
    """A preview's signed URL points at the S3 endpoint: the page may show images from
    there, and still from nowhere else (scripts, styles and requests stay 'self')."""
    stack = Stack(s3_settings)
    await stack.start("gateway")
    try:
        async with stack.client.get(f"{stack.url}/console", headers={}) as response:
            policy = response.headers["Content-Security-Policy"]
    finally:
        await stack.close()
    assert_console_policy(policy, s3_settings.s3_endpoint.rstrip("/"))


async def test_a_person_signs_in_submits_a_job_and_watches_it_turn_done(console: Console):
    await console.open()
    assert_console_policy(console.response.headers["content-security-policy"])
    await console.sign_in("prk_not-a-key-at-all")
    error = await console.until(
        "document.querySelector('#sign-in-error')?.textContent", "the wrong key's error"
    )
    assert "key" in error.lower()
    assert await console.js("document.getElementById('nav').hidden")

    await console.replace_value("#api-key", console.stack.tenant.key)
    await console.page.keyboard.press("Enter")
    await console.until("location.hash.startsWith('#/jobs')", "the jobs view")
    stored = await console.js("[sessionStorage.length, localStorage.length]")
    assert stored == [1, 0]
    assert await console.js("document.getElementById('api-key') === null")

    await console.replace_value("#job-data", '{"name": "Grace"}')
    await console.page.click("#job-submit button[type=submit]")
    job_id = await console.until(
        "location.hash.match(/^#\\/jobs\\/(.+)$/)?.[1]", "the new job's own view"
    )
    await console.until(
        "document.querySelector('#job-summary [data-status=done]')", "the job shown done", 60
    )
    href = await console.js("document.getElementById('job-download').href")
    assert "/files/" in href
    assert await console.shown("job-download")
    assert not await console.shown("job-cancel")
    assert "done" in await console.text("#job-timeline")
    assert await console.js("window.loadedOnce === true"), "the page reloaded"

    await console.go("#/jobs")
    row = f"document.querySelector('#jobs a[href=\"#/jobs/{job_id}\"]')"
    await console.until(f"{row}?.closest('tr').querySelector('[data-status=done]')", "its row")

    await console.page.click("#sign-out")
    await console.until("document.getElementById('api-key')", "the sign-in form again")
    assert await console.js("sessionStorage.length") == 0


async def test_a_person_submits_markdown_as_a_webp_from_the_console(console: Console):
    await signed_in(console)
    # The jobs view is drawn on the hash change after sign-in, and its list loaded after:
    # until then the form below it moves, and a click may land beside the radio button.
    await console.until(
        "document.getElementById('job-submit') &&"
        " !document.getElementById('jobs').textContent.includes('Loading')",
        "the job form, below the loaded list",
    )
    await console.page.click("input[name=source-kind][value=markdown]")
    assert await console.js("document.querySelector('input[value=markdown]').checked")
    # `{{ x }}` would fail a template (x is undefined): Markdown prints it as it is.
    markdown = "# Stock {{ x }}\n\n| item | qty |\n|---|---|\n| ink | 2 |"
    await console.replace_value("#job-source", markdown)
    await console.page.select("#job-output", "webp")
    await console.page.click("#job-submit button[type=submit]")
    job_id = await console.until(
        "location.hash.match(/^#\\/jobs\\/(.+)$/)?.[1]", "the new job's own view"
    )
    job = await console.stack.finished(job_id)
    assert job["status"] == "done", job
    async with console.stack.client.get(job["url"]) as response:
        assert response.headers["Content-Type"] == "image/webp"
        assert (await response.read())[8:12] == b"WEBP"


async def test_a_failed_jobs_error_is_shown_as_text_never_as_markup(
    console: Console, receiver: Receiver
):
    stack = console.stack
    template = f"{{{{ foo['{HOSTILE}'] }}}}"
    body = {"template": template, "data": {"foo": {}}, "webhook_url": receiver.url}
    bad = await stack.submit(body)
    await stack.finished(bad["id"])
    await signed_in(console)
    await console.go(f"#/jobs/{bad['id']}")
    await console.until("document.querySelector('#job-error .error-message')", "the error")
    assert await console.text("#job-error .error-type") == "template"
    assert HOSTILE in await console.text("#job-error .error-message")
    assert await console.js("document.querySelectorAll('main img').length") == 0
    assert await console.js("window.pwned === undefined")
    assert not await console.shown("job-cancel")
    assert not await console.shown("job-download")

    rows = "document.querySelectorAll('#job-webhooks tbody td.num:first-child').length"
    await console.until(f"{rows} === 1", "the webhook's delivery attempt")
    await console.page.click("#job-redeliver")
    await console.until(f"{rows} === 2", "the redelivery's attempt, without a reload")
    assert len(receiver.requests) == 2


async def test_a_job_that_failed_on_its_page_shows_its_diagnosis(console: Console):
    """What the page logged, the condition still pending and the screenshot are on the
    job's page; a console line holding markup is shown as text."""
    stack = console.stack
    html = f"<p>never ready</p><script>console.error({json.dumps(HOSTILE)})</script>"
    wait_for = {"selector": "#never-there", "timeout": 1}
    body = {"html": html, "options": {"wait_for": wait_for}}
    failed = await stack.finished((await stack.submit(body))["id"])
    assert failed["status"] == "failed", failed
    await signed_in(console)
    await console.go(f"#/jobs/{failed['id']}")
    shot = "document.querySelector('#job-diagnosis img.diagnosis-screenshot')"
    width = await console.until(
        f"{shot}?.complete && {shot}.naturalWidth", "the diagnosis' screenshot loaded", 30
    )
    assert width > 0
    shown = await console.text("#job-diagnosis")
    assert HOSTILE in shown, shown
    assert "#never-there" in shown
    assert await console.js("document.querySelectorAll('#job-diagnosis img').length") == 1
    assert await console.js("window.pwned === undefined")


async def test_a_stored_templates_preview_is_shown_as_an_image(console: Console):
    stack = console.stack
    body = {"name": "greeting", "body": "<h1 style='font-size:40px'>Hi {{ name }}</h1>"}
    async with stack.client.post(f"{stack.url}/templates", json=body) as response:
        assert response.status == 201, await response.text()
    await signed_in(console)
    await console.go("#/templates")
    await console.until("document.querySelector('#templates a')", "the template's row")
    await console.page.click("#templates a")
    await console.until("document.getElementById('preview-data')", "the template's view")
    assert "Hi {{ name }}" in await console.text("#template-body")
    await console.replace_value("#preview-data", '{"name": "Ada"}')
    await console.page.click("#preview button[type=submit]")
    width = await console.until(
        "document.getElementById('preview-image')?.complete &&"
        " document.getElementById('preview-image').naturalWidth",
        "the preview image loaded", 60,
    )  # fmt: skip
    assert width > 100


async def counts(console: Console) -> list[str]:
    return await console.js(
        "['done', 'failed'].map(k => document.querySelector(`#batch-summary .count-${k}`)"
        "?.textContent)"
    )


async def stays(read: Any, value: Any, seconds: float, what: str) -> None:
    """Look at `read()` every 0.1 s for `seconds`: it must keep being `value` (a paused
    batch is seen standing still only by watching it for a while)."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        assert await read() == value, what
        await asyncio.sleep(0.1)


async def none_running(stack: Stack, batch_id: str) -> bool:
    path = f"{stack.url}/batches/{batch_id}/items?status=running"
    async with stack.client.get(path) as response:
        return not (await response.json())["items"]


async def test_a_batch_paused_from_its_button_stops_and_moves_again_on_resume(
    console: Console,
):
    stack = console.stack
    items = [{"data": {"number": n}, "filename": f"{ENTITY_NAME}{n}.pdf"} for n in range(20)]
    options = {"wait_for": {"expression": "document.body.dataset.ready", "timeout": 10}}
    async with stack.client.post(
        f"{stack.url}/batches", json={"template": SLOW_ITEM, "items": items, "options": options}
    ) as response:
        assert response.status == 202, await response.text()
        batch_id = (await response.json())["id"]
    await signed_in(console)
    await console.go(f"#/batches/{batch_id}")
    await console.until(
        "parseInt(document.querySelector('#batch-summary .count-done')?.textContent) >= 1",
        "the first item shown done", 60,
    )  # fmt: skip
    await console.page.focus("#batch-pause")  # the controls work from the keyboard
    await console.page.keyboard.press("Enter")
    await console.until("document.querySelector('#batch-summary [data-status=paused]')", "paused")
    assert await console.js("document.getElementById('batch-pause').disabled")
    assert not await console.shown("batch-archive")
    await eventually(lambda: none_running(stack, batch_id), 30, "no item running")

    async def settled() -> list[str] | None:  # what the page shows once the API agrees
        async with stack.client.get(f"{stack.url}/batches/{batch_id}") as response:
            batch = await response.json()
        shown = await counts(console)
        return shown if shown == [f"{batch['done']} done", f"{batch['failed']} failed"] else None

    held = await eventually(settled, 10, "the page showing the paused batch's counts")
    await stays(lambda: counts(console), held, 2.0, "the counts shown while paused")
    done_paused = int(held[0].split()[0])
    assert done_paused < 20

    assert await console.js("document.activeElement.id") == "batch-resume"
    await console.page.keyboard.press("Enter")
    await console.until(
        f"parseInt(document.querySelector('#batch-summary .count-done')?.textContent)"
        f" > {done_paused}",
        "the bar moving after resume", 60,
    )  # fmt: skip
    await console.until(
        "document.getElementById('batch-archive').checkVisibility()", "the archive", 60
    )
    assert await console.js("document.querySelectorAll('main img').length") == 0
    assert ENTITY_NAME in await console.text("#batch-items")


async def test_a_console_watching_a_job_is_signed_out_within_seconds_of_its_keys_revocation(
    settings: Settings, browser: Any
):
    """Its live stream ends with the revocation (the console holds the key, nothing else:
    every call it makes is authenticated anew), and the next call it makes is refused."""
    stack = Stack(replace(settings, max_streams=1))
    await stack.start("gateway", "projector")  # no renderer: the job stays queued
    try:
        job_id = (await stack.submit({"html": "<p>watched</p>"}))["id"]
        console = Console(stack, await browser.newPage())
        await signed_in(console)
        await console.go(f"#/jobs/{job_id}")
        await console.until("document.querySelector('#job-summary [data-status=queued]')", "queued")
        stream_url = f"{stack.url}/jobs/{job_id}/stream"

        async def console_holds_the_stream() -> bool:  # the tenant's one slot is taken
            async with stack.client.get(stream_url) as response:
                return response.status == 429

        await eventually(console_holds_the_stream, 15, "the console's live stream open")
        keys = f"{stack.url}/admin/keys/{stack.tenant.key_id}"
        await admin_call(stack.client, "DELETE", keys, None, 204)
        said = await console.until(
            "document.getElementById('api-key') && "
            "document.getElementById('sign-in-error').textContent",
            "the sign-in form, saying why", 10,
        )  # fmt: skip
        assert "revoked" in said
        assert await console.js("sessionStorage.length") == 0
    finally:
        await stack.close()

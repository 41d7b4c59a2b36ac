"""Screenshots of the web console for docs/console.md: docs/img/console-*.png.

    .venv/bin/python scripts/console_screenshots.py [--out docs/img] [--views editor]

Starts what `pressroom dev` starts (embedded NATS and PostgreSQL, in a temporary folder)
and the five services in this process (the test suite's `Stack`), makes a tenant, a few
jobs, a stored template and a batch paused half way, then signs in to the console in
headless Chromium (driven as the tests drive it, `tests/browser.py`) and saves the
sign-in, jobs, job, batch, template and template editor views at 1440 px
(`console-<view>.png`) and on a 390 px phone (`console-<view>-390.png`; the editor's
live preview, below its editors there, as `console-editor-preview-390.png`).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from services.core.runtime.settings import Settings  # noqa: E402
from services.core.secrets.signing import new_secret  # noqa: E402
from services.dev import embedded_nats, embedded_postgres, free_port  # noqa: E402
from tests.browser import Page, open_page  # noqa: E402
from tests.conftest import ADMIN_KEY, SERVER_KEY, Stack, eventually  # noqa: E402

INVOICE = (ROOT / "examples" / "invoice.html.j2").read_text()
INVOICE_DATA = (ROOT / "examples" / "invoice.json").read_text()
FOOTER = (
    '<div style="font-size:9px;width:100%;text-align:center">Invoice {{ invoice.number }} · page '
    '<span class="pageNumber"></span> of <span class="totalPages"></span></div>'
)
SLOW_ITEM = (
    "<p>Invoice {{ number }}</p>"
    "<script>setTimeout(() => { document.body.dataset.ready = '1' }, 400)</script>"
)
GREETING = (
    "<style>body{font-family:sans-serif;margin:24px} h1{color:#14213d}</style>"
    "<h1>Hello {{ name }}</h1><p>Your order {{ order }} has shipped.</p>"
)


def settings_in(folder: Path, nats_url: str, database_url: str) -> Settings:
    return Settings(
        port=free_port(), metrics_port=0, data_dir=str(folder), nats_url=nats_url,
        database_url=database_url, storage_dir=str(folder / "files"),
        url_secret="screenshots", admin_key=ADMIN_KEY, server_key=SERVER_KEY,
        chromium=os.environ.get("PRESSROOM_CHROMIUM") or shutil.which("chromium") or "",
        webhook_secret=new_secret(), allow_private_networks=True,
        stream_max_bytes=256 * 2**20,
    )  # fmt: skip


async def call(stack: Stack, method: str, path: str, body: Any = None) -> Any:
    async with stack.client.request(method, f"{stack.url}{path}", json=body) as response:
        assert response.status < 300, await response.text()
        return await response.json()


async def seed(stack: Stack, views: tuple[str, ...]) -> dict[str, str]:
    """A few finished jobs (one failed), a template with two versions, a paused batch,
    and an invoice template to edit; only the invoice when only the editor is shot."""
    invoice = {"name": "invoice", "body": INVOICE, "footer": FOOTER}
    edited = await call(stack, "POST", "/templates", invoice)
    if views == ("editor",):
        return {"invoice": edited["id"], "job": "", "batch": "", "template": ""}
    for name in ("Ana", "Grace", "Ada"):
        body = {"template": GREETING, "data": {"name": name, "order": 7}}
        done = await call(stack, "POST", "/jobs", body)
    failed = await call(stack, "POST", "/jobs", {"template": "{{ customer.name }}"})
    await stack.finished(done["id"], 300)  # a loaded machine may be slow to start
    await stack.finished(failed["id"], 300)
    await call(
        stack, "POST", "/templates", {"name": "shipping-note", "body": "<h1>{{ name }}</h1>"}
    )
    template = await call(stack, "POST", "/templates", {"name": "shipping-note", "body": GREETING})
    items = [{"data": {"number": n}} for n in range(40)]
    options = {"wait_for": {"expression": "document.body.dataset.ready", "timeout": 10}}
    batch = await call(stack, "POST", "/batches", {"template": SLOW_ITEM, "items": items,
                                                   "options": options})  # fmt: skip

    async def some_done() -> bool:
        return (await call(stack, "GET", f"/batches/{batch['id']}"))["done"] >= 12

    await eventually(some_done, 300, "a third of the batch")
    await call(stack, "POST", f"/batches/{batch['id']}/pause")
    ids = {"job": done["id"], "batch": batch["id"], "template": template["id"]}
    return {**ids, "invoice": edited["id"]}


VIEWS = ("jobs", "job", "batch", "templates", "editor")
"""The views shot at each width, after sign-in (`sign-in` is shot before it)."""
WIDTHS = {1440: 900, 390: 844}
"""Each width and its screen's height: a laptop, and a phone (an iPhone 12 to 15)."""


async def show(page: Page, view: str, seeded: dict[str, str]) -> None:
    """Go to `view` and wait until it shows what the picture is for."""
    fragment, ready = {
        "jobs": ("#/jobs", "document.querySelector('#jobs table')"),
        "job": (f"#/jobs/{seeded['job']}", "document.querySelector('#job-timeline table')"),
        "batch": (f"#/batches/{seeded['batch']}",
                  "document.querySelector('#batch-summary [data-status=paused]') &&"
                  " document.querySelector('#batch-items table')"),
        "templates": (f"#/templates/{seeded['template']}",
                      "document.getElementById('preview-data')"),
        "editor": (f"#/templates/{seeded['invoice']}/edit",
                   "document.querySelector('#preview-pages canvas')"),
    }[view]  # fmt: skip
    if view == "editor":  # the sample data as typed earlier in this tab
        key = f"pressroom.console.sample.{seeded['invoice']}"
        await page.js(f"sessionStorage.setItem({json.dumps(key)}, {json.dumps(INVOICE_DATA)})")
    await page.js(f"location.hash = {json.dumps(fragment)}")
    await page.until(ready, view, 180)
    if view == "templates":
        await page.js(
            "document.getElementById('preview-data').value = "
            '\'{"name": "Ana", "order": "A-1042"}\''
        )
        await page.click("#preview button[type=submit]")
        await page.until("document.getElementById('preview-image')?.naturalWidth", "preview", 60)
    await page.js("window.scrollTo(0, 0)")


async def shoot(
    stack: Stack, seeded: dict[str, str], out: Path, views: tuple[str, ...] = VIEWS
) -> None:
    """`console-<view>.png` at 1440 px and `console-<view>-390.png` on a phone."""
    for width, height in WIDTHS.items():
        suffix = "" if width == 1440 else f"-{width}"
        async with open_page(stack.settings.chromium, width, height) as page:
            await page.goto(f"{stack.url}/console")
            await page.until("document.getElementById('api-key')", "the sign-in form")
            if "sign-in" in views:
                await page.screenshot(out / f"console-sign-in{suffix}.png")
            await page.type("#api-key", stack.tenant.key)
            await page.press_enter()
            await page.until("location.hash.startsWith('#/jobs')", "signed in")
            for view in [v for v in VIEWS if v in views]:
                await show(page, view, seeded)
                await page.screenshot(out / f"console-{view}{suffix}.png")
            if (
                width < 600 and "editor" in views
            ):  # the editor's preview is below its editors on a phone
                await page.js("document.getElementById('live-preview-title').scrollIntoView()")
                await page.screenshot(out / f"console-editor-preview{suffix}.png")


async def main(out: Path, views: tuple[str, ...]) -> None:
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="console-shots-") as tmp:
        folder = Path(tmp)
        async with embedded_nats(folder) as nats_url, embedded_postgres(folder) as pg:
            stack = Stack(settings_in(folder, nats_url, pg))
            await stack.start()
            try:
                await shoot(stack, await seed(stack, views), out, views)
            finally:
                await stack.close()
    for shot in sorted(out.glob("console-*.png")):
        print(f"{shot}: {shot.stat().st_size // 1024} KB")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "img")
    parser.add_argument(
        "--views", default=",".join(("sign-in", *VIEWS)), help="comma-separated (default all)"
    )
    args = parser.parse_args()
    asyncio.run(main(args.out, tuple(args.views.split(","))))

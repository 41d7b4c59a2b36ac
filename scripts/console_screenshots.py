"""Screenshots of the web console for the README: docs/img/console-*.png.

    .venv/bin/python scripts/console_screenshots.py [--out docs/img]

Starts what `pressroom dev` starts (embedded NATS and PostgreSQL, in a temporary folder)
and the five services in this process (the test suite's `Stack`), makes a tenant, a few
jobs, a stored template and a batch paused half way, then signs in to the console in
headless Chromium and saves the sign-in, jobs, job, batch and template views.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

import pyppeteer
import pyppeteer.connection
from websockets.legacy.client import connect as websocket_connect

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from services.core.settings import Settings  # noqa: E402
from services.core.signing import new_secret  # noqa: E402
from services.dev import embedded_nats, embedded_postgres, free_port  # noqa: E402
from tests.conftest import ADMIN_KEY, SERVER_KEY, Stack, eventually  # noqa: E402

INVOICE = (ROOT / "examples" / "invoice.html.j2").read_text()
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


async def seed(stack: Stack) -> dict[str, str]:
    """A few finished jobs (one failed), a template with two versions, a paused batch."""
    for name in ("Ana", "Grace", "Ada"):
        body = {"template": GREETING, "data": {"name": name, "order": 7}}
        done = await call(stack, "POST", "/jobs", body)
    failed = await call(stack, "POST", "/jobs", {"template": "{{ customer.name }}"})
    await stack.finished(done["id"])
    await stack.finished(failed["id"])
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

    await eventually(some_done, 60, "a third of the batch")
    await call(stack, "POST", f"/batches/{batch['id']}/pause")
    return {"job": done["id"], "batch": batch["id"], "template": template["id"]}


async def until(page: Any, expression: str) -> None:
    check = f"(() => {{ const v = ({expression}); return v instanceof Node || !!v }})()"
    await eventually(lambda: page.evaluate(check, force_expr=True), 60, expression)


async def shoot(stack: Stack, seeded: dict[str, str], out: Path) -> None:
    pyppeteer.connection.ws_connect = websocket_connect  # as in tests/integration/test_console
    browser = await pyppeteer.launch(
        executablePath=stack.settings.chromium, args=["--no-sandbox"],
        handleSIGINT=False, handleSIGTERM=False, handleSIGHUP=False,
    )  # fmt: skip
    try:
        page = await browser.newPage()
        await page.setViewport({"width": 1180, "height": 760})
        await page.goto(f"{stack.url}/console")
        await until(page, "document.getElementById('api-key')")
        await page.screenshot({"path": str(out / "console-sign-in.png")})
        await page.type("#api-key", stack.tenant.key)
        await page.keyboard.press("Enter")
        await until(page, "document.querySelector('#jobs table')")
        await page.screenshot({"path": str(out / "console-jobs.png")})
        await page.evaluate(f"location.hash = '#/jobs/{seeded['job']}'", force_expr=True)
        await until(page, "document.querySelector('#job-timeline table')")
        await page.screenshot({"path": str(out / "console-job.png")})
        await page.evaluate(f"location.hash = '#/batches/{seeded['batch']}'", force_expr=True)
        await until(page, "document.querySelector('#batch-summary [data-status=paused]')")
        await until(page, "document.querySelector('#batch-items table')")
        await page.screenshot({"path": str(out / "console-batch.png")})
        await page.evaluate(f"location.hash = '#/templates/{seeded['template']}'", force_expr=True)
        await until(page, "document.getElementById('preview-data')")
        await page.evaluate(
            "document.getElementById('preview-data').value = "
            "'{\"name\": \"Ana\", \"order\": \"A-1042\"}'", force_expr=True)  # fmt: skip
        await page.click("#preview button[type=submit]")
        await until(page, "document.getElementById('preview-image')?.naturalWidth")
        await page.screenshot({"path": str(out / "console-templates.png")})
    finally:
        await browser.close()


async def main(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="console-shots-") as tmp:
        folder = Path(tmp)
        async with embedded_nats(folder) as nats_url, embedded_postgres(folder) as pg:
            stack = Stack(settings_in(folder, nats_url, pg))
            await stack.start()
            try:
                await shoot(stack, await seed(stack), out)
            finally:
                await stack.close()
    for shot in sorted(out.glob("console-*.png")):
        print(f"{shot}: {shot.stat().st_size // 1024} KB")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "img")
    asyncio.run(main(parser.parse_args().out))

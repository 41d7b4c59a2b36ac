"""What the Gotenberg-compatible door costs against Pressroom's own, in one run.

The example invoice (examples/) is rendered `--jobs` times from 16 concurrent clients by
each route, on one stack (every service on this machine, embedded NATS and PostgreSQL,
local storage, keys off), alternating for `--rounds` rounds:

(g) Gotenberg's way: `POST /forms/chromium/convert/html` with the invoice as `index.html`,
    each request waiting for its job and answered with the PDF (sync mode);
(n) Pressroom's own: `POST /jobs` with the same HTML and the same print settings
    (Gotenberg's defaults: Letter, 0.39 in margins, no backgrounds, untagged), submitted
    by 16 clients, the oldest unfinished job's status read until all are done (as
    `render_throughput` (b) does), then every PDF downloaded from its signed link.

Prints documents/s of each per round and the median ratio (g)/(n) (target: at least
0.9): what the form's parsing, the file store and the held request cost.

    .venv/bin/python bench/gotenberg_cost.py [--jobs 200] [--rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import aiohttp

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from render_throughput import (  # noqa: E402
    CLIENTS,
    DATA,
    KEYS_OFF,
    TEMPLATE,
    environment,
    services,
    wait_done,
    wait_ready,
)

from services.core.sandbox.templating import render_html  # noqa: E402

GOTENBERG_OPTIONS = {
    "width": "8.5in", "height": "11in", "print_background": False, "tagged": False,
    "margin": {side: "0.39in" for side in ("top", "right", "bottom", "left")},
}  # fmt: skip
"""Pressroom's options for what a Gotenberg form with no fields asks."""


async def gotenberg_one(http: aiohttp.ClientSession, url: str, html: bytes) -> int:
    form = aiohttp.FormData()
    form.add_field("files", html, filename="index.html", content_type="text/html")
    async with http.post(f"{url}/forms/chromium/convert/html", data=form) as response:
        assert response.status == 200, await response.text()
        return len(await response.read())


async def native(http: aiohttp.ClientSession, url: str, html: bytes, count: int) -> float:
    """Documents/s of `count` jobs by Pressroom's own API, as `render_throughput` (b)
    drives it: CLIENTS clients submit them all, the oldest unfinished job's status is
    read until every one is done (`wait_done`), then every PDF is downloaded."""
    body = {"html": html.decode(), "options": GOTENBERG_OPTIONS}
    todo, ids = iter(range(count)), []

    async def submitter() -> None:
        for _ in todo:
            async with http.post(f"{url}/jobs", json=body) as response:
                assert response.status == 202, await response.text()
                ids.append((await response.json())["id"])

    started = time.perf_counter()
    await asyncio.gather(*(submitter() for _ in range(CLIENTS)))
    finished = await wait_done(http, url, None, ids)
    links = iter([job["url"] for job in finished if job["status"] == "done"])
    assert len(finished) == count

    async def downloader() -> None:
        for link in links:
            async with http.get(link) as response:
                assert response.status == 200
                await response.read()

    await asyncio.gather(*(downloader() for _ in range(CLIENTS)))
    return count / (time.perf_counter() - started)


async def run(one: Callable[[], Awaitable[int]], count: int) -> float:
    """Documents/s of `count` calls of `one` from CLIENTS concurrent clients."""
    todo = iter(range(count))

    async def client() -> None:
        for _ in todo:
            await one()

    started = time.perf_counter()
    await asyncio.gather(*(client() for _ in range(CLIENTS)))
    return count / (time.perf_counter() - started)


async def main(jobs: int, rounds: int) -> None:
    html = render_html(TEMPLATE, DATA).encode()
    names = ["gateway", "projector", "renderer", "notifier", "conductor"]
    with tempfile.TemporaryDirectory() as folder:
        data = Path(folder)
        async with environment(data) as env:
            env = {**env, **KEYS_OFF, "PRESSROOM_GOTENBERG_TIMEOUT": "600"}
            url = f"http://127.0.0.1:{env['PRESSROOM_PORT']}"
            async with (
                services(names, env, data),
                aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=900)) as http,
            ):
                await wait_ready(http, url)
                await run(lambda: gotenberg_one(http, url, html), CLIENTS)  # warm up
                await native(http, url, html, CLIENTS)
                ratios = []
                for number in range(1, rounds + 1):
                    g = await run(lambda: gotenberg_one(http, url, html), jobs)
                    n = await native(http, url, html, jobs)
                    ratios.append(g / n)
                    print(f"round {number}: gotenberg {g:.1f}/s, native {n:.1f}/s, "
                          f"ratio {g / n:.2f}", flush=True)  # fmt: skip
    print(f"median ratio gotenberg/native over {rounds} rounds of {jobs}: "
          f"{statistics.median(ratios):.2f} (target >= 0.9)")  # fmt: skip


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    arguments = parser.parse_args()
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(main(arguments.jobs, arguments.rounds))

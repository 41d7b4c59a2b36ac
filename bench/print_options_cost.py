"""What the printing options of issue 15 cost per job on the shared invoice
(`bench/workload/`), beside a plain job in the same run.

Each option is a job of the renderer's own path: `BrowserPool.render` (one tab), then,
for a mark, Chromium printing the mark's page (`renderer/marks.py`) and the finishing
worker placing it (`Finisher`). Options run in interleaved rounds, `--count` jobs each,
and the medians of the rounds are printed: wall milliseconds per job, and CPU
milliseconds per job of this process plus Chromium and the finishing worker (psutil, the
whole process tree), so a slower machine moves both columns of every line alike.

    .venv/bin/python bench/print_options_cost.py [--rounds 3] [--count 10]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import statistics
import sys
import time
from pathlib import Path

import jinja2
import psutil

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from services.core.model.errors import FinishingError
from services.core.model.pageoptions import Mark, PageOptions
from services.core.runtime.settings import Settings
from services.core.sandbox.jail import Jail, TemplateLimits
from services.renderer import finishing
from services.renderer.browser import BrowserPool, Html
from services.renderer.finishing.worker import Finisher
from services.renderer.marks import with_marks

ROOT = Path(__file__).resolve().parents[1]

OPTIONS = {
    "plain": PageOptions(),
    "outline": PageOptions(outline=True),
    "toc": PageOptions(toc=True),
    "watermark (text)": PageOptions(watermark=Mark(text="DRAFT")),
    "watermark + stamp": PageOptions(watermark=Mark(text="DRAFT"), stamp=Mark(text="PAID")),
    "png": PageOptions(output="png"),
}


def invoice() -> str:
    """The shared invoice, with a `<nav data-toc>` for the ToC job to fill."""
    workload = ROOT / "bench" / "workload"
    html = jinja2.Template((workload / "invoice.html.j2").read_text()).render(
        **json.loads((workload / "data.json").read_text())
    )
    return html.replace("<body>", "<body><nav data-toc></nav>", 1)


def tree_cpu() -> float:
    """CPU seconds of this process and every child (Chromium, the finishing worker)."""
    me = psutil.Process(os.getpid())
    total = sum(me.cpu_times()[:2])
    for child in me.children(recursive=True):
        with contextlib.suppress(psutil.Error):  # a Chromium helper that just ended
            total += sum(child.cpu_times()[:2])
    return total


async def job(pool: BrowserPool, finisher: Finisher, html: str, options: PageOptions) -> None:
    result = await pool.render(Html(html), options)
    context = await with_marks(pool, options, finisher.context)
    await Finisher(finisher.jail, context).finished(result, options)


async def round_of(
    pool: BrowserPool, finisher: Finisher, html: str, count: int
) -> dict[str, tuple[float, float]]:
    """Per option: (wall ms, CPU ms) per job."""
    spent = {}
    for name, options in OPTIONS.items():
        cpu, started = tree_cpu(), time.perf_counter()
        for _ in range(count):
            await job(pool, finisher, html, options)
        wall = (time.perf_counter() - started) * 1000 / count
        spent[name] = (wall, (tree_cpu() - cpu) * 1000 / count)
    return spent


async def main(rounds: int, count: int) -> None:
    html = invoice()
    limits = TemplateLimits(1024 * 2**20, 60.0, 50_000_000)
    settings = Settings()
    async with (
        BrowserPool(settings.chromium_path(), pages=1, timeout=60.0, max_output_bytes=50_000_000)
        as pool,
        Jail(1, limits, what="finishing the PDF", error=FinishingError) as jail,
    ):  # fmt: skip
        finisher = Finisher(jail, finishing.Context())
        for options in OPTIONS.values():  # warm-up: the worker imports pikepdf once
            await job(pool, finisher, html, options)
        results = [await round_of(pool, finisher, html, count) for _ in range(rounds)]
    print(f"shared invoice, one tab; {rounds} rounds of {count} jobs per option (medians)")
    print(f"{'option':20} {'wall ms/job':>12} {'CPU ms/job':>11} {'CPU vs plain':>13}")
    plain = statistics.median(r["plain"][1] for r in results)
    for name in OPTIONS:
        wall = statistics.median(r[name][0] for r in results)
        cpu = statistics.median(r[name][1] for r in results)
        print(f"{name:20} {wall:12.1f} {cpu:11.1f} {cpu / plain:12.2f}x")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--count", type=int, default=10)
    args = parser.parse_args()
    asyncio.run(main(args.rounds, args.count))

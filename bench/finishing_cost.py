"""What each finishing option costs per job on the shared invoice (`bench/workload/`).

The invoice is printed once by Chromium (with a title); then, in interleaved rounds, each
option's steps run on it `--count` times through a real finishing worker (`Finisher`,
the renderer's path: the PDF pickled to a worker process and back), and once in this
process for its CPU time alone. Prints milliseconds per job (median of the rounds) and
the file's size. A plain job's line is the cost of deciding that nothing applies.

    .venv/bin/python bench/finishing_cost.py [--rounds 3] [--count 20]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from pathlib import Path

import jinja2

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from services.core.model.errors import FinishingError
from services.core.model.pageoptions import (
    Attachment,
    Encrypt,
    FacturX,
    Metadata,
    PageOptions,
)
from services.core.runtime.settings import Settings
from services.core.sandbox.jail import Jail, TemplateLimits
from services.renderer import finishing
from services.renderer.browser import BrowserPool, Html, RenderResult
from services.renderer.finishing.worker import Finisher

ROOT = Path(__file__).resolve().parents[1]
CSV = "data:text/csv;base64," + "bnVtYmVyLHRvdGFsCklOVi0yMDI2LTAwNDIxNyw2OTM2ODQuNjgK" * 64
OPTIONS = {
    "plain": PageOptions(),
    "pdfa 2b": PageOptions(pdfa="2b"),
    "facturx": PageOptions(facturx=FacturX(xml=(ROOT / "examples/factur-x.xml").read_text())),
    "attachments (1 csv)": PageOptions(attachments=(Attachment("data.csv", CSV),)),
    "encrypt": PageOptions(encrypt=Encrypt(owner_password="owner-pass-1")),
}


async def printed() -> RenderResult:
    workload = ROOT / "bench" / "workload"
    html = jinja2.Template((workload / "invoice.html.j2").read_text()).render(
        **json.loads((workload / "data.json").read_text())
    )
    async with BrowserPool(
        Settings().chromium_path(), pages=1, timeout=30.0, max_output_bytes=50_000_000
    ) as pool:
        return await pool.render(Html(html), PageOptions(metadata=Metadata(title="Invoice")))


async def round_of(finisher: Finisher, pdf: RenderResult, count: int) -> dict[str, float]:
    times = {}
    for name, options in OPTIONS.items():
        started = time.perf_counter()
        for _ in range(count):
            await finisher.finished(pdf, options)
        times[name] = (time.perf_counter() - started) * 1000 / count
    return times


def in_process_ms(pdf: RenderResult, options: PageOptions, count: int) -> float:
    started = time.process_time()
    for _ in range(count):
        if finishing.needed(options):
            finishing.finish(pdf.data, options, finishing.Context())
    return (time.process_time() - started) * 1000 / count


async def main(rounds: int, count: int) -> None:
    pdf = await printed()
    limits = TemplateLimits(1024 * 2**20, 60.0, 50_000_000)
    async with Jail(1, limits, what="finishing the PDF", error=FinishingError) as jail:
        finisher = Finisher(jail, finishing.Context())
        await finisher.finished(pdf, OPTIONS["pdfa 2b"])  # the worker imports pikepdf once
        results = [await round_of(finisher, pdf, count) for _ in range(rounds)]
    print(f"shared invoice: {pdf.pages} pages, {len(pdf.data)} bytes; {rounds}x{count} jobs")
    print(f"{'option':22} {'worker ms/job':>14} {'CPU ms/job':>11} {'bytes':>9}")
    for name, options in OPTIONS.items():
        wall = statistics.median(r[name] for r in results)
        cpu = in_process_ms(pdf, options, count)
        size = len((await finisher_free(pdf, options)).data)
        print(f"{name:22} {wall:14.1f} {cpu:11.1f} {size:9}")


async def finisher_free(pdf: RenderResult, options: PageOptions) -> RenderResult:
    if not finishing.needed(options):
        return pdf
    data = finishing.finish(pdf.data, options, finishing.Context())
    return RenderResult(data, pdf.pages)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--count", type=int, default=20)
    args = parser.parse_args()
    asyncio.run(main(args.rounds, args.count))

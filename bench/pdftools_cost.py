"""What the PDF-tools engine costs over the library alone, same machine, same run.

Two jobs, on documents Chromium prints here (tagged, as rendering makes them):
- a merge of 100 ten-page PDFs;
- a PDF/A-2b conversion of a 300-page document.

Each runs, in alternating rounds, through the engine in its worker process (`Tools` on
the jail: inputs pickled to the worker and back, the limits, the active-content scan,
the outline entries, the report) and through the library alone in this process doing
the same work: pikepdf opening, extending and saving with object streams (and `qpdf
--empty --pages … --` for the merge, from files); for PDF/A, pikepdf's `prepare`, the
save with the level's settings and `validate_written`, as the engine does. Prints the
median seconds of each and the engine's ratio to the library, PASS at 1.3 or under.

    .venv/bin/python bench/pdftools_cost.py [--rounds 5]
"""

from __future__ import annotations

import argparse
import asyncio
import io
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import pikepdf
import pikepdf.pdfa

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from services.core.model.errors import FinishingError
from services.core.model.pageoptions import PageOptions
from services.core.runtime.settings import Settings
from services.core.sandbox.jail import Jail, TemplateLimits
from services.pdftools.context import Context, Limits
from services.pdftools.pipeline import Input
from services.pdftools.steps import Merge, PdfA
from services.pdftools.worker import Tools
from services.renderer.browser import BrowserPool, Html
from tests.integration.pdf_inputs import chapters

TARGET = 1.3
INPUTS = 100
COMPACT = {"object_stream_mode": pikepdf.ObjectStreamMode.generate, "compress_streams": True}


async def printed() -> tuple[bytes, bytes]:
    """A tagged ten-page document and a tagged 300-page one, printed by Chromium."""
    async with BrowserPool(
        Settings().chromium_path(), pages=1, timeout=300.0, max_output_bytes=500_000_000,
        max_pages=1000,
    ) as pool:  # fmt: skip
        ten = await pool.render(Html(chapters(10)), PageOptions())
        long = await pool.render(Html(chapters(300, paragraphs=6)), PageOptions())
    assert (ten.pages, long.pages) == (10, 300), (ten.pages, long.pages)
    return ten.data, long.data


def pikepdf_merge(documents: list[bytes]) -> bytes:
    merged = pikepdf.new()
    sources = [pikepdf.open(io.BytesIO(data)) for data in documents]
    for source in sources:
        merged.pages.extend(source.pages)
    out = io.BytesIO()
    merged.save(out, **COMPACT)
    return out.getvalue()


def qpdf_merge(paths: list[Path], folder: Path) -> bytes:
    target = folder / "merged.pdf"
    subprocess.run(
        [
            "qpdf",
            "--object-streams=generate",
            "--empty",
            "--pages",
            *map(str, paths),
            "--",
            str(target),
        ],
        check=True,
    )
    return target.read_bytes()


def pikepdf_pdfa(data: bytes) -> bytes:
    with pikepdf.open(io.BytesIO(data)) as pdf:
        pikepdf.pdfa.prepare(pdf, "2b")
        kwargs = pikepdf.pdfa.resolve_save_kwargs("2b")
        out = io.BytesIO()
        pdf.save(out, **kwargs)
    pikepdf.pdfa.validate_written(io.BytesIO(out.getvalue()), "2b", kwargs)
    return out.getvalue()


async def timed(action: Callable[[], Awaitable[object]]) -> float:
    started = time.perf_counter()
    await action()
    return time.perf_counter() - started


async def lifted(function: Callable[[], object]) -> object:
    return function()


async def main(rounds: int) -> None:
    ten, long = await printed()
    merge_inputs = [Input(f"part-{n:03}.pdf", ten) for n in range(INPUTS)]
    limits = TemplateLimits(2 * 2**30, 300.0, 500_000_000)
    with tempfile.TemporaryDirectory() as folder_name:
        folder = Path(folder_name)
        paths = []
        for n in range(INPUTS):
            paths.append(folder / f"part-{n:03}.pdf")
            paths[-1].write_bytes(ten)
        async with Jail(1, limits, what="the PDF steps", error=FinishingError) as jail:
            tools = Tools(jail, Context(), Limits(pages=100_000))
            contenders: dict[str, Callable[[], Awaitable[object]]] = {
                "merge: engine in its worker": lambda: tools.run(merge_inputs, [Merge()]),
                "merge: pikepdf alone": lambda: lifted(lambda: pikepdf_merge([ten] * INPUTS)),
                "merge: qpdf --empty --pages": lambda: lifted(lambda: qpdf_merge(paths, folder)),
                "pdf/a-2b: engine in its worker": lambda: tools.run(
                    [Input("long.pdf", long)], [PdfA(level="2b")]
                ),
                "pdf/a-2b: pikepdf alone": lambda: lifted(lambda: pikepdf_pdfa(long)),
            }
            for action in contenders.values():  # warm: imports, the worker's first call
                await action()
            times: dict[str, list[float]] = {name: [] for name in contenders}
            for _ in range(rounds):
                for name, action in contenders.items():
                    times[name].append(await timed(action))
    report(times, rounds)


def report(times: dict[str, list[float]], rounds: int) -> None:
    medians = {name: statistics.median(values) for name, values in times.items()}
    print(f"PDF tools, {rounds} alternating rounds, median seconds (same machine, same run)")
    for name, seconds in medians.items():
        print(f"  {name:34} {seconds:8.3f}")
    for job, library in (("merge", "pikepdf alone"), ("pdf/a-2b", "pikepdf alone")):
        ratio = medians[f"{job}: engine in its worker"] / medians[f"{job}: {library}"]
        verdict = "PASS" if ratio <= TARGET else "FAIL"
        print(f"{verdict}  {job}: engine / {library} = {ratio:.2f} (target <= {TARGET})")
    ratio = medians["merge: engine in its worker"] / medians["merge: qpdf --empty --pages"]
    print(
        f"      merge: engine / qpdf --empty --pages = {ratio:.2f} (one qpdf process, from files)"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    asyncio.run(main(parser.parse_args().rounds))

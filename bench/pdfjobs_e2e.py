"""PDF-tools jobs end to end through the service, against the library alone, same
machine, same run.

Two jobs, on documents Chromium prints here (tagged, as rendering makes them):
- a merge of 100 ten-page PDFs;
- a PDF/A-2b conversion of a 300-page document.

The service runs as deployed on one machine (`pressroom gateway`, `projector`,
`renderer`: separate processes, embedded NATS and PostgreSQL, local storage). Its inputs
are earlier jobs' documents (`{"job": id}`: the ten-page document is printed once by
a job and named 100 times), so each timed job is the whole path a user's is: the
submission checked and logged, the renderer reading every input from storage, the
pipeline in its worker process, the result stored and projected, `done` seen on the
job's stream and the file downloaded. Against it, in alternating rounds, the library
alone in this process on the same bytes: pikepdf opening, extending and saving with
object streams (and `qpdf --empty --pages … --`, one process, from files); for PDF/A,
pikepdf's `prepare`, the level's save and `validate_written`. Prints the median seconds
of each and the service's ratio to pikepdf, PASS at 1.3 or under.

    .venv/bin/python bench/pdfjobs_e2e.py [--rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import io
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aiohttp

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.pdftools_cost import TARGET, pikepdf_merge, pikepdf_pdfa, qpdf_merge
from bench.render_throughput import environment, services, tenant_key, wait_ready
from pressroom.client import Client, Job
from pressroom.client.pdf import step
from tests.integration.pdf_inputs import chapters

INPUTS = 100


PARTS: dict[str, list[tuple[float, float]]] = {}
"""Per job kind, each run's (renderer's attempt, the pipeline's steps) in seconds."""


DONE: dict[str, list[Job]] = {}
"""Per job kind, the jobs timed: their reports are read after the rounds, untimed."""


def through_service(
    client: Client, kind: str, inputs: list[dict[str, str]], steps: list[Any]
) -> bytes:
    """Submit, follow to `done`, download: the seconds a user waits."""
    job = client.wait(client.pdf_job(inputs, steps).id, timeout=600)
    assert job.status == "done", (job.status, job.error)
    out = io.BytesIO()
    client.download(job, out)
    DONE.setdefault(kind, []).append(job)
    return out.getvalue()


def parts_of(client: Client) -> None:
    """Each timed job's renderer attempt and pipeline steps, from its job and report."""
    for kind, jobs in DONE.items():
        for job in jobs:
            steps_ms = sum(s["milliseconds"] for s in client.report(job)["steps"])
            PARTS.setdefault(kind, []).append(((job.render_ms or 0) / 1000, steps_ms / 1000))


async def main(rounds: int) -> None:
    with tempfile.TemporaryDirectory() as folder_name:
        folder = Path(folder_name)
        async with environment(folder) as env:
            env = {**env, "PRESSROOM_PDF_MAX_PAGES": "100000",
                   "PRESSROOM_FINISHING_TIMEOUT": "600", "PRESSROOM_FINISHING_MEMORY":
                   str(4 * 2**30)}  # fmt: skip
            url = f"http://127.0.0.1:{env['PRESSROOM_PORT']}"
            async with services(["gateway", "projector", "renderer"], env, folder), \
                    aiohttp.ClientSession() as http:  # fmt: skip
                await wait_ready(http, url)
                key = await tenant_key(http, url, env)
                times = await asyncio.to_thread(measure, url, key, folder, rounds)
    report(times, rounds)


def measure(url: str, key: str | None, folder: Path, rounds: int) -> dict[str, list[float]]:
    """Each contender's seconds, round after round. The documents are printed by the
    service's own jobs, and the library works on those very bytes."""
    with Client(url, key, timeout=600) as client:
        sources, printed = {}, {}
        for name, html in (("ten", chapters(10)), ("long", chapters(300, paragraphs=6))):
            job = client.wait(client.submit(html=html).id, timeout=600)
            assert job.status == "done" and job.pages in (10, 300), job
            sources[name] = job.id
            out = io.BytesIO()
            client.download(job, out)
            printed[name] = out.getvalue()
        ten, long = printed["ten"], printed["long"]
        paths = []
        for n in range(INPUTS):
            paths.append(folder / f"part-{n:03}.pdf")
            paths[-1].write_bytes(ten)
        merge_inputs = [{"job": sources["ten"]}] * INPUTS
        contenders: dict[str, Callable[[], object]] = {
            "merge: the service, end to end": lambda: through_service(
                client, "merge", merge_inputs, [step("merge")]
            ),
            "merge: pikepdf alone": lambda: pikepdf_merge([ten] * INPUTS),
            "merge: qpdf --empty --pages": lambda: qpdf_merge(paths, folder),
            "pdf/a-2b: the service, end to end": lambda: through_service(
                client, "pdf/a-2b", [{"job": sources["long"]}], [step("pdfa", level="2b")]
            ),
            "pdf/a-2b: pikepdf alone": lambda: pikepdf_pdfa(long),
        }
        for action in contenders.values():  # warm: imports, the workers' first call
            action()
        DONE.clear()  # the warm-up's are not timed
        times: dict[str, list[float]] = {name: [] for name in contenders}
        for _ in range(rounds):
            for name, action in contenders.items():
                started = time.perf_counter()
                action()
                times[name].append(time.perf_counter() - started)
        parts_of(client)
    return times


def report(times: dict[str, list[float]], rounds: int) -> None:
    medians = {name: statistics.median(values) for name, values in times.items()}
    print(f"PDF-tools jobs, {rounds} alternating rounds, median seconds (same machine, same run)")
    for name, seconds in medians.items():
        print(f"  {name:36} {seconds:8.3f}")
    for job in ("merge", "pdf/a-2b"):
        ratio = medians[f"{job}: the service, end to end"] / medians[f"{job}: pikepdf alone"]
        verdict = "PASS" if ratio <= TARGET else "FAIL"
        print(f"{verdict}  {job}: service end to end / pikepdf alone = {ratio:.2f} "
              f"(target <= {TARGET})")  # fmt: skip
    for job, parts in PARTS.items():
        attempt = statistics.median(p[0] for p in parts)
        pipeline = statistics.median(p[1] for p in parts)
        print(f"      {job}: of which the renderer's attempt {attempt:.3f} s, the steps "
              f"{pipeline:.3f} s (the rest: submitting, the log, projection, stream, "
              "download)")  # fmt: skip
    ratio = medians["merge: the service, end to end"] / medians["merge: qpdf --empty --pages"]
    print(f"      merge: service / qpdf --empty --pages = {ratio:.2f} (one qpdf process)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    asyncio.run(main(parser.parse_args().rounds))

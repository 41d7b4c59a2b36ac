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
job's stream and the file downloaded. Against it, in interleaved rounds, the library
alone in this process on the same bytes: pikepdf opening, extending and saving with
object streams (and `qpdf --empty --pages … --`, one process, from files); for PDF/A,
pikepdf's `prepare`, the level's save and `validate_written`.

Robust on a loaded machine: every contender runs `WARM` times first (each of the
renderer's PDF workers pays its imports on its first job, and the workers are taken in
turn), each round runs the contenders in a rotated order, and the verdict is the median
of the rounds' own ratios (the service against the library within the same round, so a
load that comes and goes hits both sides of a ratio alike). Prints the median seconds of
each, that ratio (PASS at 1.3 or under) and where the service's time goes, per phase,
from the job's own log timestamps.

    .venv/bin/python bench/pdfjobs_e2e.py [--rounds 7]
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
from dataclasses import dataclass
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
WARM = 3
"""Untimed runs of each contender first: more than the renderer's PDF workers (two by
default), which are taken in turn and each pay their imports on their first job."""

PHASES = (
    "submitted (POST answered)",
    "started (renderer took it)",
    "done (renderer's attempt)",
    "seen done (stream, job row)",
    "downloaded",
)


@dataclass
class Timed:
    """A timed job: the client's clock at each phase's end (submission answered, `wait`
    returned, file downloaded), to be set beside the log's `started` and `done`."""

    job: Job
    started: float
    answered: float
    seen: float
    downloaded: float


DONE: dict[str, list[Timed]] = {}
"""Per job kind, the jobs timed: their timelines and reports are read after the rounds."""


def through_service(
    client: Client, kind: str, inputs: list[dict[str, str]], steps: list[Any]
) -> bytes:
    """Submit, follow to `done`, download: the seconds a user waits."""
    started = time.time()
    submitted = client.pdf_job(inputs, steps)
    answered = time.time()
    job = client.wait(submitted.id, timeout=600)
    seen = time.time()
    assert job.status == "done", (job.status, job.error)
    out = io.BytesIO()
    client.download(job, out)
    DONE.setdefault(kind, []).append(Timed(job, started, answered, seen, time.time()))
    return out.getvalue()


def phases_of(client: Client, timed: Timed) -> list[float]:
    """Milliseconds of each of `PHASES` (the log's clock is this machine's)."""
    at = {e.type: e.at.timestamp() for e in client.events(timed.job.id) if e.at is not None}
    ends = [timed.answered, at["started"], at["done"], timed.seen, timed.downloaded]
    starts = [timed.started, *ends[:-1]]
    return [round((end - start) * 1000, 1) for start, end in zip(starts, ends, strict=True)]


def parts_of(client: Client) -> dict[str, tuple[list[float], float]]:
    """Per job kind, the median ms of each phase, and of the pipeline's steps."""
    parts = {}
    for kind, jobs in DONE.items():
        phases = [phases_of(client, timed) for timed in jobs]
        steps = [sum(s["milliseconds"] for s in client.report(t.job)["steps"]) for t in jobs]
        medians = [statistics.median(column) for column in zip(*phases, strict=True)]
        parts[kind] = (medians, statistics.median(steps))
    return parts


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
                times, parts = await asyncio.to_thread(measure, url, key, folder, rounds)
    report(times, parts, rounds)


def measure(
    url: str, key: str | None, folder: Path, rounds: int
) -> tuple[dict[str, list[float]], dict[str, tuple[list[float], float]]]:
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
        for _ in range(WARM):  # imports, each worker's first call
            for action in contenders.values():
                action()
        DONE.clear()  # the warm-up's are not timed
        times: dict[str, list[float]] = {name: [] for name in contenders}
        names = list(contenders)
        for round_ in range(rounds):
            for name in names[round_ % len(names) :] + names[: round_ % len(names)]:
                started = time.perf_counter()
                contenders[name]()
                times[name].append(time.perf_counter() - started)
        return times, parts_of(client)


def report(
    times: dict[str, list[float]], parts: dict[str, tuple[list[float], float]], rounds: int
) -> None:
    medians = {name: statistics.median(values) for name, values in times.items()}
    print(f"PDF-tools jobs, {rounds} interleaved rounds, median seconds (same machine, same run)")
    for name, seconds in medians.items():
        print(f"  {name:36} {seconds:8.3f}")
    for job in ("merge", "pdf/a-2b"):
        service, library = times[f"{job}: the service, end to end"], times[f"{job}: pikepdf alone"]
        ratio = statistics.median(s / lib for s, lib in zip(service, library, strict=True))
        of_medians = statistics.median(service) / statistics.median(library)
        verdict = "PASS" if ratio <= TARGET else "FAIL"
        print(f"{verdict}  {job}: service end to end / pikepdf alone = {ratio:.2f}, the median "
              f"of the rounds' ratios (target <= {TARGET}; the medians' ratio "
              f"{of_medians:.2f})")  # fmt: skip
    for job, (phases, steps) in parts.items():
        shown = ", ".join(f"{name} {ms:.0f}" for name, ms in zip(PHASES, phases, strict=True))
        print(f"      {job}, median ms per phase: {shown}; of the attempt, the steps {steps:.0f}")
    ratio = medians["merge: the service, end to end"] / medians["merge: qpdf --empty --pages"]
    print(f"      merge: service / qpdf --empty --pages = {ratio:.2f} (one qpdf process)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    asyncio.run(main(parser.parse_args().rounds))

"""A soak: `--jobs` (10,000) renders in a row through the whole stack, watched for growth.

Every service on this machine (embedded NATS and PostgreSQL, local storage), as in
`render_throughput.py` (b). The example invoice is submitted by 16 clients, at most
`--in-flight` jobs unfinished at a time, until every job has ended; the browser is
recycled every `PRESSROOM_BROWSER_RECYCLE` renders (1,000) on the way. Every `--every`
finished jobs it samples the renderer with Chromium: memory (PSS summed over the process
tree, so pages Chromium's processes share count once), open file descriptors and the
number of Chromium processes.

It prints throughput per 1,000 jobs, the samples, and the verdict against issue 12's bar:
memory after warm-up (the median of the samples in the second 1,000 jobs, the first
being warm-up) against the last 1,000's grows < 10 %, descriptors and Chromium processes
flat (the last 1,000's median against the warm one's), the last 1,000 jobs' PDFs/s within
5 % of the first 1,000's, and every job `done`. With `--plots DIR` it writes the
throughput and memory over the run as SVG images there (`docs/img` for the docs).

    .venv/bin/python bench/soak.py [--jobs 10000] [--every 250] [--in-flight 200]
        [--plots docs/img]
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp
import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent))

import render_throughput as bench
import svgplot

WINDOW = 1000
"""Jobs per throughput figure, and per comparison window."""


def sample(renderer: int) -> dict[str, float]:
    """The renderer's tree now: PSS in MiB, open descriptors, Chromium processes."""
    pss = 0.0
    fds = 0
    chromium = 0
    root = psutil.Process(renderer)
    for proc in [root, *root.children(recursive=True)]:
        with contextlib.suppress(psutil.Error):  # a helper that just ended
            pss += proc.memory_full_info().pss
            fds += proc.num_fds()
            chromium += proc.pid != renderer
    return {"pss": pss / 2**20, "fds": fds, "chromium": chromium}


async def soak(env: dict[str, str], logs: Path, args: argparse.Namespace) -> dict[str, Any]:
    url = f"http://127.0.0.1:{env['PRESSROOM_PORT']}"
    names = ["gateway", "projector", "renderer", "notifier"]
    async with bench.services(names, env, logs) as procs, aiohttp.ClientSession() as http:
        await bench.wait_ready(http, url)
        key = await bench.tenant_key(http, url, env)
        headers = bench.authorization(key)
        await bench.wait_done(http, url, key, (await bench.submit(http, url, key, 4))[0])
        renderer = procs["renderer"].pid
        unfinished: collections.deque[str] = collections.deque()
        finished_at: list[float] = []
        statuses: collections.Counter[str] = collections.Counter()
        samples: list[dict[str, float]] = []
        submitted = 0
        started = time.time()
        deadline = time.monotonic() + args.jobs  # a second a job: far beyond any sane run
        while len(finished_at) < args.jobs:
            assert time.monotonic() < deadline, f"{args.jobs - len(finished_at)} jobs unfinished"
            room = min(args.in_flight - len(unfinished), args.jobs - submitted)
            if room >= bench.CLIENTS or (room > 0 and submitted + room == args.jobs):
                ids = (await bench.submit(http, url, key, room))[0]
                unfinished.extend(ids)
                submitted += room
            async with http.get(f"{url}/jobs/{unfinished[0]}", headers=headers) as response:
                assert response.status == 200, await response.text()
                job = await response.json()
            if job["status"] not in {"done", "failed", "cancelled"}:
                await asyncio.sleep(0.05)
                continue
            unfinished.popleft()
            statuses[job["status"]] += 1
            finished_at.append(bench.seconds(job["finished_at"]))
            if len(finished_at) % args.every == 0:
                samples.append({"jobs": len(finished_at), **sample(renderer)})
                print(f"    {len(finished_at)} jobs: {samples[-1]}", flush=True)
        return {
            "started": started,
            "finished_at": sorted(finished_at),
            "statuses": dict(statuses),
            "samples": samples,
        }


def rates(started: float, finished_at: list[float]) -> list[float]:
    """PDFs/s of each WINDOW of jobs, in order of finishing."""
    out = []
    begin = started
    for end in range(WINDOW, len(finished_at) + 1, WINDOW):
        out.append(WINDOW / (finished_at[end - 1] - begin))
        begin = finished_at[end - 1]
    return out


def window_median(samples: list[dict[str, float]], key: str, first: int, last: int) -> float:
    return statistics.median(s[key] for s in samples if first < s["jobs"] <= last)


def verdict(result: dict[str, Any], jobs: int) -> list[tuple[str, bool, str]]:
    samples = result["samples"]
    per_window = rates(result["started"], result["finished_at"])
    checks = []
    warm = {k: window_median(samples, k, WINDOW, 2 * WINDOW) for k in ("pss", "fds", "chromium")}
    last = {k: window_median(samples, k, jobs - WINDOW, jobs) for k in ("pss", "fds", "chromium")}
    growth = last["pss"] / warm["pss"] - 1
    checks.append((
        "memory after warm-up grows < 10 %", growth < 0.10,
        f"{warm['pss']:.0f} → {last['pss']:.0f} MiB ({growth:+.1%})",
    ))  # fmt: skip
    for key, name in (("fds", "open descriptors"), ("chromium", "Chromium processes")):
        checks.append((
            f"{name} flat", last[key] <= warm[key] * 1.05 + 1,
            f"{warm[key]:.0f} → {last[key]:.0f}",
        ))  # fmt: skip
    change = per_window[-1] / per_window[0] - 1
    checks.append((
        "last 1,000 within 5 % of the first 1,000", abs(change) <= 0.05,
        f"{per_window[0]:.1f} → {per_window[-1]:.1f} PDFs/s ({change:+.1%})",
    ))  # fmt: skip
    done = result["statuses"].get("done", 0)
    checks.append(("every job done", done == jobs, f"{result['statuses']}"))
    return checks


def plot(result: dict[str, Any], folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    per_window = rates(result["started"], result["finished_at"])
    points = [(WINDOW * (i + 1), rate) for i, rate in enumerate(per_window)]
    (folder / "soak-throughput.svg").write_text(
        svgplot.lines(
            {"PDFs/s per 1,000 jobs": points},
            title="Soak: throughput over 10,000 renders",
            x_label="jobs finished",
            y_label="PDFs/s",
        )
    )
    samples = result["samples"]
    (folder / "soak-memory.svg").write_text(
        svgplot.lines(
            {"renderer + Chromium PSS, MiB": [(s["jobs"], s["pss"]) for s in samples]},
            title="Soak: memory over 10,000 renders (browser recycled every 1,000)",
            x_label="jobs finished",
            y_label="MiB",
        )
    )


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--jobs", type=int, default=10_000)
    parser.add_argument("--every", type=int, default=250, help="jobs between two samples")
    parser.add_argument("--in-flight", type=int, default=200, help="unfinished jobs at most")
    parser.add_argument("--plots", type=Path, help="write SVG plots into this folder")
    args = parser.parse_args()
    assert args.jobs >= 3 * WINDOW, f"--jobs: at least {3 * WINDOW} to compare windows"
    with tempfile.TemporaryDirectory() as tmp:
        async with bench.environment(Path(tmp) / "soak") as env:
            result = await soak(env, Path(tmp), args)
    print(f"soak of {args.jobs} jobs")
    for i, rate in enumerate(rates(result["started"], result["finished_at"])):
        print(f"    jobs {i * WINDOW + 1:>6}-{(i + 1) * WINDOW:<6} {rate:5.1f} PDFs/s")
    failed = False
    for name, ok, detail in verdict(result, args.jobs):
        print(f"{'PASS' if ok else 'FAIL'}  {name}: {detail}")
        failed |= not ok
    if args.plots:
        plot(result, args.plots)
        print(f"plots written to {args.plots}")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    import uvloop

    uvloop.run(main())

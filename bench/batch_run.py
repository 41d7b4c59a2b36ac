"""Bulk runs against the ceiling: how long a batch of N invoices takes through the API.

In one run, on this machine (machine speed varies from day to day: only figures of the
same run are compared):

(a) the ceiling: the invoice (`--template`: by default the shared workload's,
    `bench/workload/`, a copy of the team's `shared/workload/`) printed by the naive
    pyppeteer loop of `render_throughput.py` at the renderer's page concurrency,
    `--ceiling-count` PDFs, before and after the invoice batches (their mean is the
    ceiling);
(b) for comparison, `--singles` jobs of the example invoice through `POST /jobs` by 16
    clients;
(d) a batch of `--items` invoices (each its own invoice number) from `POST /batches` until
    `GET /batches/{id}` shows `done` with its archive's url, alone, beside the issue's
    bar: seconds <= 1.1 x (items ÷ ceiling PDFs/s), PASS or FAIL;
(d') the same batch again with one single job (`POST /jobs`, the same invoice) every
    `PROBE_EVERY` seconds, polled to done: their p50/p99 latency while a batch runs (the
    batch's own time then includes rendering those jobs, so the bar is judged on (d));
(e) the same batch with `output: "merged"` (one PDF);
(f) a batch of 1,000 and one of 10,000 items of a tiny template (one small page): accept
    latency, time to done, and the conductor's peak RSS, which should not grow with size
    (run before (e), whose merged PDF the conductor packs in memory).

For every batch: where its time went, from its timeline (accepted → last item submitted
by the conductor: expansion; → every item ended: rendering; → the batch's terminal event:
packing; → seen done by the client), CPU per item of every process, and the conductor's
peak RSS (sampled every 0.1 s) over the whole batch and while packing.

The stack is `render_throughput.py`'s (embedded NATS and PostgreSQL, local storage, a
tenant with a rate limit far above the bench's, every service a process) plus the
conductor; the renderer keeps one browser throughout (`PRESSROOM_BROWSER_RECYCLE` above
the run's size), so Chromium's CPU can be counted.

    .venv/bin/python bench/batch_run.py [--items 2000] [--pages 2] [--ceiling-count 300]
        [--template shared|invoice|tiny] [--skip-probed] [--skip-merged] [--skip-10k]
        [--quick]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import json
import os
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent))

from render_throughput import (
    DATA,
    TEMPLATE,
    CpuMeter,
    authorization,
    ceiling,
    environment,
    naive_chromium,
    percentile,
    pressroom_chromium,
    render_html,
    seconds,
    services,
    submit,
    tenant_key,
    wait_done,
    wait_ready,
)

TINY = "<!doctype html><p>Item {{ n }}</p>"
"""One small page: what a batch costs apart from its documents."""

BAR = 1.1
"""The issue's bar: a batch takes at most this many times items ÷ the ceiling's rate."""
PROBE_P99 = 2.0
"""The issue's bar for single jobs submitted while a batch runs: their p99 in seconds."""

PROBE_EVERY = 0.5
"""Seconds between single jobs submitted while a batch runs."""

POLL = 0.2
"""Seconds between a poll and the next (batch status, probe jobs)."""

NAMES = ["gateway", "projector", "renderer", "notifier", "conductor"]


WORKLOAD = Path(__file__).resolve().parent / "workload"
"""The team's standard benchmark workload (a copy of `shared/workload/`): a 30-line
invoice template and its data, what the issue's bar is measured on."""
SHARED_TEMPLATE = (WORKLOAD / "invoice.html.j2").read_text()
SHARED_DATA = json.loads((WORKLOAD / "data.json").read_text())


def workload(template: str) -> tuple[str, dict[str, Any]]:
    """The invoice template and data `--template` names."""
    if template == "shared":
        return SHARED_TEMPLATE, SHARED_DATA
    return TEMPLATE, DATA


def invoice(data: dict[str, Any], index: int) -> dict[str, Any]:
    """An invoice's data with a number of its own."""
    return {**data, "invoice": {**data["invoice"], "number": f"B-{index:05d}"}}


def batch_body(template: str, items: int, output: str) -> dict[str, Any]:
    if template == "tiny":
        return {"template": TINY, "items": [{"data": {"n": i}} for i in range(items)],
                "output": output}  # fmt: skip
    source, data = workload(template)
    return {"template": source, "items": [{"data": invoice(data, i)} for i in range(items)],
            "output": output}  # fmt: skip


class Rss:
    """The RSS of one process, sampled every 0.1 s: (wall time, bytes) pairs."""

    def __init__(self, pid: int) -> None:
        self.proc = psutil.Process(pid)
        self.samples: list[tuple[float, int]] = []
        self.task = asyncio.create_task(self._sample())

    async def _sample(self) -> None:
        while True:
            with contextlib.suppress(psutil.Error):
                self.samples.append((time.time(), self.proc.memory_info().rss))
            await asyncio.sleep(0.1)

    def peak(self, start: float = 0.0, end: float = float("inf")) -> int:
        """The highest sample between `start` and `end` (wall time), 0 if none."""
        return max((rss for at, rss in self.samples if start <= at <= end), default=0)

    async def stop(self) -> None:
        self.task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self.task


@dataclass
class Client:
    http: aiohttp.ClientSession
    url: str
    key: str | None
    pages: int  # the renderer's page concurrency

    async def get(self, path: str) -> dict[str, Any]:
        async with self.http.get(f"{self.url}{path}", headers=authorization(self.key)) as r:
            assert r.status == 200, await r.text()
            result: dict[str, Any] = await r.json()
            return result

    async def post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        async with self.http.post(
            f"{self.url}{path}", json=body, headers=authorization(self.key)
        ) as r:
            assert r.status == 202, await r.text()
            result: dict[str, Any] = await r.json()
            return result


@dataclass
class Probe:
    """Single jobs submitted while a batch runs, and their latencies (server clocks)."""

    client: Client
    template: str  # `--template`: the batch's invoice ("tiny" batches probe the example's)
    latencies: list[float] = field(default_factory=list)
    failed: int = 0
    tasks: list[asyncio.Task[None]] = field(default_factory=list)

    async def run(self, until: asyncio.Event) -> None:
        template, data = workload(self.template)
        body = {"template": template, "data": invoice(data, 99_999)}
        while not until.is_set():
            job_id = (await self.client.post("/jobs", body))["id"]
            self.tasks.append(asyncio.create_task(self._follow(job_id)))
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(until.wait(), PROBE_EVERY)
        await asyncio.gather(*self.tasks)

    async def _follow(self, job_id: str) -> None:
        deadline = time.monotonic() + 900
        while time.monotonic() < deadline:
            job = await self.client.get(f"/jobs/{job_id}")
            if job["status"] in {"done", "failed"}:
                if job["status"] == "done":
                    self.latencies.append(seconds(job["finished_at"]) - seconds(job["created_at"]))
                else:
                    self.failed += 1
                return
            await asyncio.sleep(POLL)
        self.failed += 1


@dataclass
class Result:
    label: str
    items: int
    accept: float  # seconds the POST took
    total: float  # POST sent → seen done with its url
    phases: dict[str, float]
    rss_base: int
    rss_peak: int
    rss_pack: int
    done: int
    bytes: int
    in_hand: float  # mean seconds from an item's start to its end
    busy: float  # share of the pages' time (first start to last end) holding an item
    cpu: dict[str, float]  # CPU seconds per document (items and single jobs) by process
    probe: Probe | None = None


async def run_batch(
    client: Client,
    procs: dict[str, Any],
    env: dict[str, str],
    label: str,
    body: dict[str, Any],
    probe: str | None = None,
) -> Result:
    """Submit one batch and follow it to its end; see the module's docstring."""
    items = len(body["items"])
    rss = Rss(procs["conductor"].pid)
    await asyncio.sleep(0.3)
    base = rss.peak()
    meter = CpuMeter(env, procs)
    print(f"{label}: {items} items, output {body['output']}")
    meter.start()
    sent = time.time()
    accepted = await client.post("/batches", body)
    accept = time.time() - sent
    batch_id = accepted["id"]
    ended = asyncio.Event()
    prober = Probe(client, probe) if probe else None
    probing = asyncio.create_task(prober.run(ended)) if prober else None
    deadline = time.monotonic() + 3600
    while True:
        assert time.monotonic() < deadline, f"{label}: not done within an hour"
        batch = await client.get(f"/batches/{batch_id}")
        if batch["status"] in {"done", "failed", "cancelled"} and batch["url"]:
            break
        await asyncio.sleep(POLL)
    seen = time.time()
    ended.set()
    if probing:
        await probing
    documents = items + (len(prober.tasks) if prober else 0)
    cpu = meter.report(documents)  # the single jobs' CPU is in it: per document
    await rss.stop()
    assert batch["status"] == "done", batch
    timeline = {e["type"]: seconds(e["at"]) for e in
                (await client.get(f"/batches/{batch_id}/events"))["events"]}  # fmt: skip
    last = (await client.get(f"/jobs/{batch_id}.{items - 1}/events"))["events"]
    expanded = min(seconds(e["at"]) for e in last if e["type"] == "submitted")
    complete = timeline.get("complete", seconds(batch["finished_at"]))
    finished = seconds(batch["finished_at"])
    phases = {
        "accept": accept,
        "expansion (to the last item submitted)": expanded - sent,
        "first item started": seconds(batch["started_at"]) - sent,
        "rendering (to every item ended)": complete - expanded,
        "packing (to the batch's end)": finished - complete,
        "seen done by the client": seen - finished,
    }
    in_hand, busy = await occupancy(client, [f"{batch_id}.{i}" for i in range(items)])
    return Result(
        label, items, accept, seen - sent, phases, base, rss.peak(sent, seen),
        rss.peak(complete, seen), batch["done"], batch["bytes"] or 0, in_hand, busy, cpu,
        prober,
    )  # fmt: skip


async def occupancy(client: Client, job_ids: list[str]) -> tuple[float, float]:
    """(mean seconds an item is in hand, share of the pages' time busy with items): low
    occupancy means pages waited for work between items, not for Chromium."""
    spans: list[tuple[float, float]] = []
    todo = iter(job_ids)

    async def reader() -> None:
        for job_id in todo:
            job = await client.get(f"/jobs/{job_id}")
            if job["started_at"] and job["finished_at"]:
                spans.append((seconds(job["started_at"]), seconds(job["finished_at"])))

    await asyncio.gather(*(reader() for _ in range(4)))
    held = sum(end - start for start, end in spans)
    wall = max(end for _, end in spans) - min(start for start, _ in spans)
    print(f"    time with n items in hand: {in_hand_profile(spans, wall)}")
    return held / len(spans), held / (client.pages * wall)


def in_hand_profile(spans: list[tuple[float, float]], wall: float) -> str:
    """The share of the rendering time with 0, 1, 2… items in hand, and the longest
    stretch with fewer than the most."""
    edges = sorted([(start, 1) for start, _ in spans] + [(end, -1) for _, end in spans])
    shares: dict[int, float] = {}
    level, since = 0, edges[0][0]
    for at, step in edges:
        shares[level] = shares.get(level, 0.0) + at - since
        level, since = level + step, at
    return ", ".join(f"{n}: {t / wall:.0%}" for n, t in sorted(shares.items()))


async def singles(client: Client, count: int) -> tuple[float, float]:
    """(b) of render_throughput.py in this stack: `count` invoice jobs through
    `POST /jobs` by 16 clients; (jobs/s, mean seconds a job is in hand)."""
    started = time.time()
    ids = (await submit(client.http, client.url, client.key, count))[0]
    done = await wait_done(client.http, client.url, client.key, ids)
    last = max(seconds(job["finished_at"]) for job in done)
    held = [seconds(j["finished_at"]) - seconds(j["started_at"]) for j in done]
    return count / (last - started), statistics.mean(held)


def mib(value: int) -> str:
    return f"{value / 2**20:,.0f} MiB"


def bar(result: Result, rate: float) -> str:
    """`result` against the bar for a ceiling of `rate` PDFs/s."""
    ideal = result.items / rate
    met = "PASS" if result.total <= BAR * ideal else "FAIL"
    return (
        f"{ideal:.1f} s; bar {BAR} x that = {BAR * ideal:.1f} s; "
        f"actual / ideal {result.total / ideal:.2f} — {met}"
    )


def report(
    result: Result,
    ceiling_rate: float | None,
    loop: dict[str, float],
    shell_rate: float | None = None,
) -> None:
    print(f"  {result.label}: {result.done}/{result.items} done, {mib(result.bytes)}")
    print(f"    POST accepted in {result.accept * 1000:,.0f} ms; done in {result.total:.1f} s "
          f"({result.items / result.total:.1f} items/s)")  # fmt: skip
    if ceiling_rate:
        print(f"    items ÷ ceiling {bar(result, ceiling_rate)}")
        if result.probe and result.probe.tasks:
            extra = len(result.probe.tasks)
            whole = (result.items + extra) / ceiling_rate
            print(f"    counting the {extra} single jobs rendered meanwhile too: ideal "
                  f"{whole:.1f} s, actual / ideal {result.total / whole:.2f}")  # fmt: skip
    if shell_rate:
        print(f"    against (a*), the naive loop on Pressroom's binary: {bar(result, shell_rate)}")
    for phase, spent in result.phases.items():
        print(f"      {phase:<42}{spent:8.2f} s")
    pipeline = sum(v for k, v in result.cpu.items() if k not in {"chromium", "load generator"})
    chromium = result.cpu["chromium"]
    line = (
        f"    CPU per document, ms: chromium {chromium * 1e3:.1f} + pipeline {pipeline * 1e3:.1f}"
    )
    if ceiling_rate:
        bare = loop["chromium"] + loop["loop"]
        line += (
            f"; the loop's per PDF {bare * 1000:.1f} ms, ratio {(chromium + pipeline) / bare:.2f}"
        )
    print(line)
    print(f"    an item in hand (started → done) {result.in_hand * 1000:,.0f} ms on average; "
          f"pages busy with items {result.busy:.0%} of the rendering time")  # fmt: skip
    print(f"    conductor RSS: idle {mib(result.rss_base)}, peak {mib(result.rss_peak)}, "
          f"peak while packing {mib(result.rss_pack)}")  # fmt: skip
    if result.probe:
        lat = result.probe.latencies
        if lat:
            p50, p99 = statistics.median(lat), percentile(lat, 0.99)
            print(f"    single jobs meanwhile: {len(lat)} done, {result.probe.failed} not; "
                  f"latency p50 {p50:.2f} s, p99 {p99:.2f} s")  # fmt: skip
            ok = p99 < PROBE_P99 and not result.probe.failed
            print(f"    {'PASS' if ok else 'FAIL'}  single jobs meanwhile: p99 {p99:.2f} s "
                  f"(< {PROBE_P99} s, every one done)")  # fmt: skip


async def measure_ceiling(
    args: argparse.Namespace, loops: list[dict[str, float]], chromium: str | None = None
) -> float:
    """(a) once: PDFs/s; its CPU per PDF is added to `loops`. With `chromium`, the same
    naive loop on that binary instead, (a*)."""
    name = "(a*) the naive loop on Pressroom's binary" if chromium else "(a) ceiling"
    chromium = chromium or naive_chromium()
    print(
        f"{name}: naive pyppeteer loop on {chromium}, {args.pages} tabs, "
        f"{args.ceiling_count} PDFs (the stack runs {pressroom_chromium()})"
    )
    loops.append({})
    source, data = workload(args.template)
    html = render_html(source, data)
    rate = await ceiling(
        chromium, args.pages, args.ceiling_count, tuned=False, cpu=loops[-1], html=html
    )
    print(f"    {rate:.1f} PDFs/s")
    return rate


@dataclasses.dataclass
class Ceilings:
    """(a) and, when Pressroom runs another binary, (a*), each measured before and after
    the batches."""

    args: argparse.Namespace
    rates: list[float] = dataclasses.field(default_factory=list)
    loops: list[dict[str, float]] = dataclasses.field(default_factory=list)
    shells: list[float] = dataclasses.field(default_factory=list)

    async def measure(self) -> None:
        self.rates.append(await measure_ceiling(self.args, self.loops))
        ours = pressroom_chromium()
        if ours != naive_chromium():
            self.shells.append(await measure_ceiling(self.args, [], ours))


async def zip_runs(
    args: argparse.Namespace,
    client: Client,
    procs: dict[str, Any],
    env: dict[str, str],
    body: dict[str, Any],
) -> list[Result]:
    """(d) alone, then (d') with single jobs meanwhile."""
    runs = [await run_batch(client, procs, env, "(d) zip", body)]
    if not args.skip_probed:
        label = "(d') zip, single jobs meanwhile"
        runs.append(await run_batch(client, procs, env, label, body, probe=args.template))
    return runs


async def bench(args: argparse.Namespace, tmp: Path) -> None:
    """(a) before and after the batches (the machine's speed drifts: their mean is the
    ceiling), (b) for comparison, then (d), (f) and (e)."""
    ceilings = Ceilings(args)
    await ceilings.measure()
    invoices: list[Result] = []
    tiny: list[Result] = []
    async with (
        environment(tmp / "stack") as env,
        services(NAMES, env, tmp) as procs,
        aiohttp.ClientSession() as http,
    ):
        client = Client(http, f"http://127.0.0.1:{env['PRESSROOM_PORT']}", None, args.pages)
        await wait_ready(http, client.url)
        client.key = await tenant_key(http, client.url, env)
        await run_batch(client, procs, env, "warm-up", batch_body(args.template, 4, "zip"))
        single = None
        if args.singles:
            print(f"(b) {args.singles} single jobs through POST /jobs, 16 clients")
            meter = CpuMeter(env, procs)
            meter.start()
            single = await singles(client, args.singles)
            meter.report(args.singles)
        runs = invoices if args.template != "tiny" else tiny
        body = batch_body(args.template, args.items, "zip")
        runs += await zip_runs(args, client, procs, env, body)
        if not args.skip_10k:  # before (e): a merged PDF is packed in memory, which the
            for count in (1000, 10_000):  # conductor keeps after (RSS stays up)
                tiny_body = batch_body("tiny", count, "zip")
                tiny.append(await run_batch(client, procs, env, f"(f) tiny {count}", tiny_body))
        if not args.skip_merged:
            body["output"] = "merged"
            runs.append(await run_batch(client, procs, env, "(e) merged", body))
        await ceilings.measure()
    summary(args, ceilings, single, invoices, tiny)


def summary(
    args: argparse.Namespace,
    ceilings: Ceilings,
    single: tuple[float, float] | None,
    invoices: list[Result],
    tiny: list[Result],
) -> None:
    """The ceilings, (b), and every batch against them."""
    rates, shells = ceilings.rates, ceilings.shells
    rate = statistics.mean(rates)
    shell_rate = statistics.mean(shells) if shells else None
    loops = ceilings.loops
    loop = {key: statistics.mean(each[key] for each in loops) for key in loops[0]}
    print(f"\nceiling (a): {rate:.1f} PDFs/s, mean of {rates[0]:.1f} before and {rates[1]:.1f} "
          f"after the batches ({args.pages} tabs, {args.ceiling_count} PDFs each)")  # fmt: skip
    if shell_rate:
        print(f"(a*) naive loop on Pressroom's binary: {shell_rate:.1f} PDFs/s, mean of "
              f"{shells[0]:.1f} and {shells[1]:.1f}")  # fmt: skip
    if single:
        print(f"(b) single jobs: {single[0]:.1f} jobs/s, (b)/(a) {single[0] / rate:.2f}; a job "
              f"in hand (started → done) {single[1] * 1000:,.0f} ms on average")  # fmt: skip
    for result in invoices:
        report(result, rate, loop, shell_rate)
    for result in tiny:
        report(result, None, loop)


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--items", type=int, default=2000)
    parser.add_argument("--pages", type=int, default=2)
    parser.add_argument("--ceiling-count", type=int, default=300)
    parser.add_argument("--template", choices=["shared", "invoice", "tiny"], default="shared",
                        help="what (a), (d) and (e) render: the shared workload's invoice, "
                        "the example invoice or a tiny page")  # fmt: skip
    parser.add_argument("--skip-probed", action="store_true",
                        help="no (d'): the batch again with single jobs meanwhile")  # fmt: skip
    parser.add_argument("--singles", type=int, default=300,
                        help="(b): single jobs for comparison; 0: none")  # fmt: skip
    parser.add_argument("--keep", action="store_true", help="keep the services' logs and data")
    parser.add_argument("--skip-merged", action="store_true")
    parser.add_argument("--skip-10k", action="store_true", help="no (f)")
    parser.add_argument("--quick", action="store_true", help="100 items, 100 PDFs, no (f)")
    args = parser.parse_args()
    if args.quick:
        args.items, args.ceiling_count, args.singles, args.skip_10k = 100, 100, 50, True
    os.environ["PRESSROOM_RENDER_CONCURRENCY"] = str(args.pages)
    # A replaced browser's processes take their CPU with them (they are not the renderer's
    # children to reap): no replacement during the bench, or Chromium's CPU is lost.
    os.environ["PRESSROOM_BROWSER_RECYCLE"] = str(10 * (args.items + 10_000 + args.singles))
    if args.keep:
        folder = tempfile.mkdtemp(prefix="batch-run-")
        print(f"services' logs and data in {folder}")
        await bench(args, Path(folder))
        return
    with tempfile.TemporaryDirectory() as tmp:
        await bench(args, Path(tmp))


if __name__ == "__main__":
    import uvloop

    uvloop.run(main())  # the load generator shares the machine: keep its own cost low

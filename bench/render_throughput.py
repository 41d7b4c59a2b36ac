"""Pressroom against the ceiling: how close end-to-end throughput gets to bare Chromium.

In one run, on this machine, side by side:

(a) the ceiling: the example invoice (examples/) printed by a naive pyppeteer loop
    (setContent → pdf, pyppeteer's defaults) on one full Chromium (`chromium`, as a
    pyppeteer user runs it) with `--pages` tabs;
(a*) the same naive loop on the Chromium binary Pressroom runs (the headless shell where
    installed, `Settings.chromium_path`), when that is another binary: what the binary
    alone is worth;
(a') the tuned loop: Pressroom's binary, the renderer's Chromium flags and DevTools
    connection (a pipe, flat sessions), frameless tabs (as the renderer's for static
    PDFs: `needs_frames`) in the default context: what those save,
    apart from what the pipeline and the renderer's per-tab isolation cost;
(a'') that loop with a new browser context and tab for every PDF (a quarter of the
    PDFs), shown as a ratio to (a'): what isolating every single job would cost;
(b) Pressroom end to end: `--jobs` of the same invoice submitted through the gateway by
    16 concurrent clients until all are `done`, every service on this machine (embedded
    NATS and PostgreSQL, local storage), renderer at the same page concurrency;
(c) the gateway alone (gateway and projector, renderer not running): `--accepts`
    submissions by 16 concurrent clients, accepted jobs/s and p99 accept latency, twice:
    with API keys (as deployed) and with `PRESSROOM_AUTH=disabled`, each on fresh NATS and
    PostgreSQL, so what authentication costs shows;
(d) the front door while Chromium fills the cores: with the renderer working through
    `--backlog` jobs, wrk submits from 16 connections for 5 s as fast as they are answered;
    accepted jobs/s, accept p99 and the PDFs/s rendered meanwhile, with Chromium at the
    services' CPU priority (`PRESSROOM_CHROMIUM_NICE=0`) and below it (the default), each
    on a fresh stack; and (d'), at the default, submissions paced at about OFFERED jobs/s
    (wrk's connections each wait a moment between an answer and the next request), so the
    p99 is the latency at that rate, with Chromium rendering beside it, rather than at
    the gateway's saturation;
(e) (b) with every job's status read every 0.5 s from its accept until about when the
    last should end, by wrk over 16 keep-alive connections (~400 reads/s for 200 jobs):
    PDFs/s, their ratio to (a), status reads/s and read p99; a 404 fails the run.

Every run generates its own admin and server keys. With keys on, (b) and (c) make a tenant
whose rate limit is far above what the bench submits, and a key of it that every request
sends (the Python client's and wrk's); with keys off the installation's default rate limit
(which the implicit tenant gets) is raised as far.

(a), (a'), (b), (e) and (d) alternate for `--rounds` rounds. Prints the medians of PDFs/s of each,
of the ratios (b)/(a) and (b)/(a') per round, of p50/p99 job latency and of accept p99
while rendering; the renderer's peak memory (Chromium included); (c)'s jobs/s and accept
p99 by the Python client and by wrk (when installed), keys on and keys off side by side
with their ratio (keys on / keys off); and CPU per job of every process.

    .venv/bin/python bench/render_throughput.py [--jobs 200] [--pages 2] [--rounds 3]
        [--accepts 4000] [--accepts-only] [--backlog 300]
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import dataclasses
import json
import os
import re
import resource
import secrets
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import aiohttp
import psutil
import pyppeteer
import pyppeteer.connection
from websockets.legacy.client import connect as websocket_connect

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from services.core.runtime.settings import Settings  # noqa: E402
from services.core.sandbox.templating import render_html  # noqa: E402
from services.dev import embedded_nats, embedded_postgres, free_port  # noqa: E402
from services.renderer.browser import CHROMIUM_ARGS  # noqa: E402
from services.renderer.browser.launch import start_browser  # noqa: E402

TEMPLATE = (ROOT / "examples" / "invoice.html.j2").read_text()
DATA = json.loads((ROOT / "examples" / "invoice.json").read_text())
CLIENTS = 16


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * q))]


def naive_chromium() -> str:
    """The full Chromium a pyppeteer user points it at (`PRESSROOM_NAIVE_CHROMIUM` to
    choose another)."""
    chosen = os.environ.get("PRESSROOM_NAIVE_CHROMIUM") or shutil.which("chromium")
    return chosen or "/usr/bin/chromium"


def pressroom_chromium() -> str:
    """The binary Pressroom's renderer runs: `PRESSROOM_CHROMIUM`, else the headless shell
    where installed, else the full Chromium."""
    return Settings().chromium_path()


NAIVE_ARGS = ["--no-sandbox"]  # pyppeteer's defaults, plus what running as root needs
TUNED_ARGS = [*CHROMIUM_ARGS, "--no-sandbox"]
"""The renderer's flags, plus `--no-sandbox`: this loop runs Chromium as root, without the
renderer's change to an unprivileged user that lets Chromium sandbox itself."""

# pyppeteer's `setContent`: the document written into the tab, without waiting for `load`.
SET_CONTENT = "(html) => { document.open(); document.write(html); document.close(); }"


class Loop:
    """One browser of a bare setContent → pdf loop: `new_tab()` and `pdf(tab)`."""

    pid: int

    async def new_tab(self, fresh: bool) -> Any: ...

    async def pdf(self, tab: Any, html: str) -> None: ...

    async def close_tab(self, tab: Any) -> None: ...

    async def close(self) -> None: ...


@contextlib.contextmanager
def legacy_websocket() -> Iterator[None]:
    """pyppeteer's connection made with the `websockets` legacy client (the protocol its
    own import names for an older `websockets`) while a browser is launched, and pyppeteer's
    own name put back after: the websocket is opened during the launch alone, and nothing
    else in the process sees the swap."""
    own = pyppeteer.connection.ws_connect
    pyppeteer.connection.ws_connect = websocket_connect
    try:
        yield
    finally:
        pyppeteer.connection.ws_connect = own


class NaiveLoop(Loop):
    """pyppeteer as it comes: its launch, its default flags, its websocket, its pages; a
    fresh tab is a page in an incognito context of its own, closed after its PDF."""

    async def start(self, chromium: str) -> None:
        with legacy_websocket():
            self.browser = await pyppeteer.launch(
                executablePath=chromium, args=NAIVE_ARGS,
                handleSIGINT=False, handleSIGTERM=False, handleSIGHUP=False,
            )  # fmt: skip
        self.pid = self.browser.process.pid

    async def new_tab(self, fresh: bool) -> Any:
        if not fresh:
            return await self.browser.newPage()
        context = await self.browser.createIncognitoBrowserContext()
        return await context.newPage(), context

    async def pdf(self, tab: Any, html: str) -> None:
        page = tab[0] if isinstance(tab, tuple) else tab
        await page.setContent(html)
        await page.pdf({"format": "A4", "printBackground": True})

    async def close_tab(self, tab: Any) -> None:
        await tab[1].close()

    async def close(self) -> None:
        await self.browser.close()


class TunedLoop(Loop):
    """The renderer's Chromium flags, DevTools connection (a pipe, flat sessions) and
    frameless tabs, the least a loop can do per PDF: write the document, print it (base64,
    one answer)."""

    async def start(self, chromium: str) -> None:
        self.folder = tempfile.mkdtemp(prefix="bench-chromium-")
        profile = os.path.join(self.folder, "profile")
        os.mkdir(profile)
        args = [*TUNED_ARGS, f"--user-data-dir={profile}", "about:blank"]
        env = {**os.environ, "HOME": profile}
        self.browser = await start_browser(chromium, args, env=env, uid=None, folder=self.folder)
        self.pid = self.browser.process.pid

    async def new_tab(self, fresh: bool) -> Any:
        root = self.browser.connection.browser
        params: dict[str, Any] = {"url": "about:blank"}
        if fresh:
            made = await root.send("Target.createBrowserContext")
            params["browserContextId"] = made["browserContextId"]
        target = (
            await root.send("Target.createTarget", {**params, "enableBeginFrameControl": True})
        )["targetId"]
        attached = await root.send("Target.attachToTarget", {"targetId": target, "flatten": True})
        return self.browser.connection.session(attached["sessionId"]), params

    async def pdf(self, tab: Any, html: str) -> None:
        session, _ = tab
        await session.send(
            "Runtime.evaluate",
            {"expression": f"({SET_CONTENT})({json.dumps(html)})", "returnByValue": True},
        )
        reply = await session.send(
            "Page.printToPDF",
            {"paperWidth": 8.27, "paperHeight": 11.7, "printBackground": True},
        )
        base64.b64decode(reply["data"])

    async def close_tab(self, tab: Any) -> None:
        _, params = tab
        await self.browser.connection.browser.send(
            "Target.disposeBrowserContext", {"browserContextId": params["browserContextId"]}
        )

    async def close(self) -> None:
        with contextlib.suppress(Exception):
            await self.browser.connection.browser.send("Browser.close")
        await asyncio.to_thread(self.browser.process.wait, 10)
        self.browser.connection.close()
        shutil.rmtree(self.folder, ignore_errors=True)


async def ceiling(
    chromium: str,
    pages: int,
    count: int,
    tuned: bool,
    fresh: bool = False,
    cpu: dict[str, float] | None = None,
    html: str | None = None,
) -> float:
    """PDFs/s of a bare setContent → pdf loop on `pages` reused tabs of one browser, of
    `html` (the example invoice by default).

    Naive: pyppeteer as it comes. Tuned: with the renderer's Chromium flags (site isolation
    and the popup blocker on, as in the renderer) and DevTools connection (a pipe, flat
    sessions), tabs in the browser's default context, so (b)/(tuned) is what the pipeline
    and the renderer's isolation cost, and tuned/naive what the renderer's settings and
    connection save. Fresh: every PDF in a new browser context and tab, closed after it:
    what isolating every job costs (Pressroom pays it for every job); naive and fresh is
    the naive loop a service isolating its jobs would run, (a-iso).

    `cpu`, if given, receives the CPU seconds per PDF of Chromium and of the loop.
    """
    html = html if html is not None else render_html(TEMPLATE, DATA)
    loop: NaiveLoop | TunedLoop = TunedLoop() if tuned else NaiveLoop()
    await loop.start(chromium)
    try:
        tabs = [await loop.new_tab(False) for _ in range(pages)]

        async def run(tab: Any, todo: Any) -> None:
            for _ in todo:
                if fresh:
                    own = await loop.new_tab(True)
                    await loop.pdf(own, html)
                    await loop.close_tab(own)
                else:
                    await loop.pdf(tab, html)

        warm_up = iter(range(2 * pages))
        await asyncio.gather(*(run(tab, warm_up) for tab in tabs))
        todo = iter(range(count))
        before = tree_cpu_seconds(loop.pid, True), cpu_seconds(os.getpid())
        machine = psutil.cpu_times()
        started = time.perf_counter()
        await asyncio.gather(*(run(tab, todo) for tab in tabs))
        elapsed = time.perf_counter() - started
        after = tree_cpu_seconds(loop.pid, True), cpu_seconds(os.getpid())
        now = psutil.cpu_times()
        busy = sum(now) - now.idle - (sum(machine) - machine.idle)
        if cpu is not None:
            cpu["chromium"] = (after[0] - before[0]) / count
            cpu["loop"] = (after[1] - before[1]) / count
        kind = ("fresh " if fresh else "") + ("tuned" if tuned else "naive")
        print(
            f"    ({kind} loop) CPU per PDF, µs: chromium "
            f"{(after[0] - before[0]) / count * 1e6:,.0f}, loop "
            f"{(after[1] - before[1]) / count * 1e6:,.0f}; machine CPU busy: "
            f"{busy / (elapsed * (psutil.cpu_count() or 1)):.0%}"
        )
        return count / elapsed
    finally:
        await loop.close()


@contextlib.asynccontextmanager
async def services(
    names: list[str], env: dict[str, str], logs: Path
) -> AsyncIterator[dict[str, asyncio.subprocess.Process]]:
    """Each of `names` started as `pressroom <name>`; `renderer#2` is a second renderer."""
    procs = {}
    for name in names:
        log = (logs / f"{name}.log").open("ab")
        procs[name] = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "services.cli", name.partition("#")[0], env={**env,
            "PRESSROOM_METRICS_PORT": str(free_port())}, stdout=log, stderr=log, cwd=ROOT,
        )  # fmt: skip
    try:
        yield procs
    finally:
        for proc in procs.values():
            with contextlib.suppress(ProcessLookupError):
                proc.terminate()
        await asyncio.gather(*(proc.wait() for proc in procs.values()))


@contextlib.asynccontextmanager
async def environment(data: Path) -> AsyncIterator[dict[str, str]]:
    async with embedded_nats(data) as nats_url, embedded_postgres(data) as pg:
        yield {
            **os.environ,
            "PRESSROOM_NATS_URL": nats_url,
            "PRESSROOM_DATABASE_URL": pg,
            "PRESSROOM_PORT": str(free_port()),
            "PRESSROOM_STORAGE_DIR": str(data / "files"),
            "PRESSROOM_URL_SECRET": "bench",
            "PRESSROOM_WEBHOOK_SECRET": "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
            "PRESSROOM_LOG_LEVEL": "WARNING",
            "PRESSROOM_STREAM_MAX_BYTES": str(2 * 2**30),  # room for the accepts-only floods
            "PRESSROOM_AUTH": "enabled",  # whatever the caller's environment says
            "PRESSROOM_ADMIN_KEY": "pra_" + secrets.token_urlsafe(32),
            "PRESSROOM_SERVER_KEY": base64.b64encode(secrets.token_bytes(32)).decode(),
        }


KEYS_OFF = {  # the implicit tenant gets the default rate limit: raise it out of the way
    "PRESSROOM_AUTH": "disabled",
    "PRESSROOM_RATE_LIMIT": "1000000",
    "PRESSROOM_RATE_BURST": "10000000",
}


def authorization(key: str | None) -> dict[str, str]:
    """The header a tenant's request sends; none with keys off."""
    return {"Authorization": f"Bearer {key}"} if key else {}


async def tenant_key(http: aiohttp.ClientSession, url: str, env: dict[str, str]) -> str | None:
    """With keys on, a key of a new tenant whose rate limit is far above what the bench
    submits; None with `PRESSROOM_AUTH=disabled`."""
    if env["PRESSROOM_AUTH"] == "disabled":
        return None
    admin = authorization(env["PRESSROOM_ADMIN_KEY"])
    tenant = {"name": "bench", "rate_limit": {"per_second": 1e6, "burst": 10_000_000}}
    async with http.post(f"{url}/admin/tenants", json=tenant, headers=admin) as response:
        assert response.status == 201, await response.text()
        tenant_id = (await response.json())["id"]
    async with http.post(f"{url}/admin/tenants/{tenant_id}/keys", headers=admin) as response:
        assert response.status == 201, await response.text()
        key: str = (await response.json())["key"]
        return key


async def wait_ready(http: aiohttp.ClientSession, url: str) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        with contextlib.suppress(aiohttp.ClientError):
            async with http.get(f"{url}/readyz") as response:
                if response.status == 200:
                    return
        await asyncio.sleep(0.1)
    raise RuntimeError("gateway not ready")


async def submit(
    http: aiohttp.ClientSession, url: str, key: str | None, count: int
) -> tuple[list[str], list[float], float]:
    """`count` invoice jobs from CLIENTS concurrent clients: (ids, latencies, jobs/s)."""
    body = json.dumps({"template": TEMPLATE, "data": DATA}).encode()
    headers = {"Content-Type": "application/json", **authorization(key)}
    ids: list[str] = []
    latencies: list[float] = []
    todo = iter(range(count))

    async def client() -> None:
        for _ in todo:
            started = time.perf_counter()
            async with http.post(f"{url}/jobs", data=body, headers=headers) as response:
                assert response.status == 202, await response.text()
                ids.append((await response.json())["id"])
            latencies.append(time.perf_counter() - started)

    started = time.perf_counter()
    await asyncio.gather(*(client() for _ in range(CLIENTS)))
    return ids, latencies, count / (time.perf_counter() - started)


async def wait_done(
    http: aiohttp.ClientSession, url: str, key: str | None, ids: list[str]
) -> list[dict[str, Any]]:
    """Each job's final status document. Jobs finish roughly in submission order, so the
    oldest unfinished one is polled (~10 requests/s): polling every job would steal the
    CPU the renderer is being measured on."""
    finished: list[dict[str, Any]] = []
    deadline = time.monotonic() + 600
    headers = authorization(key)
    for job_id in ids:
        while True:
            assert time.monotonic() < deadline, f"{len(ids) - len(finished)} jobs unfinished"
            async with http.get(f"{url}/jobs/{job_id}", headers=headers) as response:
                assert response.status == 200, await response.text()
                job = await response.json()
            if job["status"] in {"done", "failed"}:
                finished.append(job)
                break
            await asyncio.sleep(0.1)
    return finished


class PeakMemory:
    """Samples the RSS of a process and its children (Chromium) until stopped."""

    def __init__(self, pid: int) -> None:
        self.pid, self.peak = pid, 0
        self.task = asyncio.create_task(self._sample())

    async def _sample(self) -> None:
        proc = psutil.Process(self.pid)
        while True:
            with contextlib.suppress(psutil.Error):
                tree = [proc, *proc.children(recursive=True)]
                self.peak = max(self.peak, sum(p.memory_info().rss for p in tree))
            await asyncio.sleep(1.0)  # each sample costs CPU the renderer would use

    async def stop(self) -> int:
        self.task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self.task
        return self.peak


def cpu_seconds(pid: int, reaped: bool = False) -> float:
    """CPU of `pid`; with `reaped`, also of its children that exited and were waited for."""
    times = psutil.Process(pid).cpu_times()
    spent = times.user + times.system
    if reaped:
        spent += times.children_user + times.children_system
    return float(spent)


def tree_cpu_seconds(pid: int, children: bool) -> float:
    """CPU of `pid` and, with `children`, of its descendants (Chromium, PostgreSQL's
    backends), those that exited meanwhile included: Chromium starts a print compositor
    process for every PDF, gone before the next sample, whose CPU only its parent's
    `children_*` times still hold."""
    proc = psutil.Process(pid)
    total = 0.0
    for member in [proc, *(proc.children(recursive=True) if children else [])]:
        with contextlib.suppress(psutil.Error):
            total += cpu_seconds(member.pid, reaped=children)
    return total


def service_cpu_seconds(pid: int) -> tuple[float, float, float]:
    """A Pressroom service's CPU: its own, its Python children's (the template jail's
    forkserver and workers, reaped ones too: rendering and checking templates is
    Pressroom's work), and (for a renderer) Chromium's: every other descendant, and what
    the service reaped (browsers replaced by recycling)."""
    proc = psutil.Process(pid)
    times = proc.cpu_times()
    own, jail = times.user + times.system, 0.0
    chromium = times.children_user + times.children_system
    for member in proc.children(recursive=True):
        with contextlib.suppress(psutil.Error):
            spent = cpu_seconds(member.pid, reaped=True)
            if "python" in member.name():
                jail += spent
            else:
                chromium += spent
    return float(own), jail, float(chromium)


PIPELINE = frozenset({"gateway", "projector", "renderer", "notifier", "nats-server", "postgresql"})
"""What the pipeline's CPU per job sums: every Pressroom process (templates' jails
included) and its servers; not Chromium, the load generator or a local S3 stand-in."""

JAIL = "'s jail"
"""The suffix of a service's template jail in CpuMeter's figures: `renderer's jail`."""


def in_pipeline(name: str) -> bool:
    """Whether CpuMeter's figure `name` (`renderer#2`, `gateway's jail`…) is the pipeline's."""
    return name.partition("#")[0].removesuffix(JAIL) in PIPELINE


class CpuMeter:
    """CPU seconds each process (or process tree) spends between `start()` and `report()`.

    CPU per job does not depend on what else the shared machine is doing, so it is the
    figure to compare between runs; rates are not.
    """

    def __init__(self, env: dict[str, str], procs: dict[str, Any]) -> None:
        data = str(Path(env["PRESSROOM_STORAGE_DIR"]).parent)
        self.services = {name: proc.pid for name, proc in procs.items()}
        self.groups: dict[str, tuple[int, bool]] = {}
        # An S3 server on this machine (scale_out's moto) serves every upload: metered too.
        s3_port = env.get("PRESSROOM_S3_ENDPOINT", "").rpartition(":")[2]
        for proc in psutil.process_iter(["name", "cmdline"]):
            line = " ".join(proc.info["cmdline"] or [])
            if proc.info["name"] == "nats-server" and data in line:
                self.groups["nats-server"] = (proc.pid, False)
            if s3_port and "moto_server" in line and line.endswith(f"-p {s3_port}"):
                self.groups["moto (S3)"] = (proc.pid, False)
            if proc.info["name"] == "postgres" and data in line:
                self.groups["postgresql"] = (proc.pid, True)
        self.groups["load generator"] = (os.getpid(), False)
        self.before: dict[str, float] = {}

    def _sample(self) -> dict[str, float]:
        spent = {}
        for name, pid in self.services.items():  # each, its jail, a renderer's Chromium
            spent[name], jail, chromium = service_cpu_seconds(pid)
            if name.partition("#")[0] in {"gateway", "renderer"}:  # the services with jails
                spent[name + JAIL] = jail
            if name.partition("#")[0] == "renderer":
                spent[name.replace("renderer", "chromium")] = chromium
        for name, (pid, children) in self.groups.items():
            spent[name] = tree_cpu_seconds(pid, children)
        return spent

    def start(self) -> None:
        self.before = self._sample()
        self.machine = psutil.cpu_times()
        self.started = time.monotonic()

    def report(self, jobs: int, extra: dict[str, float] | None = None) -> dict[str, float]:
        """Print CPU per job; `extra` adds CPU seconds measured elsewhere (a child's).
        Returns the CPU seconds per job of each process."""
        after = self._sample()
        spent = {name: after[name] - self.before[name] for name in after}
        if extra:
            del spent["load generator"]
            spent.update(extra)
        parts = [f"{name} {cpu / jobs * 1e6:,.0f}" for name, cpu in spent.items()]
        print(f"    CPU per job, µs: {', '.join(parts)}")
        pipeline = sum(cpu for name, cpu in spent.items() if in_pipeline(name))
        print(f"    pipeline CPU per job: {pipeline / jobs * 1e3:.2f} ms")
        now = psutil.cpu_times()
        busy = sum(now) - now.idle - (sum(self.machine) - self.machine.idle)
        wall = (time.monotonic() - self.started) * (psutil.cpu_count() or 1)
        print(f"    machine CPU busy: {busy / wall:.0%} of {psutil.cpu_count()} cores")
        return {name: cpu / jobs for name, cpu in spent.items()}


def seconds(value: str) -> float:
    from datetime import datetime

    return datetime.fromisoformat(value).timestamp()


POLL_EVERY = 0.5
"""Seconds between two status reads of one job in the polled run (e)."""
IDLE_POLL = 5.0
"""Seconds of (e)'s read pattern on finished jobs, before (e), for its idle p99."""


async def poll_all(
    url: str, key: str | None, ids: list[str], folder: Path, seconds: float
) -> dict[str, float]:
    """(e)'s clients: wrk reads the status of every job in `ids` in turn over CLIENTS
    keep-alive connections for `seconds`, each connection pausing so that each job is
    read about every POLL_EVERY s (a C load generator, so the figure is the gateway's,
    not a Python client's on the same two cores). Every read must be a 200: a job just
    accepted is never a 404. Reads/s and read p99 (ms)."""
    pause_ms = max(1, round(POLL_EVERY * 1000 * CLIENTS / len(ids)))
    script = folder / "poll.lua"
    script.write_text(
        "".join(
            f"wrk.headers[{json.dumps(name)}] = {json.dumps(value)}\n"
            for name, value in authorization(key).items()
        )
        + "local ids = {" + ", ".join(json.dumps(job_id) for job_id in ids) + "}\n"
        "local i = 0\n"
        "request = function()\n"
        "  i = i % #ids + 1\n"
        '  return wrk.format("GET", "/jobs/" .. ids[i])\n'
        "end\n"
        f"delay = function() return {pause_ms} end\n"
    )  # fmt: skip
    proc = await asyncio.create_subprocess_exec(
        "wrk", "-t1", f"-c{CLIENTS}", f"-d{max(1, round(seconds))}s", "--latency", "-s",
        str(script), url, stdout=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out = (await proc.communicate())[0].decode()
    rate, p99 = wrk_figures(out)
    return {"reads": rate, "read_p99": p99}


async def end_to_end(
    env: dict[str, str], logs: Path, jobs: int, polled: float = 0.0, renderers: int = 1
) -> dict[str, float]:
    """(b); with `polled` (e): every job's status read every POLL_EVERY s for `polled`
    seconds from their accept, after the same pattern of reads on finished jobs (the
    stack idle) for the idle p99 (e) is held against; with several `renderers`, as many
    renderer processes."""
    url = f"http://127.0.0.1:{env['PRESSROOM_PORT']}"
    names = ["gateway", "projector", "renderer", "notifier"]
    names += [f"renderer#{n}" for n in range(2, renderers + 1)]
    async with services(names, env, logs) as procs, aiohttp.ClientSession() as http:
        await wait_ready(http, url)
        key = await tenant_key(http, url, env)
        # Warm-up: enough jobs that every renderer has launched Chromium and rendered.
        warm = (await submit(http, url, key, max(8 * renderers, 40 if polled else 0)))[0]
        await wait_done(http, url, key, warm)
        idle = {}
        if polled:  # the same reads of as many ids, every one a finished job's
            finished = [warm[n % len(warm)] for n in range(jobs)]
            idle = await poll_all(url, key, finished, logs, min(polled, IDLE_POLL))
        memory = PeakMemory(procs["renderer"].pid)
        meter = CpuMeter(env, procs)
        meter.start()
        started = time.time()
        ids, accept, submitted = await submit(http, url, key, jobs)
        reads = None
        if polled:  # polled from their accept until about when the last one ends
            reads = asyncio.create_task(poll_all(url, key, ids, logs, polled))
        done = await wait_done(http, url, key, ids)
        per_job = meter.report(jobs)
        last = max(seconds(job["finished_at"]) for job in done)
        latency = [seconds(j["finished_at"]) - seconds(j["created_at"]) for j in done]
        result = {
            "rate": jobs / (last - started),
            "p50": statistics.median(latency),
            "p99": percentile(latency, 0.99),
            "accept_p99_busy": percentile(accept, 0.99) * 1000,
            "submissions": submitted,
            "memory": await memory.stop() / 2**20,
            "failed": sum(j["status"] != "done" for j in done),
            "pipeline_ms": sum(cpu for name, cpu in per_job.items() if in_pipeline(name)) * 1e3,
        }
        if reads is not None:
            result.update(await reads)
            result["idle_read_p99"] = idle["read_p99"]
        return result


def documents(env: dict[str, str]) -> int:
    """How many documents local storage holds."""
    return sum(1 for _ in Path(env["PRESSROOM_STORAGE_DIR"]).rglob("*.pdf"))


async def busy_front_door(
    env: dict[str, str], logs: Path, backlog: int, seconds: int = 5, *, offered: bool = False
) -> dict[str, float]:
    """(d) the gateway's accepts by wrk while the renderer works through `backlog` jobs
    (Chromium filling the cores), and the PDFs/s rendered meanwhile; with `offered`, (d'):
    at about OFFERED jobs/s instead of flat out. The stack stops after, with what wrk
    submitted unrendered."""
    url = f"http://127.0.0.1:{env['PRESSROOM_PORT']}"
    names = ["gateway", "projector", "renderer", "notifier"]
    async with services(names, env, logs) as procs, aiohttp.ClientSession() as http:
        await wait_ready(http, url)
        key = await tenant_key(http, url, env)
        await wait_done(http, url, key, (await submit(http, url, key, 4))[0])  # warm-up
        ids, _, _ = await submit(http, url, key, backlog)
        await wait_done(http, url, key, ids[: backlog // 5])  # rendering in full swing
        rendered = documents(env)
        started = time.monotonic()
        pace = {"connections": OFFERED_CONNECTIONS, "pause": OFFERED_PAUSE} if offered else {}
        rate, p99 = await wrk(url, key, logs, CpuMeter(env, procs), seconds, **pace)
        pdfs = (documents(env) - rendered) / (time.monotonic() - started)
        left = len(ids) - (documents(env) - 4)
        assert left > 0, "the backlog ran out before wrk ended: raise --backlog"
        return {"rate": rate, "p99": p99, "pdfs": pdfs}


async def accepts(env: dict[str, str], logs: Path, count: int) -> dict[str, tuple[float, float]]:
    """(jobs/s, accept p99 ms) of the gateway alone, by load generator: the Python client
    (aiohttp), and wrk when installed (C: it leaves the cores to what it measures). With
    keys on unless `env` has `PRESSROOM_AUTH=disabled`."""
    url = f"http://127.0.0.1:{env['PRESSROOM_PORT']}"
    keys = "off" if env["PRESSROOM_AUTH"] == "disabled" else "on"
    results = {}
    async with (
        services(["gateway", "projector"], env, logs) as procs,
        aiohttp.ClientSession() as http,
    ):
        await wait_ready(http, url)
        key = await tenant_key(http, url, env)
        await submit(http, url, key, 200)  # warm-up
        print(f"gateway alone, keys {keys}: python client")
        meter = CpuMeter(env, procs)
        meter.start()
        _, latencies, rate = await submit(http, url, key, count)
        meter.report(count)
        results["python client"] = rate, percentile(latencies, 0.99) * 1000
        if shutil.which("wrk"):
            print(f"gateway alone, keys {keys}: wrk")
            results["wrk"] = await wrk(url, key, logs, CpuMeter(env, procs))
    return results


async def gateway_alone(tmp: Path, count: int) -> dict[str, dict[str, tuple[float, float]]]:
    """(c) with keys on, then with keys off, each on its own NATS and PostgreSQL."""
    results = {}
    for keys, variant in (("on", {}), ("off", KEYS_OFF)):
        async with environment(tmp / f"gw-keys-{keys}") as env:
            results[keys] = await accepts({**env, **variant}, tmp, count)
    return results


def wrk_figures(out: str) -> tuple[float, float]:
    """Requests/s and p99 latency in ms from wrk's `--latency` output; every answer must
    have been a 2xx."""
    assert "Non-2xx" not in out and "Socket errors" not in out, out
    rate = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))  # type: ignore[union-attr]
    # The latency distribution's line, not a "+/- Stdev" column such as "66.99%".
    p99 = _ms(re.search(r"^\s+99%\s+(\S+)", out, re.M).group(1))  # type: ignore[union-attr]
    return rate, p99


def _ms(text: str) -> float:
    """A wrk duration (`850.00us`, `12.3ms`, `1.2s`) in milliseconds."""
    for unit, factor in (("us", 1e-3), ("ms", 1.0), ("s", 1e3)):
        if text.endswith(unit):
            return float(text[: -len(unit)]) * factor
    raise ValueError(text)


OFFERED = 1000
"""Jobs/s about offered in (d'): OFFERED_CONNECTIONS connections, each waiting
OFFERED_PAUSE ms between an answer and its next request, make 1,000/s when answers take
12 ms (fewer when they take longer: the rate (d') prints is the one achieved)."""
OFFERED_CONNECTIONS = 32
OFFERED_PAUSE = 20


async def wrk(
    url: str,
    key: str | None,
    folder: Path,
    meter: CpuMeter,
    seconds: int = 5,
    *,
    connections: int = CLIENTS,
    pause: int = 0,
) -> tuple[float, float]:
    """Submit the invoice job from `connections` connections for `seconds` with wrk
    (sending `key`, if any), each waiting `pause` ms between an answer and its next
    request (0: at once, as fast as the gateway answers)."""
    body = folder / "job.json"
    body.write_text(json.dumps({"template": TEMPLATE, "data": DATA}))
    script = folder / "post.lua"
    headers = "".join(
        f"wrk.headers[{json.dumps(name)}] = {json.dumps(value)}\n"
        for name, value in {"Content-Type": "application/json", **authorization(key)}.items()
    )
    script.write_text(
        'wrk.method = "POST"\n'
        f"{headers}"
        f"local file = io.open({json.dumps(str(body))})\n"
        "wrk.body = file:read('*a')\n"
        "file:close()\n" + (f"function delay() return {pause} end\n" if pause else "")
    )
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    meter.start()
    proc = await asyncio.create_subprocess_exec(
        "wrk", "-t1", f"-c{connections}", f"-d{seconds}s", "--latency", "-s", str(script),
        f"{url}/jobs", stdout=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out = (await proc.communicate())[0].decode()
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    requests = int(re.search(r"(\d+) requests in", out).group(1))  # type: ignore[union-attr]
    wrk_cpu = used.ru_utime + used.ru_stime - children.ru_utime - children.ru_stime
    meter.report(requests, {"wrk": wrk_cpu})
    rate, p99 = wrk_figures(out)
    return rate, p99


@dataclasses.dataclass
class Rounds:
    """What each round measured, by part."""

    naives: list[float] = dataclasses.field(default_factory=list)
    naive_shells: list[float] = dataclasses.field(default_factory=list)  # (a*)
    naive_isolated: list[float] = dataclasses.field(default_factory=list)  # (a-iso)
    tuned_chromium_ms: list[float] = dataclasses.field(default_factory=list)  # (a')'s
    tuneds: list[float] = dataclasses.field(default_factory=list)
    freshes: list[float] = dataclasses.field(default_factory=list)
    runs: list[dict[str, float]] = dataclasses.field(default_factory=list)
    polls: list[dict[str, float]] = dataclasses.field(default_factory=list)
    doors: dict[str, list[dict[str, float]]] = dataclasses.field(
        default_factory=lambda: {"0": [], str(Settings.chromium_nice): [], "offered": []}
    )


async def one_round(rounds: Rounds, tmp: Path, args: argparse.Namespace, index: int) -> None:
    """Every part once; they alternate, so a slow spell of the shared machine hits all."""
    naive, ours = naive_chromium(), pressroom_chromium()
    rounds.naives.append(await ceiling(naive, args.pages, args.jobs, tuned=False))
    if ours != naive:
        rounds.naive_shells.append(await ceiling(ours, args.pages, args.jobs, tuned=False))
    isolated = await ceiling(naive, args.pages, args.jobs // 2, tuned=False, fresh=True)
    rounds.naive_isolated.append(isolated)
    cpu: dict[str, float] = {}
    rounds.tuneds.append(await ceiling(ours, args.pages, args.jobs, tuned=True, cpu=cpu))
    rounds.tuned_chromium_ms.append(cpu["chromium"] * 1e3)
    fresh = await ceiling(ours, args.pages, args.jobs // 4, tuned=True, fresh=True)
    rounds.freshes.append(fresh / rounds.tuneds[-1])
    async with environment(tmp / f"e2e{index}") as env:
        run = await end_to_end(env, tmp, args.jobs)
    run["ratio"] = run["rate"] / rounds.naives[-1]
    run["overhead"] = run["rate"] / rounds.tuneds[-1]
    run["ratio_isolated"] = run["rate"] / isolated
    run["pipeline_share"] = run["pipeline_ms"] / rounds.tuned_chromium_ms[-1]
    if rounds.naive_shells:
        run["ratio_shell"] = run["rate"] / rounds.naive_shells[-1]
    rounds.runs.append(run)
    if not shutil.which("wrk"):
        return
    async with environment(tmp / f"poll{index}") as env:  # polled while (b) would render
        poll = await end_to_end(env, tmp, args.jobs, polled=args.jobs / run["rate"])
    poll["ratio"] = poll["rate"] / rounds.naives[-1]
    rounds.polls.append(poll)
    for nice, results in rounds.doors.items():  # at the services' priority, below, offered
        offered = nice == "offered"
        nice = str(Settings.chromium_nice) if offered else nice
        part = "(d')" if offered else "(d)"
        print(f"{part} accepts while rendering, PRESSROOM_CHROMIUM_NICE={nice}")
        async with environment(tmp / f"door{index}-{nice}-{offered}") as env:
            env = {**env, "PRESSROOM_CHROMIUM_NICE": nice}
            results.append(await busy_front_door(env, tmp, args.backlog, offered=offered))


def line(label: str, values: list[float], unit: str = "", digits: int = 1) -> None:
    """`label`, the median of `values` and each value."""
    each = ", ".join(f"{v:.{digits}f}" for v in values)
    print(f"{label:<46}{statistics.median(values):7.{digits}f} {unit:<7} (rounds: {each})")


def print_rounds(rounds: Rounds, args: argparse.Namespace) -> None:
    runs, polls = rounds.runs, rounds.polls

    def median(key: str) -> float:
        return statistics.median(run[key] for run in runs)

    print(f"medians of {args.rounds} rounds, {args.pages} tabs, {args.jobs} PDFs each")
    print(f"(a) runs {naive_chromium()}; (a*), (a'), (a'') and (b) run {pressroom_chromium()}")
    line("(a) naive pyppeteer loop (the ceiling)", rounds.naives, "PDFs/s")
    line("(a-iso) naive loop, a context per PDF", rounds.naive_isolated, "PDFs/s")
    if rounds.naive_shells:
        line("(a*) the naive loop on Pressroom's binary", rounds.naive_shells, "PDFs/s")
    line("(a') the tuned loop, Pressroom's Chromium set-up", rounds.tuneds, "PDFs/s")
    line("    (a'') a fresh browser context per PDF / (a')", rounds.freshes, "", 2)
    line("(b) Pressroom end to end", [r["rate"] for r in runs], "PDFs/s")
    line("    ratio (b)/(a)", [r["ratio"] for r in runs], "", 2)
    if rounds.naive_shells:
        line("    ratio (b)/(a*)", [r["ratio_shell"] for r in runs], "", 2)
    line("    ratio (b)/(a'): what the pipeline costs", [r["overhead"] for r in runs], "", 2)
    isolated = [r["ratio_isolated"] for r in runs]
    line("    ratio (b)/(a-iso): each job isolated in both", isolated, "", 2)
    line("    pipeline CPU per PDF", [r["pipeline_ms"] for r in runs], "ms", 2)
    line("    (a')'s Chromium CPU per PDF", rounds.tuned_chromium_ms, "ms", 2)
    print(f"    job latency p50 / p99:             {median('p50'):.2f} s / {median('p99'):.2f} s")
    print(
        f"    submissions while rendering:       {median('submissions'):.0f} jobs/s, "
        f"accept p99 {median('accept_p99_busy'):.1f} ms"
    )
    print(f"    renderer peak RSS (with Chromium): {max(r['memory'] for r in runs):.0f} MiB")
    print(f"    jobs not done:                     {sum(r['failed'] for r in runs)}")
    if not polls:
        print("(d) and (e) not measured: install wrk")
        return
    line(f"(e) (b), every job polled every {POLL_EVERY} s", [p["rate"] for p in polls], "PDFs/s")
    line("    ratio (e)/(a)", [p["ratio"] for p in polls], "", 2)
    line("    status reads", [p["reads"] for p in polls], "reads/s", 0)
    line("    status read p99", [p["read_p99"] for p in polls], "ms")
    idle = [p["idle_read_p99"] for p in polls]
    line("    status read p99, finished jobs", idle, "ms")
    print(f"    jobs not done:                     {sum(p['failed'] for p in polls)}")
    for nice, results in rounds.doors.items():
        label = (
            f"(d') offered ~{OFFERED}/s, Chromium nice {Settings.chromium_nice}"
            if nice == "offered"
            else f"(d) accepts while rendering, Chromium nice {nice}"
        )
        line(label, [r["rate"] for r in results], "jobs/s", 0)
        line("    accept p99", [r["p99"] for r in results], "ms")
        line("    PDFs rendered meanwhile", [r["pdfs"] for r in results], "PDFs/s")


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--jobs", type=int, default=200)
    parser.add_argument("--pages", type=int, default=2)
    parser.add_argument("--accepts", type=int, default=4000)
    parser.add_argument("--rounds", type=int, default=3, help="rounds of every part; medians shown")
    parser.add_argument("--accepts-only", action="store_true", help="only measure (c)")
    parser.add_argument("--backlog", type=int, default=300, help="jobs rendering during (d)")
    args = parser.parse_args()
    os.environ["PRESSROOM_RENDER_CONCURRENCY"] = str(args.pages)
    rounds = Rounds()
    with tempfile.TemporaryDirectory() as tmp:
        for index in range(0 if args.accepts_only else args.rounds):
            print(f"round {index + 1} of {args.rounds}")
            await one_round(rounds, Path(tmp), args, index)
        gateway = await gateway_alone(Path(tmp), args.accepts)
    if not args.accepts_only:
        print_rounds(rounds, args)
    print_accepts(gateway)
    if not args.accepts_only:
        print_verdicts(rounds, gateway)


def verdict(name: str, value: float, bar: float, *, at_most: bool) -> bool:
    """Print `name`'s ratio against its bar, PASS or FAIL; whether it passed."""
    ok = value <= bar if at_most else value >= bar
    print(f"{'PASS' if ok else 'FAIL'}  {name}: {value:.2f} ({'≤' if at_most else '≥'} {bar})")
    return ok


def print_verdicts(rounds: Rounds, gateway: dict[str, dict[str, tuple[float, float]]]) -> None:
    """Issue 35's bars, each the median over the rounds of a ratio of two figures taken in
    the same round (the gateway's, of this run)."""
    runs, polls = rounds.runs, rounds.polls

    def median(values: list[float]) -> float:
        return statistics.median(values)

    print("bars (issue 35), medians of the rounds' same-run ratios:")
    verdict(
        "pipeline CPU per PDF / (a')'s Chromium CPU per PDF",
        median([r["pipeline_share"] for r in runs]), 0.2, at_most=True,
    )  # fmt: skip
    verdict("(b)/(a')", median([r["overhead"] for r in runs]), 0.8, at_most=False)
    if polls:
        verdict(
            "(e) status read p99 / the same reads' p99 on finished jobs",
            median([p["read_p99"] / p["idle_read_p99"] for p in polls]), 2.0, at_most=True,
        )  # fmt: skip
        polled = median([p["ratio"] for p in polls])
        verdict("(e)/(a), polled end to end", polled, 0.85, at_most=False)
    busy = rounds.doors[str(Settings.chromium_nice)]
    alone = gateway.get("on", {}).get("wrk")
    if busy and alone:
        rate, p99 = alone
        verdict(
            "(d) accept p99 while rendering / (c) gateway alone",
            median([d["p99"] for d in busy]) / p99, 2.0, at_most=True,
        )  # fmt: skip
        verdict(
            "(d) accepted/s while rendering / (c) gateway alone",
            median([d["rate"] for d in busy]) / rate, 0.5, at_most=False,
        )  # fmt: skip


def print_accepts(results: dict[str, dict[str, tuple[float, float]]]) -> None:
    """(c) keys on and keys off side by side, and their ratio, by load generator."""
    print(
        f"{f'(c) gateway alone, {CLIENTS} clients':<34}{'keys on':<30}{'keys off':<30}"
        "ratio keys on/off"
    )
    for client, (rate, p99) in results["on"].items():
        rate_off, p99_off = results["off"][client]
        print(
            f"{f'    {client}:':<34}{rate:6.0f} jobs/s, p99 {p99:5.1f} ms    "
            f"{rate_off:6.0f} jobs/s, p99 {p99_off:5.1f} ms    "
            f"jobs/s {rate / rate_off:.2f}, p99 {p99 / p99_off:.2f}"
        )
    if "wrk" not in results["on"]:
        print("    (install wrk to measure (c) with a load generator that leaves the CPU alone)")


if __name__ == "__main__":
    import uvloop

    uvloop.run(main())  # the load generator shares the machine: keep its own cost low

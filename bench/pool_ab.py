"""Where Chromium's extra CPU per PDF in Pressroom comes from: an A/B of the pool's set-up.

In one process, in interleaved rounds (the order rotates every round), Chromium CPU per
PDF of the example invoice on `--pages` tabs, by kind of Chromium process, for:

- loop (a'): the bench's tuned loop (the renderer's flags and DevTools pipe,
  `--no-sandbox`, root, the default context, setContent → pdf as base64);
- pool as built: `BrowserPool.render` as the renderer calls it;
- pool variants, each changing one thing by patching this process only: tabs in the
  default context (no context and proxy per tab), in a context each without a proxy of
  its own, all in one context made for them, no Fetch interception, the PDF returned
  as base64 instead of streamed, Chromium as root without its sandbox, and all four;
  and for issue 29's context per job: tabs reused from job to job as before it (the
  tab put back after its job), no spare tab beyond the pages, drawing tabs for every
  job (no frameless ones), and Chromium flags that might make a context cheaper;
- pool as built beside half a core of other work (a process busy 10 ms of every 20),
  and with each tab idle 10 ms after each PDF: what the other processes of (b) and the
  pipeline's gaps between jobs do to Chromium's CPU per PDF;
- jail: the CPU per job of the template jail's processes (forkserver and workers, the
  renderer's children like Chromium), which the bench's end-to-end "chromium" figure
  (the renderer's process tree less the renderer) also counts.

Chromium's CPU is read with psutil over the browser's process tree, like
`render_throughput.py`, plus what its processes' exited children used (`children_user`,
`children_system`): Chromium starts a print compositor process for every PDF, which
exits before the next sample and which the live tree alone never sees.

    .venv/bin/python bench/pool_ab.py [--rounds 4] [--count 150] [--pages 2]
        [--only NAME [--only NAME ...]] [--workload DIR]
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any
from unittest import mock

import psutil

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from render_throughput import TunedLoop  # noqa: E402

from services.core.model.events import PageOptions  # noqa: E402
from services.core.runtime.settings import Settings  # noqa: E402
from services.core.sandbox.jail import Jail, TemplateLimits  # noqa: E402
from services.core.sandbox.templating import render_html  # noqa: E402
from services.renderer.browser import BrowserPool, Html, launch, process, tab  # noqa: E402
from services.renderer.browser import pool as pool_module  # noqa: E402
from services.renderer.browser.params import print_params  # noqa: E402
from services.renderer.browser.privileges import Confinement  # noqa: E402
from services.renderer.egress import RequestFilter  # noqa: E402
from services.renderer.evidence import Evidence  # noqa: E402

CHROMIUM = Settings().chromium_path()  # the binary the renderer runs
SETTLE = 3.0
IDLE = 2.0
NICE = [Settings().chromium_nice]  # `--nice`: Chromium's niceness in the pool variants


def cpu_seconds(proc: psutil.Process) -> float:
    times = proc.cpu_times()
    return float(times.user + times.system)


def kind(cmdline: list[str]) -> str:
    """What a Chromium process does, from its flags: browser, renderer, gpu-process, ..."""
    flags = dict(arg[2:].split("=", 1) for arg in cmdline if arg.startswith("--") and "=" in arg)
    what = flags.get("type", "browser")
    if what == "utility":
        what = flags.get("utility-sub-type", "utility").split(".")[0]
    if "--top-chrome-webui" in cmdline:
        what += " (webui)"
    return what


def tree_parts(pid: int, counts: dict[str, int] | None = None) -> dict[str, float]:
    """CPU seconds of `pid` and its descendants, by `kind` (a reaped process's under its
    parent's); with `counts`, how many live processes of each kind are counted too."""
    root = psutil.Process(pid)
    members, parts = [root], dict[str, float]()
    while members:
        proc = members.pop()
        with contextlib.suppress(psutil.Error):
            what = kind(proc.cmdline())
            # With the CPU of its children that exited (and were reaped) meanwhile: a
            # process that came and went between two samples counts too.
            times = proc.cpu_times()
            spent = times.user + times.system + times.children_user + times.children_system
            parts[what] = parts.get(what, 0.0) + spent
            members.extend(proc.children())
            if counts is not None:
                counts[what] = counts.get(what, 0) + 1
    return parts


def tree_cpu(pid: int) -> float:
    """CPU seconds of `pid` and its live descendants."""
    return sum(tree_parts(pid).values())


class Sample:
    """CPU per PDF of Chromium and of this process, PDFs/s and bytes per PDF of one run."""

    def __init__(self, chromium: float, python: float, rate: float, size: int, idle: float) -> None:
        self.chromium, self.python, self.rate, self.size = chromium, python, rate, size
        self.idle = idle  # Chromium's CPU seconds per second while no PDF is made
        self.parts: dict[str, float] = {}  # Chromium's CPU per PDF by process kind
        self.counts: dict[str, int] = {}  # Chromium's processes by kind, at the end


async def measured(
    pid: int, count: int, pages: int, one: Callable[[int], Awaitable[int]]
) -> Sample:
    """Run `one(worker)` `count` times on `pages` concurrent workers, with Chromium's tree
    rooted at `pid`: after a warm-up of two per worker and `SETTLE` s for what a new
    browser does once after starting, then `IDLE` s measured idle (CPU a set-up costs
    whatever the load)."""
    sizes: list[int] = []

    async def worker(index: int, todo: Iterator[int]) -> None:
        for _ in todo:
            sizes.append(await one(index))

    warm_up = iter(range(2 * pages))
    await asyncio.gather(*(worker(i, warm_up) for i in range(pages)))
    await asyncio.sleep(SETTLE)
    idle = tree_cpu(pid)
    await asyncio.sleep(IDLE)
    idle = (tree_cpu(pid) - idle) / IDLE
    me = psutil.Process()
    before = tree_parts(pid), cpu_seconds(me)
    started = time.perf_counter()
    todo = iter(range(count))
    await asyncio.gather(*(worker(i, todo) for i in range(pages)))
    elapsed = time.perf_counter() - started
    counts: dict[str, int] = {}
    after = tree_parts(pid, counts), cpu_seconds(me)
    sample = Sample(
        (sum(after[0].values()) - sum(before[0].values())) / count,
        (after[1] - before[1]) / count,
        count / elapsed,
        sizes[-1],
        idle,
    )
    sample.parts = {k: (v - before[0].get(k, 0.0)) / count for k, v in after[0].items()}
    sample.counts = counts
    return sample


async def tuned_loop(html: str, count: int, pages: int) -> Sample:
    """(a') as `render_throughput.ceiling(tuned=True)` runs it."""
    loop = TunedLoop()
    await loop.start(CHROMIUM)
    try:
        tabs = [await loop.new_tab(False) for _ in range(pages)]

        async def one(index: int) -> int:
            await loop.pdf(tabs[index], html)
            return 0

        return await measured(loop.pid, count, pages, one)
    finally:
        await loop.close()


# The pool variants: each patches the production code in this process only.


async def _tab_in(chromium: process.Chromium, context_id: str | None, framed: bool) -> tab.Tab:
    """A tab wired as `Chromium.open_tab` wires it, in `context_id` (None: the default
    context), its traffic through the browser's own proxy door."""
    root = chromium.connection.browser
    params: dict[str, Any] = {"url": "about:blank"}
    if context_id is not None:
        params["browserContextId"] = context_id
    if not framed:
        params["enableBeginFrameControl"] = True
    target_id = str((await root.send("Target.createTarget", params))["targetId"])
    attached = await root.send("Target.attachToTarget", {"targetId": target_id, "flatten": True})
    proof = Evidence()
    door = await chromium.proxy.open_door(proof)
    gate = RequestFilter(chromium.egress, target_id, proof)
    session = chromium.connection.session(str(attached["sessionId"]))
    made = await chromium._wire(session, target_id, "", door, gate, framed)
    chromium._targets[target_id] = made
    return made


async def _open_tab_in_default_context(self: process.Chromium, framed: bool = False) -> tab.Tab:
    """`Chromium.open_tab` with the tab in the browser's default context (no context and
    proxy of its own), the request filter still on."""
    return await _tab_in(self, None, framed)


async def _open_tab_in_context_without_proxy(
    self: process.Chromium, framed: bool = False
) -> tab.Tab:
    """`Chromium.open_tab` with the tab in a context of its own that has no proxy of its
    own (its traffic through the browser's proxy door), the request filter still on."""
    reply = await self.connection.browser.send("Target.createBrowserContext")
    return await _tab_in(self, str(reply["browserContextId"]), framed)


_SHARED: dict[int, str] = {}  # a browser's one context for all its tabs, by id(Chromium)


async def _open_tab_in_shared_context(self: process.Chromium, framed: bool = False) -> tab.Tab:
    """`Chromium.open_tab` with every tab of the browser in one context made for them
    (no proxy of its own), the request filter still on."""
    if id(self) not in _SHARED:
        reply = await self.connection.browser.send("Target.createBrowserContext")
        _SHARED[id(self)] = str(reply["browserContextId"])
    return await _tab_in(self, _SHARED[id(self)], framed)


async def _no_guard(session: Any, gate: Any, spawn: Any, children: Any) -> None:
    """`guard` without Fetch interception (and without auto-attaching child targets)."""


async def _print_pdf_base64(t: tab.Tab, options: PageOptions, limits: Any) -> bytes:
    """`print_pdf` with the PDF returned in the reply as base64, not streamed."""
    reply = await t.send("Page.printToPDF", print_params(options))
    return base64.b64decode(reply["data"])


def _unconfined(chromium_uid: int) -> Confinement:
    """Chromium as this process (root) with `--no-sandbox`, as the loops run it."""
    return Confinement(None, "bench: as root without the sandbox")


def _reuse(self: BrowserPool, chromium: process.Chromium, used: tab.Tab, framed: bool) -> None:
    """The design before issue 29: a tab goes back to the queue after its job, its
    context kept (the jobs here never touch the network, so it was never replaced)."""
    used.used = False
    chromium.idle.put_nowait(used)


def _flags(*extra: str) -> list[tuple[Any, str, Any]]:
    """Chromium started with `extra` flags besides the renderer's."""
    return [(launch, "CHROMIUM_ARGS", [*launch.CHROMIUM_ARGS, *extra])]


def _swapped(prefix: str, replacement: str) -> list[tuple[Any, str, Any]]:
    """Chromium started with the renderer's flag that starts with `prefix` replaced by
    `replacement` (or left out, for "")."""
    args = [replacement if arg.startswith(prefix) else arg for arg in launch.CHROMIUM_ARGS]
    return [(launch, "CHROMIUM_ARGS", [arg for arg in args if arg])]


PATCHES: dict[str, list[tuple[Any, str, Any]]] = {
    "default context": [(process.Chromium, "open_tab", _open_tab_in_default_context)],
    "context, no own proxy": [(process.Chromium, "open_tab", _open_tab_in_context_without_proxy)],
    "one context for both": [(process.Chromium, "open_tab", _open_tab_in_shared_context)],
    "no Fetch": [(process, "guard", _no_guard)],
    "base64": [(tab, "print_pdf", _print_pdf_base64)],
    "root, no sandbox": [(launch, "confine", _unconfined)],
}
PATCHES["all four off"] = [
    patch
    for name, patches in PATCHES.items()
    if name not in {"context, no own proxy", "one context for both"}
    for patch in patches
]
# Issue 29: a new context per job, and what it costs against reusing one.
PATCHES["reused tabs (before 29)"] = [(BrowserPool, "_renew_later", _reuse)]
PATCHES["no spare tab"] = [(pool_module, "SPARE_TABS", 0)]
PATCHES["one spare tab"] = [(pool_module, "SPARE_TABS", 1)]
PATCHES["two spare tabs"] = [(pool_module, "SPARE_TABS", 2)]
PATCHES["three spare tabs"] = [(pool_module, "SPARE_TABS", 3)]
PATCHES["drawing tabs only"] = [(pool_module, "needs_frames", lambda options, emulation: True)]
PATCHES["low-end device mode"] = _flags("--enable-low-end-device-mode")
# What a new renderer process costs at start (docs/benchmarks.md, "where a fresh
# context's CPU goes"): switches that might make it cheaper, one at a time.
PATCHES["jitless V8"] = _swapped("--js-flags=", "--js-flags=--max-old-space-size=512,--jitless")
PATCHES["V8 without JIT tiers"] = _swapped(
    "--js-flags=", "--js-flags=--max-old-space-size=512,--no-opt,--no-maglev,--no-sparkplug"
)
PATCHES["V8 without Wasm"] = _swapped(
    "--js-flags=", "--js-flags=--max-old-space-size=512,--no-expose-wasm"
)
PATCHES["sRGB colour profile"] = _flags("--force-color-profile=srgb")
PATCHES["GPU in process"] = _flags("--in-process-gpu")
PATCHES["/dev/shm"] = _swapped("--disable-dev-shm-usage", "")
PATCHES["no site isolation"] = _flags("--disable-site-isolation-trials")
PATCHES["no IPC flood guard"] = _flags("--disable-ipc-flooding-protection")


@contextlib.contextmanager
def patched(patches: list[tuple[Any, str, Any]]) -> Iterator[None]:
    with contextlib.ExitStack() as stack:
        for owner, name, value in patches:
            stack.enter_context(mock.patch.object(owner, name, value))
        yield


HOG = """import time
while True:
    end = time.perf_counter() + 0.01
    while time.perf_counter() < end:
        pass
    time.sleep(0.01)
"""
"""Half a core of other work, in 10 ms bursts: the other processes of (b), roughly."""

GAP = 0.01
"""Seconds a tab stays idle after each PDF in the "gaps" variant, as between jobs in (b)."""


@contextlib.contextmanager
def hog(on: bool) -> Iterator[None]:
    if not on:
        yield
        return
    proc = subprocess.Popen([sys.executable, "-c", HOG])
    try:
        yield
    finally:
        proc.kill()
        proc.wait()


async def pool_run(html: str, count: int, pages: int, variant: str) -> Sample:
    with patched(PATCHES.get(variant, [])), hog("hog" in variant):
        pool = BrowserPool(
            CHROMIUM, pages=pages, timeout=30, max_output_bytes=50 * 2**20, chromium_nice=NICE[0]
        )
        async with pool:
            assert pool.pid is not None
            options = PageOptions()
            gap = GAP if "gaps" in variant else 0.0

            async def one(index: int) -> int:
                size = len((await pool.render(Html(html), options)).data)
                await asyncio.sleep(gap)
                return size

            return await measured(pool.pid, count, pages, one)


@contextlib.asynccontextmanager
async def jail_of(pages: int) -> AsyncIterator[Jail]:
    limits = TemplateLimits(memory_bytes=512 * 2**20, seconds=10.0, output_chars=10**7)
    async with Jail(pages, limits) as jail:
        yield jail


async def jail_run(template: str, data: dict[str, Any], count: int, pages: int) -> Sample:
    """The jail's CPU per template render: this process's children other than Chromium."""
    async with jail_of(pages) as jail:
        limit = jail.limits.output_chars

        async def one(index: int) -> int:
            return len(await jail.call(render_html, template, data, limit))

        sample = await measured(os.getpid(), count, pages, one)
    # `measured` counted this process's own CPU into the tree: take it out again.
    sample.chromium -= sample.python
    return sample


def summary(name: str, samples: list[Sample]) -> str:
    def spread(values: list[float], scale: float = 1e3) -> str:
        ms = sorted(v * scale for v in values)
        return f"{statistics.median(ms):6.1f} ({ms[0]:5.1f}-{ms[-1]:5.1f})"

    return (
        f"{name:<26}{spread([s.chromium for s in samples])}   "
        f"{spread([s.python for s in samples])}   "
        f"{statistics.median(s.rate for s in samples):5.1f}   {samples[-1].size:>8,}   "
        f"{statistics.median(s.idle for s in samples) * 1e3:5.1f}"
    )


def breakdown(name: str, samples: list[Sample]) -> str:
    """Median Chromium CPU per PDF (ms) of each kind of process (and how many there were
    at the end of the last round)."""
    kinds = sorted({k for s in samples for k in s.parts})
    medians = {k: statistics.median(s.parts.get(k, 0.0) for s in samples) * 1e3 for k in kinds}
    counts = samples[-1].counts
    parts = ", ".join(
        f"{k} {v:.1f} (x{counts.get(k, 0)})"
        for k, v in sorted(medians.items(), key=lambda kv: -kv[1])
    )
    return f"{name:<26}{parts}"


VARIANTS = [
    "loop (a')",
    "pool as built",
    *PATCHES,
    "pool + half-core hog",
    "pool, 10 ms gaps",
    "jail",
]


def _arguments() -> tuple[argparse.Namespace, str, dict[str, Any]]:
    """The command line, and the workload's template and data."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--count", type=int, default=150, help="PDFs per variant and round")
    parser.add_argument("--pages", type=int, default=2)
    parser.add_argument("--only", action="append", help="a variant to run (repeatable)")
    parser.add_argument("--workload", type=Path, help="folder with invoice.html.j2, data.json")
    parser.add_argument(
        "--nice",
        type=int,
        help="Chromium's niceness in the pool (on a machine busy with other work, the "
        "renderer's 19 leaves it waiting for a core at every step)",
    )
    args = parser.parse_args()
    if args.nice is not None:
        NICE[0] = args.nice
    folder = args.workload or ROOT / "examples"
    names = (
        ("invoice.html.j2", "data.json") if args.workload else ("invoice.html.j2", "invoice.json")
    )
    template = (folder / names[0]).read_text()
    return args, template, json.loads((folder / names[1]).read_text())


async def main() -> None:
    args, template, data = _arguments()
    html = render_html(template, data)
    variants = [v for v in VARIANTS if not args.only or v in args.only]
    results: dict[str, list[Sample]] = {v: [] for v in variants}
    for round_ in range(args.rounds):
        shift = round_ % len(variants)  # the order rotates, so no variant always goes first
        for variant in variants[shift:] + variants[:shift]:
            if variant == "loop (a')":
                sample = await tuned_loop(html, args.count, args.pages)
            elif variant == "jail":
                sample = await jail_run(template, data, args.count, args.pages)
            else:
                sample = await pool_run(html, args.count, args.pages, variant)
            results[variant].append(sample)
            print(
                f"round {round_ + 1}: {variant:<22} chromium {sample.chromium * 1e3:6.1f} ms, "
                f"python {sample.python * 1e3:5.1f} ms per PDF, {sample.rate:6.1f} PDFs/s, "
                f"idle {sample.idle * 1e3:4.1f} ms/s",
                flush=True,
            )
    print(
        f"\nmedians (min-max) of {args.rounds} rounds, {args.count} PDFs each, "
        f"{args.pages} tabs\n{'variant':<26}{'chromium ms/PDF':<24}{'python ms/PDF':<24}"
        f"PDFs/s      bytes   idle ms/s"
    )
    for variant, samples in results.items():
        print(summary(variant, samples))
    print("\nchromium ms/PDF by process kind (medians)")
    for variant, samples in results.items():
        print(breakdown(variant, samples))
    print(f"load average now: {os.getloadavg()}")


if __name__ == "__main__":
    asyncio.run(main())

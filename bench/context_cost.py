"""What making and closing one browser context costs Chromium, step by step.

A render gets a context of its own (issue 29); this loops one step more at a time, in one
browser, variants alternating by round, nothing printed, and reads Chromium's CPU over
its process tree (exited children counted, as `pool_ab.py` does) per context made and
closed:

- `context`: `Target.createBrowserContext`, then dispose it;
- `context+door`: with a proxy door of its own, as the renderer makes them;
- `context+target`: with a frameless page in it;
- `+attach`: and a flat session attached to the page;
- `+renderer`: and one command the page's renderer process must answer
  (`Runtime.evaluate`): the process starts;
- `as built`, `as built, drawing`: `Chromium.open_tab` and `Chromium.dispose`.

    .venv/bin/python bench/context_cost.py [--rounds 3] [--count 30] [--flag FLAG ...]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any
from unittest import mock

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from pool_ab import tree_parts  # noqa: E402

from services.core.runtime.settings import Settings  # noqa: E402
from services.renderer.browser import BrowserPool, launch, process, tab  # noqa: E402
from services.renderer.browser.process import Chromium  # noqa: E402
from services.renderer.proxy import BYPASS_NOTHING  # noqa: E402

Step = Callable[[Chromium], Awaitable[None]]


async def _context(chromium: Chromium, *, door: bool = False, target: bool = False,
                   attach: bool = False, renderer: bool = False) -> None:  # fmt: skip
    root = chromium.connection.browser
    opened = await chromium.proxy.open_door() if door else None
    params = {"proxyServer": opened.url, "proxyBypassList": BYPASS_NOTHING} if opened else {}
    context = (await root.send("Target.createBrowserContext", params))["browserContextId"]
    session = None
    if target:
        made = await root.send(
            "Target.createTarget",
            {"url": "about:blank", "browserContextId": context, "enableBeginFrameControl": True},
        )
        if attach:
            attached = await root.send(
                "Target.attachToTarget", {"targetId": made["targetId"], "flatten": True}
            )
            session = chromium.connection.session(attached["sessionId"])
            if renderer:
                await session.send("Runtime.evaluate", {"expression": "1"})
    await root.send("Target.disposeBrowserContext", {"browserContextId": context})
    if session is not None:
        session.forget()
    if opened is not None:
        await opened.close()


async def _as_built(chromium: Chromium, framed: bool) -> None:
    await chromium.dispose(await chromium.open_tab(framed))


_ENABLE = tab.Tab.enable


def _without(*methods: str) -> Step:
    """`as built`, the tab's set-up commands named `methods` left out (what each costs)."""

    async def enable(self: tab.Tab) -> None:
        real = self.send

        async def send(method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
            return {} if method in methods else await real(method, params)

        self.send = send  # type: ignore[method-assign]
        try:
            await _ENABLE(self)
        finally:
            del self.send

    async def step(chromium: Chromium) -> None:
        with mock.patch.object(tab.Tab, "enable", enable):
            if "guard" in methods:
                with mock.patch.object(process, "guard", _no_guard):
                    await _as_built(chromium, False)
            else:
                await _as_built(chromium, False)

    return step


async def _no_guard(*args: Any) -> None:
    """No request filter: no `Fetch.enable`, no `Target.setAutoAttach`."""


STEPS: dict[str, Step] = {
    "context": lambda c: _context(c),
    "context+door": lambda c: _context(c, door=True),
    "context+target": lambda c: _context(c, target=True),
    "+attach": lambda c: _context(c, target=True, attach=True),
    "+renderer": lambda c: _context(c, target=True, attach=True, renderer=True),
    "as built": lambda c: _as_built(c, False),
    "as built, drawing": lambda c: _as_built(c, True),
    # As built, one group of its set-up commands left out at a time.
    "- viewport": _without("Emulation.setDeviceMetricsOverride"),
    "- Network": _without("Network.enable"),
    "- Log, Inspector": _without("Log.enable", "Inspector.enable"),
    "- Page, lifecycle": _without("Page.enable", "Page.setLifecycleEventsEnabled"),
    "- script off": _without("Runtime.disable", "Emulation.setScriptExecutionDisabled"),
    "- request filter": _without("guard"),
}


async def measure(chromium: Chromium, pid: int, step: Step, count: int) -> tuple[float, float]:
    """CPU ms and wall ms per context of `step`, after a warm-up and a settling second."""
    for _ in range(3):
        await step(chromium)
    await asyncio.sleep(1)
    before, started = sum(tree_parts(pid).values()), time.perf_counter()
    for _ in range(count):
        await step(chromium)
    wall = (time.perf_counter() - started) / count
    await asyncio.sleep(1)  # exited renderers are reaped and counted
    return (sum(tree_parts(pid).values()) - before) / count * 1e3, wall * 1e3


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--count", type=int, default=30)
    parser.add_argument("--flag", action="append", default=[], help="a Chromium flag to add")
    parser.add_argument("--only", action="append", help="a step to run (repeatable)")
    parser.add_argument("--nice", type=int, default=19, help="Chromium's niceness")
    args = parser.parse_args()
    steps = {name: step for name, step in STEPS.items() if not args.only or name in args.only}
    launch.CHROMIUM_ARGS[:] = [*launch.CHROMIUM_ARGS, *args.flag]
    results: dict[str, list[tuple[float, float]]] = {name: [] for name in steps}
    pool = BrowserPool(
        Settings().chromium_path(),
        pages=1,
        timeout=30,
        max_output_bytes=10**8,
        chromium_nice=args.nice,
    )
    async with pool:
        assert pool.chromium is not None and pool.pid is not None
        for round_ in range(args.rounds):
            for name, step in steps.items():
                cpu, wall = await measure(pool.chromium, pool.pid, step, args.count)
                results[name].append((cpu, wall))
                print(f"round {round_ + 1}: {name:<20} {cpu:6.1f} ms CPU, {wall:6.1f} ms wall")
    print(f"\nmedians of {args.rounds} rounds, {args.count} contexts each")
    for name, samples in results.items():
        cpu = statistics.median(s[0] for s in samples)
        wall = statistics.median(s[1] for s in samples)
        print(f"{name:<20} {cpu:6.1f} ms CPU, {wall:6.1f} ms wall")


if __name__ == "__main__":
    asyncio.run(main())

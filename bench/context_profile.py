"""Where a fresh browser context's CPU goes, by process and by what the kernel does for it.

`context_cost.py` says how much a context costs; this says where, with `perf` (Linux,
root): one browser, frameless tabs made and closed in a loop as the pool makes them
(`Chromium.open_tab`, `Chromium.dispose`), nothing printed, the whole machine sampled
meanwhile, then the samples of this browser's processes (those alive at the start and
every process they started during the loop, found from perf's own fork records) summed:

- by process: the browser process, the helpers alive before the loop (GPU, network,
  zygotes), and the processes the loop started (the tabs' renderers);
- by thread name, and the share of each part spent in the kernel;
- the kernel's share by what it was doing: page faults, process exit, fork, waits,
  system calls by name.

Chromium's own code is not symbolised here (a stripped binary), so its user time shows
as one lump; the kernel's is.

    .venv/bin/python bench/context_profile.py [--count 60] [--framed] [--nice 0]
        [--flag FLAG ...]
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from services.core.runtime.settings import Settings  # noqa: E402
from services.renderer.browser import BrowserPool, launch  # noqa: E402

_FORK = re.compile(r"PERF_RECORD_FORK\((\d+):(\d+)\):\((\d+):(\d+)\)")
_SAMPLE = re.compile(r"^\s*(.+?)\s+(\d+)/(\d+)\s*$")
_KERNEL_WHAT = re.compile(
    r"(__x64_sys_\w+|__do_sys_\w+|asm_exc_page_fault|do_exit|ret_from_fork|asm_sysvec_\w+)"
)


async def record(count: int, framed: bool, nice: int, data: str) -> tuple[list[int], float]:
    """Make and close `count` tabs under `perf record -a -g` into `data`; the pids of the
    browser's processes at the start, and the wall time per tab."""
    pool = BrowserPool(
        Settings().chromium_path(),
        pages=1,
        timeout=30,
        max_output_bytes=10**8,
        chromium_nice=nice,
    )
    async with pool:
        chromium = pool.chromium
        assert chromium is not None and pool.pid is not None
        for _ in range(3):  # warm-up
            await chromium.dispose(await chromium.open_tab(framed))
        root = psutil.Process(pool.pid)
        pids = [root.pid, *(child.pid for child in root.children(recursive=True))]
        perf = await asyncio.create_subprocess_exec(
            *("perf", "record", "-a", "-g", "-F", "999", "-o", data),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        await asyncio.sleep(1)  # perf is recording
        started = time.perf_counter()
        for _ in range(count):
            await chromium.dispose(await chromium.open_tab(framed))
        wall = (time.perf_counter() - started) / count
        await asyncio.sleep(1)  # the last renderers exit
        perf.send_signal(signal.SIGINT)
        await perf.wait()
    return pids, wall


def family(script: str, roots: list[int]) -> set[int]:
    """`roots` and every process they started (transitively), from perf's fork records."""
    children: dict[int, set[int]] = collections.defaultdict(set)
    for match in _FORK.finditer(script):
        child, parent = int(match.group(1)), int(match.group(3))
        if child != parent:  # a new process, not a thread
            children[parent].add(child)
    found, todo = set(roots), list(roots)
    while todo:
        for child in children[todo.pop()] - found:
            found.add(child)
            todo.append(child)
    return found


def report(data: str, roots: list[int]) -> None:
    tasks = subprocess.run(
        ["perf", "script", "-i", data, "--show-task-events", "-F", "pid,tid,event"],
        capture_output=True,
        text=True,
    ).stdout
    ours = family(tasks, roots)
    samples = subprocess.run(
        ["perf", "script", "-i", data, "-F", "comm,pid,tid,ip,sym,dso"],
        capture_output=True,
        text=True,
    ).stdout
    by_process: collections.Counter[str] = collections.Counter()
    in_kernel: collections.Counter[str] = collections.Counter()
    by_thread: collections.Counter[str] = collections.Counter()
    kernel_what: collections.Counter[str] = collections.Counter()
    total = 0
    for block in samples.split("\n\n"):
        lines = [line for line in block.strip().splitlines() if line.strip()]
        head = _SAMPLE.match(lines[0]) if lines else None
        if head is None or int(head.group(2)) not in ours:
            continue
        pid = int(head.group(2))
        part = (
            "browser"
            if pid == roots[0]
            else "helpers alive before (GPU, network, zygotes, idle tabs)"
            if pid in roots
            else "processes started in the loop (the tabs' renderers)"
        )
        total += 1
        by_process[part] += 1
        by_thread[head.group(1).strip()] += 1
        if len(lines) > 1 and "[kernel" in lines[1]:
            in_kernel[part] += 1
            what = next(
                (m.group(1) for line in lines[1:] if (m := _KERNEL_WHAT.search(line))), "other"
            )
            kernel_what[what] += 1
    if not total:
        print("no samples of this browser (is perf allowed here?)")
        return
    print(f"{total} samples of this browser's processes")
    for part, n in by_process.most_common():
        print(f"  {n / total:6.1%}  {part} (in the kernel: {in_kernel[part] / n:.0%} of it)")
    print("by thread name")
    for name, n in by_thread.most_common(10):
        print(f"  {n / total:6.1%}  {name}")
    print("the kernel's share, by what it did")
    for what, n in kernel_what.most_common(12):
        print(f"  {n / total:6.1%}  {what}")


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--count", type=int, default=60, help="tabs made and closed")
    parser.add_argument("--framed", action="store_true", help="drawing tabs, not frameless")
    parser.add_argument("--nice", type=int, default=0, help="Chromium's niceness")
    parser.add_argument("--flag", action="append", default=[], help="a Chromium flag to add")
    args = parser.parse_args()
    launch.CHROMIUM_ARGS[:] = [*launch.CHROMIUM_ARGS, *args.flag]
    with tempfile.TemporaryDirectory(prefix="context-profile-") as folder:
        data = str(Path(folder) / "perf.data")
        roots, wall = await record(args.count, args.framed, args.nice, data)
        print(f"{args.count} tabs made and closed, {wall * 1e3:.1f} ms wall each")
        report(data, roots)


if __name__ == "__main__":
    asyncio.run(main())

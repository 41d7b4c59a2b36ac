"""Out, not only up: end-to-end PDFs/s with 1, 2 and 4 renderer processes against one NATS,
as renderer pods would be, on local storage and on S3 (moto's server over HTTP).

Each renderer renders `--pages` pages at once (`PRESSROOM_RENDER_CONCURRENCY`), so four
renderers hold four Chromiums. Beside them, in the same run, the tuned bare loop (a') of
`render_throughput.py` on one Chromium with as many tabs as one renderer: the machine's
ceiling for one browser. On a machine whose cores one renderer already fills, more
renderers can only hold the rate (the bar: together at least as much as one); with spare
cores each adds its share.

    .venv/bin/python bench/scale_out.py [--jobs 200] [--pages 2] [--renderers 1,2,4]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import socket
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import render_throughput as bench

from services.dev import free_port


@contextlib.asynccontextmanager
async def moto(folder: Path) -> AsyncIterator[dict[str, str]]:
    """moto's S3 server on a free port; the settings that point Pressroom's storage at it."""
    port = free_port()
    with (folder / "moto.log").open("wb") as log:
        proc = await asyncio.create_subprocess_exec(
            str(Path(sys.executable).parent / "moto_server"), "-H", "127.0.0.1", "-p", str(port),
            stdout=log, stderr=asyncio.subprocess.STDOUT,
        )  # fmt: skip
    try:
        deadline = time.monotonic() + 30
        while True:
            with socket.socket() as sock:
                if sock.connect_ex(("127.0.0.1", port)) == 0:
                    break
            alive = proc.returncode is None and time.monotonic() < deadline
            assert alive, "moto_server did not start"
            await asyncio.sleep(0.1)
        yield {
            "PRESSROOM_STORAGE": "s3",
            "PRESSROOM_S3_ENDPOINT": f"http://127.0.0.1:{port}",
            "PRESSROOM_S3_BUCKET": "bench",
            "PRESSROOM_S3_ACCESS_KEY": "bench",
            "PRESSROOM_S3_SECRET_KEY": "bench",
        }
    finally:
        proc.terminate()
        await proc.wait()


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--jobs", type=int, default=200)
    parser.add_argument("--pages", type=int, default=2)
    parser.add_argument("--renderers", default="1,2,4", help="renderer processes, in turn")
    args = parser.parse_args()
    counts = [int(n) for n in args.renderers.split(",")]
    chromium = bench.pressroom_chromium()  # (a'): the binary the renderers run
    os.environ["PRESSROOM_RENDER_CONCURRENCY"] = str(args.pages)
    rates: dict[tuple[str, int], float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        tuned = [await bench.ceiling(chromium, args.pages, args.jobs, tuned=True)]
        for storage in ("local", "s3"):
            for count in counts:
                print(f"{count} renderer(s), {storage} storage")
                async with contextlib.AsyncExitStack() as stack:
                    env = await stack.enter_async_context(
                        bench.environment(folder / f"{storage}{count}")
                    )
                    if storage == "s3":
                        env = {**env, **await stack.enter_async_context(moto(folder))}
                    run = await bench.end_to_end(env, folder, args.jobs, renderers=count)
                assert run["failed"] == 0, f"{run['failed']} jobs not done"
                rates[storage, count] = run["rate"]
        tuned.append(await bench.ceiling(chromium, args.pages, args.jobs, tuned=True))
    print(f"{args.jobs} PDFs a run, {args.pages} pages per renderer, {os.cpu_count()} cores")
    print(f"(a') tuned loop, one Chromium: {tuned[0]:.1f} PDFs/s before, {tuned[1]:.1f} after")
    for storage in ("local", "s3"):
        for count in counts:
            rate = rates[storage, count]
            print(
                f"    {count} renderer(s), {storage:<5} storage: {rate:5.1f} PDFs/s, "
                f"{rate / rates[storage, counts[0]]:.2f} of {counts[0]}, "
                f"{rate / max(tuned):.2f} of (a')"
            )


if __name__ == "__main__":
    import uvloop

    uvloop.run(main())

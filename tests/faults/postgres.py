"""A PostgreSQL of one fault test's own (pgserver in tmp_path), which the test can freeze,
stop and start again; and what the PostgreSQL-outage tests share."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path
from typing import Any

import aiohttp
import psutil

from services.dev import clear_stale_postgres
from tests.conftest import admin_call
from tests.faults.harness import Cluster


def _running(pid: int) -> bool:
    """Alive and not a zombie (this sandbox's init does not reap daemonised processes)."""
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


class OwnPostgres:
    """A pgserver instance only this test uses, so it can be frozen, stopped and started."""

    def __init__(self, path: Path) -> None:
        import pgserver

        self.path = path
        self.server: Any = pgserver.get_server(path, cleanup_mode="stop")
        self.server.psql("CREATE DATABASE pressroom;")
        self.url = str(self.server.get_uri("pressroom"))

    def processes(self) -> list[psutil.Process]:
        """The postmaster and every backend and helper it started."""
        postmaster = psutil.Process(self.server.get_pid())
        return [postmaster, *postmaster.children(recursive=True)]

    def freeze(self) -> None:
        """SIGSTOP every process: sockets stay open and connects still complete in the
        kernel's backlog, but nothing answers (a hung VM, a stalled disk)."""
        for proc in self.processes():
            proc.send_signal(signal.SIGSTOP)

    def thaw(self) -> None:
        for proc in self.processes():
            proc.send_signal(signal.SIGCONT)

    def stop(self) -> None:
        """Fast shutdown (SIGINT), waited for."""
        pid = self.server.get_pid()
        os.kill(pid, signal.SIGINT)
        end = time.monotonic() + 30
        while _running(pid):
            assert time.monotonic() < end, "PostgreSQL did not stop within 30 s"
            time.sleep(0.05)

    def start(self) -> None:
        from pgserver.utils import ensure_prefix_permissions

        clear_stale_postgres(self.path)
        # pgserver opened the folders above the data for its own user when it first
        # started; a pytest session starting meanwhile closes `pytest-of-<user>` again
        # (0700), and PostgreSQL, not root, must get through it.
        ensure_prefix_permissions(self.path)
        self.server.ensure_postgres_running()
        assert str(self.server.get_uri("pressroom")) == self.url

    def close(self) -> None:
        self.server.cleanup()


async def revoked_key(cluster: Cluster) -> str:
    """A second key of the cluster's tenant, revoked before the outage."""
    url = f"{cluster.url}/admin/tenants/{cluster.tenant.id}/keys"
    async with aiohttp.ClientSession() as http:
        key = await admin_call(http, "POST", url, None, 201)
        await admin_call(http, "DELETE", f"{cluster.url}/admin/keys/{key['id']}", None, 204)
    return str(key["key"])

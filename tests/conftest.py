"""Real servers for the tests: nats-server, PostgreSQL, moto's S3, and the services.

Each test gets its own NATS (own store dir, free port) and its own database; PostgreSQL and
the S3 server are shared by the session. Nothing here uses the machine's own services on
their standard ports.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import inspect
import json
import random
import re
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from services.core.log import busaccess, buskeys
from services.core.runtime.settings import Settings

BIN = Path(sys.executable).parent
ADMIN_KEY = "test-admin-key"
SERVER_KEY = "dGVzdC1zZXJ2ZXIta2V5LTMyLWJ5dGVzLWxvbmctISE="  # 32 bytes, for tests only
ADMIN = {"Authorization": f"Bearer {ADMIN_KEY}"}
GENEROUS = {"per_second": 10_000, "burst": 100_000}
"""Rate limit of the tenants tests make unless they test limits: never the bottleneck."""


def _ephemeral_ports_start() -> int:
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768  # Linux's default


def free_port() -> int:
    """A port nothing listened on a moment ago. Only for a server that cannot bind port 0
    and tell which port it got, or for a port where nothing must listen; otherwise see
    `reported_port`.

    Drawn from below the kernel's ephemeral range: an outgoing connection or a server
    bound to port 0 (Chromium, NATS, PostgreSQL clients) can never be given it between
    this check and the caller's bind, as one was with a port the kernel picked.
    """
    start = _ephemeral_ports_start()
    for _ in range(100):
        port = random.randrange(max(1024, start - 12000), start)
        if port in _GIVEN:
            continue
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            _GIVEN.add(port)
            return port
    raise RuntimeError("no free port below the ephemeral range")


_GIVEN: set[int] = set()
"""Ports `free_port` handed out in this run: never handed out twice, since a service
given one may not have bound it yet when the next service's port is drawn (a renderer
once found its metrics port taken that way)."""


def reported_port(
    proc: subprocess.Popen[bytes], read: Callable[[], int | None], timeout: float, what: str
) -> int:
    """The port a server started on port 0 reports (`read` returns None until it has);
    fails at once, naming `what`, if the server exits first."""
    end = time.monotonic() + timeout
    while (port := read()) is None:
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited with status {proc.returncode}")
        if time.monotonic() > end:
            raise TimeoutError(f"{what} did not report its port within {timeout}s")
        time.sleep(0.02)
    return port


def nats_port(ports_dir: Path, pid: int) -> int | None:
    """The client port nats-server `pid` wrote to its `--ports_file_dir` file (None until
    the file is there and whole)."""
    try:
        urls = json.loads((ports_dir / f"nats-server_{pid}.ports").read_text())
    except (FileNotFoundError, ValueError):
        return None
    return int(urls["nats"][0].rsplit(":", 1)[1])


def logged_port(log: Path, pattern: str) -> int | None:
    """The port in the first match of `pattern` (one group) in `log`; None until logged."""
    found = re.search(pattern, log.read_text(errors="replace")) if log.exists() else None
    return int(found.group(1)) if found else None


def wait_until(check: Callable[[], Any], timeout: float, what: str) -> Any:
    """Poll `check` until it returns something truthy, and return that."""
    end = time.monotonic() + timeout
    while not (value := check()):
        if time.monotonic() > end:
            raise TimeoutError(f"{what} not ready within {timeout}s; last value: {value!r}")
        time.sleep(0.02)
    return value


async def eventually(
    check: Callable[[], Any],
    timeout: float = 30.0,
    what: str = "condition",
    interval: float = 0.05,
) -> Any:
    """Poll `check` (plain or async) until it returns something truthy and return that;
    at the deadline fail naming `what`, with the last value."""
    end = time.monotonic() + timeout
    value = None
    while time.monotonic() < end:
        value = check()
        if inspect.isawaitable(value):
            value = await value
        if value:
            return value
        await asyncio.sleep(interval)
    raise AssertionError(f"{what}: not met within {timeout:g}s; last value: {value!r}")


NATS_SEEDS = {role: buskeys.new_seed() for role in busaccess.SERVICES}
"""Each service's identity on the tests' NATS (`Stack` and the fault harness hand each
service its own), so every test that runs the services runs them with the permissions
`busaccess` grants them in production."""
NATS_TEST_USER = ("test", "test-password")
"""The tests' own identity (in `NatsServer.url`): `Role.ADMIN`, for what a test does
besides running the services (reading the log, publishing what it sets up)."""


def nats_authorization() -> str:
    """The tests' nats-server `authorization` block: the services' identities and the
    tests' own."""
    user, password = NATS_TEST_USER
    users = [busaccess.user(r, nkey=buskeys.public_key(s)) for r, s in NATS_SEEDS.items()]
    users.append(busaccess.user(busaccess.Role.ADMIN, user=user, password=password))
    return busaccess.authorization(users)


def as_service(settings: Settings, name: str) -> Settings:
    """`settings` for the service `name`: with its identity on NATS."""
    return replace(settings, nats_nkey_seed=NATS_SEEDS[busaccess.Role(name)])


@dataclass
class NatsServer:
    """A nats-server process with JetStream and the services' permissions
    (`nats_authorization`); stop() and start() keep its store dir."""

    root: Path
    port: int = 0
    monitor_port: int = 0  # its HTTP monitoring endpoint (/jsz, /varz), when not 0
    proc: subprocess.Popen[bytes] | None = None
    config: str = ""  # more of nats-server's configuration (a `tls` block)

    @property
    def url(self) -> str:
        """The URL with the tests' own credentials (`NATS_TEST_USER`)."""
        user, password = NATS_TEST_USER
        return f"nats://{user}:{password}@127.0.0.1:{self.port}"

    def start(self) -> None:
        """Start on a port the server picks (`-p -1`) and reports; a restart reuses that
        port, since the services reconnect to the URL they were given."""
        self.root.mkdir(parents=True, exist_ok=True)
        monitor = ["-m", str(self.monitor_port)] if self.monitor_port else []
        config = self.root / "auth.conf"
        config.write_text(nats_authorization() + self.config)
        with (self.root / "nats.log").open("ab") as log:
            self.proc = subprocess.Popen(
                [str(BIN / "nats-server"), "-c", str(config), "-js", "-sd", str(self.root),
                 "-a", "127.0.0.1", "-p", str(self.port or -1),
                 "--ports_file_dir", str(self.root), *monitor],
                stdout=log, stderr=subprocess.STDOUT,
            )  # fmt: skip
        if not self.port:
            pid = self.proc.pid
            self.port = reported_port(self.proc, lambda: nats_port(self.root, pid), 15, "nats")
        wait_until(self._listening, 15, "nats-server")

    def _listening(self) -> bool:
        with socket.socket() as sock:
            return sock.connect_ex(("127.0.0.1", self.port)) == 0

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(sig)
            self.proc.wait(15)
        self.proc = None

    def refusals(self) -> list[str]:
        """What the server refused a client: its log's authentication errors and
        permission violations (a publish or subscribe the client's identity may not
        make)."""
        try:
            lines = (self.root / "nats.log").read_text().splitlines()
        except FileNotFoundError:
            return []
        return [line for line in lines if "Violation" in line or "authentication error" in line]


@pytest.fixture
def nats_server(tmp_path: Path) -> Iterator[NatsServer]:
    """Each test's own nats-server. At the end no client may have been refused anything:
    the services, each with its own identity, had every permission they needed."""
    server = NatsServer(tmp_path / "nats")
    server.start()
    yield server
    server.stop()
    assert not server.refusals(), "NATS refused a client:\n" + "\n".join(server.refusals())


@dataclass
class Postgres:
    server: Any

    def new_database(self) -> str:
        name = f"t_{uuid.uuid4().hex[:12]}"
        self.server.psql(f"CREATE DATABASE {name};")
        return str(self.server.get_uri(name))


@pytest.fixture(scope="session")
def postgres(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Postgres]:
    import pgserver

    server = pgserver.get_server(tmp_path_factory.mktemp("pg"), cleanup_mode="stop")
    yield Postgres(server)
    server.cleanup()


@pytest.fixture
def database_url(postgres: Postgres) -> str:
    return postgres.new_database()


@pytest.fixture(scope="session")
def s3_endpoint(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    log = tmp_path_factory.mktemp("moto") / "moto.log"
    with log.open("wb") as out:  # moto binds port 0 and logs "Running on http://…:<port>"
        proc = subprocess.Popen(
            [str(BIN / "moto_server"), "-H", "127.0.0.1", "-p", "0"],
            stdout=out, stderr=subprocess.STDOUT,
        )  # fmt: skip
    pattern = r"Running on http://127\.0\.0\.1:(\d+)"
    port = reported_port(proc, lambda: logged_port(log, pattern), 30, "moto_server")
    endpoint = f"http://127.0.0.1:{port}"

    def up() -> bool:
        with socket.socket() as sock:
            return sock.connect_ex(("127.0.0.1", port)) == 0

    wait_until(up, 30, "moto_server")
    yield endpoint
    proc.terminate()
    proc.wait(10)


LAYERS = ("unit", "integration", "faults", "deploy")
"""The folders of tests/, each a marker: `pytest -m unit` runs the pure logic alone."""


SERIAL = {Path("integration/test_package.py"), Path("faults/test_sigterm_renderer.py")}
"""Tests outside deploy/ run alone, marked `serial` with deploy/: the package test
builds the wheel in the working tree (`build/` and egg-info shared, as the image builds
share podman's store); the SIGTERM test times the renderer's hand-back against the ack
wait, which another worker's load made late (it failed so under `-n 2`)."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark every test with its folder's layer, and `chromium` when it needs the browser
    (the `chromium` fixture is in its closure), so the markers cannot drift from what a
    test really uses.

    `make test` runs the rest on two workers, a file's tests on one (`--dist loadfile`,
    so its module fixtures, a browser pool or a stack, are made once), then the tests
    marked `serial` (deploy/ and `SERIAL`) in one process."""
    for item in items:
        path = item.path.relative_to(Path(__file__).parent)
        layer = path.parts[0]
        if layer in LAYERS:
            item.add_marker(layer)
        if layer == "deploy" or path in SERIAL:
            item.add_marker("serial")
        if "chromium" in getattr(item, "fixturenames", ()):
            item.add_marker("chromium")


@pytest.fixture(scope="session")
def chromium() -> str:
    """The binary the renderer would use: `PRESSROOM_CHROMIUM`, else the headless shell
    where installed, else chromium on PATH (make test installs both)."""
    return Settings().chromium_path()


@pytest.fixture
def settings(tmp_path: Path, nats_server: NatsServer, database_url: str, chromium: str) -> Settings:
    """Settings for one test's stack: local storage, private networks allowed (loopback)."""
    # free_port: the gateway's port is part of its settings (`base_url`, the links it
    # hands out) before it starts, so it cannot bind port 0 and report the one it got.
    port = free_port()
    return Settings(
        port=port,
        metrics_port=0,
        data_dir=str(tmp_path),
        nats_url=nats_server.url,
        database_url=database_url,
        storage_dir=str(tmp_path / "files"),
        url_secret="test-url-secret",
        admin_key=ADMIN_KEY,
        server_key=SERVER_KEY,
        webhook_secret="whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
        webhook_schedule=(0.0, 0.2, 0.2),
        webhook_timeout=2.0,
        chromium=chromium,
        allow_private_networks=True,
        retry_base=0.2,
        retry_cap=1.0,
        shutdown_grace=5.0,
        stream_max_bytes=256 * 2**20,  # the default reserves 4 GiB of the disk in NATS
    )


@pytest.fixture
def s3_settings(settings: Settings, s3_endpoint: str) -> Settings:
    return replace(
        settings,
        storage="s3",
        s3_endpoint=s3_endpoint,
        s3_bucket=f"b-{uuid.uuid4().hex[:10]}",
        s3_access_key="testing",
        s3_secret_key="testing",
    )


@dataclass
class Tenant:
    """A tenant a test made through the admin API, with one API key and a session that
    sends it."""

    id: str
    name: str
    key: str
    key_id: str
    webhook_secret: str
    http: aiohttp.ClientSession

    @property
    def auth(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.key}"}


async def admin_call(
    http: aiohttp.ClientSession, method: str, url: str, body: Any = None, status: int = 200
) -> Any:
    """One admin API request, asserting its status; the decoded JSON answer (or None)."""
    async with http.request(method, url, json=body, headers=ADMIN) as response:
        assert response.status == status, await response.text()
        return await response.json() if response.status != 204 else None


async def make_tenant(
    http: aiohttp.ClientSession,
    base_url: str,
    name: str | None = None,
    scopes: list[str] | None = None,
    **limits: Any,
) -> Tenant:
    """A new tenant (generous limits unless `limits` says otherwise) and an API key."""
    body = {"name": name or f"t-{uuid.uuid4().hex[:8]}", "rate_limit": GENEROUS, **limits}
    tenant = await admin_call(http, "POST", f"{base_url}/admin/tenants", body, 201)
    keys_url = f"{base_url}/admin/tenants/{tenant['id']}/keys"
    key = await admin_call(http, "POST", keys_url, {"scopes": scopes} if scopes else None, 201)
    session = aiohttp.ClientSession(headers={"Authorization": f"Bearer {key['key']}"})
    return Tenant(
        tenant["id"], tenant["name"], key["key"], key["id"], tenant["webhook_secret"]["secret"],
        session,
    )  # fmt: skip


@dataclass
class Stack:
    """The five services of one test, in this process, talking over real sockets.

    `client` acts for the tenant `tenant` (made at start); `new_tenant()` makes others.
    """

    settings: Settings
    stop: asyncio.Event = field(default_factory=asyncio.Event)
    tasks: list[asyncio.Task[None]] = field(default_factory=list)
    http: aiohttp.ClientSession | None = None
    tenants: list[Tenant] = field(default_factory=list)

    @property
    def url(self) -> str:
        return self.settings.base_url

    async def start(self, *names: str) -> None:
        for name in names or ("gateway", "projector", "renderer", "notifier", "conductor"):
            serve = importlib.import_module(f"services.{name}.main").serve
            settings = as_service(self.settings, name)
            self.tasks.append(asyncio.create_task(serve(settings, self.stop)))
        self.http = self.http or aiohttp.ClientSession()
        if not names or "gateway" in names:
            await eventually(self._ready, 30)
            if not self.tenants and self.settings.auth_enabled:
                anonymous, self.http = self.http, (await self.new_tenant()).http
                await anonymous.close()

    async def new_tenant(
        self, name: str | None = None, scopes: list[str] | None = None, **limits: Any
    ) -> Tenant:
        async with aiohttp.ClientSession() as http:
            tenant = await make_tenant(http, self.url, name, scopes, **limits)
        self.tenants.append(tenant)
        return tenant

    @property
    def tenant(self) -> Tenant:
        """The tenant `client` acts for."""
        return self.tenants[0]

    async def _ready(self) -> bool:
        for task in self.tasks:
            if task.done():
                task.result()  # a service that died at start: show why
        try:
            async with self.client.get(f"{self.url}/readyz") as response:
                return response.status == 200
        except aiohttp.ClientError:
            return False

    @property
    def client(self) -> aiohttp.ClientSession:
        assert self.http is not None
        return self.http

    async def close(self) -> None:
        self.stop.set()
        results = await asyncio.gather(*self.tasks, return_exceptions=True)
        sessions = {id(t.http): t.http for t in self.tenants}
        if self.http is not None:
            sessions[id(self.http)] = self.http
        for session in sessions.values():
            await session.close()
        errors = [r for r in results if isinstance(r, BaseException)]
        assert not errors, f"a service failed: {errors!r}"

    async def submit(self, body: dict[str, Any], **headers: str) -> dict[str, Any]:
        async with self.client.post(f"{self.url}/jobs", json=body, headers=headers) as response:
            assert response.status == 202, await response.text()
            result: dict[str, Any] = await response.json()
            return result

    async def job(self, job_id: str) -> dict[str, Any]:
        async with self.client.get(f"{self.url}/jobs/{job_id}") as response:
            assert response.status == 200, await response.text()
            result: dict[str, Any] = await response.json()
            return result

    async def finished(self, job_id: str, timeout: float = 60) -> dict[str, Any]:
        """Poll until the job is terminal; returns its status document."""

        async def terminal() -> dict[str, Any] | None:
            job = await self.job(job_id)
            return job if job["status"] in {"done", "failed", "cancelled"} else None

        result: dict[str, Any] = await eventually(terminal, timeout)
        return result

    async def rendered(self, body: dict[str, Any], folder: Path) -> Path:
        """Submit `body`, wait until it is `done` and download its document into
        `folder` (named after the job); returns the file."""
        accepted = await self.submit(body)
        job = await self.finished(accepted["id"])
        assert job["status"] == "done", job
        async with self.client.get(job["url"]) as response:
            assert response.status == 200, await response.text()
            path = folder / f"{accepted['id']}.pdf"
            path.write_bytes(await response.read())
        return path


@pytest.fixture
async def stack(settings: Settings) -> AsyncIterator[Stack]:
    stack = Stack(settings)
    await stack.start()
    yield stack
    await stack.close()


@dataclass
class Receiver:
    """A webhook receiver on loopback that records requests and answers with `statuses`."""

    statuses: list[int] = field(default_factory=list)
    requests: list[dict[str, Any]] = field(default_factory=list)
    url: str = ""

    async def handle(self, request: web.Request) -> web.Response:
        body = await request.read()
        self.requests.append({"headers": dict(request.headers), "body": body,
                              "json": json.loads(body)})  # fmt: skip
        status = self.statuses.pop(0) if self.statuses else 200
        return web.Response(status=status, text="ok")


@contextlib.asynccontextmanager
async def serving(app: web.Application) -> AsyncIterator[str]:
    """Serve `app` on a free loopback port for the test; yields its base URL."""
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.1)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    try:
        yield f"http://127.0.0.1:{runner.addresses[0][1]}"
    finally:
        with contextlib.suppress(Exception):
            await runner.cleanup()


@pytest.fixture
async def receiver() -> AsyncIterator[Receiver]:
    rec = Receiver()
    app = web.Application()
    app.router.add_post("/hook", rec.handle)
    async with serving(app) as base:
        rec.url = f"{base}/hook"
        yield rec

"""Fault harness: the services as real processes that a test can kill, stop or cut off.

`Cluster` runs each service as `python -m services.cli <name>` with an environment built from
the `settings` fixture (its own NATS, database and storage per test), in a session of its
own, logging to a file under the test's tmp_path. A renderer's Chromium stays in the
renderer's session even after the renderer is SIGKILLed, so it is found by session id and
killed too: nothing outlives the test.

`Ledger` records what the client was told (every 202 with the status the job must end in,
every refusal), and `assert_no_job_left_behind` is the check every fault test ends with:
each accepted job is in exactly one terminal state, the expected one; no job is lost; no
job has two terminal events; storage holds exactly one object per done job; the projection
holds every message of the log. It prints a one-line summary (`pytest -s` shows it).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import itertools
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import asyncpg
import nats
import psutil

from services.core.log.busaccess import Role
from services.core.model import subjects
from services.core.runtime.settings import Settings
from tests.conftest import NATS_SEEDS, Tenant, eventually, free_port, make_tenant

REPO = Path(__file__).resolve().parents[2]
TERMINAL = ("done", "failed", "cancelled")

FAULT_ENV = {
    "PRESSROOM_ACK_WAIT": "3",  # a silent worker's job comes back after 3 s, not 30
    "PRESSROOM_RETRY_BASE": "0.2",
    "PRESSROOM_RETRY_CAP": "2",
    "PRESSROOM_MAX_ATTEMPTS": "10",  # outages of a few seconds must not exhaust the retries
    "PRESSROOM_RENDER_CONCURRENCY": "2",
    "PRESSROOM_SHUTDOWN_GRACE": "5",
    "PRESSROOM_ALLOW_PRIVATE_NETWORKS": "1",
    "PRESSROOM_STREAM_MAX_BYTES": str(256 * 2**20),  # the tests need no more disk than this
}


def small_job(n: int) -> dict[str, Any]:
    """A job that renders in 50 to 100 ms on this machine."""
    return {"template": "<p>{{n}}</p>", "data": {"n": n}}


def slow_job(n: int) -> dict[str, Any]:
    """A job of about 90 pages: 0.7 s of rendering when the machine is idle."""
    template = "{% for i in range(rows) %}<p>{{ n }}.{{ i }}</p>{% endfor %}"
    return {"template": template, "data": {"n": n, "rows": 3000}}


def _env_value(value: Any) -> str:
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, tuple):
        return ",".join(f"{v:g}" for v in value)
    return str(value)


def service_env(settings: Settings, **overrides: str) -> dict[str, str]:
    """The process environment for `settings`, with the fault defaults and `overrides`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PRESSROOM_")}
    for f in dataclasses.fields(Settings):
        env[f.metadata["env"]] = _env_value(getattr(settings, f.name))
    env.update(FAULT_ENV)
    env.update(overrides)
    Settings.from_env(env)  # a bad override fails here, not silently in a subprocess
    return env


def session_members(sid: int) -> list[psutil.Process]:
    """Live processes of session `sid` (a service and whatever it started, orphans included)."""
    members = []
    for proc in psutil.process_iter(["status"]):
        with contextlib.suppress(OSError, psutil.Error):
            if os.getsid(proc.pid) == sid and proc.info["status"] != psutil.STATUS_ZOMBIE:
                members.append(proc)
    return members


def _gone(proc: psutil.Process) -> bool:
    """Exited, or a zombie: killed orphans stay zombies until init reaps them."""
    try:
        return bool(proc.status() == psutil.STATUS_ZOMBIE)
    except psutil.NoSuchProcess:
        return True


def kill_session(sid: int, timeout: float = 10) -> int:
    """SIGKILL every live process of session `sid`; returns how many there were."""
    members = session_members(sid)
    for proc in members:
        with contextlib.suppress(psutil.Error):
            proc.kill()
    end = time.monotonic() + timeout
    while not all(_gone(proc) for proc in members):
        if time.monotonic() > end:
            raise AssertionError(f"processes of session {sid} survived SIGKILL: {members}")
        time.sleep(0.01)
    return len(members)


async def poll(check: Any, timeout: float, what: str, interval: float = 0.1) -> Any:
    """`eventually`, polling every 0.1 s: fault checks ask servers under load."""
    return await eventually(check, timeout, what, interval)


@dataclass
class Service:
    """One service process, its log file and its metrics port."""

    name: str
    proc: subprocess.Popen[bytes]
    log: Path
    metrics_port: int
    expected_exit: bool = False  # killed or stopped on purpose by the test

    @property
    def pid(self) -> int:
        return self.proc.pid

    @property
    def worker(self) -> str:
        """The name the renderer puts in its `started` events."""
        return f"{socket.gethostname()}-{self.pid}"

    def alive(self) -> bool:
        return self.proc.poll() is None

    def tail(self, lines: int = 40) -> str:
        text = self.log.read_text(errors="replace") if self.log.exists() else ""
        return "\n".join(text.splitlines()[-lines:])

    async def renders_in_flight(self) -> float:
        """`pressroom_renders_in_flight` of this renderer; 0 while it cannot be read."""
        return await self.gauge("pressroom_renders_in_flight")

    async def probe(self, path: str) -> tuple[int, Any]:
        """Status and JSON body of this service's `/healthz` or `/readyz` (on its metrics
        port, where a Kubernetes probe asks); (0, None) while it does not answer."""
        url = f"http://127.0.0.1:{self.metrics_port}{path}"
        try:
            async with (
                aiohttp.ClientSession() as http,
                http.get(url, timeout=aiohttp.ClientTimeout(total=2)) as response,
            ):
                return response.status, await response.json()
        except (aiohttp.ClientError, TimeoutError):
            return 0, None

    async def gauge(self, name: str) -> float:
        """A gauge of this service's `/metrics`; 0 while it cannot be read."""
        url = f"http://127.0.0.1:{self.metrics_port}/metrics"
        try:
            async with (
                aiohttp.ClientSession() as http,
                http.get(url, timeout=aiohttp.ClientTimeout(total=2)) as response,
            ):
                text = await response.text()
        except (aiohttp.ClientError, TimeoutError):
            return 0.0
        found = re.search(rf"^{name} (\S+)$", text, re.M)
        return float(found.group(1)) if found else 0.0


@dataclass
class Reply:
    """One POST /jobs as the client saw it."""

    status: int
    body: Any
    seconds: float
    started: float


@dataclass
class Ledger:
    """What the client was told: each 202 (id → the status it must end in), each refusal."""

    accepted: dict[str, str] = field(default_factory=dict)
    refused: list[Reply] = field(default_factory=list)
    answers: list[Reply] = field(default_factory=list)  # every reply, in order


class Cluster:
    """The five services of one test as subprocesses; see the module docstring."""

    def __init__(self, settings: Settings, root: Path) -> None:
        self.settings = settings
        self.logs = root / "logs"
        self.logs.mkdir(parents=True, exist_ok=True)
        self.env = service_env(settings)
        self.services: list[Service] = []
        self.ledger = Ledger()
        self._numbers = itertools.count(1)
        self._http: aiohttp.ClientSession | None = None
        self._tenant: Tenant | None = None

    @property
    def url(self) -> str:
        return self.settings.base_url

    @property
    def database_url(self) -> str:
        return self.env["PRESSROOM_DATABASE_URL"]

    @property
    def ack_wait(self) -> float:
        return float(self.env["PRESSROOM_ACK_WAIT"])

    @property
    def http(self) -> aiohttp.ClientSession:
        if self._http is None:
            self._http = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=20))
        return self._http

    def renderers(self) -> list[Service]:
        return [s for s in self.services if s.name == "renderer" and s.alive()]

    # -- processes ---------------------------------------------------------------------

    def start(self, name: str) -> Service:
        """Start one service process (it does not wait for it to be ready)."""
        # free_port: a service serves /metrics on the port it is given (0 turns it off)
        # and does not report the port it bound, and the test must know it to read it.
        port = free_port()
        log = self.logs / f"{name}-{next(self._numbers)}.log"
        seed = NATS_SEEDS[Role(name)]  # its own identity on NATS, as in production
        env = {**self.env, "PRESSROOM_METRICS_PORT": str(port), "PRESSROOM_NATS_NKEY_SEED": seed}
        with log.open("ab") as out:
            proc = subprocess.Popen(
                [sys.executable, "-m", "services.cli", name],
                env=env, cwd=REPO, stdout=out, stderr=subprocess.STDOUT,
                start_new_session=True,
            )  # fmt: skip
        service = Service(name, proc, log, port)
        self.services.append(service)
        return service

    async def up(self, renderers: int = 1, **env: str) -> None:
        """Start gateway, projector, notifier, conductor and `renderers` renderers; wait
        until all serve. Called again after the test stopped them, it starts them again."""
        self.env.update(env)
        Settings.from_env(self.env)
        for name in ("gateway", "projector", "notifier", "conductor"):
            self.start(name)
        for _ in range(renderers):
            self.start("renderer")
        await poll(self.gateway_ready, 45, "gateway /readyz")
        if self._tenant is None:
            await self._make_tenant()
        await self.wait_consuming(renderers)
        await self.wait_pulling(subjects.CONDUCTOR)

    async def _make_tenant(self) -> None:
        """The tenant every job of the test belongs to; the client sends its key from now."""
        self._tenant = await make_tenant(self.http, self.url)
        await self._tenant.http.close()
        await self.http.close()
        self._http = aiohttp.ClientSession(
            timeout=aiohttp.ClientTimeout(total=20), headers=self._tenant.auth
        )

    @property
    def tenant(self) -> Tenant:
        assert self._tenant is not None, "up() makes the tenant"
        return self._tenant

    async def gateway_ready(self) -> bool:
        self.check_alive()
        try:
            async with self.http.get(f"{self.url}/readyz") as response:
                return response.status == 200
        except aiohttp.ClientError:
            return False

    def check_alive(self) -> None:
        """Fail with its log if a service that should run has exited."""
        for service in self.services:
            code = service.proc.poll()
            if code is not None and not service.expected_exit:
                raise AssertionError(
                    f"{service.name} (pid {service.pid}) exited with {code}:\n{service.tail()}"
                )

    async def wait_consuming(self, renderers: int, timeout: float = 45) -> None:
        """Until `renderers` renderers take work (Chromium up, their lanes' bells heard:
        `pressroom_renderer_taking_work`)."""

        async def waiting() -> bool:
            self.check_alive()
            taking = [await r.gauge("pressroom_renderer_taking_work") for r in self.renderers()]
            return sum(taking) >= renderers

        await poll(waiting, timeout, f"{renderers} renderer(s) pulling", interval=0.05)

    async def wait_pulling(self, durable: str, timeout: float = 45) -> None:
        """Until a pull request is waiting on `durable` (its service is up and fetching)."""

        async def waiting() -> bool:
            self.check_alive()
            info = await self.consumer_info(durable)
            return info is not None and info.num_waiting >= 1

        await poll(waiting, timeout, f"{durable} pulling", interval=0.05)

    def running(self, name: str) -> list[Service]:
        """The live processes of service `name`."""
        return [s for s in self.services if s.name == name and s.alive()]

    def kill(self, service: Service, *, reap: bool = True) -> int:
        """SIGKILL the service process alone, as the OOM killer would.

        Returns how many of its processes (Chromium) were still alive right after it died;
        with `reap` those are killed next, as the end of a container would (without it,
        `close()` kills whatever is left at the end of the test).
        """
        service.expected_exit = True
        service.proc.send_signal(signal.SIGKILL)
        service.proc.wait(10)
        if not reap:
            return len(session_members(service.pid))
        return kill_session(service.pid)

    async def terminate(self, service: Service, timeout: float) -> tuple[int | None, float]:
        """SIGTERM the service; (exit code or None if still running, seconds it took)."""
        service.expected_exit = True
        started = time.monotonic()
        service.proc.send_signal(signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            await asyncio.to_thread(service.proc.wait, timeout)
        return service.proc.poll(), time.monotonic() - started

    async def close(self) -> None:
        for service in self.services:
            if service.alive():
                service.proc.kill()
            with contextlib.suppress(subprocess.TimeoutExpired):
                service.proc.wait(10)
            kill_session(service.pid)
        if self._http is not None:
            await self._http.close()

    def tails(self) -> str:
        return "\n".join(
            f"----- {s.log.name} (pid {s.pid}, exit {s.proc.poll()}) -----\n{s.tail()}"
            for s in self.services
        )

    # -- the client ----------------------------------------------------------------------

    async def post_job(
        self,
        body: dict[str, Any],
        *,
        expect: str = "done",
        key: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> Reply:
        """POST /jobs once; a 202 goes into the ledger with the status the job must end in."""
        headers = {**(headers or {}), **({"Idempotency-Key": key} if key else {})}
        started = time.monotonic()
        async with self.http.post(f"{self.url}/jobs", json=body, headers=headers) as response:
            try:
                payload: Any = await response.json(content_type=None)
            except ValueError:
                payload = await response.text()
            reply = Reply(response.status, payload, time.monotonic() - started, started)
        self.ledger.answers.append(reply)
        if reply.status == 202:
            self.ledger.accepted[payload["id"]] = expect
        else:
            self.ledger.refused.append(reply)
        return reply

    async def submit_many(
        self,
        count: int,
        *,
        first: int = 0,
        parallel: int = 16,
        job: Callable[[int], dict[str, Any]] = small_job,
    ) -> list[str]:
        """Submit `count` jobs (`job(n)`, small by default), `parallel` at a time; each must
        get 202."""
        gate = asyncio.Semaphore(parallel)

        async def one(n: int) -> str:
            async with gate:
                reply = await self.post_job(job(n))
            assert reply.status == 202, reply
            return str(reply.body["id"])

        return list(await asyncio.gather(*(one(first + i) for i in range(count))))

    async def get_job(self, job_id: str) -> tuple[int, Any]:
        async with self.http.get(f"{self.url}/jobs/{job_id}") as response:
            return response.status, await response.json(content_type=None)

    # -- what the services wrote ---------------------------------------------------------

    async def query(self, sql: str, *args: Any) -> list[asyncpg.Record]:
        conn = await asyncpg.connect(self.database_url, timeout=5)
        try:
            return list(await conn.fetch(sql, *args))
        finally:
            await conn.close()

    async def started_events(self) -> list[tuple[str, str, int, float]]:
        """Every `started` event in stream order: (job id, worker, attempt, unix time)."""
        rows = await self.query(
            "SELECT job_id, body->>'worker' AS worker, (body->>'attempt')::int AS attempt, "
            "extract(epoch FROM at)::float8 AS at FROM job_events WHERE type = 'started' "
            "ORDER BY stream_seq"
        )
        return [(r["job_id"], r["worker"], r["attempt"], r["at"]) for r in rows]

    async def count_events(self, kind: str) -> int:
        """Rows of `kind` in job_events; -1 while PostgreSQL cannot be reached."""
        try:
            rows = await self.query("SELECT count(*) AS n FROM job_events WHERE type = $1", kind)
        except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError, TimeoutError):
            return -1
        return int(rows[0]["n"])

    @contextlib.asynccontextmanager
    async def jetstream(self) -> AsyncIterator[Any]:
        """A short-lived JetStream client of the test's own (no reconnects)."""
        nc = await nats.connect(self.settings.nats_url, allow_reconnect=False, connect_timeout=2)
        try:
            yield nc.jetstream(timeout=2)
        finally:
            await nc.close()

    async def consumer_info(self, durable: str) -> Any:
        """The durable's info, or None while NATS cannot tell."""
        with contextlib.suppress(Exception):
            async with self.jetstream() as js:
                return await js.consumer_info("JOBS", durable)
        return None

    async def stream_messages(self) -> int:
        async with self.jetstream() as js:
            info = await js.stream_info("JOBS")
        return int(info.state.messages)

    async def object_keys(self) -> tuple[set[str], list[str]]:
        """(keys under jobs/ ending in .pdf, anything else in storage)."""
        if self.env["PRESSROOM_STORAGE"] == "s3":
            keys = await asyncio.to_thread(self._s3_keys)
        else:
            root = Path(self.env["PRESSROOM_STORAGE_DIR"])
            keys = [p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()]
        pdfs = {k for k in keys if re.fullmatch(r"jobs/[^/.][^/]*/[^/.][^/]*\.pdf", k)}
        return pdfs, sorted(set(keys) - pdfs)

    def _s3_keys(self) -> list[str]:
        import boto3

        client = boto3.client(
            "s3",
            endpoint_url=self.env["PRESSROOM_S3_ENDPOINT"],
            region_name=self.env["PRESSROOM_S3_REGION"],
            aws_access_key_id=self.env["PRESSROOM_S3_ACCESS_KEY"],
            aws_secret_access_key=self.env["PRESSROOM_S3_SECRET_KEY"],
        )
        keys: list[str] = []
        pages = client.get_paginator("list_objects_v2").paginate(
            Bucket=self.env["PRESSROOM_S3_BUCKET"]
        )
        for page in pages:
            keys += [item["Key"] for item in page.get("Contents", [])]
        return keys


# -- the check every fault test ends with ------------------------------------------------


@dataclass
class Outcome:
    """What `assert_no_job_left_behind` found; tests assert more on it."""

    statuses: dict[str, dict[str, Any]]  # accepted id -> GET /jobs/{id} body
    lost: dict[str, str]  # accepted id -> its non-terminal status (or HTTP error)
    wrong: dict[str, tuple[str, str, Any]]  # accepted id -> (expected, got, error)
    duplicates: dict[str, list[str]]  # job id -> its terminal events, when more than one
    unacknowledged: dict[str, str]  # jobs the client never got a 202 for -> status
    missing_objects: list[str]
    extra_objects: list[str]
    objects: int
    stray_files: list[str]
    projection: tuple[int, int]  # (job_events rows, stream messages)
    usage: dict[str, tuple[int, int]]  # outcome -> (usage_documents rows, usage_months sum)
    seconds: float

    def count(self, status: str) -> int:
        return sum(1 for body in self.statuses.values() if body["status"] == status)


async def _terminal_in_db(cluster: Cluster, ids: list[str]) -> int | None:
    """How many of `ids` have a terminal event; None while PostgreSQL is unreachable."""
    try:
        rows = await cluster.query(
            "SELECT count(DISTINCT job_id) AS n FROM job_events "
            "WHERE job_id = ANY($1::text[]) AND type = ANY($2::text[])",
            ids, list(TERMINAL),
        )  # fmt: skip
    except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError, TimeoutError):
        return None
    return int(rows[0]["n"])


async def _wait_terminal(cluster: Cluster, ids: list[str], timeout: float) -> None:
    """Until every one of `ids` has a terminal event, or the deadline (checked after)."""
    end = time.monotonic() + timeout
    while time.monotonic() < end and await _terminal_in_db(cluster, ids) != len(ids):
        cluster.check_alive()
        await asyncio.sleep(0.25)


async def _statuses(cluster: Cluster, ids: list[str]) -> dict[str, dict[str, Any]]:
    """GET /jobs/{id} for each id; a 503 is retried for up to 20 s, another error is kept
    as the status (`HTTP 404 …`)."""
    gate = asyncio.Semaphore(16)

    async def one(job_id: str) -> dict[str, Any]:
        async with gate:
            end = time.monotonic() + 20
            while True:
                status, body = await cluster.get_job(job_id)
                if status != 503 or time.monotonic() > end:
                    break
                await asyncio.sleep(0.2)
        return dict(body) if status == 200 else {"status": f"HTTP {status} {body}"}

    bodies = await asyncio.gather(*(one(i) for i in ids))
    return dict(zip(ids, bodies, strict=True))


async def _duplicate_terminals(cluster: Cluster) -> dict[str, list[str]]:
    rows = await cluster.query(
        "SELECT job_id, array_agg(type ORDER BY stream_seq) AS types FROM job_events "
        "WHERE type = ANY($1::text[]) GROUP BY job_id HAVING count(*) > 1",
        list(TERMINAL),
    )
    return {r["job_id"]: list(r["types"]) for r in rows}


async def _projection(cluster: Cluster, timeout: float = 20) -> tuple[int, int]:
    """(job_events rows, stream messages), once equal or at the deadline: the projection
    should hold a row for every message of the log (keyed by stream sequence)."""
    end = time.monotonic() + timeout
    while True:
        rows = await cluster.query("SELECT count(*) AS n FROM job_events")
        counts = (int(rows[0]["n"]), await cluster.stream_messages())
        if counts[0] == counts[1] or time.monotonic() > end:
            return counts
        await asyncio.sleep(0.25)


async def _usage(cluster: Cluster) -> dict[str, tuple[int, int]]:
    """Per outcome, how many jobs the tenant's usage counted: (per-job rows, monthly sum)."""
    rows = await cluster.query(
        "SELECT outcome, count(*) AS n FROM usage_documents WHERE tenant_id = $1 GROUP BY outcome",
        cluster.tenant.id,
    )
    per_job = {r["outcome"]: int(r["n"]) for r in rows}
    month = (
        await cluster.query(
            "SELECT coalesce(sum(succeeded), 0) AS done, coalesce(sum(failed), 0) AS failed, "
            "coalesce(sum(cancelled), 0) AS cancelled FROM usage_months WHERE tenant_id = $1",
            cluster.tenant.id,
        )
    )[0]
    return {status: (per_job.get(status, 0), int(month[status])) for status in TERMINAL}


async def _outcome(cluster: Cluster, timeout: float) -> Outcome:
    started = time.monotonic()
    expected = cluster.ledger.accepted
    await _wait_terminal(cluster, list(expected), timeout)
    statuses = await _statuses(cluster, list(expected))
    rows = await cluster.query("SELECT id, status FROM jobs")
    unacknowledged = {r["id"]: r["status"] for r in rows if r["id"] not in expected}
    done = {i for i, s in statuses.items() if s["status"] == "done"}
    done |= {i for i, s in unacknowledged.items() if s == "done"}
    pdfs, stray = await cluster.object_keys()
    keys = {f"jobs/{cluster.tenant.id}/{i}.pdf" for i in done}
    return Outcome(
        statuses=statuses,
        lost={i: s["status"] for i, s in statuses.items() if s["status"] not in TERMINAL},
        wrong={
            i: (expected[i], s["status"], s.get("error"))
            for i, s in statuses.items()
            if s["status"] in TERMINAL and s["status"] != expected[i]
        },
        duplicates=await _duplicate_terminals(cluster),
        unacknowledged=unacknowledged,
        missing_objects=sorted(keys - pdfs),
        extra_objects=sorted(pdfs - keys),
        objects=len(pdfs),
        stray_files=stray,
        projection=await _projection(cluster),
        usage=await _usage(cluster),
        seconds=time.monotonic() - started,
    )


async def assert_no_job_left_behind(cluster: Cluster, name: str, *, timeout: float = 90) -> Outcome:
    """Every 202 ends in exactly one terminal state, the expected one; see module docstring.

    Waits up to `timeout` s for the jobs to end, prints the counts, then asserts.
    """
    outcome = await _outcome(cluster, timeout)
    _print_summary(name, cluster.ledger, outcome)
    sample = dict(itertools.islice(outcome.lost.items(), 10))
    assert not outcome.lost, f"{len(outcome.lost)} accepted jobs not terminal: e.g. {sample}"
    assert not outcome.wrong, f"jobs in another terminal state (want, got, error): {outcome.wrong}"
    assert not outcome.duplicates, f"jobs with several terminal events: {outcome.duplicates}"
    assert not outcome.missing_objects, f"done jobs without an object: {outcome.missing_objects}"
    assert not outcome.extra_objects, f"objects without a done job: {outcome.extra_objects}"
    no_url = [i for i, s in outcome.statuses.items() if s["status"] == "done" and not s["url"]]
    assert not no_url, f"done jobs without a download url: {no_url}"
    rows, messages = outcome.projection
    assert rows == messages, f"the projection holds {rows} events of the log's {messages}"
    ended = {s: outcome.count(s) + list(outcome.unacknowledged.values()).count(s) for s in TERMINAL}
    counted = {s: outcome.usage[s] for s in TERMINAL}
    assert counted == {s: (n, n) for s, n in ended.items()}, (
        f"usage (per job, per month) does not count each job once: {counted}, jobs: {ended}"
    )
    return outcome


def _print_summary(name: str, ledger: Ledger, outcome: Outcome) -> None:
    print(
        f"\n[faults] {name}: accepted={len(ledger.accepted)} done={outcome.count('done')} "
        f"failed={outcome.count('failed')} cancelled={outcome.count('cancelled')} "
        f"lost={len(outcome.lost)} wrong_status={len(outcome.wrong)} "
        f"duplicate_terminal={len(outcome.duplicates)} objects={outcome.objects} "
        f"missing_objects={len(outcome.missing_objects)} "
        f"extra_objects={len(outcome.extra_objects)} refused={len(ledger.refused)} "
        f"unacknowledged_jobs={len(outcome.unacknowledged)} "
        f"stray_files={len(outcome.stray_files)} "
        f"projected={outcome.projection[0]}/{outcome.projection[1]} "
        f"usage_done={outcome.usage['done'][1]} check={outcome.seconds:.1f}s"
    )

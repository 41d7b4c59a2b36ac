"""`pressroom dev` (what `make up` runs), as a user runs it: a real process tree.

Verifies: it comes up on embedded defaults on the port given by PRESSROOM_PORT; it makes a
tenant `dev` with an API key in `api-key` and writes the admin key to `admin-key`; the curl
line it prints works as printed; `pressroom tenants` and `pressroom keys` work against it
with nothing but PRESSROOM_PORT and PRESSROOM_DATA_DIR, and `scripts/backup.sh` with the
settings it writes to `run/operator.env`; its NATS lets in only the
services, each as its own identity, none refused anything; after the whole process tree is
SIGKILLed mid-work, a restart keeps every job, finishes the unfinished ones and reuses the
same API key; Ctrl-C (SIGINT) stops everything, leaving no process behind.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import io
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import nats
import psutil
import pypdf
import pytest
import requests

from services.core.log import buskeys
from services.core.log.busaccess import Role
from services.dev import load_secrets
from tests.conftest import free_port, wait_until

HELLO = {"template": "<h1>Hi {{name}}</h1>", "data": {"name": "Ana"}}
REPO = Path(__file__).resolve().parents[2]


class Dev:
    def __init__(self, data: Path, port: int) -> None:
        self.data, self.port = data, port
        self.url = f"http://127.0.0.1:{port}"
        self.proc: subprocess.Popen[bytes] | None = None
        self.log = data.parent / "dev.log"
        self.starts = 0

    @property
    def env(self) -> dict[str, str]:
        """The environment of a user who runs `pressroom …` next to `pressroom dev`."""
        env = {k: v for k, v in os.environ.items() if not k.startswith("PRESSROOM_")}
        env.update(PRESSROOM_PORT=str(self.port), PRESSROOM_DATA_DIR=str(self.data))
        return env

    def start(self) -> None:
        self.starts += 1
        with self.log.open("ab") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "services.cli", "dev"], env=self.env, stdout=log, stderr=log
            )
        wait_until(self.ready, 120, f"pressroom dev (log: {self.log})")
        # The gateway is ready before the keys are: wait for what is printed after them.
        wait_until(self.announced, 60, f"the announcement of pressroom dev (log: {self.log})")

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def announced(self) -> bool:
        assert self.proc is not None
        assert self.proc.poll() is None, self.output()[-3000:]
        return self.output().count("; webhook secret in ") == self.starts

    @property
    def key(self) -> str:
        return (self.data / "api-key").read_text().strip()

    @property
    def auth(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.key}"}

    def key_status(self, key: str) -> int:
        """What `GET /usage` answers with `key`: 200 for a working key, 401 otherwise."""
        headers = {"Authorization": f"Bearer {key}"}
        return requests.get(f"{self.url}/usage", headers=headers, timeout=10).status_code

    def cli(self, *args: str) -> subprocess.CompletedProcess[str]:
        """`pressroom <args>` as a user runs it next to `pressroom dev`."""
        command = [sys.executable, "-m", "services.cli", *args]
        return subprocess.run(command, env=self.env, capture_output=True, text=True, timeout=60)

    def ready(self) -> bool:
        assert self.proc is not None
        assert self.proc.poll() is None, self.log.read_text()[-3000:]
        try:
            return requests.get(f"{self.url}/readyz", timeout=2).status_code == 200
        except requests.RequestException:
            return False

    def tree(self) -> list[psutil.Process]:
        """The dev process, its descendants and the embedded PostgreSQL."""
        assert self.proc is not None
        parent = psutil.Process(self.proc.pid)
        procs = [parent, *parent.children(recursive=True)]
        pid_file = self.data / "pg" / "postmaster.pid"
        if pid_file.exists():
            procs.append(psutil.Process(int(pid_file.read_text().split()[0])))
        return procs

    def submit(self) -> str:
        response = requests.post(f"{self.url}/jobs", json=HELLO, headers=self.auth, timeout=10)
        assert response.status_code == 202, response.text
        return str(response.json()["id"])

    def job(self, job_id: str) -> dict[str, object]:
        response = requests.get(f"{self.url}/jobs/{job_id}", headers=self.auth, timeout=10)
        assert response.status_code == 200, response.text
        return dict(response.json())

    def wait_done(self, job_id: str, timeout: float = 90) -> dict[str, object]:
        wait_until(lambda: self.job(job_id)["status"] == "done", timeout, f"job {job_id}")
        return self.job(job_id)


@pytest.fixture
def dev(tmp_path: Path):
    server = Dev(tmp_path / "data", free_port())
    yield server
    if server.proc is not None and server.proc.poll() is None:
        for proc in server.tree():
            with contextlib.suppress(psutil.Error):
                proc.kill()


def test_make_up_serves_the_curl_example_survives_sigkill_and_stops_cleanly(dev: Dev):
    dev.start()
    check_keys_and_printed_curl_line(dev)
    check_admin_cli(dev)
    check_nats_lets_in_only_the_services(dev)
    key = dev.key
    job = dev.wait_done(dev.submit())
    assert job["attempts"] == 1
    pdf = requests.get(str(job["url"]), timeout=10)
    assert pdf.headers["Content-Type"] == "application/pdf"
    text = pypdf.PdfReader(io.BytesIO(pdf.content)).pages[0].extract_text()
    assert "Hi Ana" in text
    check_backup_with_the_operator_env(dev)

    in_flight = [dev.submit() for _ in range(10)]
    for proc in dev.tree():  # the whole tree, as a crash or `kill -9` would
        # Children die with their parent (PR_SET_PDEATHSIG), so some are gone by their turn.
        with contextlib.suppress(psutil.NoSuchProcess):
            proc.send_signal(signal.SIGKILL)
    assert dev.proc is not None
    dev.proc.wait(10)

    dev.start()
    assert dev.key == key, "a restart must reuse the API key that still works"
    assert dev.key_status(key) == 200
    assert dev.job(str(job["id"]))["status"] == "done"
    for job_id in in_flight:
        assert dev.wait_done(job_id)["attempts"] in (1, 2)

    tree = dev.tree()
    dev.proc.send_signal(signal.SIGINT)
    assert dev.proc.wait(60) == 0
    end = time.monotonic() + 30
    while left := [p for p in tree if alive(p)]:
        assert time.monotonic() < end, left
        time.sleep(0.1)


def check_keys_and_printed_curl_line(dev: Dev) -> None:
    for name in ("api-key", "admin-key"):
        text = (dev.data / name).read_text()
        assert len(text.splitlines()) == 1 and text.endswith("\n") and text.strip(), name
        assert (dev.data / name).stat().st_mode & 0o777 == 0o600, name
    assert dev.key.startswith("prk_")
    assert dev.key_status(dev.key) == 200

    printed = [line for line in dev.output().splitlines() if line.startswith("curl ")]
    assert len(printed) == 1, dev.output()[-3000:]
    # A clean start: the helpers' chatter goes to their log files, not the terminal.
    for noise in ("[INF]", "pgserver", "initdb", "RuntimeDirWarning", "egress proxy refused"):
        assert noise not in dev.output(), noise
    assert (dev.data / "run" / "nats.log").read_text().count("Server is ready") >= 1
    assert "initdb" in (dev.data / "run" / "postgres.log").read_text()
    assert f"$(cat {dev.data.resolve() / 'api-key'})" in printed[0]
    # Run exactly as printed; a curlrc (read from CURL_HOME) only adds the status code.
    curl_home = dev.data.parent / "curl-home"
    curl_home.mkdir()
    (curl_home / ".curlrc").write_text('silent\nwrite-out = "\\n%{http_code}"\n')
    env = {**os.environ, "CURL_HOME": str(curl_home)}
    ran = subprocess.run(
        ["bash", "-c", printed[0]], env=env, capture_output=True, text=True, timeout=30
    )
    assert ran.returncode == 0, ran.stderr
    body, status = ran.stdout.rsplit("\n", 1)
    assert status == "202", ran.stdout
    assert dev.wait_done(json.loads(body)["id"])["pages"] == 1


def check_nats_lets_in_only_the_services(dev: Dev) -> None:
    """The embedded NATS refuses a client without credentials; each service has its own
    identity, whose seed stays in `secrets.json` (NATS' configuration names only public
    keys), and none of them was refused anything while the jobs above ran."""
    run = dev.data / "run"
    (ports,) = run.glob("nats-server_*.ports")
    url = json.loads(ports.read_text())["nats"][0]

    async def stranger() -> None:
        await nats.connect(url, allow_reconnect=False, connect_timeout=2)

    with pytest.raises(Exception, match="Authorization Violation"):
        asyncio.run(stranger())
    kept = json.loads((dev.data / "secrets.json").read_text())
    config = (run / "nats.conf").read_text()
    for role in Role:
        seed = kept[f"nats_seed_{role}"]
        assert seed not in config and buskeys.public_key(seed) in config, role
    log = (run / "nats.log").read_text()
    assert "Violation" not in log and "authentication error" in log  # the stranger's


def check_backup_with_the_operator_env(dev: Dev) -> None:
    """`run/operator.env` (0600) is all `scripts/backup.sh` needs against the stack."""
    env_file = dev.data / "run" / "operator.env"
    assert env_file.stat().st_mode & 0o777 == 0o600
    root = dev.data.parent / "backups"
    script = f"set -a; . {env_file}; set +a; {REPO}/scripts/backup.sh {root}"
    env = {**dev.env, "PRESSROOM": str(Path(sys.executable).parent / "pressroom")}
    ran = subprocess.run(["sh", "-c", script], env=env, capture_output=True, text=True, timeout=120)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    manifest = json.loads((Path(ran.stdout.strip().splitlines()[-1]) / "manifest.json").read_text())
    assert {s["name"]: s["messages"] > 0 for s in manifest["streams"]}["JOBS"]
    assert any(key.endswith(".pdf") for key in manifest["files"]["objects"])


def check_admin_cli(dev: Dev) -> None:
    listed = dev.cli("tenants", "list", "--json")
    assert listed.returncode == 0, listed.stderr
    assert [t["name"] for t in json.loads(listed.stdout)["tenants"]] == ["dev"]

    again = dev.cli("tenants", "create", "dev")
    assert again.returncode == 3  # the API refused it, as for the client commands
    assert again.stderr == "pressroom: a tenant named 'dev' exists already\n"

    created = dev.cli("keys", "create", "dev", "--json")
    assert created.returncode == 0, created.stderr
    key = json.loads(created.stdout)
    assert dev.key_status(key["key"]) == 200
    revoked = dev.cli("keys", "revoke", key["id"])
    assert revoked.returncode == 0, revoked.stderr
    assert dev.key_status(key["key"]) == 401
    assert dev.key_status(dev.key) == 200, "revoking another key leaves dev's key working"
    keys = json.loads(dev.cli("keys", "list", "dev", "--json").stdout)["keys"]
    assert {k["id"]: k["revoked_at"] is not None for k in keys}[key["id"]] is True


def test_load_secrets_completes_a_file_from_an_older_version(tmp_path: Path):
    path = tmp_path / "secrets.json"
    old = {"url_secret": "u" * 32, "webhook_secret": "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}
    path.write_text(json.dumps(old))
    path.chmod(0o644)
    values = load_secrets(path)
    assert values.items() >= old.items()
    assert values["admin_key"].startswith("pra_")
    assert {buskeys.public_key(values[f"nats_seed_{role}"])[0] for role in Role} == {"U"}
    assert len(base64.b64decode(values["server_key"], validate=True)) == 32
    assert json.loads(path.read_text()) == values
    assert path.stat().st_mode & 0o777 == 0o600
    assert load_secrets(path) == values  # kept from now on


def alive(proc: psutil.Process) -> bool:
    try:
        return proc.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False

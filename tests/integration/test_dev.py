"""`pressroom dev` (what `make up` runs), as a user runs it: a real process tree.

Verifies: it comes up on embedded defaults on the port given by PRESSROOM_PORT; the README's
curl example works; after the whole process tree is SIGKILLed mid-work, a restart keeps
every job and finishes the unfinished ones; Ctrl-C (SIGINT) stops everything, leaving no
process behind.
"""

from __future__ import annotations

import contextlib
import io
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pypdf
import pytest
import requests

from tests.conftest import free_port, wait_until

HELLO = {"template": "<h1>Hi {{name}}</h1>", "data": {"name": "Ana"}}


class Dev:
    def __init__(self, data: Path, port: int) -> None:
        self.data, self.port = data, port
        self.url = f"http://127.0.0.1:{port}"
        self.proc: subprocess.Popen[bytes] | None = None
        self.log = data.parent / "dev.log"

    def start(self) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("PRESSROOM_")}
        env.update(PRESSROOM_PORT=str(self.port), PRESSROOM_DATA_DIR=str(self.data))
        with self.log.open("ab") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "services.cli", "dev"], env=env, stdout=log, stderr=log
            )
        wait_until(self.ready, 120, f"pressroom dev (log: {self.log})")

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
        response = requests.post(f"{self.url}/jobs", json=HELLO, timeout=10)
        assert response.status_code == 202, response.text
        return str(response.json()["id"])

    def job(self, job_id: str) -> dict[str, object]:
        response = requests.get(f"{self.url}/jobs/{job_id}", timeout=10)
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
    job = dev.wait_done(dev.submit())
    assert job["attempts"] == 1
    pdf = requests.get(str(job["url"]), timeout=10)
    assert pdf.headers["Content-Type"] == "application/pdf"
    text = pypdf.PdfReader(io.BytesIO(pdf.content)).pages[0].extract_text()
    assert "Hi Ana" in text

    in_flight = [dev.submit() for _ in range(10)]
    for proc in dev.tree():  # the whole tree, as a crash or `kill -9` would
        # Children die with their parent (PR_SET_PDEATHSIG), so some are gone by their turn.
        with contextlib.suppress(psutil.NoSuchProcess):
            proc.send_signal(signal.SIGKILL)
    assert dev.proc is not None
    dev.proc.wait(10)

    dev.start()
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


def alive(proc: psutil.Process) -> bool:
    try:
        return proc.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False

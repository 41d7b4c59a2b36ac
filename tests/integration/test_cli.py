"""The `pressroom render|batch|jobs` commands, run as the real entry point in a
subprocess against the real stack.

Verifies: `render` writes a real PDF (named by `-o`, or after the template file) with the
gateway and key from flags or from `PRESSROOM_URL`/`PRESSROOM_API_KEY`, and `--json`
prints the job for scripts; `jobs ls|show|events` show it; the exit statuses scripts
rely on: 1 for a failing template, 3 for a bad key (naming where the key came from) and
an unknown id, 4 for a gateway that is not there, 2 for bad arguments; `batch submit
--wait` prints progress lines (stderr is not a terminal) and saves the archive; Ctrl-C
while following a batch asks whether to pause it: `y` pauses it, and the command exits
130 (driven through a pty with a real SIGINT), and no answer leaves it running.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import os
import pty
import re
import signal
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from pressroom import cli
from pressroom.client import AsyncClient, Client
from services.core.runtime.settings import Settings
from tests.conftest import Stack, eventually

PRESSROOM = Path(sys.executable).parent / "pressroom"


@pytest.fixture
def settings(settings: Settings) -> Settings:
    """The stack of each test: items still rendering at its end are given 1 s, not 5."""
    return replace(settings, shutdown_grace=1.0)


INVOICE = "<h1>Invoice {{ number }}</h1><p>{{ customer }}</p>"
SLOW = ["--option", "wait_for.selector=#never", "--option", "wait_for.timeout=30"]
"""Print options that keep each item rendering for 30 s: a batch that stays running."""


async def pressroom(
    cwd: Path, *args: str, env: dict[str, str] | None = None
) -> tuple[int, str, str]:
    """Run `pressroom ARGS` in `cwd`; its exit status, stdout and stderr."""
    proc = await asyncio.create_subprocess_exec(
        str(PRESSROOM), *args, cwd=cwd, env={"PATH": os.environ["PATH"], **(env or {})},
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await asyncio.wait_for(proc.communicate(), 120)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


def flags(stack: Stack) -> list[str]:
    return ["--url", stack.url, "--key", stack.tenant.key]


def write_inputs(folder: Path, items: int = 0) -> None:
    (folder / "invoice.html.j2").write_text(INVOICE)
    (folder / "data.json").write_text(json.dumps({"number": 7, "customer": "Ana"}))
    (folder / "broken.html.j2").write_text("{{ missing.name }}")
    lines = [json.dumps({"data": {"number": i, "customer": "B"}}) for i in range(items)]
    (folder / "items.jsonl").write_text("\n".join(lines) + "\n")


async def test_render_writes_a_pdf_and_jobs_commands_show_it(stack: Stack, tmp_path: Path):
    write_inputs(tmp_path)
    status, out, err = await pressroom(
        tmp_path, "render", "invoice.html.j2", "--data", "data.json", "-o", "out.pdf",
        "--option", "format=A5", *flags(stack),
    )  # fmt: skip
    assert status == 0, err
    assert (tmp_path / "out.pdf").read_bytes()[:5] == b"%PDF-" and "1 page" in out

    env = {"PRESSROOM_URL": stack.url, "PRESSROOM_API_KEY": stack.tenant.key}
    status, out, err = await pressroom(
        tmp_path, "render", "invoice.html.j2", "--data", "data.json", "--json", env=env
    )
    job = json.loads(out)
    assert status == 0 and job["status"] == "done" and job["pages"] == 1, err
    assert job["file"] == str(tmp_path / "invoice.pdf")
    assert (tmp_path / "invoice.pdf").read_bytes()[:5] == b"%PDF-"

    status, out, _ = await pressroom(tmp_path, "jobs", "ls", "--json", *flags(stack))
    assert status == 0 and job["id"] in [j["id"] for j in json.loads(out)]
    status, out, _ = await pressroom(tmp_path, "jobs", "show", job["id"], *flags(stack))
    assert status == 0 and "done" in out
    status, out, _ = await pressroom(tmp_path, "jobs", "events", job["id"], *flags(stack))
    assert status == 0 and "submitted" in out and "done" in out


async def test_exit_statuses_tell_failed_refused_unknown_unreachable_and_misused(
    stack: Stack, tmp_path: Path
):
    write_inputs(tmp_path)
    status, out, err = await pressroom(
        tmp_path, "render", "broken.html.j2", "--json", *flags(stack)
    )
    assert status == cli.ENDED_BADLY and json.loads(out)["status"] == "failed"
    assert "missing" in err and not (tmp_path / "broken.pdf").exists()

    env = {"PRESSROOM_API_KEY": "prk_revoked-or-never-was"}
    status, out, err = await pressroom(
        tmp_path, "jobs", "ls", "--url", stack.url, "--json", env=env
    )
    error = json.loads(err)["error"]  # an error is a message: stderr, as one JSON line
    assert status == cli.API_ERROR and out == "" and error["type"] == "unauthorized"
    assert "PRESSROOM_API_KEY" in error["message"]

    status, _, err = await pressroom(tmp_path, "jobs", "show", "nosuchjob", *flags(stack))
    assert status == cli.API_ERROR and "nosuchjob" in err

    gone = ["--url", "http://127.0.0.1:9", "--key", "k"]
    assert (await pressroom(tmp_path, "jobs", "ls", *gone))[0] == cli.UNAVAILABLE
    assert (await pressroom(tmp_path, "render", "--no-such-flag", *flags(stack)))[0] == cli.USAGE
    assert (await pressroom(tmp_path, "render", "nofile.j2", *flags(stack)))[0] == cli.USAGE


async def test_a_failed_job_is_data_on_stdout_and_its_failure_a_message_on_stderr(
    stack: Stack, tmp_path: Path
):
    """`jobs show` of a failed job prints the job on stdout, as a table or as JSON, and
    says why it failed on stderr only, exiting 1: a script reads the job, a person the
    reason, and neither stream carries the other's."""
    job = await stack.finished((await stack.submit({"template": "{{ missing.name }}"}))["id"])
    assert job["status"] == "failed", job
    status, out, err = await pressroom(tmp_path, "jobs", "show", job["id"], *flags(stack))
    assert status == cli.ENDED_BADLY
    assert re.search(r"^status: +failed$", out, re.M) and job["id"] in out
    assert err.startswith(f"pressroom: job {job['id']} failed: template: ") and "missing" in err
    assert err.count("\n") == 1 and "status:" not in err

    status, out, err = await pressroom(tmp_path, "jobs", "show", job["id"], "--json", *flags(stack))
    shown = json.loads(out)
    assert status == cli.ENDED_BADLY and shown["id"] == job["id"] and shown["status"] == "failed"
    assert shown["error"]["type"] == "template" and err.startswith("pressroom: job ")

    status, out, err = await pressroom(tmp_path, "jobs", "ls", "--json", *flags(stack))
    assert status == 0 and err == "" and [j["id"] for j in json.loads(out)] == [job["id"]]


async def test_batch_submit_wait_prints_progress_and_saves_the_archive(
    stack: Stack, tmp_path: Path
):
    write_inputs(tmp_path, items=3)
    status, out, err = await pressroom(
        tmp_path, "batch", "submit", "items.jsonl", "--template", "invoice.html.j2",
        "--wait", "-o", "all.zip", *flags(stack),
    )  # fmt: skip
    assert status == 0, err
    assert "3/3 done" in err and "\r" not in err  # plain lines: stderr is not a terminal
    assert (tmp_path / "all.zip").read_bytes()[:2] == b"PK"
    batch_id = out.split()[1]
    status, out, _ = await pressroom(tmp_path, "batch", "status", batch_id, "--json", *flags(stack))
    assert status == 0 and json.loads(out)["done"] == 3


async def read_until(master: int, wanted: bytes, seen: bytearray, timeout: float = 30) -> None:
    """Read the pty's output into `seen` until it holds `wanted`."""

    def chunk() -> bytes:
        try:
            return os.read(master, 4096)
        except OSError:  # the child closed the pty
            return b""

    async def got() -> bool:
        seen.extend(await asyncio.to_thread(chunk))
        return wanted in seen

    await eventually(got, timeout, f"{wanted!r} on the terminal", interval=0)


async def test_ctrl_c_while_following_a_batch_offers_to_pause_it(stack: Stack, tmp_path: Path):
    write_inputs(tmp_path, items=4)
    master, slave = pty.openpty()
    proc = await asyncio.create_subprocess_exec(
        str(PRESSROOM), "batch", "submit", "items.jsonl", "--template", "invoice.html.j2",
        "--wait", *SLOW, *flags(stack), cwd=tmp_path, stdin=slave, stdout=slave, stderr=slave,
    )  # fmt: skip
    os.close(slave)
    seen = bytearray()
    try:
        await read_until(master, b"0/4 done", seen)  # the live bar
        batch_id = await eventually(lambda: batch_shown(seen), 10, "the batch id")
        outcome, status = await asyncio.to_thread(
            interrupt_answered_no, stack.url, stack.tenant.key, batch_id
        )
        assert (outcome.status, outcome.data) == (130, {"id": batch_id, "paused": False})
        assert status in {"queued", "running"}  # no answer: it goes on
        proc.send_signal(signal.SIGINT)
        await read_until(master, b"pause the batch? [y/N]", seen)
        os.write(master, b"y\n")
        assert await asyncio.wait_for(proc.wait(), 30) == cli.INTERRUPTED
        await read_until(master, b"paused", seen)
    finally:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        os.close(master)
    assert b"\r[" in seen  # redrawn in place on a terminal
    assert f"batch {batch_id} paused".encode() in seen
    async with AsyncClient(stack.url, stack.tenant.key) as client:

        async def paused() -> bool:
            return (await client.batch(batch_id)).status == "paused"

        await eventually(paused, 30, "the batch paused")  # the projection may lag the log
        await client.cancel_batch(batch_id)


def batch_shown(seen: bytearray) -> str | None:
    """The batch id in the plain progress lines or the bar's prompt, once shown."""
    found = re.search(rb"batch (b[0-9a-f]{31})", bytes(seen))
    return found.group(1).decode() if found else None


def interrupt_answered_no(url: str, key: str, batch_id: str) -> tuple[cli.Outcome, str]:
    """The Ctrl-C handler itself, answered with Enter; and the batch's status after."""
    io_ = cli.Io(stdout=io.StringIO(), stderr=io.StringIO(), ask=lambda prompt: "")
    with Client(url, key) as client:
        return cli.interrupted(client, batch_id, io_), client.batch(batch_id).status

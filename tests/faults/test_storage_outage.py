"""Object storage cut off while jobs render: uploads retry, and every job ends `done`.

The S3 server is a moto_server of this test's own, SIGKILLed mid-batch and started again on
the same port about 5 s later. moto keeps everything in memory, so a restarted moto has no
bucket and no objects (a real S3 outage loses neither); its request recorder is on, and
replaying the recording after the restart brings the bucket and the objects back, as S3
would have them (without it the objects of jobs already done would be gone; the renderer
re-creates a missing bucket by itself). The renderer is paused while moto restarts and
replays, so its own CreateBucket cannot race the replay's.

Verifies:
- while storage is unreachable, renders fail with a `storage` error and are retried
  (`retrying` events), not failed;
- a restarted moto has lost the bucket (printed, as a fact about the fake);
- once storage is back, every job ends `done` exactly once, with exactly one object per job
  in the bucket.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import aiohttp
import pytest

from tests.conftest import logged_port, reported_port
from tests.faults.harness import Cluster, assert_no_job_left_behind, poll

ROOT = Path(__file__).resolve().parents[2]
OUTAGE = 5.0
JOBS = 60


class Moto:
    """moto_server (`moto_recording`: its recorder writes each request whole), recording
    every request so a restart can replay them; the first start binds a port of its
    choosing, restarts bind that same port (the services keep its URL)."""

    def __init__(self, root: Path) -> None:
        self.port = 0
        self.recording = root / "moto-recording.jsonl"
        self.log = root / "moto.log"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        env = {
            **os.environ,
            "MOTO_ENABLE_RECORDING": "1",
            "MOTO_RECORDER_FILEPATH": str(self.recording),
        }
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "tests.faults.moto_recording", "-H", "127.0.0.1", "-p",
                 str(self.port)],
                env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True, cwd=ROOT,
            )  # fmt: skip
        if not self.port:  # the log holds only this first start's lines yet
            pattern = r"Running on http://127\.0\.0\.1:(\d+)"
            self.port = reported_port(self.proc, lambda: logged_port(self.log, pattern), 30, "moto")

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def kill(self) -> None:
        """SIGKILL moto, then drop the request its recorder was writing, if any: a line
        cut short would run into the restarted moto's first line and fail the replay
        ("Extra data"). That request was never answered, so its sender retries it."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        if self.recording.exists():
            recorded = self.recording.read_bytes()
            self.recording.write_bytes(recorded[: recorded.rfind(b"\n") + 1])

    async def ready(self) -> bool:
        assert self.proc is not None and self.proc.poll() is None, self.log.read_text()[-2000:]
        try:
            async with (
                aiohttp.ClientSession() as http,
                http.get(f"{self.url}/moto-api/", timeout=aiohttp.ClientTimeout(2)) as response,
            ):
                return response.status == 200
        except (aiohttp.ClientError, TimeoutError):
            return False

    async def bucket_status(self, bucket: str) -> int:
        """HTTP status of HEAD on the bucket (moto accepts unsigned requests)."""
        async with (
            aiohttp.ClientSession() as http,
            http.head(f"{self.url}/{bucket}", timeout=aiohttp.ClientTimeout(5)) as response,
        ):
            return response.status

    async def replay(self) -> None:
        """Replay every recorded request: the bucket and its objects come back."""
        async with (
            aiohttp.ClientSession() as http,
            http.post(
                f"{self.url}/moto-api/recorder/replay-recording",
                timeout=aiohttp.ClientTimeout(60),
            ) as response,
        ):
            assert response.status == 200, await response.text()


@pytest.fixture
async def moto(tmp_path: Path) -> Iterator[Moto]:
    server = Moto(tmp_path)
    server.start()
    try:
        await poll(server.ready, 30, "moto_server")
        yield server
    finally:
        with contextlib.suppress(Exception):
            server.kill()


async def _storage_retries(cluster: Cluster) -> list[str]:
    """Error messages of `retrying` events caused by storage."""
    rows = await cluster.query(
        "SELECT body->'error'->>'message' AS message FROM job_events "
        "WHERE type = 'retrying' AND body->'error'->>'type' = 'storage' ORDER BY stream_seq"
    )
    return [r["message"] for r in rows]


async def test_storage_outage_renders_retry_and_all_finish_done(
    cluster: Cluster, moto: Moto
) -> None:
    bucket = f"faults-{uuid.uuid4().hex[:10]}"
    await cluster.up(
        renderers=1,
        PRESSROOM_STORAGE="s3",
        PRESSROOM_S3_ENDPOINT=moto.url,
        PRESSROOM_S3_BUCKET=bucket,
        PRESSROOM_S3_ACCESS_KEY="testing",
        PRESSROOM_S3_SECRET_KEY="testing",
    )
    await cluster.submit_many(JOBS)

    async def some_done() -> bool:
        return await cluster.count_events("done") >= JOBS // 4

    await poll(some_done, 60, f"{JOBS // 4} jobs done")
    renderer = cluster.renderers()[0]
    await poll(renderer.renders_in_flight, 10, "the renderer rendering", interval=0.01)
    moto.kill()
    killed = time.monotonic()
    done_at_kill = await cluster.count_events("done")

    async def retried() -> list[str]:
        return await _storage_retries(cluster)

    await poll(retried, 10, "a render retried because storage is down")
    await asyncio.sleep(max(0.0, killed + OUTAGE - time.monotonic()))  # hold the outage
    # The renderer re-creates a missing bucket on its next upload; the replay's own
    # CreateBucket then fails (moto answers 500). It stays paused until the replay is done.
    renderer.proc.send_signal(signal.SIGSTOP)
    try:
        moto.start()
        await poll(moto.ready, 30, "moto_server after the restart")
        bucket_after_restart = await moto.bucket_status(bucket)
        await moto.replay()
    finally:
        renderer.proc.send_signal(signal.SIGCONT)
    restored = time.monotonic()

    outcome = await assert_no_job_left_behind(cluster, "storage_outage", timeout=90)
    retries = await _storage_retries(cluster)
    attempts = max(s["attempts"] for s in outcome.statuses.values())
    print(
        f"[faults] storage_outage: moto killed at {done_at_kill}/{JOBS} done, back after "
        f"{restored - killed:.1f}s; HEAD bucket right after the restart: "
        f"{bucket_after_restart} (404 = moto lost it); {len(retries)} storage retries, "
        f"most attempts of one job {attempts}; e.g. {retries[0]!r}"
    )

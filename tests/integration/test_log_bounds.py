"""The log has bounds: a full log refuses new jobs and never drops accepted ones."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import nats
import pytest

from services.core.log import bus
from services.core.model import events, subjects
from services.core.model.errors import EventTooLarge, LogFull
from services.core.runtime.settings import Settings, SettingsError
from services.gateway.logroom import LogRoom
from tests.conftest import BIN, Stack, eventually, nats_port, reported_port

PADDED = {"template": "<h1>Hi {{name}}</h1><p>" + "x" * 2000 + "</p>", "data": {"name": "Ana"}}


async def post_job(stack: Stack, body: dict, **headers: str) -> tuple[int, dict, dict]:
    async with stack.client.post(f"{stack.url}/jobs", json=body, headers=headers) as response:
        return response.status, await response.json(), dict(response.headers)


async def fill(stack: Stack, most: int) -> tuple[list[str], tuple[int, dict, dict]]:
    """Submit padded jobs until one is refused; the accepted ids and the refusal."""
    accepted = []
    for _ in range(most):
        answer = await post_job(stack, PADDED)
        if answer[0] != 202:
            return accepted, answer
        accepted.append(answer[1]["id"])
    pytest.fail(f"{most} jobs accepted by a log of {stack.settings.stream_max_bytes} bytes")


async def stream_first_seq(settings: Settings) -> int:
    nc = await nats.connect(settings.nats_url)
    try:
        return int((await nc.jetstream().stream_info(subjects.STREAM)).state.first_seq)
    finally:
        await nc.close()


async def test_a_full_log_answers_503_and_every_accepted_job_still_finishes(settings: Settings):
    settings = replace(settings, stream_max_bytes=96 * 1024)
    stack = Stack(settings)
    await stack.start("gateway", "projector")
    try:
        accepted, (status, body, headers) = await fill(stack, 60)
        await stack.start("renderer")
        jobs = [await stack.finished(job_id) for job_id in accepted]
        first_seq = await stream_first_seq(settings)
    finally:
        await stack.close()
    assert status == 503
    assert body["error"]["type"] == "log_full"
    assert "PRESSROOM_STREAM_MAX_BYTES" in body["error"]["message"]
    assert headers["Retry-After"] == "30"
    assert len(accepted) >= 3
    assert [job["status"] for job in jobs] == ["done"] * len(accepted)
    assert first_seq == 1, "the log dropped messages to make room"


async def test_a_job_too_large_for_one_message_is_413_and_its_key_stays_free(
    settings: Settings,
):
    stack = Stack(replace(settings, stream_max_msg_size=8192))
    await stack.start("gateway")
    try:
        big = {"template": "<p>" + "x" * 9000 + "</p>"}
        status, body, _ = await post_job(stack, big, **{"Idempotency-Key": "k1"})
        again = await post_job(stack, PADDED, **{"Idempotency-Key": "k1"})
    finally:
        await stack.close()
    assert status == 413
    assert body["error"]["type"] == "too_large"
    assert "PRESSROOM_STREAM_MAX_MSG_SIZE" in body["error"]["message"]
    assert again[0] == 202, again[1]


async def test_the_stream_itself_refuses_what_does_not_fit_and_keeps_the_rest(
    settings: Settings,
):
    """The backstop behind the gateway's check: any publisher gets `LogFull`."""
    settings = replace(settings, stream_max_bytes=64 * 1024, stream_max_msg_size=4096)
    async with bus.open_bus(settings, name="test") as (_, js):
        stored = 0
        with pytest.raises(LogFull, match="PRESSROOM_STREAM_MAX_BYTES"):
            for n in range(1000):
                await bus.publish(js, events.JobStarted(job_id=f"j{n}", worker="w", attempt=1))
                stored += 1
        with pytest.raises(EventTooLarge, match="PRESSROOM_STREAM_MAX_MSG_SIZE"):
            await bus.publish(js, events.JobSubmitted(job_id="big", template="x" * 5000))
        info = await js.stream_info(subjects.STREAM)
    assert 50 < stored < 1000
    assert (info.state.first_seq, info.state.messages) == (1, stored)


@pytest.fixture
def small_nats(tmp_path: Path) -> Iterator[str]:
    """A nats-server whose JetStream may store 64 MB in all; its URL."""
    root = tmp_path / "nats"
    root.mkdir()
    (root / "nats.conf").write_text(
        f'jetstream {{ store_dir: "{root}", max_file_store: 64MB }}\nlisten: 127.0.0.1:-1\n'
    )
    proc = subprocess.Popen(
        [str(BIN / "nats-server"), "-c", str(root / "nats.conf"), "--ports_file_dir", str(root)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        port = reported_port(proc, lambda: nats_port(root, proc.pid), 15, "nats")
        yield f"nats://127.0.0.1:{port}"
    finally:
        proc.kill()
        proc.wait()


async def test_a_log_larger_than_nats_may_store_is_refused_at_start_naming_the_variable(
    small_nats: str,
):
    settings = Settings(nats_url=small_nats, stream_max_bytes=2**30)
    with pytest.raises(SettingsError, match=r"PRESSROOM_STREAM_MAX_BYTES=1073741824 is more"):
        async with bus.open_bus(settings, name="test"):
            pass
    async with bus.open_bus(replace(settings, stream_max_bytes=32 * 2**20), name="test"):
        pass  # what fits is accepted


async def test_a_batch_s_items_keep_their_room_until_they_finish(settings: Settings):
    """No renderer runs: a batch's items wait in their batch's durable, and the log's
    reading counts each of them as an unfinished job whose later events need room."""
    stack = Stack(settings)
    await stack.start("gateway", "projector", "conductor")
    try:
        body = {"template": "<p>{{ n }}</p>", "items": [{"data": {"n": i}} for i in range(20)]}
        async with stack.client.post(f"{stack.url}/batches", json=body) as response:
            assert response.status == 202, await response.text()
        nc = await nats.connect(settings.nats_url)
        try:
            room = LogRoom()

            async def counted() -> bool:
                await room.read(nc.jetstream())
                return room.unfinished == 20

            await eventually(counted, 20, "the batch's 20 items counted as unfinished")
        finally:
            await nc.close()
    finally:
        await stack.close()

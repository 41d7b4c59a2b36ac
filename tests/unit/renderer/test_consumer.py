"""A running render's progress notes to JetStream keep going when one fails."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest
from prometheus_client import REGISTRY

from services.renderer import consumer


class Delivery:
    """A delivery whose first `failures` progress notes fail, as with NATS reconnecting."""

    def __init__(self, failures: int) -> None:
        self.failures = failures
        self.notes = 0
        self.subject = "jobs.j1.submitted"
        self.noted = asyncio.Event()

    async def in_progress(self) -> None:
        if self.failures:
            self.failures -= 1
            raise ConnectionError("nats: connection closed")
        self.notes += 1
        if self.notes == 2:
            self.noted.set()


def failures() -> float:
    return REGISTRY.get_sample_value("pressroom_heartbeat_failures_total") or 0.0


async def test_failed_progress_notes_are_logged_counted_and_sent_again(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(consumer, "HEARTBEAT_RETRY", 0.01)
    delivery = Delivery(failures=3)
    before = failures()
    msg: Any = delivery
    task = asyncio.create_task(consumer.keep_alive(msg, 0.02))
    with caplog.at_level(logging.WARNING):
        await asyncio.wait_for(delivery.noted.wait(), 5)
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    assert delivery.notes >= 2  # it went on after the failures
    assert failures() - before == 3
    assert caplog.text.count("progress note for jobs.j1.submitted failed") == 3

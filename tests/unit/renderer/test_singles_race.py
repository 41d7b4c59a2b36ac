"""A lane whose bell rang but whose first no-wait pull came back empty is asked once more
a moment later: JetStream may answer "no messages" for a message stored just before
(measured: about once in 500 pulls right after the publish), and the job must not wait
for the next sweep."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import pytest

from services.core.log import bus
from services.core.model import subjects
from services.renderer import lanes

ANSWERS: dict[str, list[list[str]]] = {}


class ScriptedLane:
    """What each durable answers, pull after pull."""

    def __init__(self, nc: Any, durable: str) -> None:
        self.durable = durable

    async def take(self, count: int, timeout: float = 2.0) -> list[str]:
        script = ANSWERS.get(self.durable, [])
        return script.pop(0) if script else []

    async def close(self) -> None:
        pass


async def no_durables(js: Any) -> AsyncIterator[Any]:
    for _ in ():
        yield


@dataclass
class Bell:
    subject: str


@pytest.fixture
def scripted(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bus, "Lane", ScriptedLane)
    monkeypatch.setattr(bus, "durables", no_durables)


async def test_an_empty_answer_after_a_bell_is_asked_again_soon(scripted: None) -> None:
    bob = subjects.singles_durable("bob")
    ANSWERS[bob] = [[], ["bob's job"]]  # the race, then the message
    wake = asyncio.Event()
    singles = lanes.Singles(None, None, wake)  # type: ignore[arg-type]
    await singles.take(2)  # the first sweep and listing: nothing anywhere
    wake.clear()
    await singles._bell(Bell(f"{subjects.LANE_BELL}.bob"))  # type: ignore[arg-type]
    assert await singles.take(1) == []
    wake.clear()
    await asyncio.wait_for(wake.wait(), 1.0)  # woken to ask again, long before a sweep
    assert await singles.take(1) == ["bob's job"]


async def test_a_lane_that_stays_empty_is_asked_again_once_only(scripted: None) -> None:
    carol = subjects.singles_durable("carol")
    ANSWERS[carol] = [[], [], ["carol's job"]]
    wake = asyncio.Event()
    singles = lanes.Singles(None, None, wake)  # type: ignore[arg-type]
    await singles.take(1)
    await singles._bell(Bell(f"{subjects.LANE_BELL}.carol"))  # type: ignore[arg-type]
    assert await singles.take(1) == []
    wake.clear()
    await asyncio.wait_for(wake.wait(), 1.0)
    assert await singles.take(1) == []
    wake.clear()
    with pytest.raises(TimeoutError):  # no third ask until the sweep
        await asyncio.wait_for(wake.wait(), 3 * lanes.RACE_WAIT)

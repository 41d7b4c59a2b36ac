"""Reading the log again after a bell whose message it does not show yet.

A core NATS subscription on a job's subjects (the bell of live streams and of answers that
wait for a job's end) hears a message as the server routes it; the JOBS stream stores it a
moment later, after whatever its ingest queue holds before it. A read of the log right
after the bell can therefore miss the very message that rang, and with no further bell
the reader would only look again at its next scheduled read. `Settle` gives the pauses
before reading again: `FIRST`, then each twice the last, up to `LONGEST`.
"""

from __future__ import annotations

FIRST = 0.005
"""Seconds before the first read again."""
LONGEST = 1.0
"""Longest pause, s, between two reads again."""


class Settle:
    """The pauses before reading the log again, for one bell's message."""

    def __init__(self) -> None:
        self._next = FIRST
        self._spent = False

    def pause(self) -> float:
        """The next pause, s: `FIRST`, then twice the last, at most `LONGEST`."""
        pause = self._next
        self._spent = pause >= LONGEST
        self._next = min(pause * 2, LONGEST)
        return pause

    @property
    def spent(self) -> bool:
        """Whether a pause of `LONGEST` has been given: a reader whose bell may ring for a
        message the log never holds (a duplicate JetStream dropped) stops there."""
        return self._spent

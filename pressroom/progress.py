"""A batch's progress on a terminal: one bar redrawn in place, or, when the output is not
a terminal (a log, a pipe), one plain line each time the counts change."""

from __future__ import annotations

import time
from typing import TextIO

from pressroom.client.models import Batch

WIDTH = 30
"""Cells of the bar: with the counts it fits an 80-column terminal."""


def bar(fraction: float, width: int = WIDTH) -> str:
    """`[#####-----]`: `fraction` (0 to 1) of `width` cells filled."""
    filled = round(max(0.0, min(1.0, fraction)) * width)
    return "[" + "#" * filled + "-" * (width - filled) + "]"


def duration(seconds: float) -> str:
    """`0:07`, `12:30`, `2:05:00`."""
    minutes, secs = divmod(round(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


def eta_seconds(batch: Batch) -> float | None:
    """Seconds until every item has ended at the batch's current pace (None if unknown)."""
    if not batch.rate or batch.terminal:
        return None
    return max(0, batch.total - batch.ended) / batch.rate


def counts(batch: Batch) -> str:
    """`12/50 done, 1 failed`: the items ended well of the total, and the rest that ended."""
    text = f"{batch.done}/{batch.total} done"
    if batch.failed:
        text += f", {batch.failed} failed"
    if batch.cancelled:
        text += f", {batch.cancelled} cancelled"
    return text


def line(batch: Batch, width: int = WIDTH) -> str:
    """One line of a batch's progress: bar, counts, rate, ETA, and its status unless it is
    plainly running."""
    parts = [bar(batch.progress, width), counts(batch)]
    if batch.rate is not None:
        parts.append(f"{batch.rate:.1f}/s")
    eta = eta_seconds(batch)
    if eta is not None:
        parts.append(f"ETA {duration(eta)}")
    if batch.status != "running":
        parts.append(batch.status)
    return "  ".join(parts)


class Progress:
    """Shows snapshots of one batch on `stream`: redrawn in place on a terminal, else a
    plain line whenever its counts or status change."""

    def __init__(self, stream: TextIO, live: bool | None = None) -> None:
        self.stream = stream
        self.live = stream.isatty() if live is None else live
        self._last: tuple[object, ...] | None = None
        self._drawn = False

    def show(self, batch: Batch) -> None:
        if self.live:
            self.stream.write("\r" + line(batch) + "\x1b[K")
            self._drawn = True
        elif (state := (batch.status, batch.done, batch.failed, batch.cancelled)) != self._last:
            self._last = state
            self.stream.write(f"{time.strftime('%H:%M:%S')} {batch.id} {line(batch)}\n")
        self.stream.flush()

    def end(self) -> None:
        """Leave the bar's line: what is written next starts on a line of its own."""
        if self._drawn:
            self.stream.write("\n")
            self.stream.flush()
            self._drawn = False

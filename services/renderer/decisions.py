"""What a renderer does with a message once an attempt is over: a pure choice, no I/O.

    no error                          -> Ack          publish `done`, then ack
    DeterministicError                -> Fail(error)  publish `failed`, then term
    TransientError, attempts left     -> Retry(delay) publish `retrying`, then nak(delay)
    TransientError, the last attempt  -> Fail(error)  "gave up after N attempts: …"

The consumer (`renderer/consumer.py`) carries the step out.
"""

from __future__ import annotations

from dataclasses import dataclass

from services.core.model import events
from services.core.model.errors import DeterministicError, PressroomError
from services.core.runtime.settings import Settings


@dataclass(frozen=True)
class Ack:
    """The document is stored: the job is done."""


@dataclass(frozen=True)
class Retry:
    """Try again after `delay` seconds; `error` says what went wrong this time."""

    delay: float
    error: events.ErrorInfo


@dataclass(frozen=True)
class Fail:
    """The job ends without a document, because of `error`."""

    error: events.ErrorInfo


Step = Ack | Retry | Fail


def retry_delay(attempt: int, base: float, cap: float) -> float:
    """Exponential backoff: base, 2·base, 4·base, … never more than `cap` seconds."""
    return float(min(cap, base * 2 ** (attempt - 1)))


def next_step(error: PressroomError | None, attempt: int, settings: Settings) -> Step:
    """What follows attempt number `attempt` (1 for the first), which ended with `error`
    (None: it succeeded). Attempts are counted up to `settings.max_attempts`; retries
    wait `retry_base`, doubling, never more than `retry_cap` seconds."""
    if error is None:
        return Ack()
    info = events.ErrorInfo(type=error.kind, message=error.message)
    if isinstance(error, DeterministicError):
        return Fail(info)
    if attempt >= settings.max_attempts:
        message = f"gave up after {attempt} attempts: {error.message}"
        return Fail(events.ErrorInfo(type=error.kind, message=message))
    return Retry(retry_delay(attempt, settings.retry_base, settings.retry_cap), info)

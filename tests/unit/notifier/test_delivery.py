"""What one webhook attempt means: delivered, retried after the schedule's delay, or given up."""

from __future__ import annotations

import pytest

from services.notifier.delivery import Delivered, GaveUp, Outcome, Retrying, Verdict, verdict

SCHEDULE = (0.0, 5.0, 30.0)  # three attempts: at once, then 5 s and 30 s after a failure

OK = Outcome(status_code=204, error=None, latency_ms=3)
SERVER_ERROR = Outcome(status_code=500, error=None, latency_ms=3)
GONE = Outcome(status_code=410, error=None, latency_ms=3)
REDIRECT = Outcome(status_code=302, error="redirect to /elsewhere not followed", latency_ms=3)
NO_ANSWER = Outcome(status_code=None, error="no response within 2s", latency_ms=2000)


@pytest.mark.parametrize(
    ("outcome", "attempt", "expected", "name"),
    [
        (OK, 1, Delivered(), "delivered"),
        (OK, 3, Delivered(), "delivered"),
        (SERVER_ERROR, 1, Retrying(5.0), "retrying"),
        (NO_ANSWER, 2, Retrying(30.0), "retrying"),
        (REDIRECT, 1, Retrying(5.0), "retrying"),
        (SERVER_ERROR, 3, GaveUp(), "gave_up"),  # the schedule is used up
        (NO_ANSWER, 3, GaveUp(), "gave_up"),
        (GONE, 1, GaveUp(), "gave_up"),  # 410: never again, attempts left or not
    ],
)
def test_verdict(outcome: Outcome, attempt: int, expected: Verdict, name: str):
    found = verdict(outcome, attempt, SCHEDULE)
    assert found == expected
    assert found.name == name


def test_a_schedule_of_one_attempt_never_retries():
    assert verdict(SERVER_ERROR, 1, (0.0,)) == GaveUp()

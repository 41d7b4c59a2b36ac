"""What a renderer does after an attempt: ack, retry after a delay, or fail the job."""

from __future__ import annotations

import pytest

from services.core.model.errors import (
    BrowserError,
    OutputTooLarge,
    PageKeepsCrashing,
    PressroomError,
    RenderTimeout,
    TemplateError,
)
from services.core.model.events import ErrorInfo
from services.core.runtime.settings import Settings
from services.renderer.decisions import Ack, Fail, Retry, Step, next_step, retry_delay

SETTINGS = Settings(max_attempts=3, retry_base=2.0, retry_cap=3.0)


@pytest.mark.parametrize(
    ("error", "attempt", "step"),
    [
        (None, 1, Ack()),
        (None, 3, Ack()),
        # Deterministic: the same input fails the same way, on any attempt.
        (TemplateError("x is undefined"), 1, Fail(ErrorInfo("template", "x is undefined"))),
        (OutputTooLarge("too big"), 2, Fail(ErrorInfo("output_too_large", "too big"))),
        (PageKeepsCrashing("crashed"), 2, Fail(ErrorInfo("page_crashed", "crashed"))),
        # Transient: retried after base, doubling, at most the cap, until the last attempt.
        (BrowserError("tab died"), 1, Retry(2.0, ErrorInfo("browser", "tab died"))),
        (RenderTimeout("slow"), 2, Retry(3.0, ErrorInfo("timeout", "slow"))),
        (
            BrowserError("tab died"),
            3,
            Fail(ErrorInfo("browser", "gave up after 3 attempts: tab died")),
        ),
        (
            RenderTimeout("slow"),
            4,
            Fail(ErrorInfo("timeout", "gave up after 4 attempts: slow")),
        ),
    ],
)
def test_next_step(error: PressroomError | None, attempt: int, step: Step):
    assert next_step(error, attempt, SETTINGS) == step


def test_one_attempt_allowed_means_a_transient_error_fails_at_once():
    settings = Settings(max_attempts=1)
    step = next_step(BrowserError("tab died"), 1, settings)
    assert step == Fail(ErrorInfo("browser", "gave up after 1 attempts: tab died"))


def test_retry_delay_is_exponential_and_capped():
    assert [retry_delay(n, 2, 60) for n in range(1, 8)] == [2, 4, 8, 16, 32, 60, 60]

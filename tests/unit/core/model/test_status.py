"""The job statuses: one vocabulary, the same on the wire as the strings it replaced."""

from __future__ import annotations

import json

import msgspec
import pytest

from services.core.model import events
from services.core.model.status import TERMINAL, UNFINISHED, JobStatus

FIELDS: dict[type, dict] = {
    events.JobDone: {"attempt": 1, "object_key": "k", "bytes": 1, "pages": 1, "render_ms": 1},
    events.JobFailed: {"attempt": 1, "error": events.ErrorInfo("t", "m")},
    events.JobCancelled: {},
}


def test_the_events_that_end_a_job_are_tagged_with_the_status_they_give_it():
    tags = {events.event_name(cls(job_id="j", **FIELDS[cls])) for cls in events.TERMINAL}
    assert tags == {str(status) for status in TERMINAL}


def test_every_status_is_either_unfinished_or_terminal():
    assert set(JobStatus) == UNFINISHED | TERMINAL
    assert not UNFINISHED & TERMINAL
    assert [s for s in JobStatus if s.terminal] == ["done", "failed", "cancelled"]


@pytest.mark.parametrize("status", list(JobStatus))
def test_a_status_is_its_plain_string_in_json_answers(status: JobStatus):
    assert json.dumps({"status": status}) == f'{{"status": "{status.value}"}}'
    assert msgspec.json.encode({"status": status}) == f'{{"status":"{status.value}"}}'.encode()
    assert msgspec.convert(status.value, JobStatus) is status

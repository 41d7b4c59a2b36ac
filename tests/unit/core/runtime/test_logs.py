"""JSON log lines: one object per record, with what the line is about (job, batch,
tenant, attempt) as bound where the work started, never leaking into other tasks, the
trace and span of that work (traces off here: the caller's trace id, or a new one), and
the line's own fields."""

from __future__ import annotations

import asyncio
import json
import logging
import re
import sys

import pytest

from services.core.runtime import logs, tracing
from services.core.runtime.tracing import SERVER


def _line(formatter: logging.Formatter, message: str, exc: bool = False) -> dict[str, object]:
    info = None
    if exc:
        try:
            raise ValueError("boom")
        except ValueError:
            info = sys.exc_info()
    record = logging.LogRecord("services.renderer", logging.INFO, "x.py", 1, message, (), info)
    parsed: dict[str, object] = json.loads(formatter.format(record))
    return parsed


def test_a_line_carries_what_it_is_about_and_nests() -> None:
    formatter = logs.JsonFormatter("renderer")
    with logs.bound(job_id="j1", tenant="ten_a", batch_id=None, attempt=2):
        line = _line(formatter, "job j1 failed")
        with logs.bound(attempt=3):
            inner = _line(formatter, "again")
    outside = _line(formatter, "idle")
    assert line["message"] == "job j1 failed"
    assert (line["service"], line["level"], line["logger"]) == (
        "renderer",
        "INFO",
        "services.renderer",
    )
    assert {k: line[k] for k in ("job_id", "tenant", "attempt")} == {
        "job_id": "j1",
        "tenant": "ten_a",
        "attempt": 2,
    }
    assert "batch_id" not in line
    assert inner["attempt"] == 3 and inner["job_id"] == "j1"
    assert "job_id" not in outside
    assert str(line["time"]).endswith("+00:00")


def test_the_exception_is_in_the_line() -> None:
    line = _line(logs.JsonFormatter("gateway"), "unexpected", exc=True)
    assert "ValueError: boom" in str(line["exception"])


async def test_concurrent_jobs_never_mix() -> None:
    seen: dict[str, object] = {}

    async def job(job_id: str) -> None:
        with logs.bound(job_id=job_id):
            await asyncio.sleep(0)
            seen[job_id] = logs.about()["job_id"]

    await asyncio.gather(*(job(f"j{n}") for n in range(20)))
    assert seen == {f"j{n}": f"j{n}" for n in range(20)}


def test_a_line_within_work_carries_its_trace_and_outside_null() -> None:
    formatter = logs.JsonFormatter("gateway")
    client = "0af7651916cd43dd8448eb211c80319c"
    with tracing.span("GET /jobs", {"traceparent": f"00-{client}-b7ad6b7169203331-01"}, SERVER):
        line = _line(formatter, "within")
    with tracing.span("render", {}, SERVER):  # no caller's trace: a new one
        fresh = _line(formatter, "fresh")
    outside = _line(formatter, "idle")
    assert line["trace_id"] == client and re.fullmatch(r"[0-9a-f]{16}", str(line["span_id"]))
    assert line["span_id"] != "b7ad6b7169203331"  # the caller's span is the parent, not ours
    assert re.fullmatch(r"[0-9a-f]{32}", str(fresh["trace_id"])) and fresh["trace_id"] != client
    assert outside["trace_id"] is None and outside["span_id"] is None


def test_a_line_s_own_fields_are_keys() -> None:
    record = logging.LogRecord("services.gateway.access", logging.INFO, "x.py", 1, "GET", (), None)
    record.__dict__.update(logs.fields(status=200, route="/jobs/{job_id}"))
    line = json.loads(logs.JsonFormatter("gateway").format(record))
    assert (line["status"], line["route"]) == (200, "/jobs/{job_id}")


def test_asyncpgs_pool_warning_is_one_line_naming_the_error(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """asyncpg's pool logs a warning with its own traceback each time it cannot restore
    its connection floor while PostgreSQL is away: the line names the error, no traceback.
    A library's error keeps its traceback."""
    logs.setup("INFO", "gateway", "json")
    try:
        raise ConnectionRefusedError(111, "Connect call failed ('127.0.0.1', 5999)")
    except ConnectionRefusedError:
        logging.getLogger("asyncpg.pool").warning(
            "Failed to restore the pool connection floor; retrying", exc_info=True
        )
        logging.getLogger("asyncpg.pool").error("broken", exc_info=True)
    formatter = logs.JsonFormatter("gateway")
    warning, error = (json.loads(formatter.format(r)) for r in caplog.records[-2:])
    assert warning["message"] == (
        "Failed to restore the pool connection floor; retrying (ConnectionRefusedError: "
        "[Errno 111] Connect call failed ('127.0.0.1', 5999))"
    )
    assert "exception" not in warning
    assert "Traceback" in error["exception"]

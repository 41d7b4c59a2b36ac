"""Log lines: text for people (`make up`), or JSON for log stores
(`PRESSROOM_LOG_FORMAT=json`): one object per line with the time, level, service, logger
and message, the job, batch, tenant and attempt the line is about (`bound`), the trace and
span it belongs to, the line's own fields (`fields`: an access line's status and
latency, a job end's pages), and the exception when there is one.

What a line is about is bound once where the work starts (a request, a renderer's
delivery, a webhook, a batch's event) and holds for everything logged beneath it, in that
task and the tasks it starts: a context variable, so concurrent jobs never mix.

`trace_id` and `span_id` are on every JSON line: the current OpenTelemetry span's when
traces are exported, else the ones bound where the work started (`tracing.span` binds the
caller's trace id from its `traceparent`, or a new one, and a span id of its own), and
null on lines that belong to no work (start-up, background loops).
"""

from __future__ import annotations

import contextlib
import contextvars
import datetime as dt
import logging
import sys
from collections.abc import Iterator
from typing import Any

import msgspec
from opentelemetry import trace

_ABOUT: contextvars.ContextVar[dict[str, Any]] = contextvars.ContextVar("pressroom_log_about")


@contextlib.contextmanager
def bound(**about: Any) -> Iterator[None]:
    """Log lines within say what they are about (fields that are None are left out)."""
    fields = {**_ABOUT.get({}), **{k: v for k, v in about.items() if v is not None}}
    token = _ABOUT.set(fields)
    try:
        yield
    finally:
        _ABOUT.reset(token)


def about() -> dict[str, Any]:
    """What log lines written now are about."""
    return dict(_ABOUT.get({}))


FIELDS = "pressroom_fields"
"""The attribute of a log record that holds its own fields (`fields`)."""


def fields(**values: Any) -> dict[str, Any]:
    """`extra=` for a line with fields of its own (JSON keys; text shows the message):
    `log.info("job %s done", job_id, extra=logs.fields(pages=3))`."""
    return {FIELDS: values}


def trace_ids() -> dict[str, str | None]:
    """The trace and span a line written now belongs to: the current span's when one is
    recording (traces exported), else those bound where the work started, else None."""
    context = trace.get_current_span().get_span_context()
    if context.is_valid:
        return {"trace_id": f"{context.trace_id:032x}", "span_id": f"{context.span_id:016x}"}
    bound_now = _ABOUT.get({})
    return {"trace_id": bound_now.get("trace_id"), "span_id": bound_now.get("span_id")}


class JsonFormatter(logging.Formatter):
    """One JSON object per record."""

    def __init__(self, service: str) -> None:
        super().__init__()
        self.service = service

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "time": dt.datetime.fromtimestamp(record.created, dt.UTC).isoformat(
                timespec="milliseconds"
            ),
            "level": record.levelname,
            "service": self.service,
            "logger": record.name,
            "message": record.getMessage(),
            **about(),
            **trace_ids(),
            **getattr(record, FIELDS, {}),
        }
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        return msgspec.json.encode(line).decode()


QUIET_TRACEBACKS = ("asyncpg.pool",)
"""Libraries whose warnings carry a traceback of their own internals for what is an outage
Pressroom reports itself (`database/pgwatch`: "PostgreSQL is not answering"): asyncpg's
pool logs one each time it cannot restore its connection floor."""


class OneLine(logging.Filter):
    """A library's warning with its exception named at the end of the line, not as a
    traceback of the library's frames. Errors keep theirs."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.exc_info and record.levelno < logging.ERROR:
            error = record.exc_info[1]
            record.msg = f"{record.getMessage()} ({type(error).__name__}: {error})"
            record.args, record.exc_info, record.exc_text = None, None, None
        return True


def setup(level: str, service: str, form: str = "text") -> None:
    """Log to stderr at `level`, as text or JSON (`form`)."""
    handler = logging.StreamHandler(sys.stderr)
    if form == "json":
        handler.setFormatter(JsonFormatter(service))
    else:
        handler.setFormatter(
            logging.Formatter(f"%(asctime)s {service:<9} %(levelname)-7s %(name)s: %(message)s")
        )
    logging.basicConfig(level=level, handlers=[handler])
    logging.getLogger("aiohttp.access").setLevel(logging.WARNING)
    for name in QUIET_TRACEBACKS:
        library = logging.getLogger(name)
        if not any(isinstance(f, OneLine) for f in library.filters):
            library.addFilter(OneLine())

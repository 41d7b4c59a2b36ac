"""Log lines: text for people (`make up`), or JSON for log stores
(`PRESSROOM_LOG_FORMAT=json`): one object per line with the time, level, service, logger
and message, the job, batch, tenant and attempt the line is about (`bound`), and the
exception when there is one.

What a line is about is bound once where the work starts (a renderer's delivery, a
webhook, a batch's event) and holds for everything logged beneath it, in that task and
the tasks it starts: a context variable, so concurrent jobs never mix.
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
        }
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        return msgspec.json.encode(line).decode()


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

"""Traces: W3C trace context carried from the HTTP request through NATS headers to the
renderer and the notifier, exported with OpenTelemetry (OTLP over HTTP) when
`PRESSROOM_OTLP_ENDPOINT` is set.

    client ─traceparent─▶ gateway: "POST /jobs"
                            └─ `submitted`'s headers ─▶ renderer: "render"
                                                          └─ `done`'s headers ─▶ notifier: "webhook"

`bus.publish` adds the current context (`headers`) to every event it stores, so what a
span does in the log carries its trace; a consumer continues it (`span`). Off (no
endpoint, the default), both are nearly free: no span is made and no header added; `span`
only binds ids for the log lines of the work (`log_ids`: the caller's trace id, or a new
one), so a request's or a delivery's lines still share one `trace_id`.

A collector that is away is said once, not on every batch: the exporter is wrapped
(`QuietExporter`) and the OpenTelemetry library's own complaints about exports are kept
from the log (`Muffler`); one warning when exports start failing, one line when they
work again.
"""

from __future__ import annotations

import contextlib
import logging
import re
import secrets
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from opentelemetry import propagate, trace
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from opentelemetry.trace import SpanKind

from services.core.runtime import logs

log = logging.getLogger(__name__)

TRACEPARENT = re.compile(r"^[0-9a-f]{2}-([0-9a-f]{32})-[0-9a-f]{16}-[0-9a-f]{2}")
"""A W3C `traceparent`: version, trace id, parent span id, flags."""

_state: dict[str, Any] = {"provider": None}

SERVER, CONSUMER = SpanKind.SERVER, SpanKind.CONSUMER


def setup(service: str, endpoint: str) -> None:
    """Export this process's spans to the OTLP/HTTP collector at `endpoint` (its base
    URL; spans go to `/v1/traces`), named `pressroom-<service>`. Nothing when empty."""
    if not endpoint:
        return
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    provider = TracerProvider(resource=Resource.create({"service.name": f"pressroom-{service}"}))
    exporter = OTLPSpanExporter(endpoint=f"{endpoint.rstrip('/')}/v1/traces")
    provider.add_span_processor(BatchSpanProcessor(QuietExporter(exporter, endpoint)))
    install(provider)
    log.info("exporting traces to %s", endpoint)


class Muffler(logging.Handler):
    """Takes the OpenTelemetry exporter's own log records (an error for every batch that
    did not reach the collector, a warning for every retry) out of the service's log,
    keeping the last one's text for `QuietExporter` to quote."""

    LOGGER = "opentelemetry.exporter"
    DROPPING = "opentelemetry.sdk._shared_internal"  # "Queue full, dropping span." per span

    def __init__(self) -> None:
        super().__init__()
        self.last = ""

    def emit(self, record: logging.LogRecord) -> None:
        self.last = record.getMessage()

    def install(self) -> None:
        exporter = logging.getLogger(self.LOGGER)
        exporter.addHandler(self)
        exporter.propagate = False
        logging.getLogger(self.DROPPING).addFilter(_not_queue_full)


def _not_queue_full(record: logging.LogRecord) -> bool:
    """False for the SDK's line per span dropped while the collector is away (the queue
    is full then): `QuietExporter` has said so once."""
    return not str(record.msg).startswith("Queue full")


class QuietExporter(SpanExporter):
    """`exporter`, telling the log once that its collector is away (and what the library
    said about it), and once that it is back: never a line per batch."""

    def __init__(self, exporter: SpanExporter, endpoint: str) -> None:
        self.exporter = exporter
        self.endpoint = endpoint
        self.away = False
        self.muffler = Muffler()
        self.muffler.install()

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        try:
            result = self.exporter.export(spans)
        except Exception as exc:  # whatever the library raises: spans are only dropped
            self.muffler.last = repr(exc)
            result = SpanExportResult.FAILURE
        self._note(result == SpanExportResult.SUCCESS)
        return result

    def _note(self, exported: bool) -> None:
        if exported and self.away:
            log.info("traces reach the collector at %s again", self.endpoint)
        elif not exported and not self.away:
            log.warning(
                "traces do not reach the collector at %s (%s): spans are dropped, and this is "
                "not said again until it answers",
                self.endpoint, self.muffler.last or "no answer",
            )  # fmt: skip
        self.away = not exported

    def shutdown(self) -> None:
        self.exporter.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self.exporter.force_flush(timeout_millis)


def install(provider: Any) -> None:
    """Make `provider` (an SDK TracerProvider) the one spans go to, and turn tracing on."""
    trace.set_tracer_provider(provider)
    _state["provider"] = provider


def shutdown() -> None:
    """Send what is still buffered (at exit)."""
    provider = _state["provider"]
    if provider is not None:
        with contextlib.suppress(Exception):
            provider.shutdown()


def active() -> bool:
    return _state["provider"] is not None


@contextlib.contextmanager
def span(
    name: str, carrier: Mapping[str, str] | None, kind: SpanKind, **attributes: Any
) -> Iterator[None]:
    """A span continuing the trace in `carrier` (HTTP or NATS headers), the current one
    while the block runs. Attributes that are None are left out. With traces off, only
    the ids of the block's log lines (`log_ids`)."""
    if not active():
        with logs.bound(**log_ids(carrier)):
            yield
        return
    context = propagate.extract(carrier if carrier is not None else {})
    tracer = trace.get_tracer("pressroom")
    kept = {key: value for key, value in attributes.items() if value is not None}
    with tracer.start_as_current_span(name, context=context, kind=kind, attributes=kept):
        yield


def headers() -> dict[str, str]:
    """The current trace context as headers (`traceparent`, `tracestate`); none when off."""
    if not active():
        return {}
    carrier: dict[str, str] = {}
    propagate.inject(carrier)
    return carrier


def log_ids(carrier: Mapping[str, str] | None) -> dict[str, str]:
    """Ids for the log lines of one piece of work while traces are off: the trace id of
    the caller's `traceparent` (so the client's own id finds the lines), or a new one, and
    a new span id for this piece."""
    found = TRACEPARENT.match((carrier or {}).get("traceparent", ""))
    trace_id = found[1] if found and found[1] != "0" * 32 else secrets.token_hex(16)
    return {"trace_id": trace_id, "span_id": secrets.token_hex(8)}

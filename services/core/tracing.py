"""Traces: W3C trace context carried from the HTTP request through NATS headers to the
renderer and the notifier, exported with OpenTelemetry (OTLP over HTTP) when
`PRESSROOM_OTLP_ENDPOINT` is set.

    client ─traceparent─▶ gateway: "POST /jobs"
                            └─ `submitted`'s headers ─▶ renderer: "render"
                                                          └─ `done`'s headers ─▶ notifier: "webhook"

`bus.publish` adds the current context (`headers`) to every event it stores, so what a
span does in the log carries its trace; a consumer continues it (`span`). Off (no
endpoint), both are free: no span is made and no header added.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator, Mapping
from typing import Any

from opentelemetry import propagate, trace
from opentelemetry.trace import SpanKind

log = logging.getLogger(__name__)

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
    provider.add_span_processor(BatchSpanProcessor(exporter))
    install(provider)
    log.info("exporting traces to %s", endpoint)


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
    while the block runs. Attributes that are None are left out."""
    if not active():
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

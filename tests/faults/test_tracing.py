"""Traces, as an OpenTelemetry collector receives them: with `PRESSROOM_OTLP_ENDPOINT` set,
the services (processes) export spans over OTLP/HTTP, and one job with a webhook, sent
with the client's own `traceparent`, makes one trace: the gateway's span is the client's
child, the renderer's span the gateway's, the notifier's span the renderer's. Without the
endpoint nothing is exported and no event carries a trace header. With a collector that
is away, each service says so once in its log, however many batches fail meanwhile."""

from __future__ import annotations

import asyncio
import json
import secrets
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from aiohttp import web
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from tests.conftest import Receiver, eventually, serving
from tests.faults.harness import Cluster, assert_no_job_left_behind


@dataclass
class Span:
    service: str
    name: str
    trace_id: str
    span_id: str
    parent_id: str


@dataclass
class Collector:
    """An OTLP/HTTP trace receiver: what the services exported."""

    url: str = ""
    spans: list[Span] = field(default_factory=list)

    async def handle(self, request: web.Request) -> web.Response:
        export = ExportTraceServiceRequest()
        export.ParseFromString(await request.read())
        for resource in export.resource_spans:
            attributes = {a.key: a.value.string_value for a in resource.resource.attributes}
            for scope in resource.scope_spans:
                for span in scope.spans:
                    self.spans.append(
                        Span(
                            attributes.get("service.name", ""),
                            span.name,
                            span.trace_id.hex(),
                            span.span_id.hex(),
                            span.parent_span_id.hex(),
                        )
                    )
        return web.Response(content_type="application/x-protobuf", body=b"")

    def of_trace(self, trace_id: str) -> dict[str, Span]:
        """The trace's spans by service (one each, the first seen)."""
        found: dict[str, Span] = {}
        for span in self.spans:
            if span.trace_id == trace_id:
                found.setdefault(span.service, span)
        return found


@pytest.fixture
async def collector() -> AsyncIterator[Collector]:
    found = Collector()
    app = web.Application()
    app.router.add_post("/v1/traces", found.handle)
    async with serving(app) as base:
        found.url = base
        yield found


async def test_one_job_is_one_trace_from_the_client_to_the_webhook(
    cluster: Cluster, collector: Collector, receiver: Receiver
) -> None:
    await cluster.up(
        renderers=1, PRESSROOM_OTLP_ENDPOINT=collector.url, OTEL_BSP_SCHEDULE_DELAY="100"
    )
    trace_id, client_span = secrets.token_hex(16), secrets.token_hex(8)
    body = {"template": "<p>{{ n }}</p>", "data": {"n": 1}, "webhook_url": receiver.url}
    headers = {"traceparent": f"00-{trace_id}-{client_span}-01"}
    async with cluster.http.post(f"{cluster.url}/jobs", json=body, headers=headers) as answer:
        assert answer.status == 202, await answer.text()
    await eventually(lambda: receiver.requests, 60, "the webhook")

    wanted = {"pressroom-gateway", "pressroom-renderer", "pressroom-notifier"}

    def whole() -> dict[str, Span] | None:
        spans = collector.of_trace(trace_id)
        return spans if wanted <= spans.keys() else None

    spans = await eventually(whole, 30, "spans of gateway, renderer and notifier")
    gateway, renderer = spans["pressroom-gateway"], spans["pressroom-renderer"]
    notifier = spans["pressroom-notifier"]
    assert (gateway.name, renderer.name, notifier.name) == ("POST /jobs", "render", "webhook")
    assert gateway.parent_id == client_span
    assert renderer.parent_id == gateway.span_id
    assert notifier.parent_id == renderer.span_id


async def test_without_an_endpoint_no_event_carries_a_trace(cluster: Cluster) -> None:
    await cluster.up(renderers=1)
    headers = {"traceparent": f"00-{secrets.token_hex(16)}-{secrets.token_hex(8)}-01"}
    body = {"template": "<p>{{ n }}</p>", "data": {"n": 1}}
    async with cluster.http.post(f"{cluster.url}/jobs", json=body, headers=headers) as answer:
        assert answer.status == 202
        job_id = (await answer.json())["id"]

    async def done() -> Any:
        status, job = await cluster.get_job(job_id)
        return status == 200 and job["status"] == "done"

    await eventually(done, 60, "the job done")
    async with cluster.jetstream() as js:
        for seq in range(1, (await js.stream_info("JOBS")).state.last_seq + 1):
            msg = await js.get_msg("JOBS", seq)
            assert "traceparent" not in (msg.headers or {}), (seq, msg.headers)


@dataclass
class Refuser:
    """A collector's address that takes each connection and hangs up: every export fails."""

    url: str = ""
    connections: int = 0

    async def hang_up(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        writer.close()


@pytest.fixture
async def refuser() -> AsyncIterator[Refuser]:
    found = Refuser()
    server = await asyncio.start_server(found.hang_up, "127.0.0.1", 0)
    found.url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"
    try:
        yield found
    finally:
        server.close()


async def test_a_collector_that_is_away_is_said_once_per_service(
    cluster: Cluster, refuser: Refuser
) -> None:
    await cluster.up(
        renderers=1,
        PRESSROOM_LOG_FORMAT="json",
        PRESSROOM_OTLP_ENDPOINT=refuser.url,
        OTEL_BSP_SCHEDULE_DELAY="100",
        OTEL_EXPORTER_OTLP_TIMEOUT="1",
    )
    for n in range(6):  # traffic, so batch after batch fails
        reply = await cluster.post_job({"template": "<p>{{ n }}</p>", "data": {"n": n}})
        assert reply.status == 202
    await assert_no_job_left_behind(cluster, "collector_away", timeout=60)
    await eventually(lambda: refuser.connections >= 12, 60, "a dozen failed exports")
    for service in cluster.services:
        said = []
        for line in service.log.read_text(errors="replace").splitlines():
            parsed = json.loads(line)  # a traceback or a library's own line fails here
            if parsed["level"] in {"WARNING", "ERROR"}:
                said.append(parsed)
        assert len(said) <= 1, (service.name, said)
        if service.name in {"gateway", "renderer"}:  # both made spans, so both tried
            (away,) = said
            assert "do not reach the collector" in away["message"], away
            assert refuser.url in away["message"], away

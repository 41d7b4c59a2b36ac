"""Every Prometheus metric, in one place, all named `pressroom_…`."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, Counter, Gauge, Histogram, generate_latest

JOBS_SUBMITTED = Counter("pressroom_jobs_submitted_total", "Jobs accepted with 202")
REQUESTS_REJECTED = Counter(
    "pressroom_requests_rejected_total", "Requests answered with an error", ["status"]
)
JOBS_FINISHED = Counter(
    "pressroom_jobs_finished_total", "Jobs that reached a terminal status", ["status"]
)
RENDER_SECONDS = Histogram(
    "pressroom_render_seconds",
    "Template to stored PDF, per attempt",
    buckets=(0.05, 0.1, 0.2, 0.3, 0.5, 0.75, 1, 2, 5, 10, 30, 60),
)
RENDER_ATTEMPTS = Counter(
    "pressroom_render_attempts_total", "Render attempts by outcome", ["outcome"]
)
RENDERS_IN_FLIGHT = Gauge("pressroom_renders_in_flight", "Renders running now")
RENDERER_TAKING_WORK = Gauge(
    "pressroom_renderer_taking_work",
    "1 while this renderer takes work (Chromium up, listening for its lanes), else 0",
)
HEARTBEAT_FAILURES = Counter(
    "pressroom_heartbeat_failures_total",
    "Progress notes (in_progress) of a running render that NATS did not take; retried",
)
BROWSER_LAUNCHES = Counter(
    "pressroom_browser_launches_total",
    "Chromium launches by reason: start, recycle (after PRESSROOM_BROWSER_RECYCLE renders), crash",
    ["reason"],
)
EVENTS_PROJECTED = Counter(
    "pressroom_events_projected_total", "Events applied to Postgres", ["type"]
)
EVENTS_SKIPPED = Counter(
    "pressroom_events_skipped_total",
    "Events PostgreSQL refused and the projector skipped (still in the log; see its log)",
    ["type"],
)
WEBHOOK_DELIVERIES = Counter(
    "pressroom_webhook_deliveries_total", "Webhook attempts by outcome", ["outcome"]
)
WEBHOOK_ATTEMPTS = Histogram(
    "pressroom_webhook_attempts",
    "Attempts a webhook took until delivered or given up",
    ["outcome"],
    buckets=(1, 2, 3, 4, 5, 6, 7, 8, 10, 15, 20),
)
WEBHOOK_BACKLOG = Gauge(
    "pressroom_webhook_backlog", "Terminal events not yet delivered (pending + in hand)"
)
WEBHOOK_SECONDS = Histogram(
    "pressroom_webhook_seconds",
    "Webhook request latency",
    buckets=(0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
)

FINALIZER_ADVISORIES = Counter(
    "pressroom_finalizer_advisories_total",
    "MAX_DELIVERIES advisories handled, by outcome",
    ["outcome"],
)
RECONCILER_ACTIONS = Counter(
    "pressroom_reconciler_actions_total",
    "Stalled jobs found by the reconciler, by what it did (redrive, fail)",
    ["action"],
)


async def handle_metrics(request: web.Request) -> web.Response:
    body = generate_latest()
    return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})


@contextlib.asynccontextmanager
async def serve(host: str, port: int) -> AsyncIterator[None]:
    """Serve `/metrics` on its own port (services without an HTTP API); 0 disables it."""
    if port == 0:
        yield
        return
    app = web.Application()
    app.router.add_get("/metrics", handle_metrics)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    try:
        await web.TCPSite(runner, host, port).start()
        yield
    finally:
        await runner.cleanup()

"""Every Prometheus metric, in one place, all named `pressroom_…`."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, Counter, Gauge, Histogram, generate_latest

JOBS_SUBMITTED = Counter("pressroom_jobs_submitted_total", "Jobs accepted with 202")
REQUESTS_REJECTED = Counter(
    "pressroom_requests_rejected_total", "Requests answered with an error", ["status"]
)
JOBS_FINISHED = Counter(
    "pressroom_jobs_finished_total",
    "Jobs that reached a terminal status (done, failed, cancelled), counted by the service "
    "that stored the end; error_type is the failure's type (none for done and cancelled)",
    ["status", "error_type"],
)
RENDER_SECONDS = Histogram(
    "pressroom_render_seconds",
    "Template to stored PDF, per attempt",
    buckets=(0.05, 0.1, 0.2, 0.3, 0.5, 0.75, 1, 2, 5, 10, 30, 60),
)
TIME_TO_DONE = Histogram(
    "pressroom_time_to_done_seconds",
    "From a job's submission stored in the log to its `done` stored (waiting, retries and "
    "rendering), by lane: singles or bulk; the time-to-done SLO's measure",
    ["lane"],
    buckets=(0.5, 1, 2, 5, 10, 20, 30, 60, 120, 300, 600, 1800, 3600),
)
RENDER_BYTES = Histogram(
    "pressroom_render_bytes",
    "Size of each stored document",
    buckets=(10e3, 30e3, 100e3, 300e3, 1e6, 3e6, 10e6, 30e6, 100e6),
)
RENDER_ATTEMPTS = Counter(
    "pressroom_render_attempts_total", "Render attempts by outcome", ["outcome"]
)
RENDERS_IN_FLIGHT = Gauge("pressroom_renders_in_flight", "Renders running now")
RENDER_BACKLOG = Gauge(
    "pressroom_render_backlog",
    "Jobs the renderers have yet to finish (pending + unacknowledged in every renderers' "
    "durable), by lane: singles (tenants' single jobs) or bulk (batches' items); "
    "the autoscaling signal, read by the projector",
    ["lane"],
)
RENDER_OLDEST_SECONDS = Gauge(
    "pressroom_render_oldest_seconds",
    "Age of the oldest job the renderers have not finished (0 with none), read by the projector",
)
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
JOB_FILES_SERVED = Counter(
    "pressroom_job_files_served_total",
    "Requests of pages for their job's files, by how they were answered: `memory` (the "
    "renderer's cache), `storage` (read first), `missing` (not among the job's files)",
    ["source"],
)
JOB_FILES_CACHED_BYTES = Gauge(
    "pressroom_job_files_cached_bytes",
    "Bytes of job files the renderer keeps in memory by digest (PRESSROOM_ASSET_CACHE_BYTES)",
)
FILES_SWEPT = Counter(
    "pressroom_files_swept_total",
    "Stored files the conductor deleted because no job, asset or template needs them",
)
LATE_EVIDENCE = Counter(
    "pressroom_late_evidence_total",
    "What a page did after its job's render had ended (a request, console line, refusal, "
    "proxy connection or window of a context being closed), dropped: never recorded on "
    "any job; by source",
    ["source"],
)
NATS_CONNECTED = Gauge(
    "pressroom_nats_connected", "1 while this service is connected to NATS, else 0"
)
POSTGRES_UP = Gauge(
    "pressroom_postgres_up",
    "1 while PostgreSQL answers this service's watch, else 0",
)
PROJECTION_LAG = Gauge(
    "pressroom_projection_lag",
    "Events in the log the projector has not applied to PostgreSQL yet",
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


class Health:
    """What a service's `/readyz` reports: named checks, each a cheap function of the
    service's state (no I/O), added once the part it watches exists; the service is ready
    when every check passes. Reports (`inform`) are shown beside them without deciding
    readiness: what the service can do without (PostgreSQL, for a notifier that signs
    with cached secrets). `/healthz` only says the event loop answers: a wedged loop
    fails it, and Kubernetes restarts the pod."""

    def __init__(self) -> None:
        self._checks: dict[str, Callable[[], bool]] = {}
        self._informs: dict[str, Callable[[], bool]] = {}

    def check(self, name: str, probe: Callable[[], bool]) -> None:
        self._checks[name] = probe

    def inform(self, name: str, probe: Callable[[], bool]) -> None:
        self._informs[name] = probe

    def report(self) -> dict[str, bool]:
        """Each check's result; none yet (still starting) counts as not ready."""
        return {name: bool(probe()) for name, probe in self._checks.items()}

    def informs(self) -> dict[str, bool]:
        return {name: bool(probe()) for name, probe in self._informs.items()}

    def ready(self) -> bool:
        report = self.report()
        return bool(report) and all(report.values())


HEALTH = web.AppKey("health", Health)


async def handle_healthz(request: web.Request) -> web.Response:
    return web.json_response({"status": "ok"})


async def handle_readyz(request: web.Request) -> web.Response:
    health = request.app[HEALTH]
    ready = health.ready()
    body: dict[str, object] = {"ready": ready, "checks": health.report()}
    if informs := health.informs():
        body["informs"] = informs
    return web.json_response(body, status=200 if ready else 503)


@contextlib.asynccontextmanager
async def serve(host: str, port: int) -> AsyncIterator[Health]:
    """Serve `/metrics`, `/healthz` and `/readyz` on their own port (the probes of
    services without an HTTP API); 0 disables it (the checks are then only kept)."""
    health = Health()
    if port == 0:
        yield health
        return
    app = web.Application()
    app[HEALTH] = health
    app.router.add_get("/metrics", handle_metrics)
    app.router.add_get("/healthz", handle_healthz)
    app.router.add_get("/readyz", handle_readyz)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    try:
        await web.TCPSite(runner, host, port).start()
        yield health
    finally:
        await runner.cleanup()

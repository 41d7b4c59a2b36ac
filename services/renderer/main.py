"""`pressroom renderer`: render jobs and batches' items with a pool of Chromium pages
until SIGTERM."""

from __future__ import annotations

import asyncio

from services.core.log import bus
from services.core.log.busaccess import Role
from services.core.objectstore.storage import open_storage
from services.core.runtime import lifecycle, metrics
from services.core.runtime.settings import Settings
from services.core.sandbox.jail import Jail, TemplateLimits
from services.pdftools.context import Limits
from services.pdftools.worker import Tools
from services.renderer import consumer, lanes, states
from services.renderer.browser import BrowserPool, privileges
from services.renderer.finishing import Context
from services.renderer.finishing.worker import Finisher, jail_of
from services.renderer.pdfjobs import PdfJobs


async def serve(settings: Settings, stop: asyncio.Event) -> None:
    context = Context.of(settings)  # reads the signing key: a bad file stops us here
    privileges.configure(privileges.Walls.of(settings))  # before the first browser
    browser = BrowserPool(
        settings.chromium_path(),
        pages=settings.render_concurrency,
        timeout=settings.render_timeout,
        max_output_bytes=settings.max_output_bytes,
        max_pages=settings.max_pages,
        max_dom_nodes=settings.max_dom_nodes,
        max_header_bytes=settings.max_header_bytes,
        max_toc_entries=settings.max_toc_entries,
        allow_private_networks=settings.allow_private_networks,
        fonts_dir=settings.fonts_dir,
        chromium_uid=settings.chromium_uid,
        chromium_nice=settings.chromium_nice,
        recycle_after=settings.browser_recycle,
    )
    async with (
        metrics.serve(settings.host, settings.metrics_port) as health,
        bus.open_bus(settings, name="renderer", role=Role.RENDERER) as (nc, js),
        open_storage(settings) as storage,
        browser,
        Jail(settings.render_concurrency, TemplateLimits.of(settings)) as jail,
        jail_of(settings) as finishing_jail,
        states.watched(js) as batches,
    ):
        health.check("nats", lambda: nc.is_connected)
        finisher = Finisher(finishing_jail, context, settings.compact_pdf_bytes)
        # PDF-tools jobs share the finishing workers: one per page that may be busy.
        tools = Tools(finishing_jail, context, Limits.of(settings))
        renderer = consumer.Renderer(
            settings, js, storage, browser, jail, batches, finisher,
            PdfJobs(storage, tools, browser),
        )  # fmt: skip
        await lanes.work(
            nc,
            js,
            renderer.handle,
            batches,
            # A job's bookkeeping (fetch, `started`, upload, `done`, ack) overlaps another
            # job's render, so the pages stay busy: CPU-bound Chromium is the ceiling.
            limit=settings.render_concurrency + settings.render_prefetch,
            # Items are not prefetched: a single job never queues behind them for a page.
            bulk_limit=settings.render_concurrency,
            stop=stop,
            grace=settings.shutdown_grace,
            health=health,
        )


def main() -> None:
    lifecycle.run("renderer", serve)

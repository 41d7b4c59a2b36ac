"""The renderer's loop: fetch `submitted` events, render, upload, publish, then ack.

Per message: publish `started`; render and upload while heartbeating; publish `done` and
only then ack. The document comes from the job's one source — a template rendered with
its data, raw HTML, or a URL the browser loads — and is stored as `jobs/<id>.pdf` or
`jobs/<id>.png` with its content type. A deterministic error publishes `failed` and terms
the message; a transient one publishes `retrying` and naks with an exponential delay,
until the last attempt, which publishes `failed` ("gave up after N attempts: …") and
terms.

A batch's item is a job like any other (`subjects.item_job_id`) and goes the same way; its
submission carries no template, which is read once per batch from the batch's `submitted`
event. An item whose batch is paused or cancelled (`states.py`) is handed back unstarted.

Size: one message's life in the renderer, its source, render, upload, heartbeats and the
events around them, whose order decides when the message is acked. The batches' template
cache (`BatchTemplates`) is the part that would split out next.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import time
from collections import OrderedDict
from typing import Any

import msgspec
from nats.aio.msg import Msg
from nats.js import JetStreamContext

from services.core.log import bus, jobsecrets, timeline
from services.core.log.pagesecrets import open_secrets
from services.core.model import events, pageoptions
from services.core.model.errors import (
    InvalidEvent,
    PageCrashed,
    PageKeepsCrashing,
    PressroomError,
    PrintKeepsTimingOut,
    PrintTimeout,
    StorageError,
    TemplateError,
    TransientError,
    Unavailable,
)
from services.core.model.files import FileRef
from services.core.model.status import BatchStatus
from services.core.objectstore.storage import Storage, object_key
from services.core.runtime import logs, metrics, tracing
from services.core.runtime.settings import Settings
from services.core.sandbox.jail import Jail
from services.core.sandbox.markdown import markdown_document
from services.core.sandbox.templating import render_html
from services.renderer import chains, diagnostics, ends
from services.renderer.browser import BrowserPool, Html, RenderResult, Source, Url
from services.renderer.browser.diagnosis import PageReport
from services.renderer.decisions import Ack, Fail, Retry, Step, next_step
from services.renderer.finishing.worker import Finisher
from services.renderer.jobfiles import FileCache, JobFiles
from services.renderer.marks import with_marks
from services.renderer.pdfjobs import PdfJobs
from services.renderer.states import BatchStates

log = logging.getLogger(__name__)


def worker_name() -> str:
    return f"{socket.gethostname()}-{os.getpid()}"


async def rendered(jail: Jail, template: str, data: dict[str, Any]) -> str:
    """`template` rendered with `data` in the jail (time, memory and output bounded)."""
    return await jail.call(render_html, template, data, jail.limits.output_chars)


async def source_of(job: events.JobSubmitted, jail: Jail) -> Source:
    """What the browser loads for `job`: a URL, raw HTML, Markdown made into HTML (in
    its template, if any), or the rendered template.

    The gateway sets exactly one source; raises `TemplateError` for a bad template (or
    Markdown whose conversion is over the jail's limits).
    """
    if job.url is not None:
        return Url(job.url)
    if job.html is not None:
        return Html(job.html)
    if job.markdown is not None:  # then the same path as HTML: no second way to render
        document = await jail.call(
            markdown_document,
            job.markdown,
            job.template or None,
            job.data,
            job.stylesheet,
            jail.limits.output_chars,
            what="the Markdown" + (" and its template" if job.template else ""),
        )
        return Html(document)
    return Html(await rendered(jail, job.template, job.data))


async def options_of(job: events.JobSubmitted, jail: Jail) -> pageoptions.PageOptions:
    """The job's options, with header and footer templates rendered with the job's data
    (so an invoice number can stand in every page's header) for template sources."""
    options = job.options
    if not job.template or not (options.header_template or options.footer_template):
        return options
    return msgspec.structs.replace(
        options,
        header_template=await _render_optional(jail, options, "header_template", job.data),
        footer_template=await _render_optional(jail, options, "footer_template", job.data),
    )


async def _render_optional(
    jail: Jail, options: pageoptions.PageOptions, part: str, data: dict[str, Any]
) -> str | None:
    """The header or footer (`part`) rendered; a `TemplateError` in it names the part
    ("header_template: line 2: …"), so an editor marks the line in the right one."""
    template = getattr(options, part)
    if template is None:
        return None
    try:
        return await rendered(jail, template, data)
    except TemplateError as exc:
        raise TemplateError(f"{part}: {exc.message}") from exc


def document_key(job: events.JobSubmitted, result: RenderResult) -> str:
    """Where the document is stored: derived from the tenant and job id, so a re-render
    overwrites."""
    return object_key(job.tenant, job.job_id, result.extension)


HELD_BACK_DELAY = 1.0
"""Seconds between two looks at the log for the `cancelled` of an item held in hand while
its batch is cancelling (the conductor publishes the items' ends)."""

TEMPLATES_CACHED = 64
"""Batches whose template a renderer keeps (least recently used go first)."""


class BatchTemplates:
    """The template of each batch, and the files its items get, read once from its
    `submitted` event and cached."""

    def __init__(self, js: JetStreamContext, size: int = TEMPLATES_CACHED) -> None:
        self.js = js
        self.size = size
        self._cache: OrderedDict[str, tuple[str, list[FileRef]]] = OrderedDict()

    async def shared(self, batch_id: str) -> tuple[str, list[FileRef]]:
        """The batch's template and files; `InvalidEvent` when the log holds no
        `submitted` event for it (the item cannot be rendered, now or later)."""
        found = self._cache.get(batch_id)
        if found is None:
            submitted = await timeline.batch_submission(self.js, batch_id, direct=True)
            if submitted is None:
                raise InvalidEvent(f"batch {batch_id} has no submission in the log: no template")
            found = (submitted.template, submitted.files)
        self._cache[batch_id] = found
        self._cache.move_to_end(batch_id)
        while len(self._cache) > self.size:
            self._cache.popitem(last=False)
        return found

    async def get(self, batch_id: str) -> str:
        """The batch's template (`shared`)."""
        return (await self.shared(batch_id))[0]

    async def fill(self, job: events.JobSubmitted) -> events.JobSubmitted:
        """`job` with its batch's template and files, if it is a templated batch's item."""
        if job.batch_id is None or job.url is not None or job.html is not None or job.template:
            return job
        template, files = await self.shared(job.batch_id)
        return msgspec.structs.replace(job, template=template, files=job.files or files)


HEARTBEAT_RETRY = 1.0
"""Seconds before a progress note NATS did not take is sent again (at most the interval)."""


async def keep_alive(msg: Msg, interval: float) -> None:
    """Tell JetStream every `interval` seconds that the render of `msg` is alive, so a
    long render is not redelivered under its feet. A note that fails (NATS reconnecting,
    a slow server) is logged, counted and sent again soon; the loop only ends when
    cancelled, with the render."""
    delay = interval
    while True:
        await asyncio.sleep(delay)
        try:
            await msg.in_progress()
            delay = interval
        except Exception as exc:  # any failure: try again, never stop
            metrics.HEARTBEAT_FAILURES.inc()
            delay = min(HEARTBEAT_RETRY, interval)
            log.warning(
                "progress note for %s failed (%s); retrying in %g s", msg.subject, exc, delay
            )


class Renderer:
    """Turns one `submitted` message into a stored PDF and a terminal event."""

    def __init__(
        self,
        settings: Settings,
        js: JetStreamContext,
        storage: Storage,
        browser: BrowserPool,
        jail: Jail,
        batches: BatchStates | None = None,
        finisher: Finisher | None = None,
        pdfjobs: PdfJobs | None = None,
    ) -> None:
        self.settings = settings
        self.finisher = finisher
        self.pdfjobs = pdfjobs
        self.js = js
        self.storage = storage
        self.browser = browser
        self.jail = jail
        self.batches = batches if batches is not None else BatchStates()
        self.templates = BatchTemplates(js)
        self.worker = worker_name()
        self.files = FileCache(storage, settings.asset_cache_bytes)  # job files, by digest

    async def handle(self, msg: Msg) -> None:
        """Process one delivery; never raises (a failure to even report is left to redelivery)."""
        event = await bus.decode_or_term(msg)
        if event is None:
            return
        if not isinstance(event, events.JobSubmitted):
            await msg.term()
            return
        about = {"job_id": event.job_id, "tenant": event.tenant, "batch_id": event.batch_id}
        attempt = msg.metadata.num_delivered
        with (
            logs.bound(attempt=attempt, **about),
            tracing.span("render", msg.headers, tracing.CONSUMER, attempt=attempt, **about),
        ):
            await self._deliver(msg, event)

    async def _deliver(self, msg: Msg, event: events.JobSubmitted) -> None:
        heartbeat = asyncio.create_task(keep_alive(msg, self.settings.ack_wait / 3))
        metrics.RENDERS_IN_FLIGHT.inc()
        try:
            with bus.map_bus_errors():  # acks, naks and terms, besides what `bus` does
                await self._attempt(msg, event)
        except asyncio.CancelledError:
            # Shutting down mid-render: hand the job back now rather than after ack wait.
            with contextlib.suppress(Exception):
                await msg.nak()
            raise
        except Unavailable as exc:
            # NATS is away (or electing): what was not acked is redelivered later.
            log.warning("job %s: cannot report (%r); left for redelivery", event.job_id, exc)
        finally:
            metrics.RENDERS_IN_FLIGHT.dec()
            heartbeat.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await heartbeat

    async def _attempt(self, msg: Msg, job: events.JobSubmitted) -> None:
        if await self._held_back(msg, job):
            return
        started = time.perf_counter()
        attempt = msg.metadata.num_delivered
        ended = await self._start(msg, job)
        if ended is not None:  # cancelled while queued, or a redelivery of a finished job
            log.info("job %s is already %s; not rendering", job.job_id, events.event_name(ended))
            await msg.ack()
            return
        report = PageReport()  # filled if the attempt fails on a page, or asks for it
        done, error = await self._render_or_error(job, attempt, report)
        if report.taken or error is not None:  # stored before the attempt's end is told
            # A failure before any page (a template error) keeps its error alone.
            await diagnostics.keep(self.storage, job, attempt, report, error)
        step = next_step(error, attempt, self.settings)
        await self._settle(msg, job, attempt, done, step, started)

    async def _held_back(self, msg: Msg, job: events.JobSubmitted) -> bool:
        """Hold, unstarted, an item whose batch is paused or cancelling until it may run;
        True if it is not to be rendered at all.

        The item stays in this renderer's hand (the handler's heartbeat keeps the message
        from being redelivered), so a pause uses up none of its delivery attempts, however
        often it is paused; it uses no page meanwhile (`BatchStates.parking`). When the
        batch runs again the item renders here; when the batch is cancelled the item is
        acked once its `cancelled` is in the log (the conductor publishes it); when the
        batch has gone from the bucket (ended) the usual check of the item's end follows.
        """
        if job.batch_id is None:
            return False
        state = self.batches.state(job.batch_id)
        if state not in (BatchStatus.PAUSED, BatchStatus.CANCELLED):
            return False
        log.info("item %s: batch %s; held unstarted until it runs again", job.job_id, state)
        with self.batches.parking():
            while state in (BatchStatus.PAUSED, BatchStatus.CANCELLED):
                if state == BatchStatus.CANCELLED and await timeline.terminal_event(
                    self.js, job.job_id, direct=True
                ):
                    await msg.ack()
                    return True
                await self.batches.changed(HELD_BACK_DELAY)
                state = self.batches.state(job.batch_id)
        return False

    async def _start(self, msg: Msg, job: events.JobSubmitted) -> events.AnyEvent | None:
        """Publish the attempt's `started`, unless the job has already ended; its terminal
        event if it has (read by direct get: cheap, and possibly stale on a replicated
        stream: an end it misses costs one render, whose own terminal event is then a
        deduplicated no-op).

        The first delivery of a job's only submission has nothing after the submission in
        the log unless the job was cancelled meanwhile: no renderer held it before, and the
        reconciler and finalizer end only jobs whose message the log no longer delivers.
        So its `started` is published on the condition that the submission is still the
        job's latest event, which JetStream checks as it stores it: one round trip per job.
        Should anything have come since, or for a redelivery or a re-driven copy, the log
        is asked for the job's end first, then `started` published.
        """
        started = events.JobStarted(
            job_id=job.job_id,
            tenant=job.tenant,
            attempt=msg.metadata.num_delivered,
            worker=self.worker,
        )
        copy = (msg.headers or {}).get("Nats-Msg-Id", job.job_id) != job.job_id
        if msg.metadata.num_delivered == 1 and not copy:
            with contextlib.suppress(bus.Moved):
                await bus.publish(self.js, started, after=msg.metadata.sequence.stream)
                return None
        ended = await timeline.terminal_event(self.js, job.job_id, direct=True)
        if ended is None:
            await bus.publish(self.js, started)
        return ended

    async def _render_or_error(
        self, job: events.JobSubmitted, attempt: int, report: PageReport
    ) -> tuple[events.JobDone | None, PressroomError | None]:
        """The attempt's stored document, or the error that prevented it."""
        try:
            return await self._render(job, attempt, report), None
        except PressroomError as exc:
            return None, await self._escalated(job, attempt, exc)
        except Exception as exc:  # a bug must not kill the worker; retry like a transient error
            log.exception("job %s: unexpected error", job.job_id)
            return None, TransientError(f"internal error: {exc!r}")

    async def _settle(
        self,
        msg: Msg,
        job: events.JobSubmitted,
        attempt: int,
        done: events.JobDone | None,
        step: Step,
        started: float,
    ) -> None:
        """Carry out `step` (see `decisions.py`): publish what happened, then ack, nak or
        term the message (`started`: when the attempt began, for its end's log line)."""
        if isinstance(step, Retry):
            await self._retry(msg, job, attempt, step)
        elif isinstance(step, Fail):
            failed = events.JobFailed(
                job_id=job.job_id,
                tenant=job.tenant,
                attempt=attempt,
                error=step.error,
                webhook_url=job.webhook_url,
            )
            await self._finish(msg, job, failed, step, started)
        elif done is not None:  # next_step acks only an attempt without error
            await self._finish(msg, job, done, step, started)

    async def _render(
        self, job: events.JobSubmitted, attempt: int, report: PageReport
    ) -> events.JobDone:
        started = time.perf_counter()
        job = jobsecrets.opened(job, self.settings.server_keys)  # sealed by the gateway
        if job.pdf is not None:
            return await self._pdf_job(job, attempt, started)
        job = await self.templates.fill(job)
        source = await source_of(job, self.jail)
        options = await options_of(job, self.jail)
        files = JobFiles(self.files, job.tenant, job.files) if job.files else None
        secrets = open_secrets(job.page_secrets, self.settings, job.job_id)
        page = await self.browser.render(source, options, report, files, secrets)
        result = await self._with_finishing(page, options)
        key = document_key(job, result)
        await self.storage.put(key, result.data, result.content_type)
        elapsed = time.perf_counter() - started
        metrics.RENDER_SECONDS.observe(elapsed)
        metrics.RENDER_BYTES.observe(len(result.data))
        return events.JobDone(
            job_id=job.job_id,
            tenant=job.tenant,
            attempt=attempt,
            object_key=key,
            bytes=len(result.data),
            pages=result.pages,
            render_ms=round(elapsed * 1000),
            refused=list(result.refused),
            webhook_url=job.webhook_url,
        )

    async def _pdf_job(
        self, job: events.JobSubmitted, attempt: int, started: float
    ) -> events.JobDone:
        """A PDF-tools job (`pdfjobs.py`): its `pages` are the pages processed, what
        usage counts for it."""
        if self.pdfjobs is None:
            raise InvalidEvent("this renderer runs no PDF-tools jobs")
        await chains.wait_for_inputs(self.js, job)
        made = await self.pdfjobs.run(job)
        elapsed = time.perf_counter() - started
        metrics.RENDER_SECONDS.observe(elapsed)
        metrics.RENDER_BYTES.observe(made.bytes)
        return events.JobDone(
            job_id=job.job_id,
            tenant=job.tenant,
            attempt=attempt,
            object_key=made.key,
            bytes=made.bytes,
            pages=made.pages_processed,
            render_ms=round(elapsed * 1000),
            webhook_url=job.webhook_url,
        )

    async def _with_finishing(
        self, result: RenderResult, options: pageoptions.PageOptions
    ) -> RenderResult:
        """`result` after the finishing steps its options ask for (PDF/A, encryption…)."""
        finisher = self.finisher
        if finisher is None:
            return result
        context = await with_marks(self.browser, options, finisher.context)  # Chromium prints them
        return await Finisher(finisher.jail, context, finisher.compact_bytes).finished(
            result, options
        )

    async def _finish(
        self,
        msg: Msg,
        job: events.JobSubmitted,
        event: events.JobDone | events.JobFailed,
        step: Ack | Fail,
        started: float,
    ) -> None:
        """Publish the terminal event, then ack it (`Ack`) or term it (`Fail`): never the
        other way round. An end stored now is counted and logged (`ends`)."""
        status = events.event_name(event)
        if await bus.publish(self.js, event):
            bus.count_finished(event)
            ends.report(event, job, msg.metadata.timestamp, started)
        elif isinstance(event, events.JobDone):
            await self._discard_if_cancelled(event)
        metrics.RENDER_ATTEMPTS.labels(status).inc()
        if isinstance(step, Ack):
            # Not ack_sync: a lost ack only means a redelivery, which finds `done` above.
            await msg.ack()
        else:
            await msg.term()

    async def _discard_if_cancelled(self, done: events.JobDone) -> None:
        """A cancel won the race against this render: remove the file it just stored."""
        ended = await timeline.terminal_event(self.js, done.job_id)
        if isinstance(ended, events.JobCancelled):
            try:
                await self.storage.delete(done.object_key)
            except StorageError as exc:
                log.warning("job %s: cancelled, but its file stays: %s", done.job_id, exc)

    async def _same_before(self, job: events.JobSubmitted, exc: PressroomError) -> bool:
        """Whether the job's previous attempt also ended as `exc` did: its page crashed
        the tab, or its printing ran out of time."""
        retried = await timeline.last_event(self.js, job.job_id, "retrying")
        if not isinstance(retried, events.JobRetrying) or retried.error.type != exc.kind:
            return False
        return not isinstance(exc, PrintTimeout) or retried.error.message.startswith(
            PrintTimeout.PREFIX
        )

    async def _escalated(
        self, job: events.JobSubmitted, attempt: int, exc: PressroomError
    ) -> PressroomError:
        """`exc`, or a deterministic error if this attempt and the one before both ended
        with the page crashing its tab (`PageKeepsCrashing`) or with printing out of time
        (`PrintKeepsTimingOut`): the document itself is the cause, and a third try would
        end alike, so it fails now instead of using up every attempt (and holding a page
        that other tenants' jobs wait for)."""
        if not isinstance(exc, PageCrashed | PrintTimeout) or attempt == 1:
            return exc
        if not await self._same_before(job, exc):
            return exc
        if isinstance(exc, PageCrashed):
            return PageKeepsCrashing(f"{exc.message}, on two attempts in a row")
        return PrintKeepsTimingOut(f"{exc.message}, on two attempts in a row")

    async def _retry(self, msg: Msg, job: events.JobSubmitted, attempt: int, step: Retry) -> None:
        log.info(
            "job %s attempt %d failed (%s); retry in %.1fs",
            job.job_id, attempt, step.error, step.delay,
        )  # fmt: skip
        await bus.publish(
            self.js,
            events.JobRetrying(
                job_id=job.job_id,
                tenant=job.tenant,
                attempt=attempt,
                worker=self.worker,
                error=step.error,
                delay=step.delay,
            ),
        )
        metrics.RENDER_ATTEMPTS.labels("retrying").inc()
        await msg.nak(delay=step.delay)

"""What a job's end tells operators: one log line, and the time it took to be done.

    job 4f1c… done: 2 pages, 31250 bytes, attempt 1 in 412 ms (1.3 s since submitted)
      status, job_id, tenant, attempt (bound by the consumer), duration_ms (this attempt),
      since_submitted_ms, pages and bytes, or error_type for a failure

Written once per end the renderer stored (a redelivery that finds the end already in the
log writes none). `pressroom_time_to_done_seconds` (by lane) is what the time-to-done
SLO is measured on (deploy/prometheus/alerts.yaml): from the submission stored in the log
to `done` stored, waiting, retries and rendering included.
"""

from __future__ import annotations

import datetime as dt
import logging
import time

from services.core.model import events
from services.core.runtime import logs, metrics

log = logging.getLogger(__name__)


def lane_of(job: events.JobSubmitted) -> str:
    """The lane a job waited in: `bulk` for a batch's item, `singles` for the rest."""
    return "bulk" if job.batch_id is not None else "singles"


def report(
    end: events.JobDone | events.JobFailed,
    job: events.JobSubmitted,
    submitted: dt.datetime,
    started: float,
) -> None:
    """Log the end the renderer just stored (`started`: the attempt's `perf_counter`;
    `submitted`: when the log stored the submission) and time a `done`."""
    since = max(0.0, (dt.datetime.now(dt.UTC) - submitted).total_seconds())
    timing = {
        "status": events.event_name(end),
        "duration_ms": round((time.perf_counter() - started) * 1000),
        "since_submitted_ms": round(since * 1000),
    }
    if isinstance(end, events.JobDone):
        metrics.TIME_TO_DONE.labels(lane_of(job)).observe(since)
        log.info(
            "job %s done: %s pages, %d bytes, attempt %d in %d ms (%.1f s since submitted)",
            end.job_id, end.pages, end.bytes, end.attempt, timing["duration_ms"], since,
            extra=logs.fields(**timing, pages=end.pages, bytes=end.bytes),
        )  # fmt: skip
    else:
        log.info(
            "job %s failed: %s: %s",
            end.job_id, end.error.type, end.error.message,
            extra=logs.fields(**timing, error_type=end.error.type),
        )  # fmt: skip

"""Storing an attempt's diagnosis beside the job's file (`keep`).

The JSON (`services.core.objectstore.diagnosis.Diagnosis`) and the screenshot go under keys derived
from the tenant, the job and the attempt, so a re-render overwrites them. The JSON is
written last: a diagnosis that names a screenshot always has one. Storage failing here
costs the diagnosis, never the job: it is logged and the attempt ends as it would have.
"""

from __future__ import annotations

import datetime as dt
import logging

from services.core.model import events
from services.core.model.errors import PressroomError, StorageError
from services.core.objectstore import diagnosis
from services.core.objectstore.storage import Storage
from services.renderer.browser.diagnosis import PageReport

log = logging.getLogger(__name__)


def diagnosis_of(
    report: PageReport, attempt: int, error: PressroomError | None, screenshot: str | None
) -> diagnosis.Diagnosis:
    """The stored form of `report`, for attempt `attempt` that ended with `error`."""
    failure = (
        None if error is None else diagnosis.AttemptFailure(type=error.kind, message=error.message)
    )
    return diagnosis.Diagnosis(
        attempt=attempt,
        at=dt.datetime.now(dt.UTC).isoformat(),
        error=failure,
        console=report.console,
        errors=report.errors,
        requests=report.requests,
        pending_wait_for=report.pending_wait_for,
        screenshot=screenshot,
        dropped=report.dropped,
    )


async def keep(
    storage: Storage,
    job: events.JobSubmitted,
    attempt: int,
    report: PageReport,
    error: PressroomError | None,
) -> None:
    """Store `report` as the diagnosis of `job`'s attempt `attempt`."""
    screenshot = None
    try:
        if report.screenshot is not None:
            screenshot = diagnosis.diagnosis_key(job.tenant, job.job_id, attempt, "png")
            await storage.put(screenshot, report.screenshot, "image/png")
        key = diagnosis.diagnosis_key(job.tenant, job.job_id, attempt)
        stored = diagnosis.encode(diagnosis_of(report, attempt, error, screenshot))
        await storage.put(key, stored, "application/json")
    except StorageError as exc:
        log.warning("job %s: attempt %d's diagnosis is lost: %s", job.job_id, attempt, exc)
    except Exception:  # a bug here must not change how the attempt ends
        log.exception("job %s: attempt %d's diagnosis is lost", job.job_id, attempt)

"""Billable documents: what a counted job adds to its tenant's bill.

A tenant's first `PRESSROOM_FREE_TIER` successful documents of a month are free; every
later one is billable and recorded on the USAGE stream as `events.DocumentUsed`, whose
`idempotency_key` is stable per job. Failed and cancelled jobs never count against the
free tier and are never billed.
"""

from __future__ import annotations

from services.core.model import events
from services.core.model.status import JobStatus
from services.projector.apply import Counted


def idempotency_key(job_id: str) -> str:
    """The key a billing connector deduplicates on: one per job, forever."""
    return f"pressroom-document-{job_id}"


def billable(counted: Counted, free_tier: int) -> list[events.DocumentUsed]:
    """The usage event of a counted job, if it is a billable document (else none)."""
    if counted.outcome != JobStatus.DONE or counted.succeeded <= free_tier:
        return []
    used = events.DocumentUsed(
        idempotency_key=idempotency_key(counted.job_id),
        tenant=counted.tenant,
        job_id=counted.job_id,
        month=counted.month.strftime("%Y-%m"),
        ordinal=counted.succeeded,
        pages=counted.pages,
        bytes=counted.bytes,
        at=counted.at.timestamp(),
    )
    return [used]

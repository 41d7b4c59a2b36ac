"""The ids of new jobs and batches: random, or derived from the tenant's
`Idempotency-Key` with the server key so that a retried request gets the same id."""

from __future__ import annotations

import uuid

from services.core.model.errors import RequestError
from services.core.secrets import crypto


def job_id_for(server_key: bytes, tenant: str, idempotency_key: str | None) -> str:
    """A new random id, or for an `Idempotency-Key` the same id on every request of that
    tenant with that key (one only the server can compute: `crypto.idempotent_job_id`)."""
    if idempotency_key is None:
        return uuid.uuid4().hex
    if not 1 <= len(idempotency_key) <= 255:
        raise RequestError("Idempotency-Key must be 1 to 255 characters", field="Idempotency-Key")
    return crypto.idempotent_job_id(server_key, tenant, idempotency_key)


def batch_id_for(server_key: bytes, tenant: str, idempotency_key: str | None) -> str:
    """`job_id_for` for a batch: `b` and 31 hex digits (`BATCH_ID`), random or derived
    from the `Idempotency-Key` (`crypto.idempotent_batch_id`)."""
    if idempotency_key is None:
        return "b" + uuid.uuid4().hex[:31]
    if not 1 <= len(idempotency_key) <= 255:
        raise RequestError("Idempotency-Key must be 1 to 255 characters", field="Idempotency-Key")
    return crypto.idempotent_batch_id(server_key, tenant, idempotency_key)

"""Request bodies: parsed strictly, every problem reported with the field it concerns."""

from __future__ import annotations

import re
import uuid
from typing import Any

import msgspec

from services.core.errors import RequestError
from services.core.events import PageOptions
from services.core.options import check_options

_PATH = re.compile(r"at `\$\.?([^`]*)`")
_NAMED = re.compile(r"(?:required|unknown) field `([^`]*)`")
JOB_ID = re.compile(r"^[A-Za-z0-9_-]{1,64}$")

# Derives job ids from Idempotency-Key values; fixed so ids are stable across restarts.
_IDEMPOTENCY_NAMESPACE = uuid.UUID("5f0c2b7e-3c1a-4d8e-9a51-7b0f1f2c9e42")


class JobRequest(msgspec.Struct, forbid_unknown_fields=True):
    """`POST /jobs`: a Jinja2 template, its data, page options and an optional webhook."""

    template: str
    data: dict[str, Any] = msgspec.field(default_factory=dict)
    webhook_url: str | None = None
    options: PageOptions = msgspec.field(default_factory=PageOptions)


def _field_of(message: str) -> str:
    """The dotted field a msgspec message is about (`options.margin.top`), else `body`."""
    match = _PATH.search(message)
    path = match.group(1) if match else ""
    named = _NAMED.search(message)
    if named:
        return f"{path}.{named.group(1)}" if path else named.group(1)
    return path or "body"


def parse_json(body: bytes) -> dict[str, Any]:
    """Decode a JSON object, or raise `RequestError` saying what is wrong with it."""
    try:
        value = msgspec.json.decode(body)
    except msgspec.DecodeError as exc:
        raise RequestError(f"body is not valid JSON: {exc}", field="body") from None
    if not isinstance(value, dict):
        raise RequestError("body must be a JSON object", field="body")
    return value


def parse_job(body: bytes) -> JobRequest:
    """Validate a job request; `RequestError.field` names the offending field."""
    raw = parse_json(body)
    if "webhookUrl" in raw:
        if "webhook_url" in raw:
            raise RequestError("give webhook_url or webhookUrl, not both", field="webhookUrl")
        raw["webhook_url"] = raw.pop("webhookUrl")
    try:
        job = msgspec.convert(raw, JobRequest)
    except msgspec.ValidationError as exc:
        message = str(exc)
        raise RequestError(message, field=_field_of(message)) from None
    if not job.template.strip():
        raise RequestError("template must not be empty", field="template")
    check_options(job.options)
    return job


def job_id_for(idempotency_key: str | None) -> str:
    """A new random id, or the same id for every request with the same Idempotency-Key."""
    if idempotency_key is None:
        return uuid.uuid4().hex
    if not 1 <= len(idempotency_key) <= 255:
        raise RequestError("Idempotency-Key must be 1 to 255 characters", field="Idempotency-Key")
    return uuid.uuid5(_IDEMPOTENCY_NAMESPACE, idempotency_key).hex

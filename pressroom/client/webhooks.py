"""Checking a Pressroom webhook, per Standard Webhooks, with the standard library only.

Pressroom signs `"<webhook-id>.<webhook-timestamp>.<raw body>"` with HMAC-SHA256 under
each of the tenant's secrets (`whsec_<base64 key>`) and sends `webhook-signature:
v1,<base64> v1,<base64> …` (see services/core/secrets/signing.py).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import time
from collections.abc import Iterable, Mapping

TOLERANCE = 300
"""Seconds a timestamp may be off, either way: five minutes, as the Standard Webhooks
spec recommends against replays."""


def verify_webhook(
    body: bytes,
    headers: Mapping[str, str],
    secret: str | Iterable[str],
    *,
    tolerance: float = TOLERANCE,
    now: float | None = None,
) -> bool:
    """Whether `body` (the raw bytes, before any JSON parsing) with these `headers` was
    signed by Pressroom with `secret` (a `whsec_…` string, several space-separated, or
    a list: one match is enough) within `tolerance` seconds of `now`.

    >>> from pressroom.client import verify_webhook
    >>> secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
    >>> headers = {"webhook-id": "msg_1", "webhook-timestamp": "1700000000",
    ...            "webhook-signature": "v1,qf2YZDjEP+XbhjE/DJ1WdM4qAvSfch6EEgmVHdbxRuM="}
    >>> verify_webhook(b'{"type":"job.done"}', headers, secret, now=1700000010)
    True
    >>> verify_webhook(b'{"type":"job.failed"}', headers, secret, now=1700000010)
    False
    >>> verify_webhook(b'{"type":"job.done"}', headers, secret)  # years later: a replay
    False
    """
    lowered = {name.lower(): value for name, value in headers.items()}
    msg_id, stamp = lowered.get("webhook-id"), lowered.get("webhook-timestamp")
    signatures = lowered.get("webhook-signature", "").split()
    if not msg_id or not stamp or not fresh(stamp, tolerance, now):
        return False
    signed = f"{msg_id}.{stamp}.".encode() + body
    expected = {_signature(key, signed) for key in _keys(secret)}
    given = [part.removeprefix("v1,") for part in signatures if part.startswith("v1,")]
    return any(hmac.compare_digest(g, e) for g in given for e in expected)


def fresh(stamp: str, tolerance: float, now: float | None) -> bool:
    """Whether the `webhook-timestamp` (Unix seconds) is within `tolerance` of `now`."""
    try:
        sent = int(stamp)
    except ValueError:
        return False
    return abs((time.time() if now is None else now) - sent) <= tolerance


def _keys(secret: str | Iterable[str]) -> list[bytes]:
    """The keys of the `whsec_` secrets given; a malformed one is skipped (it can match
    nothing)."""
    parts = secret.replace(",", " ").split() if isinstance(secret, str) else list(secret)
    keys = []
    for part in parts:
        try:
            keys.append(base64.b64decode(part.removeprefix("whsec_"), validate=True))
        except binascii.Error:
            continue
    return keys


def _signature(key: bytes, signed: bytes) -> str:
    return base64.b64encode(hmac.new(key, signed, hashlib.sha256).digest()).decode()

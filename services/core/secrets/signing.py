"""Standard Webhooks signatures: `v1,<base64 HMAC-SHA256 of "id.timestamp.body">`.

Secrets look like `whsec_<base64 key>`. Several secrets (space- or comma-separated) are
all used, so receivers can rotate keys: the `webhook-signature` header carries one
signature per secret, separated by spaces.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import re
import secrets

PREFIX = "whsec_"


def parse_secrets(raw: str) -> list[bytes]:
    """The keys in a `PRESSROOM_WEBHOOK_SECRET` value; ValueError if one is malformed."""
    keys = []
    for part in re.split(r"[\s,]+", raw.strip()):
        if not part:
            continue
        if not part.startswith(PREFIX):
            raise ValueError("each secret must start with whsec_")
        try:
            keys.append(base64.b64decode(part[len(PREFIX) :], validate=True))
        except binascii.Error:
            raise ValueError("the part after whsec_ must be base64") from None
    if not keys:
        raise ValueError("no secret given")
    return keys


def new_secret() -> str:
    """A fresh random secret in the `whsec_` format."""
    return PREFIX + base64.b64encode(secrets.token_bytes(32)).decode()


def sign(keys: list[bytes], msg_id: str, timestamp: int, body: bytes) -> str:
    """The `webhook-signature` header value for one message."""
    signed = f"{msg_id}.{timestamp}.".encode() + body
    sigs = [
        "v1," + base64.b64encode(hmac.new(key, signed, hashlib.sha256).digest()).decode()
        for key in keys
    ]
    return " ".join(sigs)


def headers(keys: list[bytes], msg_id: str, timestamp: int, body: bytes) -> dict[str, str]:
    return {
        "content-type": "application/json",
        "webhook-id": msg_id,
        "webhook-timestamp": str(timestamp),
        "webhook-signature": sign(keys, msg_id, timestamp, body),
    }

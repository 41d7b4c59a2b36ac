"""Webhook signatures verify with the reference standardwebhooks library."""

from __future__ import annotations

import json

import pytest
from standardwebhooks.webhooks import Webhook, WebhookVerificationError

from services.core.secrets import signing

SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"


def test_signature_verifies_with_reference_library():
    body = json.dumps({"type": "job.done", "data": {"id": "x"}}).encode()
    import time

    headers = signing.headers(signing.parse_secrets(SECRET), "msg_x", int(time.time()), body)
    assert Webhook(SECRET).verify(body, headers) == {"type": "job.done", "data": {"id": "x"}}


def test_every_active_secret_signs_so_receivers_can_rotate():
    other = signing.new_secret()
    keys = signing.parse_secrets(f"{SECRET} {other}")
    import time

    body = b"{}"
    headers = signing.headers(keys, "msg_y", int(time.time()), body)
    assert len(headers["webhook-signature"].split(" ")) == 2
    Webhook(SECRET).verify(body, headers)
    Webhook(other).verify(body, headers)


def test_tampered_body_fails_verification():
    import time

    headers = signing.headers(signing.parse_secrets(SECRET), "m", int(time.time()), b"{}")
    with pytest.raises(WebhookVerificationError):
        Webhook(SECRET).verify(b'{"a":1}', headers)


@pytest.mark.parametrize("raw", ["", "abc", "whsec_!!notbase64"])
def test_malformed_secret_is_refused(raw):
    with pytest.raises(ValueError):
        signing.parse_secrets(raw)

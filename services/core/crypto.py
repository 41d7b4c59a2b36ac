"""Secrets: API keys (random, stored as hashes), sealed values (encrypted at rest with the
server key) and job ids derived from an `Idempotency-Key` that only the server can compute.

An API key carries 256 random bits, so a plain SHA-256 of it is enough to store: there is
nothing to guess that a slow hash would protect. Sealed values use AES-256-GCM with the
value's owner (a job id, a tenant id) as associated data, so a ciphertext copied to
another job or tenant does not open.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import secrets

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

KEY_PREFIX = "prk_"
"""Every tenant API key starts with this, so a leaked one is easy to recognise and scan for."""

_SEALED = "sealed1:"
_NONCE_BYTES = 12  # AES-GCM's standard nonce size


def new_api_key() -> str:
    """A fresh tenant API key: the prefix and 256 random bits, URL-safe."""
    return KEY_PREFIX + secrets.token_urlsafe(32)


def hash_key(key: str) -> bytes:
    """What is stored of an API key (the key itself never is)."""
    return hashlib.sha256(key.encode()).digest()


def same_hash(a: bytes, b: bytes) -> bool:
    """Constant-time comparison of two key hashes."""
    return hmac.compare_digest(a, b)


def new_id(prefix: str) -> str:
    """A random public identifier such as `key_…` or `whs_…` (not a secret)."""
    return f"{prefix}_{secrets.token_hex(8)}"


def seal(server_key: bytes, plaintext: str, owner: str) -> str:
    """`plaintext` encrypted for storage; only `unseal` with the same owner opens it."""
    nonce = os.urandom(_NONCE_BYTES)
    sealed = AESGCM(server_key).encrypt(nonce, plaintext.encode(), owner.encode())
    return _SEALED + base64.urlsafe_b64encode(nonce + sealed).decode()


def is_sealed(value: str) -> bool:
    return value.startswith(_SEALED)


def unseal(server_key: bytes, value: str, owner: str) -> str:
    """The plaintext of a `seal`ed value; ValueError if it was not sealed for `owner` with
    this key (or is damaged)."""
    if not is_sealed(value):
        raise ValueError("not a sealed value")
    try:
        raw = base64.urlsafe_b64decode(value[len(_SEALED) :])
        nonce, sealed = raw[:_NONCE_BYTES], raw[_NONCE_BYTES:]
        return AESGCM(server_key).decrypt(nonce, sealed, owner.encode()).decode()
    except (InvalidTag, ValueError) as exc:
        raise ValueError("cannot open a sealed value: wrong key or owner") from exc


def idempotent_job_id(server_key: bytes, tenant: str, idempotency_key: str) -> str:
    """The job id of a tenant's `Idempotency-Key`: the same for every retry, different for
    every tenant, and not computable without the server key."""
    mac = hmac.new(server_key, f"idempotency\n{tenant}\n{idempotency_key}".encode(), "sha256")
    return mac.hexdigest()[:32]


def idempotent_batch_id(server_key: bytes, tenant: str, idempotency_key: str) -> str:
    """The batch id of a tenant's `Idempotency-Key` on `POST /batches`: `b` and 31 hex
    digits, like a random batch id; keyed apart from `idempotent_job_id`, so a job and a
    batch submitted with the same key never share an id."""
    text = f"batch\n{tenant}\n{idempotency_key}"
    return "b" + hmac.new(server_key, text.encode(), "sha256").hexdigest()[:31]

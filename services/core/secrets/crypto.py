"""Secrets: API keys (random, stored as hashes), sealed values (encrypted at rest with the
server key) and job ids derived from an `Idempotency-Key` that only the server can compute.

An API key carries 256 random bits, so a plain SHA-256 of it is enough to store: there is
nothing to guess that a slow hash would protect. Sealed values use AES-256-GCM with the
value's owner (a job id, a tenant id) as associated data, so a ciphertext copied to
another job or tenant does not open.

The server key is a keyring (`ServerKeys`, `PRESSROOM_SERVER_KEY` holding one key or
several): the first seals new values and derives ids, every one opens what it sealed. A
sealed value names the key that sealed it by its id (`key_id`, a digest, not the key), so
an operator can tell which keys are still needed (`pressroom server-keys status`) and
re-seal what an old key holds with the new one (`… rotate`) before dropping it.
"""

from __future__ import annotations

import base64
import binascii
import functools
import hashlib
import hmac
import os
import re
import secrets
from dataclasses import dataclass

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

KEY_PREFIX = "prk_"
"""Every tenant API key starts with this, so a leaked one is easy to recognise and scan for."""

_SEALED = "sealed2:"
"""A value sealed by a keyring: `sealed2:<key id>:<nonce and ciphertext, base64>`."""
_LEGACY = "sealed1:"
"""A value sealed before keyrings, by the one server key of the time (no key id)."""
_NONCE_BYTES = 12  # AES-GCM's standard nonce size
KEY_BYTES = 32  # AES-256


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


def key_id(key: bytes) -> str:
    """A server key's public name: 8 hex digits of a digest of it (not the key; 32 bits
    cannot help anyone find 256)."""
    return hashlib.sha256(b"pressroom server key id\n" + key).hexdigest()[:8]


def is_sealed(value: str) -> bool:
    return value.startswith((_SEALED, _LEGACY))


def sealed_with(value: str) -> str | None:
    """The id of the key that sealed `value`; None for a value sealed before key ids."""
    if not value.startswith(_SEALED):
        return None
    return value[len(_SEALED) :].partition(":")[0]


def _open(key: bytes, raw: str, owner: str) -> str:
    try:
        data = base64.urlsafe_b64decode(raw)
        nonce, sealed = data[:_NONCE_BYTES], data[_NONCE_BYTES:]
        return AESGCM(key).decrypt(nonce, sealed, owner.encode()).decode()
    except (InvalidTag, ValueError) as exc:
        raise ValueError("cannot open a sealed value: wrong key or owner") from exc


@dataclass(frozen=True)
class ServerKeys:
    """The server keyring: `keys[0]` seals and derives ids; every key opens what it
    sealed. Built by `Settings.server_keys()` from `PRESSROOM_SERVER_KEY`."""

    keys: tuple[bytes, ...]

    def __post_init__(self) -> None:
        if not self.keys or any(len(key) != KEY_BYTES for key in self.keys):
            raise ValueError(f"a server keyring is one or more keys of {KEY_BYTES} bytes")

    @property
    def primary(self) -> bytes:
        """The key that seals new values and derives idempotent ids."""
        return self.keys[0]

    @property
    def ids(self) -> tuple[str, ...]:
        return tuple(key_id(key) for key in self.keys)

    def seal(self, plaintext: str, owner: str) -> str:
        """`plaintext` encrypted for storage with the primary key; only `unseal` with the
        same owner opens it."""
        nonce = os.urandom(_NONCE_BYTES)
        sealed = AESGCM(self.primary).encrypt(nonce, plaintext.encode(), owner.encode())
        body = base64.urlsafe_b64encode(nonce + sealed).decode()
        return f"{_SEALED}{key_id(self.primary)}:{body}"

    def unseal(self, value: str, owner: str) -> str:
        """The plaintext of a sealed value; ValueError if no key of the ring sealed it for
        `owner` (a wrong key, a key dropped too early, another owner, damage)."""
        if value.startswith(_LEGACY):
            return self._open_legacy(value[len(_LEGACY) :], owner)
        if not value.startswith(_SEALED):
            raise ValueError("not a sealed value")
        kid, _, raw = value[len(_SEALED) :].partition(":")
        for key in self.keys:
            if key_id(key) == kid:
                return _open(key, raw, owner)
        raise ValueError(f"cannot open a sealed value: its key {kid} is not in the keyring")

    def _open_legacy(self, raw: str, owner: str) -> str:
        for key in self.keys:
            try:
                return _open(key, raw, owner)
            except ValueError:
                continue
        raise ValueError("cannot open a sealed value: wrong key or owner")


@functools.lru_cache(maxsize=4)
def read_keyring(raw: str) -> ServerKeys | None:
    """The keyring a `PRESSROOM_SERVER_KEY` value holds: keys of 32 random bytes in base64,
    separated by spaces or commas; None for no key. ValueError naming the malformed key
    (never showing it). Cached: the gateway derives a job id from it per request."""
    parts = [part for part in re.split(r"[\s,]+", raw.strip()) if part]
    keys = []
    for n, part in enumerate(parts, start=1):
        which = f"key {n} of {len(parts)}" if len(parts) > 1 else "the key"
        try:
            key = base64.b64decode(part, validate=True)
        except binascii.Error:
            raise ValueError(f"{which} must be base64") from None
        if len(key) != KEY_BYTES:
            raise ValueError(f"{which} must be 32 bytes in base64 (openssl rand -base64 32)")
        keys.append(key)
    return ServerKeys(tuple(keys)) if keys else None


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

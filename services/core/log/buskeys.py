"""A service's credentials on NATS and the TLS it connects with.

Identities are NKeys: an Ed25519 key pair per service. nats-server's configuration lists
each service's public key with its permissions (`busaccess`); the service holds its seed
(`PRESSROOM_NATS_NKEY_SEED`) and proves it holds it by signing the server's nonce, so the
seed never crosses the network and the server's configuration holds no secret.

TLS: with `PRESSROOM_NATS_TLS_CA` (or a `tls://` URL) the client speaks TLS from its first
byte (`tls_handshake_first`), so it never sends anything in plain text to a server that
does not offer TLS, whatever the network answers; the server must then be configured
with `handshake_first: true` in its `tls` block (deploy/k8s does). A client certificate
(`PRESSROOM_NATS_TLS_CERT`/`_KEY`) is sent where the server verifies clients.
"""

from __future__ import annotations

import base64
import binascii
import os
import ssl
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import nkeys

from services.core.runtime.settings import Settings, SettingsError


def new_seed() -> str:
    """A fresh NKey user seed (`SU…`): 32 random bytes."""
    seed: bytes = nkeys.encode_seed(os.urandom(32), nkeys.PREFIX_BYTE_USER)
    return seed.decode()


def public_key(seed: str) -> str:
    """The public key (`U…`) of `seed`; `ValueError` if it is not a user seed, or a
    mistyped one (its checksum, which nkeys does not check)."""
    _check_sum(seed)
    try:
        pair = nkeys.from_seed(bytearray(seed.encode()))
    except (nkeys.NkeysError, ValueError, TypeError) as exc:
        raise ValueError(f"not an NKey seed ({type(exc).__name__})") from None
    try:
        key: bytes = pair.public_key
    finally:
        pair.wipe()
    if not key.startswith(b"U"):
        raise ValueError("not a user seed (SU…)")
    return key.decode()


def _check_sum(seed: str) -> None:
    try:
        raw = base64.b32decode(seed + "=" * (-len(seed) % 8))
    except (binascii.Error, ValueError):
        raise ValueError("not base32") from None
    if len(raw) < 4 or bytes(nkeys.crc16_checksum(raw[:-2])) != raw[-2:]:
        raise ValueError("its checksum is wrong (a mistyped or truncated seed?)")


def servers(settings: Settings) -> list[str]:
    return [url.strip() for url in settings.nats_url.split(",") if url.strip()]


def redacted(urls: str) -> str:
    """`urls` without the passwords a URL may carry (`nats://user:password@host`)."""
    return ",".join(_redact(url.strip()) for url in urls.split(","))


def _redact(url: str) -> str:
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.netloc.rsplit("@", 1)[1]
    return urlunsplit(parts._replace(netloc=f"{parts.username}:***@{host}"))


def connect_options(settings: Settings) -> dict[str, Any]:
    """nats-py's `connect` options for this service's credentials and TLS; a seed or a
    certificate file that cannot be used is a `SettingsError` naming its variable."""
    options: dict[str, Any] = {}
    if settings.nats_nkey_seed:
        try:
            public_key(settings.nats_nkey_seed)
        except ValueError as exc:
            raise SettingsError(f"PRESSROOM_NATS_NKEY_SEED is invalid: {exc}") from None
        options["nkeys_seed_str"] = settings.nats_nkey_seed
    context = tls_context(settings)
    if context is not None:
        options.update(tls=context, tls_handshake_first=True)
    return options


def uses_tls(settings: Settings) -> bool:
    return bool(settings.nats_tls_ca or settings.nats_tls_cert) or any(
        url.startswith("tls://") for url in servers(settings)
    )


def tls_context(settings: Settings) -> ssl.SSLContext | None:
    """The TLS context NATS is reached with; None for plain connections."""
    if not uses_tls(settings):
        return None
    try:
        context = ssl.create_default_context(cafile=settings.nats_tls_ca or None)
    except (OSError, ssl.SSLError) as exc:
        raise SettingsError(f"PRESSROOM_NATS_TLS_CA={settings.nats_tls_ca!r}: {exc}") from None
    if settings.nats_tls_cert:
        try:
            context.load_cert_chain(settings.nats_tls_cert, settings.nats_tls_key)
        except (OSError, ssl.SSLError) as exc:
            raise SettingsError(
                f"PRESSROOM_NATS_TLS_CERT={settings.nats_tls_cert!r} and "
                f"PRESSROOM_NATS_TLS_KEY={settings.nats_tls_key!r}: {exc}"
            ) from None
    return context

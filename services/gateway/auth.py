"""Who is asking: API keys resolved to a tenant and its scopes, without a database round
trip.

Every gateway keeps every key's hash (and every tenant) in memory: `Directory` loads them
at start and reloads what changed every `PRESSROOM_AUTH_REFRESH` seconds; a change made
through any gateway is told to every gateway over NATS at once (`keynews.py`), so a
revocation is refused everywhere within a round trip. While PostgreSQL is down the last
copy keeps serving: known keys keep getting their `202`, revoked keys stay refused. A
gateway that starts while PostgreSQL is down takes its first copy from the bus instead
(`seed`, from `keymirror.py`); until it has one, every key is answered `503`, not `401`.
Last-use times are collected in memory and written in one statement every few seconds.

A request is authenticated when it arrives, but an answer that lasts (a live-update
stream) outlives that moment: it asks `Directory.recheck` again as it goes, and the
Directory tells its watchers (`watch`) the moment it learns that a key changed (revoked,
here or on another gateway), so such an answer ends within about a refresh.

Routes declare the scope they need with `guarded(scope, handler)`; the admin API uses
`admin_only(handler)` and `PRESSROOM_ADMIN_KEY`. With `PRESSROOM_AUTH=disabled` every
request is the implicit tenant `default` with every scope.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import hashlib
import hmac
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import asyncpg
from aiohttp import web

from services.core.database import tenancy
from services.core.model.errors import Forbidden, Unauthorized, Unavailable
from services.core.model.subjects import DEFAULT_TENANT
from services.core.runtime.settings import Settings
from services.core.secrets import crypto
from services.gateway.headers import header

log = logging.getLogger(__name__)

SCOPES = (
    "jobs:read",
    "jobs:write",
    "templates:read",
    "templates:write",
    "webhooks:write",
    "usage:read",
)
"""Every scope a key can have; a key created without a list gets all of them."""

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@dataclass(frozen=True)
class Caller:
    """The tenant a request acts for, the key it used (None without keys) and its scopes."""

    tenant: str
    key_id: str | None
    scopes: frozenset[str]


CALLER_KEY = web.RequestKey("caller", Caller)

IMPLICIT = Caller(DEFAULT_TENANT, None, frozenset(SCOPES))
"""Every request when `PRESSROOM_AUTH=disabled`."""


def bearer_token(request: web.Request) -> str | None:
    """The token of an `Authorization: Bearer <token>` header, None without one."""
    scheme, _, token = (header(request, "Authorization") or "").partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        return None
    return token.strip()


class Directory:
    """Every API key (as its hash) and every tenant, kept current from PostgreSQL."""

    def __init__(self) -> None:
        self.keys: dict[bytes, tenancy.ApiKey] = {}
        self.by_id: dict[str, tenancy.ApiKey] = {}
        self.callers: dict[bytes, Caller] = {}  # made once per key, not per request
        self.tenants: dict[str, tenancy.Tenant] = {}
        self.used: dict[str, float] = {}  # key id -> time.monotonic() of its last use
        self._keys_seen: dt.datetime | None = None
        self._tenants_seen: dt.datetime | None = None
        self._watchers: list[Callable[[set[str]], None]] = []
        self.loaded = False  # from PostgreSQL or the bus copy
        self._seeded = False  # from the bus copy, not yet reconciled with PostgreSQL

    def watch(self, changed: Callable[[set[str]], None]) -> None:
        """Call `changed(key_ids)` whenever keys that were known change what they allow
        (a revocation, made here or learnt from PostgreSQL)."""
        self._watchers.append(changed)

    def add_keys(self, keys: list[tenancy.ApiKey]) -> None:
        changed = set()
        for key in keys:
            known = self.by_id.get(key.id)
            if known is not None and _allows(known) != _allows(key):
                changed.add(key.id)
            self.keys[key.hash] = self.by_id[key.id] = key
            self.callers[key.hash] = Caller(key.tenant_id, key.id, frozenset(key.scopes))
            self._keys_seen = max(self._keys_seen or key.updated_at, key.updated_at)
        if changed:
            for watcher in self._watchers:
                watcher(changed)

    def revoke(self, key_ids: list[str]) -> None:
        """Refuse these keys from now on, as a notice from another gateway says (the
        revocation is in PostgreSQL already; the next refresh reads the same)."""
        now = dt.datetime.now(dt.UTC)
        known = [self.by_id[k] for k in key_ids if k in self.by_id]
        self.add_keys([dataclasses.replace(k, revoked_at=now) for k in known if not k.revoked_at])

    def add_tenants(self, tenants: list[tenancy.Tenant]) -> None:
        for tenant in tenants:
            self.tenants[tenant.id] = tenant
            self._tenants_seen = max(self._tenants_seen or tenant.updated_at, tenant.updated_at)

    def seed(self, keys: list[tenancy.ApiKey], tenants: list[tenancy.Tenant]) -> None:
        """Serve a copy (the bus's, while PostgreSQL is away) until the first refresh,
        which then reads everything and drops what PostgreSQL does not have."""
        self.add_tenants(tenants)
        self.add_keys(keys)
        self._keys_seen = self._tenants_seen = None
        self.loaded = self._seeded = True

    async def refresh(self, pool: asyncpg.Pool) -> list[str]:
        """Load what changed since the last refresh (everything the first time); the ids
        of keys dropped because PostgreSQL does not have them (after `seed` only)."""
        self.add_tenants(await tenancy.tenants_changed(pool, self._tenants_seen))
        everything = self._keys_seen is None
        keys = await tenancy.keys_changed(pool, self._keys_seen)
        self.add_keys(keys)
        self.loaded = True
        if not (everything and self._seeded):
            return []
        self._seeded = False
        gone = set(self.by_id) - {key.id for key in keys}
        for key_id in gone:
            self.keys.pop(self.by_id[key_id].hash, None)
            self.callers.pop(self.by_id.pop(key_id).hash, None)
        if gone:
            for watcher in self._watchers:
                watcher(gone)
        return sorted(gone)

    async def flush_use(self, pool: asyncpg.Pool) -> None:
        """Write the last-use times collected since the last flush."""
        used, self.used = self.used, {}
        try:
            now = time.monotonic()
            await tenancy.record_key_use(pool, {k: now - at for k, at in used.items()})
        except BaseException:
            for key_id, at in used.items():  # keep them for the next flush
                self.used[key_id] = max(self.used.get(key_id, at), at)
            raise

    def authenticate(self, token: str | None) -> Caller:
        """The caller a bearer token stands for; `Unauthorized` if none, unknown or revoked."""
        if token is None:
            raise Unauthorized("missing API key: send the header Authorization: Bearer <key>")
        digest = crypto.hash_key(token)
        key = self.keys.get(digest)
        if key is None and not self.loaded:
            raise Unavailable("API keys are not loaded yet: PostgreSQL and NATS cannot say")
        if key is None or not crypto.same_hash(key.hash, digest):
            raise Unauthorized("unknown API key")
        if key.revoked_at is not None:
            raise Unauthorized("this API key was revoked")
        self.used[key.id] = time.monotonic()
        return self.callers[digest]

    def recheck(self, caller: Caller, scope: str) -> None:
        """`Unauthorized` if `caller`'s key is now revoked or unknown, `Forbidden` if it
        no longer has `scope`: for answers that last beyond the request that opened them.
        A caller without a key (`PRESSROOM_AUTH=disabled`) always passes."""
        if caller.key_id is None:
            return
        key = self.by_id.get(caller.key_id)
        if key is None or key.tenant_id != caller.tenant:
            raise Unauthorized("unknown API key")
        if key.revoked_at is not None:
            raise Unauthorized("this API key was revoked")
        if scope not in key.scopes:
            raise Forbidden(f"this API key lacks the scope {scope}")


def _allows(key: tenancy.ApiKey) -> tuple[bool, str, frozenset[str]]:
    """What a key lets its holder do, to tell a change that matters from a last use."""
    return key.revoked_at is None, key.tenant_id, frozenset(key.scopes)


DIRECTORY = web.AppKey("directory", Directory)
AUTH_SETTINGS = web.AppKey("auth_settings", Settings)


def caller_of(request: web.Request) -> Caller:
    """The caller `guarded` resolved for this request."""
    caller: Caller = request[CALLER_KEY]
    return caller


def authenticate(request: web.Request) -> Caller:
    """The request's caller (`IMPLICIT` without keys); raises `Unauthorized`."""
    if not request.app[AUTH_SETTINGS].auth_enabled:
        return IMPLICIT
    return request.app[DIRECTORY].authenticate(bearer_token(request))


API_KEY = "apiKey"
"""The OpenAPI security scheme of a tenant's API key."""
ADMIN_KEY = "adminKey"
"""The OpenAPI security scheme of an admin key."""


@dataclass(frozen=True)
class Guard:
    """What a guarded handler asks of its caller: the key `scheme` (`"apiKey"` for a
    tenant's key, `"adminKey"` for an admin key) and, for a tenant's key, its `scope`.
    The OpenAPI document reads it from the router (`guard_of`), so it cannot drift."""

    scheme: str
    scope: str | None = None


_GUARD = "pressroom_guard"


def _guarding(handler: Handler, guard: Guard) -> Handler:
    setattr(handler, _GUARD, guard)  # a function attribute, read back typed by guard_of
    return handler


def guard_of(handler: object) -> Guard | None:
    """The `Guard` of a handler made by `guarded` or `admin_only`; None for an open route."""
    guard = getattr(handler, _GUARD, None)
    return guard if isinstance(guard, Guard) else None


def declared(guard: Guard, handler: Handler) -> Handler:
    """`handler`, which checks its caller itself (the Gotenberg-compatible routes take
    Basic credentials too), declared as needing `guard` for the OpenAPI document."""
    return _guarding(handler, guard)


def guarded(scope: str, handler: Handler) -> Handler:
    """`handler` for callers whose key has `scope`: 401 without a valid key, 403 without
    the scope. The caller is then `caller_of(request)`."""
    assert scope in SCOPES, scope

    async def guard(request: web.Request) -> web.StreamResponse:
        caller = authenticate(request)
        request[CALLER_KEY] = caller
        if scope not in caller.scopes:
            raise Forbidden(f"this API key lacks the scope {scope}")
        return await handler(request)

    return _guarding(guard, Guard(API_KEY, scope))


def _digest(value: str) -> bytes:
    return hashlib.sha256(value.encode()).digest()


def is_admin(settings: Settings, token: str | None) -> bool:
    """Whether `token` is one of the admin keys (compared in constant time)."""
    if token is None:
        return False
    digest = _digest(token)
    matches = [hmac.compare_digest(digest, _digest(key)) for key in settings.admin_keys]
    return any(matches)


def admin_only(handler: Handler) -> Handler:
    """`handler` for requests that bring an admin key (`PRESSROOM_ADMIN_KEY`)."""

    async def guard(request: web.Request) -> web.StreamResponse:
        settings = request.app[AUTH_SETTINGS]
        token = bearer_token(request)
        if not settings.admin_keys:
            raise Unauthorized("the admin API is off: set PRESSROOM_ADMIN_KEY")
        if not is_admin(settings, token):
            if token is not None and crypto.hash_key(token) in request.app[DIRECTORY].keys:
                raise Forbidden("this route needs an admin key, not a tenant's API key")
            raise Unauthorized("missing or unknown admin key")
        return await handler(request)

    return _guarding(guard, Guard(ADMIN_KEY))

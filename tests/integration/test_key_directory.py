"""The gateways' copy of the API keys on NATS, and its reconciliation with PostgreSQL.

Verifies, on a real nats-server (with the services' identities) and PostgreSQL: a
Directory seeded from the bucket authenticates the keys it holds (a revoked one is still
refused) before PostgreSQL is read; the bucket holds hashes, never a key; the first
refresh from PostgreSQL drops a key the database does not have, which then is refused
(and forgotten in the bucket); a Directory with no copy at all answers `Unavailable`, not
`Unauthorized`; another service's identity cannot read the bucket.
"""

from __future__ import annotations

import datetime as dt

import pytest

from services.core.database import db, tenancy
from services.core.log import bus
from services.core.log.busaccess import Role
from services.core.model.errors import Unauthorized, Unavailable
from services.core.runtime.settings import Settings
from services.core.secrets import crypto
from services.gateway import keymirror
from services.gateway.auth import Directory
from tests.conftest import as_service

NOW = dt.datetime(2026, 12, 3, tzinfo=dt.UTC)


def _key(key_id: str, tenant: str, secret: str, revoked: bool = False) -> tenancy.ApiKey:
    return tenancy.ApiKey(
        id=key_id, tenant_id=tenant, hash=crypto.hash_key(secret), prefix=secret[:6],
        scopes=("jobs:write",), created_at=NOW, revoked_at=NOW if revoked else None,
        last_used_at=None, updated_at=NOW,
    )  # fmt: skip


async def test_a_seeded_directory_serves_the_copy_until_postgres_reconciles_it(
    settings: Settings,
) -> None:
    gateway = as_service(settings, "gateway")
    async with (
        db.open_pool(settings) as pool,
        bus.open_bus(gateway, name="test", role=Role.GATEWAY) as (_, js),
    ):
        tenant = await tenancy.create_tenant(pool, "ten_a", "a", None, None)
        assert tenant is not None
        kept = await tenancy.create_key(
            pool, "key_kept", tenant.id, crypto.hash_key("prk_kept"), "prk_ke", ["jobs:write"]
        )
        writer = keymirror.Mirror(await keymirror.open_bucket(js, settings))
        stale = _key("key_gone", tenant.id, "prk_gone")
        revoked = _key("key_revoked", tenant.id, "prk_revoked", revoked=True)
        assert await writer.write([kept, stale, revoked], [tenant]) == 4
        stored = b"".join([(await writer.kv.get(f"key.{k}")).value for k in ("key_gone",)])
        assert b"prk_gone" not in stored  # the hash only

        reader = keymirror.Mirror(await keymirror.open_bucket(js, settings))
        keys, tenants = await reader.read()
        directory = Directory()
        with pytest.raises(Unavailable):
            directory.authenticate("prk_kept")  # nothing known yet: not a 401
        directory.seed(keys, tenants)
        assert directory.authenticate("prk_gone").key_id == "key_gone"
        with pytest.raises(Unauthorized, match="revoked"):
            directory.authenticate("prk_revoked")
        assert directory.tenants["ten_a"].name == "a"

        assert await directory.refresh(pool) == ["key_gone", "key_revoked"]
        assert directory.authenticate("prk_kept").key_id == "key_kept"
        with pytest.raises(Unauthorized, match="unknown"):
            directory.authenticate("prk_gone")
        await reader.forget(["key_gone", "key_revoked"])
        assert {k.id for k in (await keymirror.Mirror(reader.kv).read())[0]} == {"key_kept"}

"""The key Directory tells long-lived answers when a key stops allowing them.

Verifies: a key revoked (here, in PostgreSQL, or in a notice from another gateway), or one
whose scopes no longer include what a stream needs, is reported to the Directory's
watchers once, and `recheck` then refuses it (401, 403); a key's last use alone is no
news; a caller without a key (auth disabled) always passes.
"""

from __future__ import annotations

import dataclasses
import datetime as dt

import pytest

from services.core.database.tenancy import ApiKey
from services.core.model.errors import Forbidden, Unauthorized
from services.core.secrets import crypto
from services.gateway.auth import IMPLICIT, Directory

NOW = dt.datetime(2026, 12, 3, tzinfo=dt.UTC)


def key(**changes: object) -> ApiKey:
    made = ApiKey(
        id="key_1", tenant_id="t1", hash=crypto.hash_key("prk_secret"), prefix="prk_se",
        scopes=("jobs:read", "jobs:write"), created_at=NOW, revoked_at=None,
        last_used_at=None, updated_at=NOW,
    )  # fmt: skip
    return dataclasses.replace(made, **changes)


def watched() -> tuple[Directory, list[set[str]]]:
    directory, told = Directory(), []
    directory.add_keys([key()])
    directory.watch(told.append)
    return directory, told


def test_a_revocation_is_told_once_and_the_key_then_fails_its_recheck():
    directory, told = watched()
    caller = directory.authenticate("prk_secret")
    directory.recheck(caller, "jobs:read")
    later = NOW + dt.timedelta(seconds=5)
    directory.add_keys([key(revoked_at=later, updated_at=later)])
    directory.add_keys([key(revoked_at=later, updated_at=later)])  # the refresh's overlap
    assert told == [{"key_1"}]
    with pytest.raises(Unauthorized, match="revoked"):
        directory.recheck(caller, "jobs:read")


def test_a_scope_taken_away_is_told_and_refused_with_403():
    directory, told = watched()
    caller = directory.authenticate("prk_secret")
    directory.add_keys([key(scopes=("jobs:write",), updated_at=NOW + dt.timedelta(seconds=1))])
    assert told == [{"key_1"}]
    with pytest.raises(Forbidden, match="jobs:read"):
        directory.recheck(caller, "jobs:read")


def test_a_last_use_is_no_news_and_a_caller_without_a_key_always_passes():
    directory, told = watched()
    used = NOW + dt.timedelta(seconds=3)
    directory.add_keys([key(last_used_at=used, updated_at=used)])
    assert told == []
    directory.recheck(IMPLICIT, "jobs:read")
    stranger = dataclasses.replace(directory.authenticate("prk_secret"), key_id="key_2")
    with pytest.raises(Unauthorized):
        directory.recheck(stranger, "jobs:read")


def test_a_revocation_heard_from_another_gateway_is_refused_at_once_and_told():
    """`keynews`: a notice names the key; this gateway refuses it without PostgreSQL."""
    directory, told = watched()
    directory.authenticate("prk_secret")
    directory.revoke(["key_1", "key_unknown"])
    directory.revoke(["key_1"])  # told again: no news
    assert told == [{"key_1"}]
    with pytest.raises(Unauthorized, match="revoked"):
        directory.authenticate("prk_secret")

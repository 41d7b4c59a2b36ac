"""A job row's sealed values are sealed again for the same owner, or dropped once the job
has ended (`core/database/sealedinput.resealed`)."""

from __future__ import annotations

import os

from services.core.database.sealedinput import resealed
from services.core.secrets import crypto

OLD = crypto.ServerKeys((os.urandom(32),))
NEW_KEY = os.urandom(32)
BOTH = crypto.ServerKeys((NEW_KEY, OLD.primary))
NEW = crypto.ServerKeys((NEW_KEY,))


def _item_input(job: str, batch: str) -> dict[str, object]:
    return {
        "batch_id": batch,
        "webhook_secret": OLD.seal("whsec_own", job),
        "page_secrets": OLD.seal('{"headers":[]}', job),
        "options": {"encrypt": {"owner_password": OLD.seal("owner-pw", batch)}},
        "pdf": {
            "inputs": [{"file": "a.pdf", "password": OLD.seal("in-pw", job)}],
            "steps": [{"step": "encrypt", "user_password": OLD.seal("step-pw", job)}],
        },
        "data": {"note": "sealed2:not-a-secret"},
    }


def test_an_unfinished_item_s_values_open_with_the_new_key_alone_for_the_same_owners() -> None:
    given = _item_input("job1", "batch1")
    fresh, changed = resealed("job1", given, BOTH, ended=False)
    assert (changed.done, changed.dropped, changed.unreadable) == (5, 0, 0)
    assert NEW.unseal(fresh["webhook_secret"], "job1") == "whsec_own"
    assert NEW.unseal(fresh["page_secrets"], "job1") == '{"headers":[]}'
    assert NEW.unseal(fresh["options"]["encrypt"]["owner_password"], "batch1") == "owner-pw"
    assert NEW.unseal(fresh["pdf"]["inputs"][0]["password"], "job1") == "in-pw"
    assert NEW.unseal(fresh["pdf"]["steps"][0]["user_password"], "job1") == "step-pw"
    assert fresh["data"] == given["data"]  # a client's data is never taken for a secret
    assert given["pdf"]["inputs"][0]["password"].startswith("sealed2:")  # not changed in place


def test_an_ended_job_keeps_only_its_webhook_secret() -> None:
    fresh, changed = resealed("job1", _item_input("job1", "batch1"), BOTH, ended=True)
    assert (changed.done, changed.dropped) == (1, 4)
    assert NEW.unseal(fresh["webhook_secret"], "job1") == "whsec_own"
    assert "page_secrets" not in fresh and fresh["options"]["encrypt"] == {}
    assert fresh["pdf"]["inputs"] == [{"file": "a.pdf"}]
    assert fresh["pdf"]["steps"] == [{"step": "encrypt"}]


def test_a_value_no_key_opens_is_left_as_it_was() -> None:
    given = {"page_secrets": crypto.ServerKeys((os.urandom(32),)).seal("x", "job1")}
    fresh, changed = resealed("job1", given, BOTH, ended=False)
    assert fresh == given and changed.unreadable == 1

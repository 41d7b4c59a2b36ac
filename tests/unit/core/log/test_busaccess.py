"""The permission table's own logic: NATS subject matching, deny before allow, replies
kept apart, and the configuration text nats-server reads."""

from __future__ import annotations

from services.core.log import busaccess
from services.core.log.busaccess import GRANTS, SERVICES, Grants, Role, Variable


def test_subjects_match_as_nats_matches_them():
    assert busaccess.matches("jobs.*.done", "jobs.j1.done")
    assert not busaccess.matches("jobs.*.done", "jobs.b.1.done")  # `*` is one token
    assert not busaccess.matches("jobs.*.done", "jobs.j1.done.quiet")
    assert busaccess.matches("jobs.>", "jobs.j1.done.quiet")
    assert not busaccess.matches("jobs.>", "jobs")  # `>` is one token or more
    assert busaccess.matches("$JS.ACK.JOBS.renderer.>", "$JS.ACK.JOBS.renderer.1.2.3.4.0")
    assert not busaccess.matches("singles-*", "singles-t1")  # wildcards are whole tokens


def test_a_denied_subject_is_refused_whatever_allows_it():
    grants = Grants(publish=("jobs.*.*.done",), subscribe=(), deny=("jobs.*.submitted.*",))
    assert grants.may_publish("jobs.b.1.done")
    assert not grants.may_publish("jobs.j.submitted.done")


def test_no_service_may_read_another_s_replies():
    for role in SERVICES:
        mine = f"{busaccess.inbox(role)}.abc"
        assert GRANTS[role].may_subscribe(mine), role
        for other in SERVICES:
            if other is not role:
                assert not GRANTS[other].may_subscribe(mine), (other, role)


def test_no_service_may_change_delete_or_purge_the_log_but_its_keeper_its_settings():
    for role in SERVICES:
        for verb in ("DELETE", "PURGE", "MSG.DELETE"):
            assert not GRANTS[role].may_publish(f"$JS.API.STREAM.{verb}.JOBS"), (role, verb)
        keeper = GRANTS[role].may_publish("$JS.API.STREAM.UPDATE.JOBS")
        assert keeper == (role is Role.PROJECTOR), role
        assert not GRANTS[role].may_publish("$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.JOBS.x")


def test_the_authorization_names_keys_as_given_and_variables_unquoted():
    text = busaccess.authorization(
        [
            busaccess.user(Role.RENDERER, nkey="UABC"),
            busaccess.user(Role.GATEWAY, nkey=Variable("NATS_NKEY_GATEWAY")),
        ]
    )
    assert 'nkey: "UABC"' in text
    assert "nkey: $NATS_NKEY_GATEWAY" in text
    assert '"$JS.ACK.JOBS.renderer.>"' in text  # quoted: `$JS` is no variable

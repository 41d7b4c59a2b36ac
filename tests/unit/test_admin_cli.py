"""`pressroom tenants|keys|usage`: arguments, where the admin key comes from, and the exit
statuses of the failures that need no gateway (the rest runs against `pressroom dev` in
tests/integration/test_dev.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from services import admin_cli
from services.admin_cli import CliError, admin_key, error_message, parse_args, run, table
from services.cli import COMMANDS
from services.core.runtime.settings import Settings
from tests.conftest import free_port


def test_tenants_create_takes_its_limits():
    args = parse_args(
        ["tenants", "create", "acme", "--rate", "2.5", "--burst", "10", "--quota", "5"]
    )
    assert args.run is admin_cli.tenants_create
    assert (args.name, args.rate, args.burst, args.quota, args.json) == ("acme", 2.5, 10, 5, False)


def test_rate_and_burst_go_together(capsys: pytest.CaptureFixture[str]):
    with pytest.raises(SystemExit) as exit_:
        parse_args(["tenants", "create", "acme", "--rate", "2"])
    assert exit_.value.code == 2
    assert "--rate and --burst go together" in capsys.readouterr().err


def test_keys_create_splits_scopes_and_json_is_a_flag_of_every_action():
    args = parse_args(["keys", "create", "acme", "--scopes", "jobs:read, jobs:write,", "--json"])
    assert (args.run, args.tenant, args.scopes) == (
        admin_cli.keys_create,
        "acme",
        ["jobs:read", "jobs:write"],
    )
    assert args.json is True
    assert parse_args(["keys", "create", "acme"]).scopes is None
    assert parse_args(["keys", "revoke", "key_1"]).key_id == "key_1"
    assert parse_args(["usage", "--month", "2026-11", "--json"]).month == "2026-11"
    assert parse_args(["tenants", "show", "ten_1"]).tenant == "ten_1"


def test_an_action_is_required():
    with pytest.raises(SystemExit) as exit_:
        parse_args(["keys"])
    assert exit_.value.code == 2


def test_the_admin_key_comes_from_the_environment_first(tmp_path: Path):
    (tmp_path / "admin-key").write_text("pra_from_file\n")
    env = {"PRESSROOM_DATA_DIR": str(tmp_path), "PRESSROOM_ADMIN_KEY": "pra_one pra_two"}
    assert admin_key(Settings.from_env(env)) == "pra_one"
    assert admin_key(Settings.from_env({"PRESSROOM_DATA_DIR": str(tmp_path)})) == "pra_from_file"


def test_without_an_admin_key_the_command_exits_2_naming_the_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
):
    with pytest.raises(CliError) as error:
        admin_key(Settings.from_env({"PRESSROOM_DATA_DIR": str(tmp_path)}))
    assert error.value.status == 2
    assert run(["tenants", "list"], {"PRESSROOM_DATA_DIR": str(tmp_path)}) == 2
    err = capsys.readouterr().err
    assert err.startswith("pressroom: no admin key: ") and str(tmp_path / "admin-key") in err
    assert err.count("\n") == 1


def test_an_unreachable_gateway_exits_4_in_one_line(capsys: pytest.CaptureFixture[str]):
    """4, as `pressroom render|batch|jobs` exit for a gateway that is not there."""
    port = free_port()  # nothing listens there
    env = {"PRESSROOM_ADMIN_KEY": "pra_x", "PRESSROOM_PORT": str(port)}
    assert run(["usage"], env) == 4
    out, err = capsys.readouterr()
    assert err.startswith(f"pressroom: cannot reach the gateway at http://127.0.0.1:{port}: ")
    assert err.count("\n") == 1 and out == ""
    assert run(["usage", "--json"], env) == 4
    out, err = capsys.readouterr()
    assert out == "" and json.loads(err)["error"]["type"] == "unavailable"


def test_a_bad_setting_exits_2(capsys: pytest.CaptureFixture[str]):
    assert run(["tenants", "list"], {"PRESSROOM_PORT": "port"}) == 2
    assert capsys.readouterr().err.startswith("pressroom: PRESSROOM_PORT='port' is invalid")


def test_error_messages_come_from_the_error_body():
    body = b'{"error":{"type":"validation","message":"name is too long","field":"name"}}'
    assert error_message(400, body) == ("name is too long", "validation")
    assert error_message(400, b'{"error":{"type":"v","message":"bad","field":"x"}}') == (
        "bad (field x)",
        "v",
    )
    assert error_message(502, b"<html>bad gateway</html>") == (
        "the gateway answered HTTP 502",
        "http",
    )


def test_table_aligns_columns_and_shows_missing_values_as_dashes():
    assert table([("key_1", None), ("key_22", "now")], ("ID", "USED")).splitlines() == [
        "ID      USED",
        "key_1   -",
        "key_22  now",
    ]


def test_the_commands_are_registered_and_have_help():
    for name in ("tenants", "keys", "usage"):
        assert COMMANDS[name][0] == "services.admin_cli"
    shown = subprocess.run(
        [sys.executable, "-m", "services.cli", "tenants", "--help"],
        capture_output=True, text=True, timeout=30,
    )  # fmt: skip
    assert shown.returncode == 0
    assert "usage: pressroom tenants" in shown.stdout and "create" in shown.stdout
    assert "exit status: 0 ok; 2 usage" in " ".join(shown.stdout.split())


def test_pressroom_help_is_an_answer_on_stdout_and_a_wrong_command_a_usage_error():
    """Asked for, the command list is data (stdout, 0) and names the exit statuses; an
    unknown command gets it as a message (stderr, 2)."""

    def pressroom(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "services.cli", *args], capture_output=True, text=True,
            timeout=30,
        )  # fmt: skip

    asked = pressroom("--help")
    assert asked.returncode == 0 and asked.stderr == ""
    assert "render" in asked.stdout and "3 the API refused" in " ".join(asked.stdout.split())
    wrong = pressroom("no-such-command")
    assert wrong.returncode == 2 and wrong.stdout == "" and "render" in wrong.stderr

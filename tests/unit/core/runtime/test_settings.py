"""Settings come from PRESSROOM_* variables; a bad value names the variable."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from services.core.runtime.settings import Settings, SettingsError, describe
from services.core.runtime.valuefiles import MAX_FILE_BYTES, files_read

REFERENCE = Path(__file__).parents[4] / "docs" / "configuration.md"
"""Where the settings' table is: a row per variable, `| name | default | meaning |`."""


def test_defaults_need_no_environment():
    settings = Settings.from_env({})
    assert settings.port == 8080
    assert settings.base_url == "http://127.0.0.1:8080"
    assert settings.storage == "local"


def test_values_are_parsed():
    settings = Settings.from_env(
        {
            "PRESSROOM_PORT": "9000",
            "PRESSROOM_ALLOW_PRIVATE_NETWORKS": "1",
            "PRESSROOM_WEBHOOK_SCHEDULE": "0, 5,300",
            "PRESSROOM_PUBLIC_URL": "https://pdf.example.com/",
        }
    )
    assert settings.port == 9000
    assert settings.allow_private_networks is True
    assert settings.webhook_schedule == (0.0, 5.0, 300.0)
    assert settings.base_url == "https://pdf.example.com"


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("PRESSROOM_PORT", "eighty"),
        ("PRESSROOM_PORT", "70000"),
        ("PRESSROOM_STORAGE", "ftp"),
        ("PRESSROOM_ALLOW_PRIVATE_NETWORKS", "maybe"),
        ("PRESSROOM_WEBHOOK_SCHEDULE", "5,-1"),
        ("PRESSROOM_RENDER_CONCURRENCY", "0"),
        ("PRESSROOM_BROWSER_RECYCLE", "0"),
        ("PRESSROOM_CHROMIUM_UID", "0"),  # Chromium must not run as root
    ],
)
def test_bad_value_names_the_variable(name, value):
    with pytest.raises(SettingsError) as raised:
        Settings.from_env({name: value})
    assert name in str(raised.value)
    assert repr(value) in str(raised.value)


def test_every_setting_is_documented_in_the_configuration_reference():
    reference = REFERENCE.read_text(encoding="utf-8")
    for name, _, doc in describe():
        assert doc, name
        assert f"`{name}`" in reference, f"{name} missing from docs/configuration.md"


def test_the_settings_table_is_the_code_s_own_defaults_and_meanings():
    """Row for row what `describe()` reads from `Settings`' fields (the meaning's code
    spans aside), and no row for a setting that is gone: the table cannot drift."""
    rows = re.findall(r"^\| `(PRESSROOM_\w+)` \| (.*?) \| (.*) \|$", REFERENCE.read_text(), re.M)
    table = {name: (default, meaning.replace("`", "")) for name, default, meaning in rows}
    assert len(table) == len(rows), "a setting has two rows"
    code = {
        name: (f"`{default}`" if default not in ("", "None") else "(none)", doc.replace("`", ""))
        for name, default, doc in describe()
    }
    assert table == code


SERVER_KEY = "a2V5LWtleS1rZXkta2V5LWtleS1rZXkta2V5LWtleS0="  # 32 bytes


def test_any_setting_may_come_from_a_file_named_by_its_file_variable(tmp_path: Path):
    secret = tmp_path / "server-key"
    secret.write_text(SERVER_KEY + "\n")  # as `echo … > file` and Secret volumes leave it
    port = tmp_path / "port"
    port.write_text("9000\r\n")
    settings = Settings.from_env(
        {"PRESSROOM_SERVER_KEY_FILE": str(secret), "PRESSROOM_PORT_FILE": str(port)}
    )
    assert settings.server_key == SERVER_KEY and settings.port == 9000
    assert str(secret.resolve()) in files_read()


def test_a_setting_given_both_ways_is_refused_naming_both(tmp_path: Path):
    secret = tmp_path / "secret"
    secret.write_text("from-the-file")
    with pytest.raises(SettingsError) as raised:
        Settings.from_env(
            {"PRESSROOM_URL_SECRET": "from-env", "PRESSROOM_URL_SECRET_FILE": str(secret)}
        )
    assert "PRESSROOM_URL_SECRET and PRESSROOM_URL_SECRET_FILE" in str(raised.value)


@pytest.mark.parametrize(
    ("make", "says"),
    [
        (lambda path: None, "No such file"),
        (lambda path: path.mkdir(), "Is a directory"),
        (lambda path: path.write_bytes(b"\xff\xfe"), "not UTF-8"),
        (lambda path: path.write_bytes(b"k" * (MAX_FILE_BYTES + 1)), "larger than"),
    ],
    ids=["missing", "a-folder", "not-text", "too-large"],
)
def test_a_file_that_cannot_be_read_names_the_variable_and_the_path(tmp_path: Path, make, says):
    path = tmp_path / "value"
    make(path)
    with pytest.raises(SettingsError) as raised:
        Settings.from_env({"PRESSROOM_S3_SECRET_KEY_FILE": str(path)})
    assert f"PRESSROOM_S3_SECRET_KEY_FILE={path}" in str(raised.value)
    assert says in str(raised.value)


def test_a_bad_value_from_a_file_is_named_without_showing_it(tmp_path: Path):
    path = tmp_path / "server-key"
    path.write_text("not-base64-but-a-leaked-secret!")
    with pytest.raises(SettingsError) as raised:
        Settings.from_env({"PRESSROOM_SERVER_KEY_FILE": str(path)})
    assert f"PRESSROOM_SERVER_KEY_FILE={path}" in str(raised.value)
    assert "leaked-secret" not in str(raised.value)


def test_the_configuration_reference_states_the_file_rule():
    assert "`PRESSROOM_X_FILE`" in REFERENCE.read_text(encoding="utf-8")

"""Settings come from PRESSROOM_* variables; a bad value names the variable."""

from __future__ import annotations

from pathlib import Path

import pytest

from services.core.settings import Settings, SettingsError, describe


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


def test_every_setting_is_documented_in_the_readme():
    readme = (Path(__file__).parents[3] / "README.md").read_text(encoding="utf-8")
    for name, _, doc in describe():
        assert doc, name
        assert f"`{name}`" in readme, f"{name} missing from the README table"

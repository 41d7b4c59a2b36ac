"""`pressroom dev`'s choices that need no servers."""

from __future__ import annotations

from pathlib import Path

import pytest

from services.core.runtime.settings import Settings
from services.dev import embedded_defaults, load_secrets, log_size_for, service_env

GIB = 2**30


def test_the_embedded_log_fits_a_small_disk_and_keeps_the_default_on_a_big_one():
    assert log_size_for(100 * GIB) == Settings.stream_max_bytes
    assert log_size_for(4 * GIB) == GIB  # a quarter: NATS would refuse 75 % of it and more
    assert log_size_for(10 * 2**20) == 64 * 2**20  # never below a useful minimum


def test_a_secret_given_as_a_file_gets_no_generated_default_beside_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """`pressroom dev` generates the secrets nobody gave; one given as
    `PRESSROOM_X_FILE` is given (a default beside it would be refused as set twice)."""
    monkeypatch.setenv("PRESSROOM_URL_SECRET_FILE", str(tmp_path / "url-secret"))
    monkeypatch.delenv("PRESSROOM_URL_SECRET", raising=False)
    kept = load_secrets(tmp_path / "s.json")
    defaults = embedded_defaults(Settings(), tmp_path, kept)
    assert "PRESSROOM_URL_SECRET" not in defaults
    monkeypatch.delenv("PRESSROOM_SERVER_KEY", raising=False)
    monkeypatch.delenv("PRESSROOM_SERVER_KEY_FILE", raising=False)
    assert "PRESSROOM_SERVER_KEY" in embedded_defaults(Settings(), tmp_path, kept)


def test_each_service_gets_its_own_identity_on_the_embedded_nats(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """Its own seed, whatever seed (or seed file) the person's environment names: the
    embedded NATS knows only the identities `pressroom dev` made."""
    monkeypatch.setenv("PRESSROOM_NATS_NKEY_SEED_FILE", str(tmp_path / "elsewhere"))
    kept = load_secrets(tmp_path / "s.json")
    envs = service_env(Settings(), {}, kept)
    for name, env in envs.items():
        assert env["PRESSROOM_NATS_NKEY_SEED"] == kept[f"nats_seed_{name}"], name
        assert "PRESSROOM_NATS_NKEY_SEED_FILE" not in env, name
        Settings.from_env(env)
    assert len({env["PRESSROOM_NATS_NKEY_SEED"] for env in envs.values()}) == len(envs)
    assert "PRESSROOM_NATS_NKEY_SEED" not in service_env(Settings(), {})["renderer"]

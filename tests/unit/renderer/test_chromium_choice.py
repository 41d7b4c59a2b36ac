"""Which Chromium the renderer runs: `PRESSROOM_CHROMIUM`, else the headless shell where
installed (about half the CPU per PDF), else a full Chromium on PATH, else a clear error."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from services.core.runtime import browsersettings
from services.core.runtime.settings import Settings, SettingsError


def executable(path: Path) -> str:
    path.write_text("#!/bin/sh\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


def test_the_setting_wins_over_everything(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    shell = executable(tmp_path / "chromium-headless-shell")
    monkeypatch.setattr(browsersettings, "HEADLESS_SHELLS", (shell,))
    assert Settings(chromium="/opt/chrome/chrome").chromium_path() == "/opt/chrome/chrome"


def test_the_headless_shell_comes_before_a_chromium_on_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    shell = executable(tmp_path / "chromium-headless-shell")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    executable(bin_dir / "chromium")
    monkeypatch.setenv("PATH", str(bin_dir))
    monkeypatch.setattr(browsersettings, "HEADLESS_SHELLS", (str(tmp_path / "absent"), shell))
    assert Settings(chromium="").chromium_path() == shell


def test_without_a_headless_shell_the_chromium_on_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    not_executable = tmp_path / "chromium-headless-shell"
    not_executable.write_text("")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    chromium = executable(bin_dir / "chromium")
    monkeypatch.setenv("PATH", str(bin_dir))
    monkeypatch.setattr(browsersettings, "HEADLESS_SHELLS", (str(not_executable),))
    assert Settings(chromium="").chromium_path() == chromium


def test_no_chromium_at_all_says_what_to_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(browsersettings, "HEADLESS_SHELLS", ())
    with pytest.raises(SettingsError, match="apt-get install chromium-headless-shell"):
        Settings(chromium="").chromium_path()


def test_debian_s_headless_shell_is_its_binary_not_the_wrapper_script() -> None:
    """/usr/bin/chromium-headless-shell runs the binary without `exec`: Chromium would not
    be the launcher's child, and would outlive a renderer that died."""
    assert all(not path.startswith("/usr/bin/") for path in browsersettings.HEADLESS_SHELLS)
    for path in browsersettings.HEADLESS_SHELLS:
        if os.path.exists(path):
            with open(path, "rb") as binary:
                assert binary.read(4) == b"\x7fELF"

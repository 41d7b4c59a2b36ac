"""Who Chromium runs as, whether its sandbox is on and what it may not read, decided from
the renderer's user, whether user namespaces work for Chromium's user, whether Landlock
is there, and `PRESSROOM_CHROMIUM_SANDBOX`."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from services.core.model.errors import BrowserError
from services.core.runtime.settings import Settings
from services.renderer.browser import CHROMIUM_ARGS, landlock, privileges
from services.renderer.browser.privileges import (
    Confinement,
    Sandbox,
    Walls,
    decide,
    readable_by,
)


def refusing(answer: str, asked: list[int | None]):
    def refusal(uid: int | None) -> str:
        asked.append(uid)
        return answer

    return refusal


def test_a_root_renderer_runs_chromium_as_the_unprivileged_uid_and_probes_that_uid():
    asked: list[int | None] = []
    confinement = decide(0, 64123, refusing("", asked))
    assert confinement == Confinement(64123)
    assert asked == [64123]
    assert confinement.sandboxed and confinement.args == []


def test_a_non_root_renderer_runs_chromium_as_itself():
    asked: list[int | None] = []
    confinement = decide(1000, 64123, refusing("", asked))
    assert confinement.uid is None
    assert asked == [None]
    assert confinement.args == []


def test_without_user_namespaces_the_sandbox_is_off_and_the_reason_kept():
    for euid, uid in ((0, 64123), (1000, None)):
        confinement = decide(euid, 64123, refusing("unshare: Operation not permitted", []))
        assert confinement.uid == uid
        assert not confinement.sandboxed
        assert confinement.args == ["--no-sandbox"]
        assert "Operation not permitted" in confinement.why_unsandboxed


def test_the_renderers_flags_leave_the_sandbox_to_the_confinement():
    assert "--no-sandbox" not in CHROMIUM_ARGS


def test_a_folder_is_readable_by_a_user_only_if_its_mode_bits_and_parents_allow():
    # In the system's temporary folder: pytest's tmp_path may sit in a folder only its
    # owner can enter.
    with tempfile.TemporaryDirectory() as tmp:
        outer, inner = Path(tmp), Path(tmp) / "fonts"
        inner.mkdir(mode=0o755)
        os.chmod(outer, 0o711)  # searchable, not listable: enough to reach `fonts`
        assert readable_by(str(inner), 64123)
        assert not readable_by(str(outer), 64123)
        os.chmod(inner, 0o700)
        assert not readable_by(str(inner), 64123)
        assert readable_by(str(inner), inner.stat().st_uid)  # the owner's bits apply to it
        assert not readable_by(str(outer / "missing"), 64123)


@pytest.fixture
def walls(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[..., Confinement]]:
    """`confine` under given walls, with user namespaces refused or not and Landlock there
    or not, as this machine cannot be made to refuse them."""

    def confined(
        sandbox: Sandbox, hidden: frozenset[str] = frozenset(), refusal: str = "", abi: int = 4
    ) -> Confinement:
        monkeypatch.setattr(privileges, "namespaces_refusal", lambda uid: refusal)
        monkeypatch.setattr(privileges.landlock, "abi", lambda: abi)
        privileges.configure(Walls(sandbox, hidden))
        return privileges.confine(64123)

    yield confined
    privileges.configure(Walls())


def test_auto_runs_chromium_unsandboxed_where_it_must_and_says_why(walls):
    confinement = walls(Sandbox.AUTO, refusal="no user namespaces here")
    assert confinement.args == ["--no-sandbox"]
    assert confinement.why_unsandboxed == "no user namespaces here"


def test_require_refuses_to_start_chromium_without_its_sandbox(walls):
    with pytest.raises(BrowserError) as raised:
        walls(Sandbox.REQUIRE, refusal="no user namespaces here")
    assert "PRESSROOM_CHROMIUM_SANDBOX=require" in str(raised.value)
    assert "no user namespaces here" in str(raised.value)
    assert walls(Sandbox.REQUIRE).sandboxed


def test_require_refuses_without_the_wall_around_secret_files_only_when_there_are_some(walls):
    with pytest.raises(BrowserError) as raised:
        walls(Sandbox.REQUIRE, frozenset({"/run/secrets/key"}), abi=0)
    assert "Landlock" in str(raised.value)
    assert walls(Sandbox.REQUIRE, abi=0).sandboxed  # no secret files: nothing to wall off
    walled = walls(Sandbox.REQUIRE, frozenset({"/run/secrets/key"}))
    assert walled.walled and walled.hidden == {"/run/secrets/key"}


def test_auto_without_landlock_starts_chromium_unwalled_and_says_so(walls):
    confinement = walls(Sandbox.AUTO, frozenset({"/run/secrets/key"}), abi=0)
    assert not confinement.walled and "Landlock" in confinement.why_unwalled


def test_off_never_asks_for_the_sandbox(walls):
    confinement = walls(Sandbox.OFF)
    assert confinement.args == ["--no-sandbox"]
    assert "PRESSROOM_CHROMIUM_SANDBOX=off" in confinement.why_unsandboxed


def test_the_renderer_walls_off_its_secret_files_and_the_signing_key(tmp_path: Path):
    secret = tmp_path / "url-secret"
    secret.write_text("s3cr3t\n")
    settings = Settings.from_env(
        {
            "PRESSROOM_URL_SECRET_FILE": str(secret),
            "PRESSROOM_SIGNING_KEY": str(tmp_path / "key.pem"),
            "PRESSROOM_CHROMIUM_SANDBOX": "require",
        }
    )
    walls = Walls.of(settings)
    assert walls.sandbox is Sandbox.REQUIRE
    assert {str(secret.resolve()), str((tmp_path / "key.pem").resolve())} <= walls.hidden


def test_grants_cover_everything_beside_the_hidden_files_and_follow_no_link(tmp_path: Path):
    root = tmp_path / "root"
    (root / "etc" / "secrets").mkdir(parents=True)
    (root / "etc" / "secrets" / "key").write_text("k")
    (root / "etc" / "secrets" / "public.pem").write_text("p")
    (root / "etc" / "fonts").mkdir()
    (root / "usr").mkdir()
    (root / "link").symlink_to(root / "etc" / "secrets")
    granted = landlock.grants([str(root / "etc" / "secrets" / "key")])
    mine = {Path(p).relative_to(root).as_posix() for p in granted if p.startswith(str(root))}
    assert mine == {"usr", "etc/fonts", "etc/secrets/public.pem"}
    assert "/usr" in granted and "/proc" in granted  # the rest of the machine too
    on_the_way = {tmp_path, *tmp_path.parents}
    assert not on_the_way & {Path(p) for p in granted}  # nor the folders on the way

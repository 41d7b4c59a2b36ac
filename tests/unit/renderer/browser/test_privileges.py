"""Who Chromium runs as and whether its sandbox is on, decided from the renderer's user and
whether user namespaces work for Chromium's user."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from services.renderer.browser import CHROMIUM_ARGS
from services.renderer.browser.privileges import Confinement, decide, readable_by


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

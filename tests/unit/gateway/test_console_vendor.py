"""The console's vendored CodeMirror 6 and pdf.js: served as committed, never rebuilt here.

Verifies: each built file matches the sha256 that `console/editor-src/build.mjs` recorded
when it made it (a hand edit, or a partial upgrade, shows here); the gateway serves each
as JavaScript, and its licence notices as text; the packages they came from are pinned
exactly in `package.json` (the lock pins the rest); the console's policy admits pdf.js's
worker from its own origin and nothing inline nor evaluated.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from services.gateway import console

ROOT = Path(__file__).resolve().parents[3]
FOLDER = ROOT / "services" / "gateway" / "console"
SOURCE = ROOT / "console" / "editor-src"


def recorded() -> dict[str, str]:
    lines = (FOLDER / "vendor.sha256").read_text().splitlines()
    return {name: digest for digest, name in (line.split("  ") for line in lines)}


def test_the_vendored_files_are_the_ones_the_build_recorded() -> None:
    sums = recorded()
    assert sorted(sums) == ["codemirror.js", "pdf-worker.js", "pdf.js"]
    for name, digest in sums.items():
        assert hashlib.sha256((FOLDER / name).read_bytes()).hexdigest() == digest, name


def test_the_gateway_serves_them_and_their_licences() -> None:
    files = console.load_files()
    for name in recorded():
        assert files[name][1] == "text/javascript; charset=utf-8"
    licences, kind = files["vendor-licenses.txt"]
    assert kind.startswith("text/plain")
    for package in (b"@codemirror/view", b"pdfjs-dist", b"style-mod"):
        assert package in licences


def test_the_packages_are_pinned_exactly() -> None:
    wanted = json.loads((SOURCE / "package.json").read_text())["devDependencies"]
    locked = json.loads((SOURCE / "package-lock.json").read_text())["packages"]
    for package, version in wanted.items():
        assert version[0].isdigit(), f"{package} is not pinned: {version}"
        assert locked[f"node_modules/{package}"]["version"] == version


def test_the_policy_admits_the_worker_and_nothing_inline() -> None:
    policy = console.policy(("https://bucket.example",))
    assert "worker-src 'self';" in policy
    assert "connect-src 'self' https://bucket.example;" in policy
    assert "unsafe" not in policy and "script-src 'self';" in policy

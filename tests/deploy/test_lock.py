"""The dependency locks (requirements/) and how the image uses them, checked offline
where possible:

- each lock is what pyproject.toml makes of it (scripts/lock.sh --check, with uv: a
  rebuild resolves the same set, so a dependency added to pyproject.toml without
  `scripts/lock.sh` fails here);
- every pinned release carries sha256 hashes, and the Dockerfile installs the image's lock
  with --require-hashes and no index, the project alone beside it, from a base pinned by
  digest; the build script refuses a base given by tag.

The image itself holding exactly the lock, and its SBOM saying so, is checked on the
built image (tests/deploy/test_image.py).
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

from tests.conftest import BIN
from tests.deploy.k8s import REPO

LOCKS = ("image.txt", "dev.txt")


def pins(lock: str) -> dict[str, list[str]]:
    """Each `name==version` line of requirements/<lock> with the hashes under it."""
    found: dict[str, list[str]] = {}
    current = ""
    for line in (REPO / "requirements" / lock).read_text().splitlines():
        if pin := re.match(r"^([A-Za-z0-9._-]+==[^ ;]+)", line):
            current = pin[1]
            found[current] = []
        elif digest := re.search(r"--hash=sha256:([0-9a-f]{64})", line):
            found[current].append(digest[1])
    return found


def test_each_lock_is_what_pyproject_makes_of_it() -> None:
    checked = subprocess.run(
        [str(REPO / "scripts" / "lock.sh"), "--check"],
        capture_output=True, text=True, timeout=300, cwd=REPO,
        env={**os.environ, "UV": str(BIN / "uv")},
    )  # fmt: skip
    assert checked.returncode == 0, checked.stdout[-4000:] + checked.stderr[-2000:]


def test_every_pinned_release_carries_its_hashes() -> None:
    for lock in LOCKS:
        found = pins(lock)
        assert len(found) > 20, (lock, found)
        unhashed = [pin for pin, digests in found.items() if not digests]
        assert not unhashed, (lock, unhashed)
    image = {pin.split("==")[0] for pin in pins("image.txt")}
    assert {"aiohttp", "nats-py", "pikepdf"} <= image
    assert not image & {"pytest", "uv", "pyppeteer"}, "a test tool in the image's lock"


def test_the_dockerfile_installs_the_lock_with_hashes_on_a_base_pinned_by_digest() -> None:
    dockerfile = (REPO / "Dockerfile").read_text()
    base = re.search(r"^ARG BASE=(\S+)$", dockerfile, re.M)
    assert base and re.fullmatch(r"[\w./-]+:[\w.-]+@sha256:[0-9a-f]{64}", base[1]), base
    install = re.sub(r"\\\n\s*", " ", dockerfile)
    assert re.search(
        r"pip install [^&]*--no-index [^&]*--require-hashes --requirement /wheels/req",
        install,
    ), "the lock is not installed with --require-hashes and no index"
    assert re.search(r"pip install [^&]*--no-index --no-deps /project/", install)
    assert "COPY build/wheels/ /wheels/" in dockerfile


def test_only_releases_built_from_checked_source_leave_the_hashed_install(tmp_path: Path) -> None:
    """nkeys is published as source only: the build script builds it on the host after
    `pip download` checked the source's hash, and the image installs every other release
    of the lock by hash (`scripts/lock_without.py`)."""
    (tmp_path / "nkeys-0.2.1-py3-none-any.whl").touch()
    lock = (REPO / "requirements" / "image.txt").read_text()
    kept = subprocess.run(
        [str(BIN / "python"), str(REPO / "scripts" / "lock_without.py"),
         str(REPO / "requirements" / "image.txt"), str(tmp_path)],
        capture_output=True, text=True, check=True, timeout=60,
    ).stdout  # fmt: skip
    assert "nkeys==" in lock and "nkeys==" not in kept
    pins = re.findall(r"^([A-Za-z0-9][\w.-]*)==", lock, re.M)
    assert sorted(re.findall(r"^([A-Za-z0-9][\w.-]*)==", kept, re.M)) == sorted(
        pin for pin in pins if pin != "nkeys"
    )
    nkeys_hash = re.search(r"^nkeys==.*\n\s*--hash=(sha256:\w+)", lock, re.M)
    assert nkeys_hash and nkeys_hash[1] not in kept
    assert set(kept.splitlines()) <= set(lock.splitlines())  # nothing else changed


def test_the_build_script_refuses_a_base_given_by_tag() -> None:
    built = subprocess.run(
        [str(REPO / "scripts" / "build-image.sh"), "localhost/pressroom:never"],
        capture_output=True, text=True, timeout=60, cwd=REPO,
        env={**os.environ, "PYTHON": str(BIN / "python"),
             "PRESSROOM_IMAGE_BASE": "docker.io/library/debian:bookworm-slim"},
    )  # fmt: skip
    assert built.returncode == 1
    assert "pin it by digest" in built.stderr, built.stderr

"""The wheel people install: built from a copy of the source, as pip builds it.

Verifies: it ships `pressroom/py.typed` (PEP 561), so a type checker reads the client's
annotations in a project that installs Pressroom; and the files the gateway serves from
the package (the console's and the API page's), which a missing package-data line would
leave out while every test run from the source tree still passed.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def built_wheel(folder: Path) -> Path:
    """Build the project's wheel from a copy of what the build reads, as pip builds it (in
    an isolated environment with the `build-system` requirements)."""
    source = folder / "src"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    for package in ("services", "pressroom"):
        shutil.copytree(ROOT / package, source / package,
                        ignore=shutil.ignore_patterns("__pycache__"))  # fmt: skip
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(folder / "dist"),
         str(source)],
        check=True, capture_output=True, timeout=300,
    )  # fmt: skip
    (wheel,) = (folder / "dist").glob("pressroom-*.whl")
    return wheel


def test_the_wheel_ships_py_typed_and_the_served_files(tmp_path: Path):
    names = set(zipfile.ZipFile(built_wheel(tmp_path)).namelist())
    assert "pressroom/py.typed" in names
    assert "pressroom/client/aio.py" in names
    for served in ("console/index.html", "console/console.js", "apidocs/apidocs.js"):
        assert f"services/gateway/{served}" in names, served

"""Print a hashed requirements lock without the releases whose wheels lie in a folder.

`scripts/build-image.sh` builds the few pure-Python releases published only as source on
the host, after `pip download` checked their source against the lock's sha256; the image
then installs the rest of the lock by hash and those wheels as built. Usage:

    python scripts/lock_without.py requirements/image.txt build/built > requirements.txt
"""

from __future__ import annotations

import re
import sys
from pathlib import Path


def normalized(name: str) -> str:
    """A distribution name as PEP 503 compares it."""
    return re.sub(r"[-_.]+", "-", name).lower()


def built_names(folder: Path) -> set[str]:
    """The distributions of the wheels in `folder` (`name-version-tags.whl`)."""
    return {normalized(wheel.name.split("-")[0]) for wheel in folder.glob("*.whl")}


def without(lock: str, names: set[str]) -> str:
    """`lock` less the requirement blocks (a `name==version \\` line, its hash lines and
    comments) of `names`."""
    kept: list[str] = []
    skipping = False
    for line in lock.splitlines(keepends=True):
        if line[:1].isalnum():  # a requirement line starts a block
            skipping = normalized(re.split(r"[=<>!~ ;\\[]", line, maxsplit=1)[0]) in names
        if not skipping:
            kept.append(line)
    return "".join(kept)


def main() -> None:
    lock, folder = sys.argv[1], sys.argv[2]
    sys.stdout.write(without(Path(lock).read_text(), built_names(Path(folder))))


if __name__ == "__main__":
    main()

"""The wall around the renderer's secret files: Chromium may open everything but them.

Where Chromium runs as the renderer's own user (a non-root pod), the files the renderer
reads its secrets from (`PRESSROOM_X_FILE`, the signing key) are readable by that user,
and so by a Chromium process a page has taken over. Landlock (Linux 5.13+, no privilege
needed) closes them: the launcher restricts itself, and with it Chromium and everything
Chromium starts, to a ruleset that grants reading and writing beneath every path except
the hidden ones.

Landlock only grants, so "everything but these files" is spelled as grants beside them:
for each folder on the way from `/` to a hidden file, every entry of that folder that is
neither hidden nor itself on the way (`grants`). Symbolic links are not granted: a path
through one is judged where it leads. What is created later in a folder on the way (a new
Kubernetes Secret version, say) is not granted either, which is the safe side; Chromium's
own temporary files go to its browser folder (`launch.chromium_env`), which is granted.
The renderer itself is not restricted.

The rules are written to a file in the browser's folder (a folder such as /tmp can hold
more entries than one command-line argument may), which the launcher reads after it has
changed user, just before it restricts itself (`WALL_OFF`).
"""

from __future__ import annotations

import ctypes
import functools
import json
import os
import sys
from collections.abc import Iterable
from pathlib import PurePath

SYS_LANDLOCK_CREATE_RULESET = 444
"""The same number on every architecture (syscalls from 424 on are numbered alike)."""
LANDLOCK_CREATE_RULESET_VERSION = 1

RULES_NAME = "landlock.json"
"""The rules' file in a browser's folder."""


@functools.cache
def abi() -> int:
    """The Landlock ABI version this kernel offers this process; 0 where it has none (an
    old kernel, Landlock not enabled at boot, a seccomp profile that refuses the call)."""
    if not sys.platform.startswith("linux"):
        return 0
    libc = ctypes.CDLL(None, use_errno=True)
    version = libc.syscall(
        ctypes.c_long(SYS_LANDLOCK_CREATE_RULESET),
        None,
        ctypes.c_size_t(0),
        ctypes.c_uint32(LANDLOCK_CREATE_RULESET_VERSION),
    )
    return max(int(version), 0)


def _on_the_way(path: str) -> set[str]:
    """The folders from `/` down to `path`'s parent."""
    return {str(parent) for parent in PurePath(path).parents}


def grants(hidden: Iterable[str]) -> list[str]:
    """The paths beneath which Chromium may open files so that it opens none of `hidden`
    (real paths): the other entries of every folder on the way to them."""
    closed = {os.path.realpath(path) for path in hidden}
    way = set().union(*(_on_the_way(path) for path in closed))
    granted = []
    for folder in sorted(way):
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue  # nothing there to grant
        for entry in entries:
            if entry.path in closed or entry.path in way or entry.is_symlink():
                continue
            granted.append(entry.path)
    return sorted(granted)


def write_rules(folder: str, hidden: Iterable[str]) -> str:
    """The rules' file for a browser in `folder` (readable by Chromium's user: it names
    paths, not secrets); its path."""
    path = os.path.join(folder, RULES_NAME)
    with open(path, "w", encoding="utf-8") as file:
        json.dump(grants(hidden), file)
    os.chmod(path, 0o644)
    return path


WALL_OFF = """def wall_off(rules):
    # Restrict this process and what it starts to the grants in the file `rules`.
    with open(rules, encoding="utf-8") as file:
        granted = json.load(file)
    libc = ctypes.CDLL(None, use_errno=True)
    call = lambda *args: libc.syscall(*(ctypes.c_long(a) if isinstance(a, int) else a
                                        for a in args))
    abi = call(444, None, 0, 1)  # landlock_create_ruleset(NULL, 0, ..._VERSION)
    if abi < 1:
        sys.exit(f"Landlock is not available ({os.strerror(ctypes.get_errno())})")
    # write file, read file (and truncate from ABI 3 on); read folders
    on_files = (1 << 1) | (1 << 2) | ((1 << 14) if abi >= 3 else 0)
    handled = on_files | (1 << 3)
    ruleset = call(444, struct.pack("=Q", handled), 8, 0)
    if ruleset < 0:
        sys.exit(f"cannot make a Landlock ruleset: {os.strerror(ctypes.get_errno())}")
    for path in granted:
        try:
            fd = os.open(path, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError:
            continue  # gone, or out of this user's reach anyway
        rights = handled if stat.S_ISDIR(os.fstat(fd).st_mode) else on_files
        rule = struct.pack("=Qi", rights, fd)  # struct landlock_path_beneath_attr (packed)
        added = call(445, ruleset, 1, rule, 0)  # landlock_add_rule(.., PATH_BENEATH, ..)
        os.close(fd)
        if added != 0:
            sys.exit(f"cannot add a Landlock rule: {os.strerror(ctypes.get_errno())}")
    if libc.prctl(38, 1, 0, 0, 0) != 0 or call(446, ruleset, 0) != 0:  # NO_NEW_PRIVS
        sys.exit(f"cannot apply Landlock: {os.strerror(ctypes.get_errno())}")
    os.close(ruleset)
"""
"""Python for the launcher (which has imported `ctypes`, `json`, `os`, `stat`, `struct`
and `sys`, before a change of user could put the standard library out of its reach):
`wall_off(rules)` restricts the launcher, and so Chromium, to the grants in `rules`."""

"""Who Chromium runs as, whether its own sandbox is on, and what it may not read.

A renderer running as root (containers, CI) starts Chromium as an unprivileged user
instead (`PRESSROOM_CHROMIUM_UID`, no /etc/passwd entry needed): the launcher drops to it
between the fork and Chromium's exec (`DROP_TO_UID`). A renderer that is not root
starts Chromium as itself.

Chromium's own sandbox (seccomp-bpf, and a user, PID and network namespace for every
renderer) needs Chromium to run as a user that may create user namespaces; without that,
Chromium refuses to start unless given `--no-sandbox`. `confine` checks once per process,
by trying as that user, and then follows `PRESSROOM_CHROMIUM_SANDBOX`: `auto` logs a
warning when the sandbox has to stay off, `require` refuses to start Chromium instead,
`off` never asks for it.

The renderer's secret files (`Walls.hidden`) are closed to Chromium by Landlock
(`landlock`) wherever the kernel offers it; `require` also refuses to start Chromium
without that wall when there are such files. The renderer sets its walls once at start
(`configure`), before it starts a browser.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import logging
import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from services.core.model.errors import BrowserError
from services.core.runtime.settings import Settings
from services.core.runtime.valuefiles import files_read
from services.renderer.browser import landlock

log = logging.getLogger(__name__)

DROP_TO_UID = """import ctypes, os, signal, sys
uid = int(sys.argv[1])  # -1: stay who we are
if uid >= 0:  # groups first: setgroups and setgid are refused once uid is not 0
    os.setgroups([])
    os.setgid(uid)
    os.setuid(uid)
"""
"""Python run by the launcher before anything else: with `sys.argv[1]` a uid other than
-1, become that user and group with no supplementary groups (real, effective and saved
ids, so there is no way back)."""

# The namespaces Chromium's zygote makes for its sandboxed processes. Where user namespaces
# are allowed but powerless (Ubuntu's AppArmor restriction), only the PID and network ones
# fail, so asking for all three at once finds that too.
NAMESPACES_CHECK = (
    DROP_TO_UID
    + """
flags = 0x10000000 | 0x20000000 | 0x40000000  # CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNET
if ctypes.CDLL(None, use_errno=True).unshare(flags) != 0:
    print(os.strerror(ctypes.get_errno()))
    sys.exit(3)
try:  # what Chromium's sandbox does next; a seccomp profile may refuse it (containers
    os.chroot("/proc/self/fdinfo/")  # without CAP_SYS_CHROOT), and Chromium then dies
except OSError as exc:
    print(f"chroot: {exc.strerror}")
    sys.exit(3)
"""
)

_NO_NAMESPACES = 3
"""Exit status of `NAMESPACES_CHECK` when the kernel refused them; any other failure means
the change of user did not work."""


class Sandbox(enum.StrEnum):
    """`PRESSROOM_CHROMIUM_SANDBOX`."""

    AUTO = "auto"
    REQUIRE = "require"
    OFF = "off"


@dataclass(frozen=True)
class Walls:
    """What the renderer asks of Chromium's confinement: the `sandbox` policy, and the
    files Chromium must not read (real paths)."""

    sandbox: Sandbox = Sandbox.AUTO
    hidden: frozenset[str] = frozenset()

    @classmethod
    def of(cls, settings: Settings) -> Walls:
        """The renderer's walls: every file its settings were read from, and the signing
        key (`PRESSROOM_SIGNING_KEY` names a file: its content is the secret)."""
        hidden = set(files_read())
        if settings.signing_key:
            hidden.add(os.path.realpath(settings.signing_key))
        return cls(Sandbox(settings.chromium_sandbox), frozenset(hidden))


_walls = Walls()


def configure(walls: Walls) -> None:
    """Set this process's walls (the renderer, at start); later launches follow them."""
    global _walls
    _walls = walls
    confine.cache_clear()


@dataclass(frozen=True)
class Confinement:
    """How Chromium runs: as `uid` (None: the renderer's own user), with its own sandbox
    unless `why_unsandboxed` says why not, and kept from the `hidden` files (by Landlock)
    unless `why_unwalled` says why not."""

    uid: int | None
    why_unsandboxed: str = ""
    hidden: frozenset[str] = frozenset()
    why_unwalled: str = ""

    @property
    def sandboxed(self) -> bool:
        return not self.why_unsandboxed

    @property
    def args(self) -> list[str]:
        """Chromium flags this confinement needs besides `CHROMIUM_ARGS`."""
        return [] if self.sandboxed else ["--no-sandbox"]

    @property
    def walled(self) -> bool:
        """Whether the launcher closes the hidden files to Chromium."""
        return bool(self.hidden) and not self.why_unwalled


def decide(euid: int, chromium_uid: int, refusal: Callable[[int | None], str]) -> Confinement:
    """Chromium runs as `chromium_uid` when the renderer is root (`euid` 0), else as the
    renderer; sandboxed unless `refusal(uid)` says why user namespaces cannot be used."""
    uid = chromium_uid if euid == 0 else None
    return Confinement(uid, refusal(uid))


def namespaces_refusal(uid: int | None) -> str:
    """Why Chromium's sandbox cannot work as `uid` (None: as this process), or "" if it can.

    Runs the same change of user the launcher makes, then the namespaces Chromium makes, in
    a child process. `BrowserError` when the change of user itself fails: Chromium must not
    run as root, so the renderer cannot start Chromium at all.
    """
    try:
        done = subprocess.run(
            [sys.executable, "-I", "-S", "-c", NAMESPACES_CHECK, str(-1 if uid is None else uid)],
            capture_output=True,
            text=True,
            timeout=30,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        raise BrowserError(f"cannot check whether Chromium can be sandboxed: {exc}") from exc
    if done.returncode == _NO_NAMESPACES:
        return f"user namespaces are not available to {_who(uid)} ({done.stdout.strip()})"
    if done.returncode != 0 and uid is None:
        raise BrowserError(
            f"cannot check whether Chromium can be sandboxed: {_last_line(done.stderr)}"
        )
    if done.returncode != 0:
        raise BrowserError(
            f"the renderer runs as root but cannot start Chromium as uid {uid} "
            f"({_last_line(done.stderr)}): give it CAP_SETUID and CAP_SETGID, "
            "or run the renderer as a non-root user"
        )
    return ""


def _who(uid: int | None) -> str:
    return f"uid {os.geteuid() if uid is None else uid}"


def _last_line(text: str) -> str:
    lines = text.strip().splitlines()
    return lines[-1] if lines else "no message"


def readable_by(folder: str, uid: int) -> bool:
    """Whether user and group `uid`, with no other groups, may list `folder` and reach it
    through the folders above it, as far as their mode bits say (ACLs are not read)."""
    path = os.path.abspath(folder)
    for part in (path, *(str(parent) for parent in Path(path).parents)):
        try:
            info = os.stat(part)
        except OSError:
            return False
        bits = 6 if info.st_uid == uid else 3 if info.st_gid == uid else 0
        needed = 0o5 if part == path else 0o1  # read and search, or search only
        if (info.st_mode >> bits) & needed != needed:
            return False
    return True


def _file_wall(hidden: frozenset[str]) -> str:
    """Why the hidden files cannot be closed to Chromium, or "" if they can (or there are
    none)."""
    if hidden and landlock.abi() < 1:
        return "Landlock is not available (Linux 5.13+, enabled at boot, allowed by seccomp)"
    return ""


def _applied(found: Confinement, sandbox: Sandbox) -> Confinement:
    """`found` under the policy `sandbox`; `BrowserError` when `require` cannot be met."""
    if sandbox is Sandbox.OFF:
        return dataclasses.replace(found, why_unsandboxed="PRESSROOM_CHROMIUM_SANDBOX=off")
    if sandbox is Sandbox.REQUIRE:
        missing = [why for why in (found.why_unsandboxed, found.why_unwalled) if why]
        if missing:
            raise BrowserError(
                "PRESSROOM_CHROMIUM_SANDBOX=require, but Chromium cannot be confined: "
                + "; ".join(missing)
                + " (docs/sandbox.md; docs/deploy.md)"
            )
    return found


def _warn(confinement: Confinement, sandbox: Sandbox) -> None:
    if not confinement.sandboxed:
        log.warning(
            "Chromium runs without its own sandbox (--no-sandbox): %s. A page that takes "
            "over a Chromium process then has everything %s may do%s (docs/sandbox.md)",
            confinement.why_unsandboxed,
            _who(confinement.uid),
            ""
            if sandbox is Sandbox.OFF
            else "; to sandbox Chromium, allow unprivileged user namespaces",
        )
    if confinement.why_unwalled:
        log.warning(
            "Chromium can read the renderer's secret files (%s): %s",
            ", ".join(sorted(confinement.hidden)),
            confinement.why_unwalled,
        )


@functools.cache
def confine(chromium_uid: int) -> Confinement:
    """This process's `Confinement` for Chromium under its `Walls`, decided once (and
    warned about once); `BrowserError` when the walls ask for what cannot be had."""
    hidden = _walls.hidden
    if not sys.platform.startswith("linux"):
        # The launcher that changes user is Linux-only; elsewhere Chromium runs as before.
        found = Confinement(None, f"{sys.platform} is not Linux", hidden, _file_wall(hidden))
    else:
        decided = decide(os.geteuid(), chromium_uid, namespaces_refusal)
        found = dataclasses.replace(decided, hidden=hidden, why_unwalled=_file_wall(hidden))
    confinement = _applied(found, _walls.sandbox)
    _warn(confinement, _walls.sandbox)
    return confinement

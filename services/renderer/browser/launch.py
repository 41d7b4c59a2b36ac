"""Launching Chromium: its flags, profile folder, fonts and environment, and a launcher
that makes it die with the renderer; `launch_browser` returns a `Browser` (the process
and its DevTools connection) once it answers.

Chromium starts with `CHROMIUM_ARGS` through a launcher (`_LAUNCHER`) that makes it die
with the renderer and, when the renderer is root, run as an unprivileged user
(`privileges`), with its own sandbox where user namespaces allow it, with none of the
renderer's secrets in its environment (`chromium_env`) nor its secret files within reach
(`landlock`), below the services' CPU priority. The DevTools protocol runs over two pipes
(`cdp`), so Chromium opens no port. `prepare` makes everything but the process (the
confinement, folder, profile, environment and walls) and `spawn` starts a program in it
the way Chromium is started, which the tests use to try the walls from Chromium's place.

What needs care:

- The kernel clears a process's parent-death signal when it changes user, so the launcher
  asks for it only after the change.
- Chromium's user must own nothing that root runs or writes: a browser taken over by a
  page could replace the next browser's launcher or plant a symlink where root writes.
  So each browser gets a folder of its own in which `fonts.conf` and `chromium.log` stay
  the renderer's and only the `profile` folder is Chromium's. Root still kills Chromium
  and removes the folder.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from xml.sax.saxutils import escape as xml_escape

from services.core.model.errors import BrowserError
from services.renderer.browser import landlock
from services.renderer.browser.cdp import Connection
from services.renderer.browser.privileges import DROP_TO_UID, Confinement, confine, readable_by
from services.renderer.browser.tasks import describe
from services.renderer.proxy import BYPASS_NOTHING

log = logging.getLogger(__name__)

CHROMIUM_ARGS = [
    "--headless",
    # No `--no-sandbox`: Chromium's own sandbox stays on wherever it can work; where it
    # cannot, `Confinement.args` adds the flag at launch (see `privileges`). Its popup
    # blocker stays on (a page's `window.open` or form to `_blank` opens no window), and
    # so does site isolation (a cross-site frame gets a renderer process of its own).
    "--disable-gpu",
    "--disable-dev-shm-usage",
    # Without these Chromium keeps trying to reach Google's servers.
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-client-side-phishing-detection",
    "--safebrowsing-disable-auto-update",
    "--disable-default-apps",
    "--disable-extensions",
    "--metrics-recording-only",
    "--no-first-run",
    "--password-store=basic",
    "--use-mock-keychain",
    "--disable-breakpad",
    "--disable-hang-monitor",
    "--disable-prompt-on-repost",
    "--mute-audio",
    "--hide-scrollbars",
    "--font-render-hinting=none",
    # Headless tabs past the first count as hidden and their renderers get background
    # priority; with every tab printing, that cost throughput (docs/benchmarks.md).
    "--disable-renderer-backgrounding",
    "--disable-backgrounding-occluded-windows",
    "--disable-background-timer-throttling",
    # A page that eats memory dies at 512 MB of JS heap (its tab crashes and is replaced)
    # instead of growing to V8's default of several GB beside the other tabs.
    "--js-flags=--max-old-space-size=512",
    # Chromium 156 gives every browser context its windows' omnibox popups, WebUI pages
    # preloaded in renderer processes of their own (three per context seen): nothing a
    # headless tab uses, costing each new context CPU and memory.
    "--disable-features=WebUIOmniboxPopup,WebUIOmniboxAimPopup,WebUIOmniboxFullPopup,"
    "PreloadTopChromeWebUI",
    # chromium-headless-shell (the default where installed) has neither the profile's
    # preferences nor the popup blocker below: these are its own switches for the same
    # (a full Chromium ignores the second and does not obey the first; see PREFERENCES).
    "--force-webrtc-ip-handling-policy=disable_non_proxied_udp",
    "--block-new-web-contents",
]
"""Chromium's flags, besides the profile, the proxy and the DevTools pipe."""

PREFERENCES = {"webrtc": {"ip_handling_policy": "disable_non_proxied_udp"}}
"""The profile's preferences (every browser context inherits them): WebRTC may use TCP
through the proxy only, never UDP (STUN, TURN, peer traffic) that the egress proxy would
not see. (`--force-webrtc-ip-handling-policy` on the command line did not do it.)"""


def _write_preferences(profile: str, uid: int | None) -> None:
    """`PREFERENCES` in the profile's `Default` folder, owned by `uid` (when given), whose
    Chromium writes its own preferences there."""
    folder = os.path.join(profile, "Default")
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, "Preferences")
    with open(path, "w", encoding="utf-8") as file:
        json.dump(PREFERENCES, file)
    if uid is not None:
        os.chown(folder, uid, uid)
        os.chown(path, uid, uid)


START_GRACE = 30.0
"""Seconds Chromium gets to answer its first DevTools command after it was started."""

_LAUNCHER = (
    """import json, os, stat, struct, sys  # all before a change of user: it may lose them
nice = int(sys.argv[2])  # lower priority only: raising it would need root
if nice > os.getpriority(os.PRIO_PROCESS, 0):
    os.setpriority(os.PRIO_PROCESS, 0, nice)
try:  # in a session of its own, the session's autogroup is what the scheduler weighs
    with open("/proc/self/autogroup", "w") as autogroup:  # before a change of user makes
        autogroup.write(str(nice))  # /proc/self root's
except OSError:
    pass  # no autogroups (a kernel without them, or turned off)
"""
    + DROP_TO_UID
    + landlock.WALL_OFF
    + """if sys.argv[5]:  # the walls: after the change of user, so nothing undoes them
    wall_off(sys.argv[5])
# The DevTools pipes on fds 3 (commands in) and 4 (messages out), as Chromium expects:
# copied out of the way first, so that neither lands on the other.
given = [int(fd) for fd in sys.argv[3:5]]
spare = [fd for fd in range(100, 104) if fd not in given][:2]
for fd, copy in zip(given, spare):
    os.dup2(fd, copy)
for copy, fd in zip(spare, (3, 4)):
    os.dup2(copy, fd)
    os.close(copy)
ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
if os.getppid() == 1:
    sys.exit(1)  # the renderer is already gone
os.execv(sys.argv[6], sys.argv[6:])
"""
)
"""Run by `python -c` between the fork and Chromium: changes user when asked, puts the
DevTools pipes where Chromium reads and writes them, then asks the kernel to SIGKILL
Chromium when the renderer process dies, however it dies (a SIGKILLed renderer would
otherwise leave a whole browser behind). The parent-death signal comes after the change
of user, which would clear it. Chromium runs at a lower CPU priority (`nice`) than the
services, so that a busy browser does not make the gateway's accepts and the pipeline's
bookkeeping wait for a core. Its arguments: uid (-1: stay), niceness, the two pipe ends,
the Landlock rules' file ("" for none), Chromium's executable and flags."""

LOG_NAME = "chromium.log"
"""Chromium's stdout and stderr, in the browser's folder: the tail explains a failed start."""


@dataclass
class Browser:
    """A started Chromium: its process and DevTools connection."""

    process: subprocess.Popen[bytes]
    connection: Connection
    folder: str

    def log_tail(self, lines: int = 5) -> str:
        """The last lines Chromium wrote, for an error message."""
        try:
            with open(os.path.join(self.folder, LOG_NAME), "rb") as file:
                text = file.read()[-4096:].decode(errors="replace")
        except OSError:
            return ""
        return " | ".join(line for line in text.strip().splitlines()[-lines:] if line)


def spawn(
    executable: str,
    args: Sequence[str],
    *,
    env: dict[str, str],
    uid: int | None,
    folder: str,
    nice: int = 0,
    rules: str = "",
) -> tuple[subprocess.Popen[bytes], int, int]:
    """Fork the launcher for `executable`, as `uid` (None: as this process) and walled
    by the Landlock `rules` file (if any); the process and this side's pipe ends (read
    Chromium's messages, write commands)."""
    commands_in, commands_out = os.pipe()  # Chromium reads commands_in (its fd 3)
    messages_in, messages_out = os.pipe()  # Chromium writes messages_out (its fd 4)
    try:
        with open(os.path.join(folder, LOG_NAME), "wb") as output:
            process = subprocess.Popen(
                [sys.executable, "-I", "-S", "-c", _LAUNCHER, str(-1 if uid is None else uid),
                 str(nice), str(commands_in), str(messages_out), rules, executable, *args,
                 "--remote-debugging-pipe"],
                pass_fds=(commands_in, messages_out), env=env, stdin=subprocess.DEVNULL,
                stdout=output, stderr=output,
                start_new_session=True,  # a terminal's Ctrl-C is the renderer's to handle
            )  # fmt: skip
    except OSError as exc:
        for fd in (commands_out, messages_in):
            os.close(fd)
        raise BrowserError(f"cannot start Chromium ({executable}): {describe(exc)}") from exc
    finally:
        os.close(commands_in)
        os.close(messages_out)
    return process, messages_in, commands_out


async def start_browser(
    executable: str,
    args: Sequence[str],
    *,
    env: dict[str, str],
    uid: int | None,
    folder: str,
    nice: int = 0,
    rules: str = "",
) -> Browser:
    """Start `executable` with `args` and the DevTools pipe, as `uid` (None: as this
    process) at niceness `nice` (never above this process's priority), walled by the
    Landlock `rules` file (if any), logging into `folder`; return once it answers.
    `BrowserError` if it cannot start, with what it said."""
    process, reads, writes = spawn(
        executable, args, env=env, uid=uid, folder=folder, nice=nice, rules=rules
    )
    browser = Browser(process, await Connection.open(reads, writes), folder)
    try:
        await asyncio.wait_for(
            browser.connection.browser.send("Target.setDiscoverTargets", {"discover": True}),
            START_GRACE,
        )
    except (BrowserError, TimeoutError) as exc:
        await _end(browser)
        said = browser.log_tail()
        raise BrowserError(
            f"cannot start Chromium ({executable}): {describe(exc)}" + (f": {said}" if said else "")
        ) from exc
    return browser


async def _end(browser: Browser) -> None:
    browser.connection.close()
    with contextlib.suppress(ProcessLookupError):
        browser.process.kill()
    await asyncio.to_thread(browser.process.wait)


def _make_folder(uid: int | None) -> tuple[str, str]:
    """A new folder for one browser, and the `profile` and `tmp` folders in it, owned by
    `uid` (when given) and by nobody else: the rest of the folder stays the renderer's."""
    folder = tempfile.mkdtemp(prefix="pressroom-chromium-")
    profile = os.path.join(folder, "profile")
    for own in (profile, os.path.join(folder, "tmp")):
        os.mkdir(own, 0o700)
        if uid is not None:
            os.chown(own, uid, uid)
    if uid is not None:
        os.chmod(folder, 0o711)  # Chromium's user may go through it, not list or change it
    return folder, profile


_FONTS_CONF = """<?xml version="1.0"?>
<!DOCTYPE fontconfig SYSTEM "fonts.dtd">
<fontconfig>
  <include ignore_missing="yes">/etc/fonts/fonts.conf</include>
  <dir>{fonts}</dir>
  <cachedir>{cache}</cachedir>
</fontconfig>
"""


def _check_fonts_dir(fonts_dir: str, uid: int | None) -> None:
    """Warn when Chromium's user cannot read `fonts_dir`: its fonts would silently be
    missing from documents."""
    if fonts_dir and uid is not None and not readable_by(fonts_dir, uid):
        log.warning(
            "PRESSROOM_FONTS_DIR=%s cannot be read by uid %d, the user Chromium runs as: "
            "documents will not find its fonts; make the folder readable by that user, "
            "and the folders above it searchable",
            fonts_dir,
            uid,
        )


_CHROMIUM_ENV = ("PATH", "LANG", "LANGUAGE", "TZ")
"""What Chromium is given of the renderer's environment (and `LC_*`): nothing else, so
the URL-signing key, webhook and S3 secrets and the database URL stay out of reach of a
page that takes over a Chromium process."""


def chromium_env(fonts_dir: str, profile: str, conf_dir: str) -> dict[str, str]:
    """Chromium's environment: the locale and `PATH` of the renderer, `HOME` in the
    profile, `TMPDIR` the `tmp` folder beside it in `conf_dir` (the browser's own folder:
    its temporary files go with it, and stay within its walls), and with `fonts_dir` a
    fontconfig file (written in `conf_dir`) that adds that folder to the system's fonts
    (Chromium finds fonts through fontconfig on Linux)."""
    env = {
        name: value
        for name, value in os.environ.items()
        if name in _CHROMIUM_ENV or name.startswith("LC_")
    }
    env.setdefault("PATH", os.defpath)
    env["HOME"] = profile
    env["TMPDIR"] = os.path.join(conf_dir, "tmp")
    if fonts_dir:
        conf = os.path.join(conf_dir, "fonts.conf")
        with open(conf, "w", encoding="utf-8") as file:
            file.write(
                _FONTS_CONF.format(
                    fonts=xml_escape(os.path.abspath(fonts_dir)),
                    cache=xml_escape(os.path.join(profile, "fontcache")),
                )
            )
        os.chmod(conf, 0o644)  # whatever the umask: Chromium may run as another user
        env["FONTCONFIG_FILE"] = conf
    return env


@dataclass(frozen=True)
class Prepared:
    """Everything a browser starts with but its program: how it is confined, its folder
    (with the profile), its environment and the Landlock rules' file ("" for none)."""

    confinement: Confinement
    folder: str
    profile: str
    env: dict[str, str]
    rules: str


async def prepare(fonts_dir: str, *, chromium_uid: int) -> Prepared:
    """A new browser's folder, profile, environment and walls, under this process's
    confinement for Chromium (`privileges.confine`; `BrowserError` when it cannot be had).
    The caller removes `folder` when the browser is gone."""
    confinement = await asyncio.to_thread(confine, chromium_uid)  # a child process, once
    _check_fonts_dir(fonts_dir, confinement.uid)
    folder, profile = _make_folder(confinement.uid)
    try:
        _write_preferences(profile, confinement.uid)
        env = chromium_env(fonts_dir, profile, folder)
        hidden = confinement.hidden if confinement.walled else ()
        rules = landlock.write_rules(folder, hidden) if hidden else ""
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    return Prepared(confinement, folder, profile, env, rules)


async def launch_browser(
    executable: str, proxy_url: str, fonts_dir: str, *, chromium_uid: int, nice: int
) -> Browser:
    """Start Chromium with its own folder and profile, everything it fetches sent to the
    proxy at `proxy_url`; `BrowserError` if it cannot start. With `fonts_dir`, the fonts
    in that folder are usable from documents by family name. When this process is root,
    Chromium runs as `chromium_uid` (user and group); it runs at niceness `nice`."""
    prepared = await prepare(fonts_dir, chromium_uid=chromium_uid)
    args = [
        *CHROMIUM_ARGS,
        *prepared.confinement.args,
        f"--user-data-dir={prepared.profile}",
        f"--proxy-server={proxy_url}",
        f"--proxy-bypass-list={BYPASS_NOTHING}",
        "about:blank",  # the first window's page: not the new-tab page
    ]
    try:
        return await start_browser(
            executable,
            args,
            env=prepared.env,
            uid=prepared.confinement.uid,
            folder=prepared.folder,
            nice=nice,
            rules=prepared.rules,
        )
    except BaseException:
        shutil.rmtree(prepared.folder, ignore_errors=True)
        raise

"""What a page that takes over Chromium can reach of the renderer: nothing secret.

There is no honest way to get code execution inside Chromium in a test, so the walls are
tried from Chromium's place: a real `pressroom renderer` process (started as production
starts it: `runtime.run`, settings with `PRESSROOM_X_FILE` secrets, `renderer.main`) is
given a "Chromium" that is a probe (`PRESSROOM_CHROMIUM`). The renderer's own launcher
starts it exactly as it starts Chromium (same user, environment and walls, as the
renderer's child), and the probe tries what such a page would: the renderer's
`/proc/<pid>/environ`, `mem`, `fd` and `root`, attaching with ptrace, and the secret files.
The renderer then stops, since its "Chromium" never answers.

Verifies, with the renderer as root (Chromium as another user) and with the renderer and
Chromium as one non-root user (the production overlay's pod, where only the renderer
being non-dumpable closes its environment and memory, and only Landlock its files):
every attempt is refused, and the probe's environment holds no secret. And with a real
Chromium: no secret given as a file is in the renderer's environment, nor any secret in
Chromium's (each read as root from /proc), Chromium runs walled (no new privileges) and
starts its tabs, and no process of the renderer's user opens the environment or memory
of the renderer, the template jail's forkserver or its workers.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psutil
import pytest

from services.core.model.pageoptions import PageOptions
from services.core.runtime.settings import Settings
from services.renderer.browser import BrowserPool, Html, privileges
from services.renderer.browser.privileges import Sandbox, Walls
from tests.conftest import NatsServer, wait_until

REPO = Path(__file__).resolve().parents[2]
SITE = sysconfig.get_paths()["purelib"]
"""This project's packages, for an interpreter other than this one (`python_for`)."""

ALONE_UID = 10001
"""The renderer's user in the same-user case: the pods' user in deploy/k8s."""

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux") or os.geteuid() != 0,
    reason="needs Linux and root: the test starts the renderer as other users",
)

PROBE = """#!{python} -IS
import ctypes, json, os, sys
renderer = os.getppid()  # the launcher exec'd us: our parent is the renderer
secrets = {secrets!r}

def attempt(action):
    try:
        action()
    except OSError as exc:
        return f"refused: {{exc.strerror}}"
    return "succeeded"

def ptrace():
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.ptrace(0x4206, renderer, None, None) != 0:  # PTRACE_SEIZE: the tracee runs on
        raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))
    # attached: our exit detaches again

tried = {{
    "environ": lambda: open(f"/proc/{{renderer}}/environ", "rb").read(),
    "mem": lambda: open(f"/proc/{{renderer}}/mem", "rb").close(),
    "fd": lambda: os.listdir(f"/proc/{{renderer}}/fd"),
    "ptrace": ptrace,
}}
for path in secrets:
    tried[path] = lambda path=path: open(path, "rb").read()
    tried["root:" + path] = lambda path=path: open(f"/proc/{{renderer}}/root{{path}}", "rb").read()
found = {{name: attempt(action) for name, action in tried.items()}}
found["uid"] = os.getuid()
found["env"] = dict(os.environ)
with open({results!r}, "w") as file:
    json.dump(found, file)
"""


@dataclass
class Secrets:
    """Two secrets, as files as a Secret volume gives them (mode 0400, the renderer's)
    named by `PRESSROOM_X_FILE` or else in the environment, and a third always in the
    environment."""

    folder: Path
    paths: dict[str, str]  # PRESSROOM_X -> the file holding its value
    values: dict[str, str]  # PRESSROOM_X -> its value
    as_files: bool
    env_secret: str = "whsec_ZW52aXJvbm1lbnQtc2VjcmV0LW9mLXRoZS10ZXN0"

    @property
    def files(self) -> list[str]:
        """The files the renderer reads its secrets from."""
        return list(self.paths.values()) if self.as_files else []

    @property
    def env(self) -> dict[str, str]:
        given = (
            {f"{name}_FILE": path for name, path in self.paths.items()}
            if self.as_files
            else self.values
        )
        return {**given, "PRESSROOM_WEBHOOK_SECRET": self.env_secret}

    @property
    def everything(self) -> list[str]:
        return [*self.values.values(), self.env_secret]


def _shared_folder(owner: int) -> Path:
    """A folder under /tmp that `owner` (and only it) may write, others may go through."""
    folder = Path(tempfile.mkdtemp(prefix="pressroom-walls-"))
    folder.chmod(0o755)
    os.chown(folder, owner, owner)
    return folder


@contextlib.contextmanager
def secrets_of(owner: int, as_files: bool = True) -> Iterator[Secrets]:
    folder = _shared_folder(owner)
    try:
        paths, values = {}, {}
        for name in ("PRESSROOM_S3_SECRET_KEY", "PRESSROOM_URL_SECRET"):
            values[name] = f"{name.lower()}-{os.urandom(8).hex()}"
            path = folder / name.lower()
            path.write_text(values[name] + "\n")
            os.chown(path, owner, owner)
            path.chmod(0o400)
            paths[name] = str(path)
        yield Secrets(folder, paths, values, as_files)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def python_for(uid: int, needs: str = "services.renderer.main") -> str:
    """An interpreter `uid` may run with the module `needs` (this one, unless it lives
    where `uid` cannot reach, as under /root; then the system's of the same version)."""
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    for python in (sys.executable, f"/usr/bin/{version}"):
        with contextlib.suppress(OSError):  # not even executable by `uid`
            tried = subprocess.run(
                [python, "-c", f"import {needs}"],
                env=_base_env(), user=uid, group=uid, extra_groups=[], cwd="/",
                capture_output=True, timeout=60,
            )  # fmt: skip
            if tried.returncode == 0:
                return python
    pytest.skip(f"no Python that uid {uid} may run with this project's packages")


def _base_env() -> dict[str, str]:
    return {"PATH": "/usr/bin:/bin", "PYTHONPATH": f"{REPO}:{SITE}", "LANG": "C.UTF-8"}


def renderer_env(nats: NatsServer, data: Path, secrets: Secrets, **more: str) -> dict[str, str]:
    """The environment of a `pressroom renderer` as deploy/k8s's production overlay gives
    it: secrets as files (one in the environment too, to show it stays there)."""
    settings = {
        "PRESSROOM_NATS_URL": nats.url,
        "PRESSROOM_METRICS_PORT": "0",
        "PRESSROOM_DATA_DIR": str(data),
        "PRESSROOM_STORAGE_DIR": str(data / "files"),
        "PRESSROOM_RENDER_CONCURRENCY": "1",
        "PRESSROOM_SHUTDOWN_GRACE": "2",
    }
    return {**_base_env(), **settings, **secrets.env, **more}


def run_renderer(python: str, uid: int, env: dict[str, str]) -> subprocess.Popen[bytes]:
    """`pressroom renderer` as `uid` (started as that user from the first instruction, as
    a pod's process is, not changed to it later)."""
    return subprocess.Popen(
        [python, "-m", "services.cli", "renderer"], env=env, cwd="/",
        user=uid, group=uid, extra_groups=[],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
    )  # fmt: skip


@dataclass(frozen=True)
class Case:
    renderer_uid: int
    chromium_uid: int
    as_files: bool


CASES = {
    "renderer-root-chromium-another-user": Case(0, Settings().chromium_uid, True),
    # the production overlay: one non-root user, secrets from a Secret volume
    "one-user-secrets-as-files": Case(ALONE_UID, ALONE_UID, True),
    # no files to wall off, so no Landlock: only the renderer being non-dumpable stands
    "one-user-secrets-in-the-environment": Case(ALONE_UID, ALONE_UID, False),
}


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_chromium_s_place_reaches_no_secret_of_the_renderer(
    nats_server: NatsServer, case: Case
) -> None:
    python = python_for(case.renderer_uid)
    with secrets_of(case.renderer_uid, case.as_files) as secrets:
        results = _shared_folder(case.renderer_uid)
        results.chmod(0o777)  # Chromium's user writes there
        probe = secrets.folder / "probe"
        probe.write_text(
            PROBE.format(
                python=python_for(case.chromium_uid, needs="json"),
                secrets=secrets.files,
                results=str(results / "found.json"),
            )
        )
        probe.chmod(0o755)
        env = renderer_env(nats_server, secrets.folder, secrets, PRESSROOM_CHROMIUM=str(probe))
        renderer = run_renderer(python, case.renderer_uid, env)
        try:
            said, _ = renderer.communicate(timeout=120)
        finally:
            with contextlib.suppress(ProcessLookupError):
                renderer.kill()
        found_file = results / "found.json"
        assert found_file.exists(), said.decode(errors="replace")[-3000:]
        found = json.loads(found_file.read_text())
        shutil.rmtree(results, ignore_errors=True)
    assert renderer.returncode == 1, said  # its "Chromium" never answered: it stopped
    assert found.pop("uid") == case.chromium_uid
    env = found.pop("env")
    reached = {what: how for what, how in found.items() if not how.startswith("refused")}
    assert not reached, f"Chromium's place reached {reached}"
    assert len(found) == 4 + 2 * len(secrets.files)
    leaked = [value for value in secrets.everything if value in json.dumps(env)]
    assert not leaked, env


def _chromium_of(renderer: subprocess.Popen[bytes], chromium: str) -> psutil.Process | None:
    """The renderer's Chromium (the browser process), once the launcher has become it."""
    with contextlib.suppress(psutil.Error):
        for child in psutil.Process(renderer.pid).children():
            if child.cmdline()[:1] == [chromium]:
                return child
    return None


def _stop(renderer: subprocess.Popen[bytes]) -> None:
    if renderer.poll() is None:
        renderer.terminate()
        try:
            renderer.wait(30)
        except subprocess.TimeoutExpired:
            renderer.kill()
            renderer.wait(10)


def test_secrets_from_files_are_in_no_environment_and_the_renderer_s_processes_are_closed(
    nats_server: NatsServer, chromium: str
) -> None:
    python = python_for(ALONE_UID)
    with secrets_of(ALONE_UID) as secrets:
        env = renderer_env(nats_server, secrets.folder, secrets)
        renderer = run_renderer(python, ALONE_UID, env)
        try:
            browser = wait_until(
                lambda: _chromium_of(renderer, chromium), 90, "the renderer's Chromium"
            )
            tabs = wait_until(lambda: _renderers_of(browser), 60, "Chromium's tab renderers")
            renderer_environ = Path(f"/proc/{renderer.pid}/environ").read_bytes()
            chromium_environ = Path(f"/proc/{browser.pid}/environ").read_bytes()
            status = Path(f"/proc/{browser.pid}/status").read_text()
            jail = wait_until(lambda: _jail_of(renderer), 60, "the template jail's workers")
            reached = _read_as(ALONE_UID, [renderer.pid, *jail])
        finally:
            _stop(renderer)
    assert not reached, f"another process of the renderer's user reached {reached}"
    for value in secrets.values.values():  # given as files: nowhere
        assert value.encode() not in renderer_environ
        assert value.encode() not in chromium_environ
    assert secrets.env_secret.encode() in renderer_environ  # given in the environment
    assert secrets.env_secret.encode() not in chromium_environ
    assert b"PRESSROOM_" not in chromium_environ
    assert "NoNewPrivs:\t1" in status, "the launcher applied no Landlock walls"
    assert tabs


def _jail_of(renderer: subprocess.Popen[bytes]) -> list[int]:
    """The jail's forkserver and the workers it forked (template data, the signing key),
    once there are workers."""
    with contextlib.suppress(psutil.Error):
        found = [
            p.pid
            for p in psutil.Process(renderer.pid).children(recursive=True)
            if "multiprocessing.forkserver" in " ".join(p.cmdline())
        ]
        return found if len(found) >= 2 else []
    return []


READER = """import json, os, sys
found = {}
for pid in sys.argv[1:]:
    for part in ("environ", "mem"):
        try:
            open(f"/proc/{pid}/{part}", "rb").close()
            found[f"{pid}/{part}"] = "opened"
        except OSError:
            pass
print(json.dumps(found))
"""


def _read_as(uid: int, pids: list[int]) -> dict[str, str]:
    """What a process of `uid` (not Chromium: any other) opens of `pids`' environ and mem."""
    done = subprocess.run(
        [python_for(uid, needs="json"), "-c", READER, *map(str, pids)],
        user=uid, group=uid, extra_groups=[], capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    found: dict[str, str] = json.loads(done.stdout)
    return found


def _renderers_of(chromium: psutil.Process) -> list[psutil.Process]:
    with contextlib.suppress(psutil.Error):
        return [p for p in chromium.children(recursive=True) if "--type=renderer" in p.cmdline()]
    return []


async def test_a_walled_chromium_renders_with_a_secret_in_its_temporary_folder(chromium: str):
    """The hardest place for the wall: a secret file under /tmp, so that only what /tmp
    held at launch is granted. Chromium's temporary files go to its own folder, so it
    still starts and prints."""
    folder = _shared_folder(0)
    secret = folder / "key"
    secret.write_text("k")
    privileges.configure(Walls(Sandbox.AUTO, frozenset({str(secret)})))
    try:
        async with BrowserPool(chromium, pages=1, timeout=30, max_output_bytes=10**8) as pool:
            result = await pool.render(Html("<p>walled in</p>"), PageOptions())
            status = Path(f"/proc/{pool.pid}/status").read_text()
    finally:
        privileges.configure(Walls())
        shutil.rmtree(folder, ignore_errors=True)
    assert result.data.startswith(b"%PDF")
    assert "NoNewPrivs:\t1" in status

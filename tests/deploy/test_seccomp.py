"""The renderer's seccomp profile in production (deploy/k8s/seccomp/chromium.json).

Verifies: the profile allows every system call of this machine's kernel table except the
administrative and introspective ones no renderer makes, which it refuses with EPERM (an
unknown, newer call gets ENOSYS, so the C library falls back); it allows what Chromium's
sandbox needs (namespaces through clone/unshare, `chroot`) and Landlock. And in a
container run as the production pod runs (user 10001, every capability dropped, no new
privileges, read-only root) under that profile: Chromium starts with its own sandbox (it
refuses to start at all when the sandbox cannot be had), the renderer's own check of user
namespaces passes, and the refused calls are refused.
"""

from __future__ import annotations

import json
import platform
import re
from pathlib import Path
from typing import Any

from services.renderer.browser.privileges import NAMESPACES_CHECK
from tests.deploy.k8s import K8S
from tests.deploy.podman import needs_podman, podman

PROFILE = K8S / "seccomp" / "chromium.json"
HEADER = Path("/usr/include/x86_64-linux-gnu/asm/unistd_64.h")

SANDBOX_NEEDS = {"clone", "clone3", "unshare", "chroot", "setresuid", "prctl", "seccomp"}
"""What Chromium's namespace sandbox calls (and installs its own seccomp-bpf with)."""
LANDLOCK = {"landlock_create_ruleset", "landlock_add_rule", "landlock_restrict_self"}
REFUSED = {
    "mount", "umount2", "pivot_root", "open_tree", "move_mount", "fsopen", "setns",
    "bpf", "perf_event_open", "ptrace", "process_vm_readv", "process_vm_writev",
    "keyctl", "add_key", "request_key", "io_uring_setup", "userfaultfd",
    "init_module", "finit_module", "delete_module", "kexec_load", "reboot",
    "open_by_handle_at", "name_to_handle_at", "swapon", "syslog", "settimeofday",
}  # fmt: skip
"""Calls a renderer never makes and a taken-over Chromium would like to."""

EPERM, ENOSYS = 1, 38


def profile() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(PROFILE.read_text())
    return loaded


def rules(action: str) -> set[str]:
    return {n for rule in profile()["syscalls"] if rule["action"] == action for n in rule["names"]}


def test_the_profile_allows_the_kernel_s_calls_but_the_administrative_ones() -> None:
    loaded = profile()
    assert loaded["defaultAction"] == "SCMP_ACT_ERRNO"
    assert loaded["defaultErrnoRet"] == ENOSYS
    allowed, refused = rules("SCMP_ACT_ALLOW"), rules("SCMP_ACT_ERRNO")
    assert all(
        r.get("errnoRet") == EPERM for r in loaded["syscalls"] if r["action"] != "SCMP_ACT_ALLOW"
    )
    assert not allowed & refused
    assert allowed >= SANDBOX_NEEDS | LANDLOCK
    assert refused >= REFUSED
    if HEADER.exists():
        table = set(re.findall(r"#define __NR_(\w+)\s+\d+", HEADER.read_text()))
        unused = {"afs_syscall", "getpmsg", "putpmsg", "security", "tuxcall", "vserver",
                  "epoll_ctl_old", "epoll_wait_old", "uretprobe"}  # fmt: skip
        assert table - refused - unused <= allowed, sorted(table - refused - allowed)


RESTRICTED = [
    "--user", "10001:10001", "--cap-drop", "ALL", "--security-opt", "no-new-privileges",
    "--read-only", "--tmpfs", "/tmp", "--network", "none",
    "--security-opt", f"seccomp={PROFILE}",
]  # fmt: skip
"""`podman run` options for a container as the production renderer pod runs."""

CALLS = """import ctypes, json
libc = ctypes.CDLL(None, use_errno=True)
numbers = {"mount": 165, "bpf": 321, "keyctl": 250, "ptrace": 101, "io_uring_setup": 425,
           "unknown": 1000}
found = {}
for name, number in numbers.items():
    ctypes.set_errno(0)
    libc.syscall(number, 0, 0, 0, 0, 0)
    found[name] = ctypes.get_errno()
print(json.dumps(found))
"""
"""x86-64 numbers: the image runs where the tests run."""


@needs_podman
def test_chromium_sandboxes_itself_in_a_container_as_restricted_as_production(
    image: str,
) -> None:
    shell = "/usr/lib/chromium/chromium-headless-shell"
    dom = podman(
        "run", "--rm", *RESTRICTED, "--entrypoint", shell, image,
        "--headless", "--disable-gpu", "--dump-dom", "about:blank",
        timeout=180,
    )  # fmt: skip
    assert "<body></body>" in dom  # no --no-sandbox: it would not have started unsandboxed
    probe = podman(
        "run", "--rm", *RESTRICTED, "--entrypoint", "python", image,
        "-I", "-S", "-c", NAMESPACES_CHECK, "-1",
        check=False,
    )  # fmt: skip
    assert probe.strip() == "", probe  # what the renderer checks at start
    if platform.machine() == "x86_64":  # the numbers in CALLS
        said = podman("run", "--rm", *RESTRICTED, "--entrypoint", "python", image, "-c", CALLS)
        errnos = json.loads(said)
        assert errnos.pop("unknown") == ENOSYS
        assert errnos == dict.fromkeys(errnos, EPERM), errnos

"""What every Pressroom process does to itself first: it becomes non-dumpable.

`prctl(PR_SET_DUMPABLE, 0)` makes the kernel treat the process as if it held privileges
other processes of its user do not: none of them may read its `/proc/<pid>/environ`,
`mem` or open files (`fd`), nor attach to it with ptrace, and it leaves no core dump.
Root (CAP_SYS_PTRACE) still can. That matters where Chromium runs as the renderer's own
user (a non-root pod): a page that takes over a Chromium process finds the renderer's
memory and environment closed to it. The flag survives fork (the jail's forkserver and its
workers set it themselves too) and is reset by exec, so Chromium, started by exec, is not
protected by it and holds no secret.
"""

from __future__ import annotations

import ctypes
import logging
import sys

log = logging.getLogger(__name__)

PR_GET_DUMPABLE = 3
PR_SET_DUMPABLE = 4
"""From <linux/prctl.h>."""


def make_undumpable() -> bool:
    """Make this process non-dumpable; whether it now is (False off Linux, with a warning
    when Linux refuses)."""
    if not sys.platform.startswith("linux"):
        return False
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0:
        log.warning("could not make the process non-dumpable: errno %d", ctypes.get_errno())
    return bool(libc.prctl(PR_GET_DUMPABLE, 0, 0, 0, 0) == 0)

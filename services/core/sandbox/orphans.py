"""Die with the parent: for the jail's forkserver and workers, which would otherwise
outlive a renderer or gateway killed with SIGKILL (the OOM killer, a crashed supervisor).

The forkserver watches its parent (`services.core.sandbox.forkserver_preload`); each worker,
forked by the forkserver's only thread, calls `die_with_parent()` so that it dies with
the forkserver. (The kernel's parent-death signal follows the thread that forked, which
is why the forkserver, started from a worker thread of the service, cannot use it.)
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys

_PR_SET_PDEATHSIG = 1


def die_with_parent() -> None:
    """SIGKILL this process when its parent dies (Linux; elsewhere nothing)."""
    if not sys.platform.startswith("linux"):
        return
    ctypes.CDLL(None).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() == 1:  # the parent died before the request took effect
        os._exit(1)

"""Imported by the jail's forkserver alone (its preload list): it dies with the service
that started it.

Not with `PR_SET_PDEATHSIG`: that follows the *thread* that started the process, and the
jail starts its forkserver from a worker thread (so the event loop does not wait for it),
which may end long before the service does. A thread of the forkserver watches its parent
instead and ends the process once the parent is gone (re-parented), within a second.
It also makes the forkserver non-dumpable, and with it every worker it forks (the flag
survives fork): a worker holds a tenant's template data or the signing key, and a Chromium
of the same user must not read its memory (`core/runtime/hardening`).

Never import this module anywhere else.
"""

from __future__ import annotations

import os
import threading
import time

from services.core.runtime.hardening import make_undumpable

_PARENT = os.getppid()


def _watch() -> None:
    while os.getppid() == _PARENT:
        time.sleep(1.0)
    os._exit(1)


threading.Thread(target=_watch, name="die-with-parent", daemon=True).start()
make_undumpable()

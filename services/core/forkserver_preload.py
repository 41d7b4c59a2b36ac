"""Imported by the jail's forkserver alone (its preload list): it dies with the service
that started it.

Not with `PR_SET_PDEATHSIG`: that follows the *thread* that started the process, and the
jail starts its forkserver from a worker thread (so the event loop does not wait for it),
which may end long before the service does. A thread of the forkserver watches its parent
instead and ends the process once the parent is gone (re-parented), within a second.
Never import this module anywhere else.
"""

from __future__ import annotations

import os
import threading
import time

_PARENT = os.getppid()


def _watch() -> None:
    while os.getppid() == _PARENT:
        time.sleep(1.0)
    os._exit(1)


threading.Thread(target=_watch, name="die-with-parent", daemon=True).start()

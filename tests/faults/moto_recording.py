"""`moto_server` whose request recorder writes one request at a time.

moto's recorder appends each request to its file with two writes, the request and then
its newline, from whichever server thread handled it. A request over the file buffer's
8 KB (an uploaded PDF) goes out in a write of its own, so two uploads at once can store
`{first}{second}\\n\\n`, and the replay then fails ("Extra data"). Here the recorder holds a
lock while it writes, so each request is stored whole on its line.

    python -m tests.faults.moto_recording -H 127.0.0.1 -p 0
"""

from __future__ import annotations

import sys
import threading
from typing import Any

from moto.moto_api._internal.recorder.models import Recorder
from moto.server import main

_LOCK = threading.Lock()
_RECORD = Recorder._record_request


def _record_whole(self: Recorder, *args: Any, **kwargs: Any) -> None:
    with _LOCK:
        _RECORD(self, *args, **kwargs)


Recorder._record_request = _record_whole  # type: ignore[method-assign]

if __name__ == "__main__":
    main(sys.argv[1:])

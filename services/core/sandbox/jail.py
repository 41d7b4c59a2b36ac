"""Hostile templates run in a jail: worker processes with a memory limit, a time limit and
an output cap, so nothing a template does blocks an event loop or another job.

A `Jail` keeps `slots` worker processes, each with `RLIMIT_AS` set to the memory limit,
each answering calls over a pipe of its own that the event loop reads (no executor thread
in between: a call costs a fraction of a millisecond). Workers are forked from a
forkserver (a clean process started once, with `core/sandbox/templating` imported): no copy of
the service's threads, sockets or memory, and a new worker in milliseconds.
`call(fn, *args)` runs `fn` (an importable function) in an idle worker:

- a `MemoryError` in the worker (`'x' * 10**9`) becomes `TemplateError` naming the limit;
- a call that outlives the time limit (`range(10**5)` twice, a huge compile, `9**9**9`) has
  its worker killed and replaced, and becomes `TemplateError` naming the limit;
- a worker that dies otherwise is replaced, and the call raises `TemplateError` too: the
  same template would kill the next worker the same way;
- whatever else `fn` raises (a `PressroomError` such as `TemplateError` or `RequestError`)
  reaches the caller as it is.

Other calls never wait behind a killed one: each slot is its own process, replaced at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import multiprocessing
import pickle
import resource
import signal
import socket
import struct
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.connection import Connection
from types import TracebackType
from typing import Any, TypeVar

from services.core.model.errors import PressroomError, TemplateError
from services.core.runtime.settings import Settings
from services.core.sandbox.orphans import die_with_parent

log = logging.getLogger(__name__)

T = TypeVar("T")

_CONTEXT = multiprocessing.get_context("forkserver")
# `forkserver_preload` first: the forkserver dies with the service that started it.
_CONTEXT.set_forkserver_preload(
    [
        "services.core.sandbox.forkserver_preload",
        "services.core.sandbox.templating",
        "services.core.sandbox.markdown",
    ]
)


@dataclass(frozen=True)
class TemplateLimits:
    """What one call may use: worker memory (bytes), wall-clock seconds, output characters."""

    memory_bytes: int
    seconds: float
    output_chars: int

    @classmethod
    def of(cls, settings: Settings) -> TemplateLimits:
        """The limits `PRESSROOM_TEMPLATE_*` set."""
        return cls(
            settings.template_memory, settings.template_timeout, settings.template_max_output
        )


def _start_worker(memory_bytes: int) -> None:
    """In each worker: death with the forkserver (and so with the service), the memory
    limit, and no reaction to the terminal's Ctrl-C (the service stops its workers)."""
    die_with_parent()
    resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _serve(conn: Connection, memory_bytes: int) -> None:
    """A worker's life: answer each `(fn, args)` with `("ok", result)` or `("error",
    exception)` until the service closes its end."""
    _start_worker(memory_bytes)
    while True:
        try:
            fn, args = conn.recv()
        except EOFError:
            return
        try:
            answer: tuple[str, Any] = ("ok", fn(*args))
        except BaseException as exc:  # the caller decides what it means
            answer = ("error", exc)
        try:
            conn.send(answer)
        except MemoryError:  # the result is too large to pickle within the limit
            conn.send(("error", MemoryError()))
        except Exception as exc:  # what cannot be pickled (a bug here, not the template's)
            conn.send(("error", RuntimeError(f"the jail cannot send back {answer[1]!r}: {exc}")))


def _ready() -> bool:
    return True


class _WorkerDied(Exception):
    """The worker ended (killed by the kernel, or crashed) before it answered."""


_HEADER = struct.Struct("!i")  # `multiprocessing.connection`'s framing, which the
_LONG = struct.Struct("!Q")  # worker's end speaks: a length, or -1 and a 64-bit one


class _Slot:
    """One worker process and this side's end of a socket pair to it. Requests and
    answers are pickled in `multiprocessing.connection`'s framing; this side reads and
    writes through the event loop (the socket is non-blocking: no executor thread, and a
    large answer arriving in pieces never blocks the loop), the worker blockingly."""

    def __init__(self, memory_bytes: int) -> None:
        self.sock, theirs = socket.socketpair()
        self.sock.setblocking(False)
        end = Connection(theirs.detach())
        self.process = _CONTEXT.Process(
            target=_serve, args=(end, memory_bytes), name="pressroom-jail", daemon=True
        )
        try:
            self.process.start()  # a fork of the forkserver (which the first start starts)
        except BaseException:
            self.sock.close()
            raise
        finally:
            # The worker has its own copy now: with this one open, its death would never
            # show as the end of the socket here.
            end.close()

    async def call(self, fn: Callable[..., T], args: tuple[Any, ...]) -> T:
        loop = asyncio.get_running_loop()
        request = pickle.dumps((fn, args), protocol=pickle.HIGHEST_PROTOCOL)
        if len(request) > 0x7FFFFFFF:
            header = _HEADER.pack(-1) + _LONG.pack(len(request))
        else:
            header = _HEADER.pack(len(request))
        try:
            await loop.sock_sendall(self.sock, header + request)
            (size,) = _HEADER.unpack(await self._read(_HEADER.size))
            if size == -1:
                (size,) = _LONG.unpack(await self._read(_LONG.size))
            kind, value = pickle.loads(await self._read(size))
        except OSError as exc:  # the worker's end closed: it died
            raise _WorkerDied(str(exc)) from exc
        if kind == "error":
            raise value
        result: T = value
        return result

    async def _read(self, size: int) -> bytes:
        loop = asyncio.get_running_loop()
        buffer = bytearray(size)
        view = memoryview(buffer)
        got = 0
        while got < size:
            n = await loop.sock_recv_into(self.sock, view[got:])
            if n == 0:
                raise _WorkerDied("the worker closed its end")
            got += n
        return bytes(buffer)

    def kill(self) -> None:
        """Kill the worker at once (a template may be spinning in C code)."""
        with contextlib.suppress(Exception):
            self.process.kill()
        self.sock.close()


class Jail:
    """`slots` jailed worker processes; use as an async context manager.

    A limit exceeded raises `error` (`TemplateError` unless another user of the jail, such
    as the renderer's finishing steps, names its own) with a message about `what`.
    """

    def __init__(
        self,
        slots: int,
        limits: TemplateLimits,
        what: str = "the template",
        error: type[PressroomError] = TemplateError,
    ) -> None:
        self.slots = slots
        self.limits = limits
        self.what = what
        self.error = error
        self._idle: asyncio.Queue[_Slot] = asyncio.Queue()
        self._all: set[_Slot] = set()

    def _new_slot(self) -> _Slot:
        slot = _Slot(self.limits.memory_bytes)
        self._all.add(slot)
        return slot

    async def __aenter__(self) -> Jail:
        # Workers start in a thread: the first one waits for the forkserver to come up
        # (it imports the templates module), which would block the event loop. Later
        # ones, replacements included, are forks of it: milliseconds.
        for _ in range(self.slots):
            slot = await asyncio.to_thread(self._new_slot)
            if await slot.call(_ready, ()) is not True:  # not an assert: kept under -O
                raise RuntimeError("a template worker answered its start-up call wrongly")
            self._idle.put_nowait(slot)
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        for slot in self._all:
            slot.kill()
        self._all.clear()

    def _replace(self, slot: _Slot) -> _Slot:
        slot.kill()
        self._all.discard(slot)
        return self._new_slot()

    async def call(self, fn: Callable[..., T], *args: Any, what: str | None = None) -> T:
        """`fn(*args)` in an idle worker, within the limits (see the module docstring); a
        limit's message names `what` (the jail's own `what` by default)."""
        what = what or self.what
        slot = await self._idle.get()
        try:
            return await asyncio.wait_for(slot.call(fn, args), self.limits.seconds)
        except TimeoutError:
            slot = self._replace(slot)
            raise self.error(
                f"{what} took longer than {self.limits.seconds:g} s and was stopped"
            ) from None
        except MemoryError:
            raise self.error(self._memory_message(what)) from None
        except _WorkerDied:
            slot = self._replace(slot)
            raise self.error(self._memory_message(what) + ", or crashed its worker") from None
        except asyncio.CancelledError:
            slot = self._replace(slot)  # the call may still be running: never reuse it
            raise
        finally:
            self._idle.put_nowait(slot)

    def _memory_message(self, what: str) -> str:
        mib = self.limits.memory_bytes // 2**20
        return f"{what} needed more than the memory limit of {mib} MiB"

"""Hostile templates run in a jail: worker processes with a memory limit, a time limit and
an output cap, so nothing a template does blocks an event loop or another job.

A `Jail` keeps `slots` worker processes, each its own single-process pool, each with
`RLIMIT_AS` set to the memory limit. Workers are forked from a forkserver (a clean process
started once, with `core/templating` imported): no copy of the service's threads,
sockets or memory, and a new worker in milliseconds. `call(fn, *args)` runs `fn` (an
importable function) in an idle worker:

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
import resource
import signal
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from types import TracebackType
from typing import Any, TypeVar

from services.core.errors import TemplateError
from services.core.orphans import die_with_parent
from services.core.settings import Settings

log = logging.getLogger(__name__)

T = TypeVar("T")

_CONTEXT = multiprocessing.get_context("forkserver")
# `forkserver_preload` first: the forkserver dies with the service that started it.
_CONTEXT.set_forkserver_preload(["services.core.forkserver_preload", "services.core.templating"])


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


def _ready() -> bool:
    return True


def _start(pool: ProcessPoolExecutor) -> None:
    """Start the pool's worker and wait until it answers (blocking: call it in a thread)."""
    pool.submit(_ready).result()


def _kill(pool: ProcessPoolExecutor) -> None:
    """Kill the pool's worker at once (a template may be spinning in C code)."""
    kill_workers = getattr(pool, "kill_workers", None)  # Python 3.14+
    if kill_workers is not None:
        kill_workers()
    else:
        for process in list(getattr(pool, "_processes", {}).values()):
            with contextlib.suppress(Exception):
                process.kill()
    pool.shutdown(wait=False, cancel_futures=True)


class Jail:
    """`slots` jailed worker processes; use as an async context manager."""

    def __init__(self, slots: int, limits: TemplateLimits, what: str = "the template") -> None:
        self.slots = slots
        self.limits = limits
        self.what = what
        self._idle: asyncio.Queue[ProcessPoolExecutor] = asyncio.Queue()
        self._all: set[ProcessPoolExecutor] = set()

    def _new_slot(self) -> ProcessPoolExecutor:
        pool = ProcessPoolExecutor(
            max_workers=1,
            mp_context=_CONTEXT,
            initializer=_start_worker,
            initargs=(self.limits.memory_bytes,),
        )
        self._all.add(pool)
        return pool

    async def __aenter__(self) -> Jail:
        # Workers start in a thread: the first one waits for the forkserver to come up
        # (it imports the templates module), which would block the event loop. Later
        # ones, replacements included, are forks of it: milliseconds.
        for _ in range(self.slots):
            pool = self._new_slot()
            await asyncio.to_thread(_start, pool)
            self._idle.put_nowait(pool)
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        for pool in self._all:
            _kill(pool)
        self._all.clear()

    def _replace(self, pool: ProcessPoolExecutor) -> ProcessPoolExecutor:
        _kill(pool)
        self._all.discard(pool)
        return self._new_slot()

    async def call(self, fn: Callable[..., T], *args: Any) -> T:
        """`fn(*args)` in an idle worker, within the limits (see the module docstring)."""
        pool = await self._idle.get()
        try:
            future = asyncio.get_running_loop().run_in_executor(pool, fn, *args)
            return await asyncio.wait_for(future, self.limits.seconds)
        except TimeoutError:
            pool = self._replace(pool)
            raise TemplateError(
                f"{self.what} took longer than {self.limits.seconds:g} s and was stopped"
            ) from None
        except MemoryError:
            raise TemplateError(self._memory_message()) from None
        except BrokenProcessPool:
            pool = self._replace(pool)
            raise TemplateError(self._memory_message() + ", or crashed its worker") from None
        except asyncio.CancelledError:
            pool = self._replace(pool)  # the call may still be running: never reuse it
            raise
        finally:
            self._idle.put_nowait(pool)

    def _memory_message(self) -> str:
        mib = self.limits.memory_bytes // 2**20
        return f"{self.what} needed more than the memory limit of {mib} MiB"

"""What every service's `main` shares: hardening, logging, settings, signals, the exit status."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import os
import signal
import sys
from collections.abc import Awaitable, Callable
from typing import Any

from services.core.model.errors import PressroomError
from services.core.runtime import logs, tracing
from services.core.runtime.hardening import make_undumpable
from services.core.runtime.settings import Settings, SettingsError

ServiceMain = Callable[[Settings, asyncio.Event], Awaitable[None]]


async def pause(stop: asyncio.Event, seconds: float) -> None:
    """Wait `seconds`, or less if `stop` is set meanwhile (a backoff that yields to shutdown)."""
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(stop.wait(), seconds)


CANCEL_AGAIN = 0.5
"""Seconds a cancelled task gets to end before it is cancelled again (`cancelled`)."""


async def cancelled(*tasks: asyncio.Task[Any]) -> None:
    """Cancel `tasks` and return once every one has ended, whatever each raised.

    Python 3.11's `asyncio.wait_for` returns the result instead of raising when the cancel
    arrives as the awaited future completes (gh-86296), and nats-py awaits every request
    that way: a background task cancelled at such a moment runs on. A renderer stopped
    while its batch-state watch was being set up waited for updates forever, so its
    shutdown never ended. The cancel is therefore repeated until the task is gone.
    """
    pending = {task for task in tasks if not task.done()}
    while pending:
        for task in pending:
            task.cancel()
        _, pending = await asyncio.wait(pending, timeout=CANCEL_AGAIN)
    await asyncio.gather(*tasks, return_exceptions=True)  # retrieved: never "never retrieved"


def load_settings() -> Settings:
    """Settings from the process environment; a bad value ends the process with status 2."""
    try:
        return Settings.from_env(os.environ)
    except SettingsError as exc:
        print(f"pressroom: {exc}", file=sys.stderr)
        raise SystemExit(2) from None


STOP_MARGIN = 2.0
"""Seconds past `PRESSROOM_SHUTDOWN_GRACE` a stopping service gets to close its
connections; then it exits at once, whatever it is still waiting for."""


async def _run(service_main: ServiceMain, settings: Settings) -> None:
    """Run the service; on SIGINT/SIGTERM set its `stop` and, should it still run
    `shutdown_grace + STOP_MARGIN` seconds later (NATS or PostgreSQL unreachable, a close
    that waits for a reconnect that never comes), end the process with status 1."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    deadline = settings.shutdown_grace + STOP_MARGIN
    main = asyncio.current_task()

    def stopping() -> None:
        if not stop.is_set():
            stop.set()
            loop.call_later(deadline, _overdue, deadline, main)

    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stopping)
    await service_main(settings, stop)


def waiting_in(task: asyncio.Task[Any] | None) -> str:
    """Where `task` waits: its chain of awaited coroutines, outermost first
    ("serve:40 > __aexit__:174 > close:342"), for the log of a stop that overran."""
    steps = []
    coro: Any = task.get_coro() if task is not None else None
    while coro is not None and getattr(coro, "cr_frame", None) is not None:
        steps.append(f"{coro.cr_code.co_name}:{coro.cr_frame.f_lineno}")
        coro = coro.cr_await
    return " > ".join(steps) or "nothing"


def _overdue(seconds: float, main: asyncio.Task[Any] | None) -> None:
    logging.getLogger("pressroom").error(
        "still stopping %g s after the signal (NATS or PostgreSQL unreachable?), waiting "
        "in %s; exiting now",
        seconds,
        waiting_in(main),
    )
    logging.shutdown()
    os._exit(1)


def _loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    """uvloop where installed: its C transports cut the gateway's CPU per request
    (docs/benchmarks.md)."""
    try:
        import uvloop
    except ImportError:
        return None
    return uvloop.new_event_loop


def tune_gc() -> None:
    """Collect garbage less often than CPython's default (every 700 net allocations).

    The services allocate many short-lived objects per request or event and keep few: the
    default runs a young collection every few requests and promotes survivors that later
    cost full collections, which showed as the gateway's accept-latency tail
    (docs/benchmarks.md). Objects that exist at start (modules, settings) are frozen out
    of every collection.
    """
    gc.freeze()
    gc.set_threshold(50_000, 50, 100)


def run(name: str, service_main: ServiceMain) -> None:
    """Run one service until SIGINT/SIGTERM; startup failures exit 1 with one clear line.

    The process becomes non-dumpable before it reads a setting (`hardening`)."""
    make_undumpable()
    settings = load_settings()
    logs.setup(settings.log_level, name, settings.log_format)
    tracing.setup(name, settings.otlp_endpoint)
    tune_gc()
    try:
        with asyncio.Runner(loop_factory=_loop_factory()) as runner:
            runner.run(_run(service_main, settings))
    except (PressroomError, SettingsError) as exc:
        logging.getLogger(name).error("%s", exc)
        raise SystemExit(1) from None
    finally:
        tracing.shutdown()

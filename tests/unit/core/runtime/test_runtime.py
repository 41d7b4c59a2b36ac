"""`runtime.cancelled`: a background task stops even when a cancel is swallowed; `waiting_in`
says where a task waits."""

from __future__ import annotations

import asyncio

from services.core.runtime import lifecycle


async def test_a_cancel_that_wait_for_swallows_is_repeated_until_the_task_ends() -> None:
    """The renderer's batch-state watch, stopped while nats-py awaited a reply with
    `asyncio.wait_for`: the reply and the cancel arrive in the same loop turn, 3.11's
    `wait_for` returns the reply, and the task goes on to wait for updates forever."""
    reply: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    updates = asyncio.Event()  # never set: no batch changes state

    async def watch() -> None:
        await asyncio.wait_for(reply, 5)  # a request, as nats-py makes it
        await updates.wait()

    task = asyncio.create_task(watch())
    await asyncio.sleep(0)  # the task waits for its reply
    reply.set_result(None)  # the reply comes as the service stops: the first cancel is lost
    await asyncio.wait_for(lifecycle.cancelled(task), 5)
    assert task.done()


async def test_tasks_that_end_by_themselves_or_fail_are_waited_for_quietly() -> None:
    async def fails() -> None:
        raise ValueError("boom")

    failed = asyncio.create_task(fails())
    finished = asyncio.create_task(asyncio.sleep(0))
    sleeping = asyncio.create_task(asyncio.sleep(60))
    await asyncio.sleep(0)
    await asyncio.wait_for(lifecycle.cancelled(failed, finished, sleeping), 5)
    assert sleeping.cancelled() and isinstance(failed.exception(), ValueError)


async def test_where_a_task_waits_is_its_chain_of_coroutines_outermost_first() -> None:
    """What the log of a stop that overran names (`lifecycle.waiting_in`)."""
    never = asyncio.Event()

    async def close_browser() -> None:
        await never.wait()

    async def serve() -> None:
        await close_browser()

    task = asyncio.create_task(serve())
    await asyncio.sleep(0)
    where = lifecycle.waiting_in(task)
    assert where.startswith("serve:") and " > close_browser:" in where
    assert where.split(" > ")[2].startswith("wait:")  # Event.wait: where it really blocks
    task.cancel()
    assert lifecycle.waiting_in(None) == "nothing"

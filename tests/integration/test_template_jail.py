"""Hostile templates in the jail: real worker processes with real limits.

Verifies: a template that loops for long, builds a huge string or prints more than the
output cap fails at once with a clear `template` error naming the limit; the event loop
stays responsive meanwhile (a ticker keeps ticking); the next template on the same jail
renders at once; the sandbox still refuses Python internals. On the real stack: a loop
bomb job fails on its first attempt and a plain job behind it is done; a stored template
that takes too long to compile is a 400 naming `body` while `/healthz` keeps answering
within 100 ms.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
from collections.abc import AsyncIterator
from dataclasses import replace

import aiohttp
import psutil
import pytest
import uvloop

from services.core.model import events
from services.core.model.errors import TemplateError
from services.core.runtime.settings import Settings
from services.core.sandbox.jail import Jail, TemplateLimits
from services.core.sandbox.templating import render_html
from services.renderer.browser import Html, Url
from services.renderer.consumer import source_of
from tests.conftest import Stack
from tests.integration.test_tenants import call

LIMITS = TemplateLimits(memory_bytes=512 * 2**20, seconds=2.0, output_chars=100_000)
LOOP_BOMB = "{% for a in range(100000) %}{% for b in range(100000) %}{% endfor %}{% endfor %}"


@pytest.fixture
async def jail() -> AsyncIterator[Jail]:
    async with Jail(2, LIMITS) as jailed:
        yield jailed


async def render(jail: Jail, template: str, data: dict | None = None) -> str:
    return await jail.call(render_html, template, data or {}, LIMITS.output_chars)


async def failing_while_ticking(call: asyncio.Future[str]) -> tuple[str, float]:
    """(the `TemplateError` message `call` ends with, the longest gap of a 10 ms ticker
    that ran meanwhile: how long the event loop was blocked)."""
    longest, last = 0.0, time.monotonic()

    async def ticker() -> None:
        nonlocal longest, last
        while True:
            await asyncio.sleep(0.01)
            now = time.monotonic()
            longest, last = max(longest, now - last), now

    ticking = asyncio.create_task(ticker())
    try:
        with pytest.raises(TemplateError) as raised:
            await call
    finally:
        ticking.cancel()
    return raised.value.message, longest


async def test_a_template_that_loops_for_long_is_stopped_and_the_loop_never_stalls(jail: Jail):
    started = time.monotonic()
    error, longest = await failing_while_ticking(asyncio.ensure_future(render(jail, LOOP_BOMB)))
    took = time.monotonic() - started
    assert "took longer than 2 s and was stopped" in error
    assert took < LIMITS.seconds + 2
    assert longest < 0.1, f"the event loop stalled for {longest:.3f}s"
    print(f"\n[jail] loop bomb stopped after {took:.2f}s; longest loop gap {longest * 1000:.0f} ms")
    # The next template starts at once, on a fresh worker.
    started = time.monotonic()
    assert await render(jail, "<p>{{ n }}</p>", {"n": 7}) == "<p>7</p>"
    assert time.monotonic() - started < 1.0


async def test_a_template_that_eats_memory_fails_naming_the_limit(jail: Jail):
    with pytest.raises(TemplateError) as raised:
        await render(jail, "{{ 'x' * 10**9 }}")
    assert "memory limit of 512 MiB" in raised.value.message
    assert await render(jail, "ok") == "ok"


async def test_output_over_the_cap_fails_naming_it(jail: Jail):
    with pytest.raises(TemplateError) as raised:
        await render(jail, "{% for i in range(20000) %}<p>{{ i }}</p>{% endfor %}")
    assert "larger than 100000 characters" in raised.value.message


async def test_a_worker_killed_mid_call_fails_the_call_and_is_replaced(jail: Jail):
    """A worker that dies while it renders (the kernel's OOM killer, a crash) fails that
    call with a `TemplateError` saying so at once, not at the time limit, and the next
    calls get a fresh worker."""
    workers = {slot.process.pid for slot in jail._all}
    bomb = asyncio.ensure_future(render(jail, LOOP_BOMB))
    started = time.monotonic()

    def cpu(pid: int) -> float:
        with contextlib.suppress(psutil.Error):
            return sum(psutil.Process(pid).cpu_times()[:2])
        return 0.0

    async def busy_worker() -> int | None:
        """The worker that spends CPU now: the bomb's."""
        before = {pid: cpu(pid) for pid in workers}
        await asyncio.sleep(0.1)
        return next((pid for pid in workers if cpu(pid) - before[pid] > 0.05), None)

    while (victim := await busy_worker()) is None:
        assert time.monotonic() - started < 1.5, "no worker took the call"
    os.kill(victim, signal.SIGKILL)
    with pytest.raises(TemplateError) as raised:
        await bomb
    assert "crashed its worker" in raised.value.message
    assert time.monotonic() - started < LIMITS.seconds  # not the time limit's message
    assert [await render(jail, "{{ n }}", {"n": n}) for n in range(4)] == ["0", "1", "2", "3"]
    assert victim not in {slot.process.pid for slot in jail._all}


def test_large_data_and_output_pass_whole_on_the_services_event_loop():
    """Megabytes each way, on uvloop as the services run: the socket to a worker is
    non-blocking there, so data and a document that arrive in pieces must be read whole,
    not taken for a worker that died."""

    rows = "{% for i in range(rows) %}<p>{{ n }}.{{ i }}</p>{% endfor %}"  # ~38 KB out

    async def main() -> tuple[str, list[int]]:
        async with Jail(2, replace(LIMITS, output_chars=5_000_000)) as jail:
            big = await jail.call(render_html, "{{ s }}{{ s }}", {"s": "x" * 1_500_000}, 5_000_000)
            sizes = []
            for _ in range(10):  # two calls a slot at once, as a renderer's pages do
                calls = [jail.call(render_html, rows, {"n": n, "rows": 3000}, 10**6)
                         for n in range(4)]  # fmt: skip
                sizes += [len(out) for out in await asyncio.gather(*calls)]
            return big, sizes

    big, sizes = uvloop.run(main())
    assert big == "x" * 3_000_000
    assert sizes == [37_890] * 40


async def test_other_calls_go_on_while_one_worker_is_stuck(jail: Jail):
    bomb = asyncio.ensure_future(render(jail, LOOP_BOMB))
    started = time.monotonic()
    assert await render(jail, "{{ 1 + 1 }}") == "2"
    assert time.monotonic() - started < 1.0  # the second slot answered, not after the bomb
    with pytest.raises(TemplateError):
        await bomb


async def test_the_job_source_is_its_url_its_html_or_its_template_rendered_in_the_jail(
    jail: Jail,
):
    url = events.JobSubmitted(job_id="j", url="https://example.com/")
    assert await source_of(url, jail) == Url("https://example.com/")
    html = events.JobSubmitted(job_id="j", html="<p>{{x}}</p>")
    assert await source_of(html, jail) == Html("<p>{{x}}</p>")
    templated = events.JobSubmitted(job_id="j", template="<p>{{x}}</p>", data={"x": "hi"})
    assert await source_of(templated, jail) == Html("<p>hi</p>")


async def test_the_sandbox_still_refuses_python_internals(jail: Jail):
    with pytest.raises(TemplateError, match="unsafe"):
        await render(jail, "{{ cycler.__init__.__globals__ }}")
    with pytest.raises(TemplateError, match="undefined"):
        await render(jail, "{{ missing }}")


async def test_a_loop_bomb_job_fails_at_once_and_the_next_job_is_not_held_up(
    settings: Settings,
):
    stack = Stack(replace(settings, template_timeout=6.0))
    await stack.start()
    try:
        bomb = await stack.submit({"template": LOOP_BOMB})
        plain = await stack.submit({"template": "<p>{{ n }}</p>", "data": {"n": 1}})
        started = time.monotonic()
        done = await stack.finished(plain["id"], timeout=30)
        done_at = time.monotonic()
        assert done["status"] == "done"
        failed = await stack.finished(bomb["id"], timeout=30)
        assert (failed["status"], failed["attempts"]) == ("failed", 1)
        assert failed["error"]["type"] == "template"
        assert "took longer than 6 s and was stopped" in failed["error"]["message"]
        waited = done_at - started
        print(f"\n[jail] the plain job behind the bomb: done in {waited:.1f}s")
        assert waited < 6.0  # not after the bomb: a worker of its own
    finally:
        await stack.close()


async def test_a_compile_bomb_is_a_400_and_healthz_stays_fast(settings: Settings):
    stack = Stack(replace(settings, template_timeout=2.0))
    await stack.start("gateway")
    slowest = 0.0
    try:
        body = {"name": "bomb", "body": "{{a}}" * 150_000}
        posting = asyncio.ensure_future(
            call(stack.client, "POST", f"{stack.url}/templates", json=body)
        )
        async with aiohttp.ClientSession() as anonymous:
            while not posting.done():
                started = time.monotonic()
                async with anonymous.get(f"{stack.url}/healthz") as response:
                    assert response.status == 200
                slowest = max(slowest, time.monotonic() - started)
                await asyncio.sleep(0.05)
        status, answer, _ = posting.result()
        assert (status, answer["error"]["field"]) == (400, "body"), answer
        assert "compiling the template took longer than 2 s" in answer["error"]["message"]
        assert slowest < 0.1, f"/healthz took {slowest * 1000:.0f} ms while the bomb compiled"
        print(f"\n[jail] /healthz while a compile bomb ran: slowest {slowest * 1000:.0f} ms")
        ok = await call(stack.client, "POST", f"{stack.url}/templates",
                        json={"name": "fine", "body": "<p>{{ n }}</p>"})  # fmt: skip
        assert ok[0] == 201
    finally:
        await stack.close()

"""One tenant's heavy templates cannot stall another tenant's template uploads.

Verifies, on the real gateway with its default pool of two template workers and a 3 s
compile limit: while one tenant posts compile bombs (each takes the whole limit, then its
worker is killed and replaced) from three clients in a loop, another tenant's
`POST /templates` answers within 1 s of its idle latency, measured on the same stack in
the same test; the heavy tenant gets 429 `compile_limited` with `Retry-After` for every
request beyond its one compile in flight, and a 400 naming the limit for each bomb that
ran. A tenant over its template rate gets 429 too, before any work is queued, and the
pool's own queue is bounded: past it, 503 with `Retry-After`.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import replace
from typing import Any

from services.core.runtime.settings import Settings
from tests.conftest import Stack, Tenant, eventually
from tests.integration.test_tenants import call

BOMB = {"name": "bomb", "body": "{{a}}" * 150_000}
"""Compiles for several seconds: always stopped at the compile limit."""

LIGHT_ROUNDS = 10
LIGHT_EVERY = 0.2
"""The light tenant's uploads are spread over 2 s, inside the heavy tenant's bombs."""

BOUND = 1.0
"""Seconds a light upload may take beyond its idle latency while bombs compile: a third
of the 3 s compile limit, which is what waiting behind one bomb would cost."""


async def upload(stack: Stack, tenant: Tenant, body: dict[str, Any]) -> tuple[int, Any, Any]:
    return await call(tenant.http, "POST", f"{stack.url}/templates", json=body)


async def latencies(stack: Stack, tenant: Tenant, rounds: int) -> list[float]:
    """Seconds each of `rounds` small uploads took, `LIGHT_EVERY` apart; each is a 201."""
    took = []
    for n in range(rounds):
        started = time.monotonic()
        small = {"name": f"light-{n}", "body": "<p>{{ n }}</p>"}
        status, body, _ = await upload(stack, tenant, small)
        took.append(time.monotonic() - started)
        assert status == 201, body
        await asyncio.sleep(LIGHT_EVERY)  # pacing, not a wait for anything
    return took


async def test_heavy_templates_of_one_tenant_do_not_stall_anothers_uploads(settings: Settings):
    stack = Stack(replace(settings, template_timeout=3.0))
    await stack.start("gateway")
    answers: list[tuple[int, Any, Any]] = []
    hammering: list[asyncio.Task[None]] = []
    stop = asyncio.Event()
    try:
        heavy, light = await stack.new_tenant(), await stack.new_tenant()
        idle = await latencies(stack, light, LIGHT_ROUNDS)

        async def hammer() -> None:
            """A client that posts bombs and tries again five times a second when refused."""
            while not stop.is_set():
                answers.append(await upload(stack, heavy, BOMB))
                if answers[-1][0] == 429:
                    await asyncio.sleep(0.2)

        hammering += [asyncio.create_task(hammer()) for _ in range(3)]
        busy = await latencies(stack, light, LIGHT_ROUNDS)
    finally:
        stop.set()
        await asyncio.gather(*hammering, return_exceptions=True)
        await stack.close()
    print(
        f"\n[templates] light tenant's POST /templates: idle max {max(idle) * 1000:.0f} ms, "
        f"while another posts bombs max {max(busy) * 1000:.0f} ms; heavy answers: "
        f"{sorted({status for status, _, _ in answers})}, {len(answers)} in all"
    )
    assert max(busy) < max(idle) + BOUND, (idle, busy)
    statuses = [status for status, _, _ in answers]
    assert set(statuses) == {400, 429}, statuses
    for status, body, headers in answers:
        if status == 429:
            assert body["error"]["type"] == "compile_limited", body
            assert "PRESSROOM_TEMPLATE_CONCURRENCY" in body["error"]["message"]
            assert int(headers["Retry-After"]) >= 1
        else:
            assert body["error"]["field"] == "body"
            assert "took longer than 3 s" in body["error"]["message"]


async def test_over_the_template_rate_is_429_and_a_full_pool_queue_is_503(settings: Settings):
    stack = Stack(
        replace(
            settings,
            template_timeout=2.0,
            template_rate=0.2,
            template_burst=2,
            template_workers=1,
            template_queue=1,
        )
    )
    await stack.start("gateway")
    try:
        tenant, others = await stack.new_tenant(), [await stack.new_tenant() for _ in range(2)]
        small = {"name": "small", "body": "<p>{{ n }}</p>"}
        assert [(await upload(stack, tenant, small))[0] for _ in range(2)] == [201, 201]
        status, body, headers = await upload(stack, tenant, small)
        assert (status, body["error"]["type"]) == (429, "compile_limited"), body
        assert "PRESSROOM_TEMPLATE_RATE" in body["error"]["message"]
        assert 1 <= int(headers["Retry-After"]) <= 5

        # One worker, one place in its queue: two bombs fill both, a third tenant's upload
        # is refused at once rather than queued behind them.
        bombs = [asyncio.ensure_future(upload(stack, other, BOMB)) for other in others]
        started = time.monotonic()
        status, body, headers = await eventually(
            lambda: _refused_by_the_pool(stack, tenant, small), 10, "the pool's queue full"
        )
        assert time.monotonic() - started < 2.0  # refused, not queued behind the bombs
        assert "PRESSROOM_TEMPLATE_QUEUE" in body["error"]["message"]
        assert int(headers["Retry-After"]) >= 1
        assert [answer[0] for answer in await asyncio.gather(*bombs)] == [400, 400]
    finally:
        await stack.close()


async def _refused_by_the_pool(
    stack: Stack, tenant: Tenant, body: dict[str, Any]
) -> tuple[int, Any, Any] | None:
    answer = await upload(stack, tenant, body)
    return answer if answer[0] == 503 else None

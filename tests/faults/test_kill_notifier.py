"""A notifier SIGKILLed in the middle of a retry schedule loses no webhook.

Verifies, with a receiver that answers 500 to the first two attempts for each job and
200 afterwards, a schedule of 0, 3, 3, 3 s, and the notifier SIGKILLed after every job's
first attempt and replaced:
- every job's webhook is finally delivered (a 200 was answered for each job);
- every attempt for one job carries the same `webhook-id`, and each verifies with the
  standardwebhooks library;
- every job ends `done` exactly once (the usual closing check).
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp import web
from standardwebhooks.webhooks import Webhook

from tests.conftest import serving
from tests.faults.harness import Cluster, assert_no_job_left_behind, poll, small_job

JOBS = 5


class FlakyReceiver:
    def __init__(self) -> None:
        self.calls: dict[str, list[tuple[str, int]]] = defaultdict(list)
        self.url = ""
        self.secret = ""

    async def handle(self, request: web.Request) -> web.Response:
        body = await request.read()
        Webhook(self.secret).verify(body, dict(request.headers))
        job_id = json.loads(body)["data"]["id"]
        status = 500 if len(self.calls[job_id]) < 2 else 200
        self.calls[job_id].append((request.headers["webhook-id"], status))
        return web.Response(status=status)

    def delivered(self) -> int:
        return sum(any(s == 200 for _, s in calls) for calls in self.calls.values())


@pytest.fixture
async def flaky() -> AsyncIterator[FlakyReceiver]:
    receiver = FlakyReceiver()
    app = web.Application()
    app.router.add_post("/hook", receiver.handle)
    async with serving(app) as base:
        receiver.url = f"{base}/hook"
        yield receiver


async def test_killed_notifier_mid_retry_loses_no_webhook(
    cluster: Cluster, flaky: FlakyReceiver
) -> None:
    await cluster.up(PRESSROOM_WEBHOOK_SCHEDULE="0,3,3,3", PRESSROOM_WEBHOOK_TIMEOUT="2")
    flaky.secret = cluster.tenant.webhook_secret  # a tenant's own secret signs its webhooks
    notifier = next(s for s in cluster.services if s.name == "notifier")

    def job(n: int) -> dict[str, Any]:
        return {**small_job(n), "webhook_url": flaky.url}

    await cluster.submit_many(JOBS, job=job)

    async def first_attempts() -> bool:
        return len(flaky.calls) == JOBS

    await poll(first_attempts, 60, "a first webhook attempt for every job")
    cluster.kill(notifier)
    cluster.start("notifier")

    async def all_delivered() -> bool:
        return flaky.delivered() == JOBS

    await poll(all_delivered, 60, "every webhook delivered")
    await assert_no_job_left_behind(cluster, "kill_notifier", timeout=60)
    for calls in flaky.calls.values():
        assert len({webhook_id for webhook_id, _ in calls}) == 1
        assert [s for _, s in calls][:3] == [500, 500, 200]
    print(f"kill_notifier: {sum(len(c) for c in flaky.calls.values())} attempts, all delivered")

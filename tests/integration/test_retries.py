"""Transient failures retry with backoff and end `failed` with the root cause when they run out."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import replace

import pytest
from aiohttp import web

from services.core.runtime.settings import Settings
from tests.conftest import Stack, free_port, serving
from tests.integration.test_pipeline import HELLO, job_events

# A page that, once loaded, asks for /hang: an answer the server holds back until the test
# ends, so the page's network never goes idle.
BUSY_PAGE = "<p>busy</p><script>fetch('/hang')</script>"


async def test_unreachable_storage_retries_then_fails_with_root_cause(settings: Settings):
    dead_s3 = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    stack = Stack(
        replace(
            settings,
            storage="s3",
            s3_endpoint=dead_s3,
            s3_access_key="x",
            s3_secret_key="x",
            max_attempts=3,
        )
    )
    await stack.start()
    try:
        job = await stack.finished((await stack.submit(HELLO))["id"], timeout=90)
        events = await job_events(stack, job["id"])
    finally:
        await stack.close()
    assert job["status"] == "failed"
    assert job["attempts"] == 3
    assert job["error"]["type"] == "storage"
    assert job["error"]["message"].startswith("gave up after 3 attempts: cannot upload")
    assert dead_s3 in job["error"]["message"]
    assert events == [
        "submitted", "started", "retrying", "started", "retrying", "started", "failed",
    ]  # fmt: skip


async def test_output_over_the_limit_fails_at_once(settings: Settings):
    stack = Stack(replace(settings, max_output_bytes=2048))
    await stack.start()
    try:
        job = await stack.finished((await stack.submit(HELLO))["id"])
    finally:
        await stack.close()
    assert job["status"] == "failed"
    assert job["attempts"] == 1
    assert job["error"]["type"] == "output_too_large"
    assert "over the limit of 2048" in job["error"]["message"]


async def test_render_longer_than_ack_wait_is_not_redelivered(settings: Settings):
    """Heartbeats (in-progress acks every ack_wait/3) keep a live render's message: a
    render of ~3 s with a 1.5 s ack wait is attempted once and started once."""
    stack = Stack(replace(settings, ack_wait=1.5, render_timeout=20.0))
    await stack.start()
    try:
        body = {
            "html": "<p>slow</p><script>setTimeout(() => { window.ready = true }, 3000)</script>",
            "options": {"wait_for": {"expression": "window.ready === true"}},
        }
        job = await stack.finished((await stack.submit(body))["id"])
        events = await job_events(stack, job["id"])
    finally:
        await stack.close()
    assert job["status"] == "done", job
    assert job["attempts"] == 1
    assert job["render_ms"] >= 3000
    assert events == ["submitted", "started", "done"]


async def test_a_page_that_crashes_its_tab_twice_fails_instead_of_using_every_attempt(
    settings: Settings,
):
    """A memory eater crashes its tab; the retry crashes it again; the job then fails as
    `page_crashed` on attempt 2 of 5 (it used to burn all of them)."""
    eater = "<script>let a = []; while (true) a.push(new Array(1e6).fill(1.5));</script>"
    stack = Stack(replace(settings, max_attempts=5))
    await stack.start()
    try:
        job = await stack.finished((await stack.submit({"html": eater}))["id"], timeout=90)
        events = await job_events(stack, job["id"])
        beside = await stack.finished((await stack.submit(HELLO))["id"])
    finally:
        await stack.close()
    assert (job["status"], job["attempts"]) == ("failed", 2)
    assert job["error"]["type"] == "page_crashed"
    assert job["error"]["message"] == (
        "the page crashed its tab (out of memory, or a renderer fault), on two attempts in a row"
    )
    assert events == ["submitted", "started", "retrying", "started", "failed"]
    assert beside["status"] == "done"


@pytest.fixture
async def busy_site() -> AsyncIterator[str]:
    """A loopback site whose /busy page keeps one request open for as long as the test."""
    over = asyncio.Event()

    async def busy(request: web.Request) -> web.Response:
        return web.Response(text=BUSY_PAGE, content_type="text/html")

    async def hang(request: web.Request) -> web.Response:
        await over.wait()
        return web.Response(text="late")

    app = web.Application()
    app.router.add_get("/busy", busy)
    app.router.add_get("/hang", hang)
    async with serving(app) as base:
        yield base
        over.set()


async def test_a_network_that_never_goes_idle_is_retried_then_fails_with_the_cause(
    settings: Settings, busy_site: str
):
    """`network_idle` not reached in time is transient (the open requests are the
    network's): every attempt is used, and the job fails naming the request still open."""
    stack = Stack(replace(settings, max_attempts=2))
    await stack.start()
    try:
        body = {
            "url": f"{busy_site}/busy",
            "options": {"wait_for": {"network_idle": True, "timeout": 0.5}},
        }
        job = await stack.finished((await stack.submit(body))["id"])
        events = await job_events(stack, job["id"])
    finally:
        await stack.close()
    assert (job["status"], job["attempts"]) == ("failed", 2)
    assert job["error"]["type"] == "timeout"
    assert job["error"]["message"] == (
        "gave up after 2 attempts: wait_for.network_idle: the network was still busy after "
        f"0.5 s (1 requests open, e.g. {busy_site}/hang)"
    )
    assert events == ["submitted", "started", "retrying", "started", "failed"]

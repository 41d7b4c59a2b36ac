"""Crashes mid-batch: a bulk run still ends once, with every item rendered once, one archive.

Verifies, with the services as real processes (`harness.Cluster`) and a batch of 60 small
items, each rendering its own number:
- a renderer SIGKILLed (with its Chromium) while it has items in flight, and a new one
  started: the batch ends `done` with 60 done; the items the dead renderer had started are
  rendered again by the new one;
- every service SIGKILLed part-way (NATS and PostgreSQL stay up) and all started again:
  the same ending;
and in both cases, read from the log itself: each item has one submission and exactly one
terminal event, the batch exactly one terminal event (`batches.<id>.done`), and the
archive behind the batch's url holds 60 PDFs and `manifest.json`, each sampled PDF holding
its own item's number.

And, with no renderer running and a batch of 3,000 items paused as soon as it is accepted,
the conductor SIGKILLed while it is expanding them and a new one started: once the
submission is handled again (after the conductor durable's 15 s ack wait, which is most
of this test's time), each item was submitted exactly once (3,000 distinct
`jobs.<id>.<i>.submitted` subjects, one message each), the batch reads `paused`, and
cancelled it ends `cancelled` with all 3,000 items cancelled.
"""

from __future__ import annotations

import io
import json
import time
import zipfile
from collections import Counter
from typing import Any

import aiohttp
from pypdf import PdfReader

from tests.faults.harness import Cluster, Service, poll

ITEMS = 60
TEMPLATE = "<h1>Item {{ n }}</h1>"
SLOW = {
    "template": TEMPLATE
    + '<script>setTimeout(() => { document.body.dataset.ready = "1"; }, 150);</script>',
    "options": {"wait_for": {"selector": "body[data-ready]"}},
}
"""Items that take 150 ms or more to render, so that a renderer killed while it renders
some is killed mid-render: the bare `TEMPLATE` prints in ~10 ms on a fast day, and a kill
that followed the look at `renders_in_flight` could find its renders already done."""
ENDED = ("done", "failed", "cancelled")


def numbered(count: int) -> list[dict[str, Any]]:
    """Items whose documents can be told apart: `N-00017` in item 17's."""
    return [{"data": {"n": f"N-{i:05d}"}} for i in range(count)]


async def submit_batch(cluster: Cluster, body: dict[str, Any]) -> str:
    async with cluster.http.post(f"{cluster.url}/batches", json=body) as response:
        assert response.status == 202, await response.text()
        batch_id: str = (await response.json())["id"]
        return batch_id


async def batch_status(cluster: Cluster, batch_id: str) -> dict[str, Any]:
    """GET /batches/{id}; `{}` while the gateway cannot answer (it is being restarted)."""
    try:
        async with cluster.http.get(f"{cluster.url}/batches/{batch_id}") as response:
            if response.status != 200:
                return {}
            body: dict[str, Any] = await response.json()
            return body
    except aiohttp.ClientError:
        return {}


async def ended_batch(cluster: Cluster, batch_id: str, timeout: float) -> dict[str, Any]:
    async def ended() -> dict[str, Any] | None:
        cluster.check_alive()
        batch = await batch_status(cluster, batch_id)
        return batch if batch.get("status") in ENDED else None

    result: dict[str, Any] = await poll(ended, timeout, f"batch {batch_id} ended", interval=0.25)
    return result


async def subjects(cluster: Cluster, pattern: str) -> dict[str, int]:
    """Messages on the JOBS stream per subject matching `pattern`, as the log holds them."""
    async with cluster.jetstream() as js:
        info = await js.stream_info("JOBS", subjects_filter=pattern)
    return dict(info.state.subjects or {})


async def item_events(cluster: Cluster, batch_id: str, event: str) -> dict[int, int]:
    """Item index -> how many `event` messages the log holds for it."""
    found = await subjects(cluster, f"jobs.{batch_id}.*.{event}")
    return {int(subject.split(".")[2]): count for subject, count in found.items()}


async def some_done_and_rendering(cluster: Cluster, batch_id: str, renderer: Service) -> float:
    """Wait until a sixth of the items are done and `renderer` has renders in flight; how
    many it has. Fails if the batch ended first (the crash would then prove nothing)."""

    async def progressed() -> bool:
        batch = await batch_status(cluster, batch_id)
        assert batch.get("status") not in ENDED, f"the batch ended before the crash: {batch}"
        return int(batch.get("done", 0)) >= ITEMS // 6

    await poll(progressed, 60, f"{ITEMS // 6} items done")
    in_flight: float = await poll(renderer.renders_in_flight, 10, "renders in flight", 0.01)
    return in_flight


async def assert_ended_once_with_one_archive(cluster: Cluster, batch_id: str) -> None:
    """The batch's end as the user sees it and as the log holds it; see the module doc."""
    batch = await ended_batch(cluster, batch_id, timeout=90)
    assert batch["status"] == "done", batch
    counts = (batch["total"], batch["done"], batch["failed"], batch["cancelled"])
    assert counts == (ITEMS, ITEMS, 0, 0), batch

    submitted = await item_events(cluster, batch_id, "submitted")
    assert submitted == dict.fromkeys(range(ITEMS), 1), f"submissions per item: {submitted}"
    terminal: Counter[int] = Counter()
    for event in ENDED:
        terminal.update(await item_events(cluster, batch_id, event))
    assert dict(terminal) == dict.fromkeys(range(ITEMS), 1), f"ends per item: {terminal}"
    ends = await subjects(cluster, f"batches.{batch_id}.*")
    batch_ends = {s: n for s, n in ends.items() if s.rsplit(".", 1)[1] in ENDED}
    assert batch_ends == {f"batches.{batch_id}.done": 1}, f"the batch's ends: {ends}"

    async with aiohttp.ClientSession() as http, http.get(batch["url"]) as response:
        assert response.status == 200, await response.text()
        archive = zipfile.ZipFile(io.BytesIO(await response.read()))
    documents = [name for name in archive.namelist() if name.endswith(".pdf")]
    assert len(documents) == len(set(documents)) == ITEMS, archive.namelist()
    assert archive.namelist()[-1] == "manifest.json"
    manifest = json.loads(archive.read("manifest.json"))
    entries = {item["index"]: item for item in manifest["items"]}
    assert sorted(entries) == list(range(ITEMS))
    assert all(item["status"] == "done" for item in entries.values()), manifest
    for index in (0, 17, ITEMS - 1):
        pdf = PdfReader(io.BytesIO(archive.read(entries[index]["filename"])))
        text = "".join(page.extract_text() for page in pdf.pages)
        assert f"N-{index:05d}" in text, (index, text)


async def restarted_items(cluster: Cluster, batch_id: str, worker: str) -> set[str]:
    """Items `worker` started that another worker started again afterwards."""
    started = [s for s in await cluster.started_events() if s[0].startswith(f"{batch_id}.")]
    return {
        job_id
        for job_id, who, attempt, _ in started
        if who == worker
        and any(j == job_id and w != worker and n > attempt for j, w, n, _ in started)
    }


async def test_a_renderer_killed_mid_batch_leaves_one_end_per_item_and_one_archive(
    cluster: Cluster,
) -> None:
    await cluster.up(renderers=1)
    victim = cluster.renderers()[0]
    batch_id = await submit_batch(cluster, {**SLOW, "items": numbered(ITEMS)})
    in_flight = await some_done_and_rendering(cluster, batch_id, victim)
    cluster.kill(victim)
    killed_at = time.monotonic()
    cluster.start("renderer")

    await assert_ended_once_with_one_archive(cluster, batch_id)
    again = await restarted_items(cluster, batch_id, victim.worker)
    print(
        f"\n[faults] batch_kill_renderer: killed with {in_flight:g} in flight; "
        f"{len(again)} items rendered again; ended {time.monotonic() - killed_at:.1f}s later"
    )
    assert again, "no item the killed renderer had started was rendered again"


async def test_the_whole_stack_killed_mid_batch_ends_it_once_with_one_archive(
    cluster: Cluster,
) -> None:
    await cluster.up(renderers=1)
    renderer = cluster.renderers()[0]
    batch_id = await submit_batch(cluster, {"template": TEMPLATE, "items": numbered(ITEMS)})
    in_flight = await some_done_and_rendering(cluster, batch_id, renderer)
    progress = await batch_status(cluster, batch_id)
    for service in list(cluster.services):
        if service.alive():
            cluster.kill(service)
    killed_at = time.monotonic()
    await cluster.up(renderers=1)

    await assert_ended_once_with_one_archive(cluster, batch_id)
    print(
        f"\n[faults] batch_kill_stack: killed everything at {progress.get('done')}/{ITEMS} "
        f"done with {in_flight:g} in flight; ended {time.monotonic() - killed_at:.1f}s later"
    )


EXPANDED = 3000


async def control(cluster: Cluster, batch_id: str, action: str) -> dict[str, Any]:
    async with cluster.http.post(f"{cluster.url}/batches/{batch_id}/{action}") as response:
        assert response.status == 202, await response.text()
        body: dict[str, Any] = await response.json()
        return body


async def test_the_conductor_killed_mid_expansion_submits_each_item_once(
    cluster: Cluster,
) -> None:
    await cluster.up(renderers=0)  # only the expansion is under test: nothing renders
    items = [{"data": {"n": i}} for i in range(EXPANDED)]
    batch_id = await submit_batch(cluster, {"template": "<p>{{ n }}</p>", "items": items})
    await control(cluster, batch_id, "pause")
    durable = f"bulk-{batch_id}"

    async def expanding() -> int | None:
        info = await cluster.consumer_info(durable)
        return None if info is None or not info.num_pending else int(info.num_pending)

    await poll(expanding, 30, "the expansion under way", interval=0.01)
    conductor = cluster.running("conductor")[0]
    cluster.kill(conductor)
    at_kill = len(await item_events(cluster, batch_id, "submitted"))
    assert at_kill < EXPANDED, "the expansion ended before the conductor was killed"
    cluster.start("conductor")
    killed_at = time.monotonic()

    async def expanded() -> bool:
        cluster.check_alive()
        return len(await item_events(cluster, batch_id, "submitted")) >= EXPANDED

    await poll(expanded, 120, f"{EXPANDED} items submitted", interval=0.5)
    expanded_in = time.monotonic() - killed_at
    submitted = await item_events(cluster, batch_id, "submitted")
    again = {index: n for index, n in submitted.items() if n != 1}
    assert sorted(submitted) == list(range(EXPANDED)), "items missing from the expansion"
    assert not again, f"items submitted more than once: {dict(list(again.items())[:10])}"
    assert (await batch_status(cluster, batch_id))["status"] == "paused"

    await control(cluster, batch_id, "cancel")
    batch = await ended_batch(cluster, batch_id, timeout=90)
    counts = (batch["status"], batch["done"], batch["failed"], batch["cancelled"])
    assert counts == ("cancelled", 0, 0, EXPANDED), batch
    print(
        f"\n[faults] batch_kill_conductor: killed at {at_kill}/{EXPANDED} submitted; "
        f"all submitted {expanded_in:.1f}s after the restart"
    )

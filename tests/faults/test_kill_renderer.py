"""A renderer SIGKILLed mid-batch loses nothing: its jobs come back after the ack wait.

Verifies, with two renderer processes working through 200 small jobs:
- one renderer process is SIGKILLed (the process alone, while it has renders in flight) once
  about 30% of the jobs are done, and a replacement is started;
- every one of the 200 jobs ends `done`, with exactly one terminal event and one object;
- each job the killed renderer had started but not finished is rendered again by another
  renderer, and not before the ack wait ran out (no earlier: nothing else hands it back);
- how many of the killed renderer's processes (its Chromium) were still alive right after it
  died is printed (the harness kills them, as the end of a container would).
"""

from __future__ import annotations

import time

from tests.faults.harness import Cluster, assert_no_job_left_behind, poll, session_members

JOBS = 200


async def _redeliveries(cluster: Cluster, worker: str) -> dict[str, float]:
    """Jobs `worker` started and another worker started again: id → seconds in between."""
    started = await cluster.started_events()
    gaps: dict[str, float] = {}
    for job_id, who, attempt, at in started:
        if who != worker:
            continue
        later = [a for j, w, n, a in started if j == job_id and n > attempt]
        if later:
            gaps[job_id] = min(later) - at
    return gaps


async def test_killed_renderer_jobs_are_redelivered_and_done_once(cluster: Cluster) -> None:
    await cluster.up(renderers=2)
    victim = cluster.renderers()[0]
    await cluster.submit_many(JOBS)

    async def thirty_percent_done() -> bool:
        return await cluster.count_events("done") >= JOBS * 0.3

    await poll(thirty_percent_done, 90, "30% of the jobs done")
    done_at_kill = await cluster.count_events("done")
    in_flight = await poll(victim.renders_in_flight, 10, "the victim rendering", interval=0.01)
    killed_at = time.monotonic()
    outlived = cluster.kill(victim, reap=False)

    async def all_gone() -> bool:  # by themselves: parent-death signals, no reaper
        return not session_members(victim.pid)

    # Chromium, and the template jail's forkserver, workers and resource tracker.
    await poll(all_gone, 10, "the killed renderer's processes gone by themselves")
    cluster.start("renderer")

    await assert_no_job_left_behind(cluster, "kill_renderer", timeout=120)
    gaps = await _redeliveries(cluster, victim.worker)
    print(
        f"[faults] kill_renderer: killed pid {victim.pid} with {in_flight:g} renders in flight "
        f"at {done_at_kill}/{JOBS} done; {outlived} of its (Chromium) processes "
        f"were still alive right after it died; redelivered {len(gaps)} jobs after "
        f"{min(gaps.values(), default=0):.2f} to {max(gaps.values(), default=0):.2f}s; "
        f"finished {time.monotonic() - killed_at:.1f}s after the kill"
    )
    assert gaps, "no job the killed renderer had in hand was rendered again"
    early = {j: g for j, g in gaps.items() if g < cluster.ack_wait - 0.5}
    assert not early, f"redelivered before the ack wait of {cluster.ack_wait}s: {early}"

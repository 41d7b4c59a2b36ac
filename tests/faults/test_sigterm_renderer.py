"""A renderer stopped with SIGTERM mid-batch exits cleanly and costs no job anything.

Verifies, with two renderers working through 60 jobs (every fifth one a slow, 90-page one),
SIGTERM sent to one of them once 10 are done, while it has renders in flight and at least
20 jobs are not yet done:
- it exits with status 0 within PRESSROOM_SHUTDOWN_GRACE (5 s) plus 5 s, and none of its
  processes (its Chromium) outlives it;
- every job ends `done` exactly once, with one object;
- no job it had started waits out the ack wait: each either finished there or was handed
  back and started again elsewhere sooner than the ack wait.
"""

from __future__ import annotations

from typing import Any

from tests.faults.harness import (
    Cluster,
    assert_no_job_left_behind,
    poll,
    session_members,
    slow_job,
    small_job,
)

JOBS = 60
GRACE = 5.0


def mixed_job(n: int) -> dict[str, Any]:
    """Every fifth job is a slow one, so a render in flight at the signal takes a while."""
    return slow_job(n) if n % 5 == 0 else small_job(n)


async def test_sigterm_renderer_exits_zero_and_every_job_is_done_once(cluster: Cluster) -> None:
    await cluster.up(renderers=2, PRESSROOM_SHUTDOWN_GRACE=str(GRACE))
    victim = cluster.renderers()[0]
    await cluster.submit_many(JOBS, job=mixed_job)

    async def some_done() -> bool:
        return await cluster.count_events("done") >= 10

    await poll(some_done, 60, "10 jobs done")
    done_at_signal = await cluster.count_events("done")
    in_flight = await poll(victim.renders_in_flight, 10, "the victim rendering", interval=0.01)
    code, seconds = await cluster.terminate(victim, timeout=GRACE + 10)

    async def no_leftovers() -> bool:
        return not session_members(victim.pid)

    await poll(no_leftovers, 5, "the stopped renderer's processes gone")
    outcome = await assert_no_job_left_behind(cluster, "sigterm_renderer", timeout=90)
    started = await cluster.started_events()
    mine = [(job, attempt, at) for job, who, attempt, at in started if who == victim.worker]
    again = {
        job: min(a for j, _, n, a in started if j == job and n > attempt) - at
        for job, attempt, at in mine
        if any(j == job and n > attempt for j, _, n, _ in started)
    }
    print(
        f"[faults] sigterm_renderer: SIGTERM with {in_flight:g} renders in flight, "
        f"{JOBS - done_at_signal} jobs not done; exit {code} after {seconds:.2f}s; it started "
        f"{len(mine)} jobs, {len(again)} of them were started again elsewhere "
        f"{sorted(round(g, 2) for g in again.values())}; {len(outcome.statuses)} jobs done"
    )
    assert code == 0, f"exit status {code} after {seconds:.1f}s"
    assert seconds < GRACE + 5, f"took {seconds:.1f}s to exit"
    assert JOBS - done_at_signal >= 20, f"only {JOBS - done_at_signal} jobs were left"
    slow = {job: gap for job, gap in again.items() if gap >= cluster.ack_wait}
    assert not slow, f"jobs that waited out the ack wait after the SIGTERM: {slow}"

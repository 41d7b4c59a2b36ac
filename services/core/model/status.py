"""The statuses a job goes through, as the projection stores them and the API shows them.

    queued ──> running ──> done
      ^           │   └──> failed
      └───────────┘        cancelled (from queued or running, on request)

`retrying` puts a running job back to `queued`. The three terminal statuses are also the
tags of the events that end a job (`events.JobDone`, `JobFailed`, `JobCancelled`), so a
terminal event's tag is its job's status.

A `StrEnum`: each member is its value wherever a string goes (JSON answers, SQL
parameters, metric labels), so using it changes nothing on the wire.
"""

from __future__ import annotations

from enum import StrEnum


class JobStatus(StrEnum):
    """Where a job is: `queued` (waiting for a renderer, or for a retry), `running`, then
    one of `done`, `failed` and `cancelled`, which never change again."""

    QUEUED = "queued"
    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"
    CANCELLED = "cancelled"

    @property
    def terminal(self) -> bool:
        """Whether the job has ended: a terminal status never changes again."""
        return self in TERMINAL


TERMINAL = frozenset({JobStatus.DONE, JobStatus.FAILED, JobStatus.CANCELLED})
UNFINISHED = frozenset({JobStatus.QUEUED, JobStatus.RUNNING})


class BatchStatus(StrEnum):
    """The statuses of a batch (`batches.status`): queued until the conductor expands it,
    running (or paused on request) while its items render, then one terminal status."""

    QUEUED = "queued"
    RUNNING = "running"
    PAUSED = "paused"
    DONE = "done"
    FAILED = "failed"
    CANCELLED = "cancelled"

    @property
    def terminal(self) -> bool:
        """Whether the batch has ended: its archive (if any) is stored and final."""
        return self in BATCH_TERMINAL


BATCH_TERMINAL = frozenset({BatchStatus.DONE, BatchStatus.FAILED, BatchStatus.CANCELLED})

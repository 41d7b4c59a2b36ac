"""PDF-tools jobs whose input is a job submitted just before them (`PdfInput.after`):
Gotenberg's post-processing in webhook mode, where the printed PDF's job and the job
that post-processes it are both on the log before either runs.

Before such a job reads its inputs, `wait_for_inputs` looks for each input job's end in
the log: not ended yet is a `TransientError` (the job is retried later, with the usual
backoff, as for any transient failure); failed or cancelled fails this job too, with the
input job's error type and message, so its error webhook says what really went wrong.
"""

from __future__ import annotations

from nats.js import JetStreamContext

from services.core.log import timeline
from services.core.model import events
from services.core.model.errors import DeterministicError, TransientError
from services.core.model.errortypes import ErrorType


class InputJobFailed(DeterministicError):
    """The job this one post-processes failed or was cancelled; `kind` is its error's."""

    def __init__(self, message: str, kind: ErrorType) -> None:
        super().__init__(message)
        self.kind = kind


async def wait_for_inputs(js: JetStreamContext, job: events.JobSubmitted) -> None:
    """Return once every `after` input job of `job` is done; see the module docstring."""
    assert job.pdf is not None
    for given in job.pdf.inputs:
        if not given.after or given.job is None:
            continue
        ended = await timeline.terminal_event(js, given.job, direct=True)
        if ended is None:
            raise TransientError(f"job {given.job}, whose PDF this job processes, has not ended")
        if isinstance(ended, events.JobFailed):
            raise InputJobFailed(
                f"job {given.job}, whose PDF this job processes, failed: {ended.error.message}",
                _kind(ended.error.type),
            )
        if not isinstance(ended, events.JobDone):
            raise InputJobFailed(f"job {given.job}, whose PDF this job processes, was cancelled",
                                 ErrorType.DETERMINISTIC)  # fmt: skip


def _kind(name: str) -> ErrorType:
    try:
        return ErrorType(name)
    except ValueError:
        return ErrorType.DETERMINISTIC

"""Settings of how long the files of jobs are kept (`core/database/fileclaims`, the conductor's
`filesweep`).

A base of `AssetSettings` (so of `Settings`: its fields are read the same way from
`PRESSROOM_*` variables), kept apart so the lifetime of stored files is read in one place.
"""

from __future__ import annotations

from dataclasses import dataclass

from services.core.runtime.settingvalues import float_in, var


@dataclass(frozen=True)
class FileSettings:
    """How long a job's files outlive it, and how often the conductor looks."""

    job_files_retention: float = var(
        "PRESSROOM_JOB_FILES_RETENTION",
        86400.0,
        float_in(0, 365 * 86400),
        "a job's files (its uploads; the stored assets it named, once deleted) are kept "
        "this long after the job ended, for redeliveries and re-runs, s",
    )
    file_sweep_interval: float = var(
        "PRESSROOM_FILE_SWEEP_INTERVAL",
        300.0,
        float_in(0.05, 86400),
        "conductor: time between sweeps for files no job, asset or template uses, s",
    )

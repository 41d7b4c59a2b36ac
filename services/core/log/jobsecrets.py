"""A job's passwords, sealed with the server key for as long as they travel and rest.

A PDF-tools job's work (`pdfwork.SECRET_FIELDS`: an input's `password`, an `encrypt`
step's `owner_password` and `user_password`) and a rendering job's `options.encrypt`
hold passwords. The gateway seals each of them for the job (`crypto.ServerKeys.seal`,
the job's id as owner; a batch's `options.encrypt` for the batch, whose items carry its
options) before the submission is published, so neither the log nor
PostgreSQL's `jobs.input` (what the reconciler re-drives) ever holds them in plain text;
the renderer opens them just before the work runs (`opened`). A submission published
before sealing carried plain text: a value that does not look sealed is used as it is.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgspec

from services.core.model import events
from services.core.model.errors import InvalidEvent
from services.core.model.pageoptions import PageOptions
from services.core.model.pdfwork import SECRET_FIELDS, PdfWork
from services.core.secrets.crypto import ServerKeys

SEALED_PREFIXES = ("sealed2:", "sealed1:")
"""How a sealed value begins (`crypto.ServerKeys.seal`, and the form before key ids)."""

_ENCRYPT_SECRETS = ("owner_password", "user_password")


def sealed(job: events.JobSubmitted, keys: ServerKeys) -> events.JobSubmitted:
    """`job` with every password sealed for it."""
    return _each(job, lambda value: keys.seal(value, job.job_id))


def sealed_batch(batch: events.BatchSubmitted, keys: ServerKeys) -> events.BatchSubmitted:
    """`batch` with its `options.encrypt` passwords sealed for it (and so for its items)."""
    options = _options(batch.options, lambda value: keys.seal(value, batch.batch_id))
    return msgspec.structs.replace(batch, options=options)


def opened(job: events.JobSubmitted, keys: Callable[[], ServerKeys]) -> events.JobSubmitted:
    """`job` with every sealed password opened; `InvalidEvent` if one does not open (a
    server key that is not the one that sealed it, or a value sealed for another job).
    `keys` is called only for a job that has a sealed value: a renderer without the
    server key renders every job that has none."""

    def opener(owner: str) -> Callable[[str], str]:
        def unseal(value: str) -> str:
            if not value.startswith(SEALED_PREFIXES):
                return value  # published before passwords were sealed
            try:
                return keys().unseal(value, owner)
            except ValueError as exc:
                raise InvalidEvent(f"a password of the job cannot be opened: {exc}") from None

        return unseal

    # an item's options are its batch's, sealed for the batch
    return _each(job, opener(job.job_id), opener(job.batch_id or job.job_id))


def _each(
    job: events.JobSubmitted,
    change: Callable[[str], str],
    change_options: Callable[[str], str] | None = None,
) -> events.JobSubmitted:
    """`job` with `change` applied to each of its non-empty passwords (`change_options`
    to those of its options, if given)."""
    if job.pdf is not None:
        job = msgspec.structs.replace(job, pdf=_work(job.pdf, change))
    options = _options(job.options, change_options or change)
    return msgspec.structs.replace(job, options=options)


def _options(options: PageOptions, change: Callable[[str], str]) -> PageOptions:
    crypt = options.encrypt
    if crypt is None:
        return options
    changed = {n: change(v) for n in _ENCRYPT_SECRETS if (v := getattr(crypt, n))}
    return msgspec.structs.replace(options, encrypt=msgspec.structs.replace(crypt, **changed))


def _work(work: PdfWork, change: Callable[[str], str]) -> PdfWork:
    inputs = [
        msgspec.structs.replace(given, password=change(given.password)) if given.password else given
        for given in work.inputs
    ]
    steps = [_step(step, change) for step in work.steps]
    return PdfWork(inputs=inputs, steps=steps)


def _step(step: dict[str, Any], change: Callable[[str], str]) -> dict[str, Any]:
    return {
        name: change(value) if name in SECRET_FIELDS and isinstance(value, str) and value else value
        for name, value in step.items()
    }

"""The values a job's row holds sealed with the server key (`jobs.input`, what the
reconciler re-drives), whom each is sealed for, and a row's input with them sealed again.

A job's own values: its `webhook_secret` (the notifier opens it, also after the job
ended, for the webhook's retries), its `page_secrets` (`log/pagesecrets`) and the
passwords of its PDF-tools work (`pdf.inputs[*].password`, a step's `SECRET_FIELDS`;
`log/jobsecrets`). Its `options.encrypt` passwords are sealed for its batch when it is
a batch's item (the batch's options are its items'), for the job otherwise. Only the
renderer opens the passwords and page secrets: once the job has ended nothing ever
will, so `resealed` drops them from an ended job's row instead of sealing them again.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from services.core.model.pdfwork import SECRET_FIELDS
from services.core.secrets import crypto

WEBHOOK_SECRET = "$.webhook_secret"
RENDER_PATHS = (
    "$.page_secrets",
    "$.pdf.inputs[*].password",
    *(f"$.pdf.steps[*].{name}" for name in SECRET_FIELDS),
    "$.options.encrypt.owner_password",
    "$.options.encrypt.user_password",
)
"""Where the values only the renderer opens are (SQL/JSON paths in `jobs.input`)."""
PATHS = (WEBHOOK_SECRET, *RENDER_PATHS)

_ENCRYPT = ("owner_password", "user_password")


def values_sql() -> str:
    """SQL listing every sealed value of `jobs.input` as rows (`id`, `value`)."""
    paths = ", ".join(f"('{path}')" for path in PATHS)
    return (
        "SELECT j.id, v #>> '{}' AS value FROM jobs j "
        f"CROSS JOIN (VALUES {paths}) AS p(path) "
        "CROSS JOIN LATERAL jsonb_path_query(j.input, p.path::jsonpath) AS v "
        "WHERE j.input IS NOT NULL AND jsonb_typeof(v) = 'string' "
        "AND v #>> '{}' LIKE 'sealed%'"
    )


@dataclass
class Changed:
    """What `resealed` did to one row's values."""

    done: int = 0
    dropped: int = 0
    unreadable: int = 0


def resealed(
    job_id: str, given: dict[str, Any], keys: crypto.ServerKeys, *, ended: bool
) -> tuple[dict[str, Any], Changed]:
    """`given` (a job's input) with every value another key sealed sealed again with the
    primary key; an ended job's passwords and page secrets removed instead. A value that
    does not open stays as it was (counted `unreadable`)."""
    changed = Changed()
    primary = f"sealed2:{crypto.key_id(keys.primary)}:"

    def again(owner: str, *, render: bool) -> Callable[[str], str | None]:
        def change(value: str) -> str | None:
            if render and ended:
                changed.dropped += 1
                return None
            if not value.startswith("sealed") or value.startswith(primary):
                return value
            try:
                fresh = keys.seal(keys.unseal(value, owner), owner)
            except ValueError:
                changed.unreadable += 1
                return value
            changed.done += 1
            return fresh

        return change

    own = again(job_id, render=True)
    out = dict(given)
    _apply(out, "webhook_secret", again(job_id, render=False))
    _apply(out, "page_secrets", own)
    _pdf(out, own)
    _encrypt(out, again(str(given.get("batch_id") or job_id), render=True))
    return out, changed


def _apply(holder: dict[str, Any], name: str, change: Callable[[str], str | None]) -> None:
    """`holder[name]` changed (removed when the change gives None), if it is a string."""
    value = holder.get(name)
    if not isinstance(value, str) or not value:
        return
    fresh = change(value)
    if fresh is None:
        del holder[name]
    else:
        holder[name] = fresh


def _pdf(given: dict[str, Any], change: Callable[[str], str | None]) -> None:
    work = given.get("pdf")
    if not isinstance(work, dict):
        return
    work = given["pdf"] = dict(work)
    for part in ("inputs", "steps"):
        entries = [dict(e) if isinstance(e, dict) else e for e in work.get(part) or []]
        for entry in entries:
            if isinstance(entry, dict):
                for name in SECRET_FIELDS:
                    _apply(entry, name, change)
        if part in work:
            work[part] = entries


def _encrypt(given: dict[str, Any], change: Callable[[str], str | None]) -> None:
    options = given.get("options")
    if not isinstance(options, dict) or not isinstance(options.get("encrypt"), dict):
        return
    encrypt = dict(options["encrypt"])
    for name in _ENCRYPT:
        _apply(encrypt, name, change)
    given["options"] = {**options, "encrypt": encrypt}

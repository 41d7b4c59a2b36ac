"""Gotenberg's post-processing fields on a Chromium route (`splitMode`, `flatten`,
`pdfua`, metadata beyond what printing writes) and Gotenberg 9's `stages` (`pipe`, after
those): the form's PDF-tools steps, run on the printed PDF as a second job whose input is
the first (`{"job": <id>}`), so each is an ordinary, durable, metered Pressroom job."""

from __future__ import annotations

from services.gateway.gotenberg import chromium, pdfengines, pipe
from services.gateway.gotenberg.chromium import Mapped
from services.gateway.gotenberg.forms import Form


def convert(form: Form, kind: str) -> Mapped:
    """`chromium.convert`, with the steps the printed PDF needs afterwards."""
    later = Mapped(body={"pdf": {"inputs": [], "steps": []}}, files=[])
    pdfengines.split(form, later, required=False)
    if form.flag("pdfua", False):
        later.body["pdf"]["steps"].append({"step": "pdfua"})
    if form.flag("flatten", False):
        later.body["pdf"]["steps"].append({"step": "flatten"})
    stages = pipe.stages_of(form)  # read before `convert` refuses the fields no one read
    mapped = chromium.convert(form, kind)
    steps = later.body["pdf"]["steps"]
    if mapped.later_metadata or (steps and _printed_metadata(mapped)):
        # every key again: a split's parts are new documents, without the printed Info
        metadata = {**_printed_metadata(mapped), **mapped.later_metadata}
        steps.append({"step": "metadata", **metadata})
    if stages is not None:
        pipe.apply(stages, later, form.files)
        mapped.files = [u for u in mapped.files if u not in later.withheld]
    mapped.later = steps
    return mapped


def _printed_metadata(mapped: Mapped) -> dict[str, str]:
    options = mapped.body.get("options", {})
    return dict(options.get("metadata", {}))


def body(job_id: str, mapped: Mapped, *, after: bool = False) -> dict[str, object]:
    """The second job: the printed PDF through the steps (`after`: submitted before the
    printed job ended, waiting for it)."""
    given: dict[str, object] = {"job": job_id, "after": True} if after else {"job": job_id}
    return {"pdf": {"inputs": [given], "steps": mapped.later}}

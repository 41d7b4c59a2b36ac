"""PDF tools in the client: a PDF-tools job's inputs read from paths or file objects and
sent as the parts of a multipart `POST /jobs`, the steps as the API spells them, and
`POST /validate`.

    job = pressroom.pdf_job(["a.pdf", open("b.pdf", "rb")], [step("merge")])
    job = pressroom.merge("a.pdf", "b.pdf")                 # the same
    pressroom.download(pressroom.wait(job.id), "merged.pdf")
    report = pressroom.validate("invoice.pdf")              # what it claims, and holds

An input is a path, a binary file object, `(name, bytes)`, `Input(source, password)`
for an encrypted file, or what the gateway already has: `{"job": "<id>"}` (an earlier
job's PDF) or `{"asset": "terms.pdf"}` (a stored asset).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from pressroom.client import errors
from pressroom.client.calls import Call, accepted, decoder, segment
from pressroom.client.models import Job

Source = str | os.PathLike[str] | BinaryIO | tuple[str, bytes] | Mapping[str, str]
PDF = "application/pdf"


@dataclass(frozen=True)
class Input:
    """An input and the password that opens it."""

    source: Source
    password: str | None = None


InputLike = Source | Input


def step(name: str, **fields: Any) -> dict[str, Any]:
    """One step as the API spells it: `step("rotate", angle=90)`; None fields left out."""
    return {"step": name, **{k: v for k, v in fields.items() if v is not None}}


@dataclass
class Parts:
    """A job's inputs as the API names them, and the files to upload."""

    inputs: list[dict[str, str]]
    files: list[tuple[str, bytes]]

    def add_file(self, name: str, data: bytes) -> str:
        """Upload `data` as `name` (made unique among the job's files); the name used."""
        taken = {existing for existing, _ in self.files}
        unique, number = name, 1
        while unique in taken:
            number += 1
            stem, dot, suffix = name.rpartition(".")
            unique = f"{stem}-{number}.{suffix}" if dot else f"{name}-{number}"
        self.files.append((unique, data))
        return unique


def parts_of(inputs: Sequence[InputLike], extra: Sequence[Source] = ()) -> tuple[Parts, list[str]]:
    """The parts of a job with `inputs`, and the names of `extra` files (attachments,
    marks) uploaded beside them."""
    parts = Parts([], [])
    for given in inputs:
        password = given.password if isinstance(given, Input) else None
        source = given.source if isinstance(given, Input) else given
        if isinstance(source, Mapping):
            entry = dict(source)
        else:
            entry = {"file": parts.add_file(*read(source))}
        if password is not None:
            entry["password"] = password
        parts.inputs.append(entry)
    names = [parts.add_file(*read(source)) for source in extra if not isinstance(source, Mapping)]
    return parts, names


def read(source: Source) -> tuple[str, bytes]:
    """(name, bytes) of a path, a binary file or a `(name, bytes)` pair."""
    if isinstance(source, Mapping):
        raise errors.ConfigurationError(f"{source} names no local file", type="usage")
    if isinstance(source, tuple):
        return source
    if isinstance(source, (str, os.PathLike)):
        path = Path(source)
        try:
            return path.name, path.read_bytes()
        except OSError as exc:
            raise errors.ConfigurationError(f"cannot read {path}: {exc}", type="usage") from None
    data = source.read()
    name = Path(str(getattr(source, "name", "") or "input.pdf")).name
    return name, data


def pdf_job(
    parts: Parts,
    steps: Sequence[Mapping[str, Any]],
    webhook_url: str | None = None,
    idempotency_key: str | None = None,
) -> Call[Job]:
    """`POST /jobs` with `pdf`: multipart when there are files to upload, else JSON."""
    body: dict[str, Any] = {"pdf": {"inputs": parts.inputs, "steps": [dict(s) for s in steps]}}
    if webhook_url is not None:
        body["webhook_url"] = webhook_url
    headers = {"Idempotency-Key": idempotency_key} if idempotency_key else {}
    files = tuple(parts.files)  # multipart when there are any (`Call.request`)
    return Call("POST", "/jobs", accepted, body=body, headers=headers, files=files)


def validate(data: bytes, name: str, password: str | None) -> Call[dict[str, Any]]:
    """`POST /validate`: the answer's `validation` and `warnings`."""
    headers = {"Content-Type": PDF}
    if password is not None:
        headers["Pdf-Password"] = password
    params = {"name": name}
    return Call("POST", "/validate", decoder(dict[str, Any]), params, headers=headers, content=data)


def report(job_id: str) -> Call[dict[str, Any]]:
    """`GET /jobs/{id}/report`: the report of a done PDF-tools job."""

    def decode(raw: bytes) -> dict[str, Any]:
        answer: dict[str, Any] = decoder(dict[str, Any])(raw)["report"]
        return answer

    return Call("GET", f"/jobs/{segment(job_id)}/report", decode)

"""The two Server-Sent Events routes as the OpenAPI document describes them.

`text/event-stream` is a sequence of messages (`id`, `event`, `data`), which OpenAPI 3.1
has no type for; the answer's schema is therefore an array of message objects, one
component per stream (`JobStreamMessage`, `BatchStreamMessage`), whose `event` lists
every name that stream sends (read from the event Structs' tags, as `streams.py` names
them) and whose `data` is the JSON each message carries. An example shows the wire form.
"""

from __future__ import annotations

import typing
from typing import Any

from services.core.model import events

STREAM_ERROR = "error"
"""The last message of a stream whose key was revoked: its data is an error body."""


def _tags(union: Any) -> list[str]:
    return [str(cls.__struct_config__.tag) for cls in typing.get_args(union)]


JOB_EVENTS = [*_tags(events.AnyEvent), STREAM_ERROR]
"""What `GET /jobs/{id}/stream` names its messages: each event of the job's log, by tag."""
BATCH_EVENTS = [
    "progress",
    *(
        name.removeprefix("batch_")
        for name in _tags(events.AnyBatchEvent)
        if name != "batch_progress"
    ),
    STREAM_ERROR,
]
"""What `GET /batches/{id}/stream` names its messages: its own `progress`, and each batch
event of the log without its `batch_` prefix (the projector's progress events aside)."""

REF = "#/components/schemas/{name}"
"""How the document refers to a schema of its components."""

JOB_EXAMPLE = [
    {
        "id": "41",
        "event": "started",
        "data": {"seq": 41, "type": "started", "at": "2026-11-03T10:00:00.12+00:00",
                 "attempt": 1, "status": "running"},
    },
    {
        "id": "42",
        "event": "done",
        "data": {"seq": 42, "type": "done", "at": "2026-11-03T10:00:00.51+00:00",
                 "attempt": 1, "pages": 1, "bytes": 18034, "status": "done",
                 "url": "https://pressroom.example.com/files/jobs/t/j.pdf?expires=1&sig=s"},
    },
]  # fmt: skip
BATCH_EXAMPLE = [
    {
        "id": "7",
        "event": "progress",
        "data": {"id": "b2f0c4d1e8a9b7c6d5e4f3a2b1c0d9e", "status": "running", "total": 2,
                 "done": 1, "failed": 0, "cancelled": 0, "progress": 0.5, "rate": 1.5,
                 "eta": "2026-11-03T10:00:01.2+00:00", "output": "zip", "error": None,
                 "url": None, "bytes": None, "webhook_url": None,
                 "created_at": "2026-11-03T10:00:00+00:00",
                 "started_at": "2026-11-03T10:00:00.1+00:00", "finished_at": None},
    },
]  # fmt: skip
"""Two messages of a job's stream; on the wire, the first reads
`id: 41\nevent: started\ndata: {"seq":41,…}\n\n`."""


def _message(names: list[str], data: dict[str, Any], what: str) -> dict[str, Any]:
    return {
        "type": "object",
        "description": f"One message of {what}, as `id:`, `event:` and `data:` lines ended by "
        "a blank line. While idle the stream sends `: keep-alive` comments, which carry no "
        "message.",
        "required": ["event", "data"],
        "properties": {
            "id": {
                "type": "string",
                "pattern": "^[0-9]+$",
                "description": "The stream sequence of the event: send it back as "
                "`Last-Event-ID` to resume after it.",
            },
            "event": {
                "type": "string",
                "enum": names,
                "description": "The message's name; `error` is the last message of a stream "
                "whose key was revoked.",
            },
            "data": {
                "description": "One line of JSON; for `error`, an error body (`ErrorBody`).",
                **data,
            },
        },
    }


def components() -> dict[str, Any]:
    """The two message schemas, for the document's components."""
    job_data = {
        "type": "object",
        "properties": {
            "status": {
                "$ref": REF.format(name="JobStatus"),
                "description": "The job's status after this event.",
            },
            "url": {
                "type": "string",
                "description": "On `done`: a signed link to the document.",
            },
        },
        "additionalProperties": True,
    }
    batch_data = {"$ref": REF.format(name="Batch")}
    return {
        "JobStreamMessage": _message(
            JOB_EVENTS, {"anyOf": [job_data, {"$ref": REF.format(name="ErrorBody")}]},
            "a job's stream: its data is the timeline entry of the event (as "
            "`GET /jobs/{id}/events` lists it) with the job's `status` after it",
        ),
        "BatchStreamMessage": _message(
            BATCH_EVENTS, {"anyOf": [batch_data, {"$ref": REF.format(name="ErrorBody")}]},
            "a batch's stream: its data is the batch as `GET /batches/{id}` shows it",
        ),
    }  # fmt: skip


def stream_of(message: str) -> dict[str, Any]:
    """The schema of a `text/event-stream` answer whose messages are `message`s."""
    return {
        "type": "array",
        "description": "The stream, read as it arrives: a sequence of messages.",
        "items": {"$ref": REF.format(name=message)},
    }

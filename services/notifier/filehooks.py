"""The webhook of a job that asked for its file itself (`JobSubmitted.file_webhook`,
Gotenberg's webhook mode): on `done` the document, with its content type and name, to
`webhook_url`; on a failure or a cancel `{"status", "message"}` as JSON to its
`error_url`; each with its method and the client's extra headers (unsealed here)."""

from __future__ import annotations

import json
from dataclasses import dataclass

from services.core.model import events, filenames
from services.core.model.hooks import FileWebhook, content_type, failure_status
from services.core.objectstore.storage import Storage
from services.notifier.keyring import Keyring


@dataclass(frozen=True)
class Message:
    url: str
    method: str
    body: bytes
    headers: dict[str, str]


def _headers(keyring: Keyring, hook: FileWebhook, job_id: str) -> dict[str, str]:
    headers: dict[str, str] = {}
    if hook.sealed_headers is not None:
        opened = keyring.opened(hook.sealed_headers, job_id, "its webhook's extra headers")
        headers.update(json.loads(opened))
    if hook.trace is not None:
        headers["Gotenberg-Trace"] = hook.trace
    return headers


async def _document(storage: Storage, key: str) -> bytes:
    data = bytearray()
    async for chunk in storage.read(key):
        data += chunk
    return bytes(data)


async def message(
    storage: Storage,
    keyring: Keyring,
    event: events.Terminal,
    submitted: events.JobSubmitted,
    url: str,
) -> Message:
    """What to send for the job's end `event`."""
    hook = submitted.file_webhook
    assert hook is not None
    headers = _headers(keyring, hook, event.job_id)
    if isinstance(event, events.JobDone):
        extension = event.object_key.rsplit(".", 1)[-1]
        name = f"{hook.filename or event.job_id}.{extension}"
        headers["Content-Type"] = content_type(event.object_key)
        headers["Content-Disposition"] = filenames.content_disposition(name)
        return Message(url, hook.method, await _document(storage, event.object_key), headers)
    if isinstance(event, events.JobFailed):
        status, text = (
            failure_status(event.error.type),
            f"{event.error.type}: {event.error.message}",
        )
    else:
        status, text = 409, f"the job was cancelled: {event.reason}"
    body = json.dumps({"status": status, "message": text}).encode()
    headers["Content-Type"] = "application/json"
    return Message(hook.error_url, hook.error_method, body, headers)

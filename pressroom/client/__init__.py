"""The Python client of Pressroom: `Client` (blocking) and `AsyncClient` (asyncio).

    from pressroom.client import Client

    with Client("http://127.0.0.1:8080", "prk_…") as pressroom:
        job = pressroom.submit(template="<h1>Hi {{ name }}</h1>", data={"name": "Ana"})
        job = pressroom.wait(job.id, timeout=60)   # done, failed or cancelled
        if job.status == "done":
            pressroom.download(job, "hi.pdf")

Answers are typed (`Job`, `JobEvent`, `Batch`, `BatchItem`, `Template`, `Usage`); error
answers raise the exceptions of `pressroom.client.errors`, which carry the API's
`error.type`, `message`, `field` and HTTP `status`. `verify_webhook` checks a webhook's
signature.
"""

from pressroom.client.aio import AsyncClient
from pressroom.client.errors import (
    ConfigurationError,
    Conflict,
    Forbidden,
    Invalid,
    NotFound,
    PressroomError,
    ProtocolError,
    RateLimited,
    TooLarge,
    Unauthorized,
    Unavailable,
    WaitTimeout,
)
from pressroom.client.models import Batch, BatchItem, ErrorInfo, Job, JobEvent, Template, Usage
from pressroom.client.sync import Client
from pressroom.client.webhooks import verify_webhook

__all__ = [
    "AsyncClient",
    "Batch",
    "BatchItem",
    "Client",
    "ConfigurationError",
    "Conflict",
    "ErrorInfo",
    "Forbidden",
    "Invalid",
    "Job",
    "JobEvent",
    "NotFound",
    "PressroomError",
    "ProtocolError",
    "RateLimited",
    "Template",
    "TooLarge",
    "Unauthorized",
    "Unavailable",
    "Usage",
    "WaitTimeout",
    "verify_webhook",
]

"""Gotenberg's webhook mode: `Gotenberg-Webhook-Url` (with `-Error-Url`, `-Method`,
`-Error-Method` and `-Extra-Http-Headers`) makes the request answer `204` at once; the
notifier then sends the file itself, or the failure, like every webhook (retried, logged,
redeliverable, under the address policy): `core/model/hooks.FileWebhook`."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass

from aiohttp import web

from services.core.model import events
from services.core.model.errors import RequestError
from services.core.model.hooks import METHODS, FileWebhook
from services.core.runtime.settings import Settings
from services.core.sandbox import netpolicy
from services.gateway.keys import SETTINGS

URL = "Gotenberg-Webhook-Url"
ERROR_URL = "Gotenberg-Webhook-Error-Url"
METHOD = "Gotenberg-Webhook-Method"
ERROR_METHOD = "Gotenberg-Webhook-Error-Method"
EXTRA = "Gotenberg-Webhook-Extra-Http-Headers"
EVENTS_URL = "Gotenberg-Webhook-Events-Url"


@dataclass(frozen=True)
class Webhook:
    """The webhook a request asked for."""

    url: str
    hook: FileWebhook
    headers: dict[str, str]


def _method(request: web.Request, name: str) -> str:
    method = request.headers.get(name, "POST").strip().upper() or "POST"
    if method not in METHODS:
        raise RequestError(f"{name} must be one of {', '.join(METHODS)}", field=name)
    return method


def _extra(request: web.Request) -> dict[str, str]:
    raw = request.headers.get(EXTRA)
    if not raw:
        return {}
    try:
        headers = json.loads(raw)
    except ValueError:
        raise RequestError(f"{EXTRA} is not valid JSON", field=EXTRA) from None
    if not isinstance(headers, dict) or not all(
        isinstance(k, str) and isinstance(v, str) and k.isascii() and "\n" not in k + v
        for k, v in headers.items()
    ):
        raise RequestError(f"{EXTRA} must be a JSON object of header names to text", field=EXTRA)
    return headers


async def asked(request: web.Request, trace: str, filename: str | None) -> Webhook | None:
    """The request's webhook, None without `Gotenberg-Webhook-Url`; `RequestError` naming
    the header that is wrong (the error URL is checked against the address policy here,
    the webhook URL with the job's own `webhook_url`)."""
    url = request.headers.get(URL, "").strip()
    if not url:
        return None
    if request.headers.get(EVENTS_URL):
        raise RequestError(f"{EVENTS_URL} is not supported: Pressroom sends no progress events"
                           " this way", field=EVENTS_URL)  # fmt: skip
    error_url = request.headers.get(ERROR_URL, "").strip()
    if not error_url:
        raise RequestError(f"{ERROR_URL} is required with {URL}", field=ERROR_URL)
    settings = request.app[SETTINGS]
    await netpolicy.check_url(error_url, allow_private=settings.allow_private_networks,
                              field=ERROR_URL)  # fmt: skip
    hook = FileWebhook(
        error_url=error_url,
        method=_method(request, METHOD),
        error_method=_method(request, ERROR_METHOD),
        filename=filename,
        trace=trace,
    )
    return Webhook(url, hook, _extra(request))


async def check_url(request: web.Request, webhook: Webhook) -> None:
    """The webhook URL against the address policy, before any job is submitted for it."""
    settings = request.app[SETTINGS]
    await netpolicy.check_url(webhook.url, allow_private=settings.allow_private_networks,
                              field=URL)  # fmt: skip


def preparer(webhook: Webhook, settings: Settings) -> Callable[[events.JobSubmitted], None]:
    """Set the job's file webhook, its extra headers sealed for the job."""

    def prepare(event: events.JobSubmitted) -> None:
        sealed = None
        if webhook.headers:
            sealed = settings.server_keys().seal(json.dumps(webhook.headers), event.job_id)
        event.file_webhook = FileWebhook(
            error_url=webhook.hook.error_url,
            method=webhook.hook.method,
            error_method=webhook.hook.error_method,
            sealed_headers=sealed,
            filename=webhook.hook.filename,
            trace=webhook.hook.trace,
        )

    return prepare

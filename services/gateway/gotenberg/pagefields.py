"""Gotenberg's `cookies` and `extraHttpHeaders` as a job's page secrets
(`core/log/pagesecrets`): read from the form, checked, and sealed for the job on its way to
the log (`preparer`), so neither a cookie nor a header value is ever on the log or in the
job's row in plain text.

- `cookies`: a JSON list of `{name, value, domain, path, secure, httpOnly, sameSite}`,
  as Gotenberg takes it (`domain` needed: a cookie goes only to its own domain).
- `extraHttpHeaders`: a JSON object of header names to values; a value may end with
  `;scope=<regular expression>` (Gotenberg 8), and the header then goes only to the
  requests whose URL the expression matches (searched, as Gotenberg does); without a
  scope it goes to every request of the page.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from services.core.log.pagesecrets import Cookie, Header, PageSecrets, check_secrets, seal_secrets
from services.core.model import events
from services.core.model.errors import RequestError
from services.core.runtime.settings import Settings
from services.gateway.gotenberg.forms import Form

SCOPE = "scope="

_COOKIE_FIELDS = {
    "name": "name",
    "value": "value",
    "domain": "domain",
    "path": "path",
    "secure": "secure",
    "httpOnly": "http_only",
    "sameSite": "same_site",
}
_TEXT = ("name", "value", "domain", "path", "sameSite")


def secrets(form: Form) -> PageSecrets:
    """The form's cookies and extra headers; `RequestError` naming the field."""
    found = PageSecrets(cookies=_cookies(form), headers=_headers(form))
    check_secrets(PageSecrets(cookies=found.cookies), "cookies")
    check_secrets(PageSecrets(headers=found.headers), "extraHttpHeaders")
    return found


def _cookies(form: Form) -> list[Cookie]:
    given = form.json("cookies")
    if given is None:
        return []
    if not isinstance(given, list) or not all(isinstance(c, dict) for c in given):
        raise RequestError("form field 'cookies' must be a JSON list of objects", field="cookies")
    return [_cookie(c) for c in given]


def _cookie(given: dict[str, Any]) -> Cookie:
    unknown = sorted(set(given) - set(_COOKIE_FIELDS))
    if unknown:
        raise RequestError(f"form field 'cookies': unknown key {unknown[0]!r}", field="cookies")
    for key in ("name", "value", "domain"):
        if not isinstance(given.get(key), str):
            raise RequestError(f"form field 'cookies': each cookie needs {key!r} as text",
                               field="cookies")  # fmt: skip
    for key, value in given.items():
        if (key in _TEXT and not isinstance(value, str)) or (
            key not in _TEXT and not isinstance(value, bool)
        ):
            kind = "text" if key in _TEXT else "true or false"
            raise RequestError(f"form field 'cookies': {key!r} must be {kind}", field="cookies")
    return Cookie(**{_COOKIE_FIELDS[k]: v for k, v in given.items() if v != ""})


def _headers(form: Form) -> list[Header]:
    given = form.json("extraHttpHeaders")
    if given is None:
        return []
    if not isinstance(given, dict) or not all(isinstance(v, str) for v in given.values()):
        raise RequestError("form field 'extraHttpHeaders' must be a JSON object of header "
                           "names to text", field="extraHttpHeaders")  # fmt: skip
    return [_header(name, value) for name, value in given.items()]


def _header(name: str, value: str) -> Header:
    """A header of `extraHttpHeaders`: its value's `;scope=…` part, if any, is its scope."""
    parts = value.split(";")
    scopes = [p.strip()[len(SCOPE) :] for p in parts if p.strip().startswith(SCOPE)]
    if not scopes:
        return Header(name=name, value=value)
    if len(scopes) > 1 or not scopes[0]:
        raise RequestError(f"form field 'extraHttpHeaders': {name!r} needs one non-empty scope",
                           field="extraHttpHeaders")  # fmt: skip
    rest = ";".join(p for p in parts if not p.strip().startswith(SCOPE)).strip()
    return Header(name=name, value=rest, scope=scopes[0])


def preparer(found: PageSecrets, settings: Settings) -> Callable[[events.JobSubmitted], None]:
    """Seal `found` for the job into its submission (`JobSubmitted.page_secrets`)."""
    keys = settings.server_keys()

    def prepare(event: events.JobSubmitted) -> None:
        event.page_secrets = seal_secrets(found, keys, event.job_id)

    return prepare

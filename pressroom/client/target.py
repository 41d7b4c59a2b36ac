"""Which gateway to talk to, and with which key: flags first, then `PRESSROOM_URL` and
`PRESSROOM_API_KEY`, then what `make up` left in its data folder (`pressroom dev` writes
`<PRESSROOM_DATA_DIR or ./.pressroom>/api-key` and serves on the settings' `base_url`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from pressroom.client.errors import ConfigurationError


@dataclass(frozen=True)
class Target:
    """A gateway's base URL and the API key to send (None: send none)."""

    url: str
    key: str | None
    key_source: str
    """Where the key came from (`--key`, `PRESSROOM_API_KEY`, a file), or why none."""


def resolve(url: str | None, key: str | None, environ: Mapping[str, str]) -> Target:
    """The target of explicit `url` and `key` (flags), else of `environ`, else of the
    `make up` data folder; each of the two is resolved on its own."""
    url = url or environ.get("PRESSROOM_URL") or None
    if key:
        key_source = "--key"
    elif environ.get("PRESSROOM_API_KEY"):
        key, key_source = environ["PRESSROOM_API_KEY"], "PRESSROOM_API_KEY"
    else:
        key, key_source = _dev_key(environ)
    return Target((url or _dev_url(environ)).rstrip("/"), key, key_source)


def _dev_settings(environ: Mapping[str, str]) -> tuple[str, str]:
    """`pressroom dev`'s base URL and data folder under `environ`."""
    from services.core.runtime.settings import Settings, SettingsError

    try:
        settings = Settings.from_env(environ)
    except SettingsError as exc:
        raise ConfigurationError(str(exc), type="configuration") from None
    return settings.base_url, settings.data_dir


def _dev_url(environ: Mapping[str, str]) -> str:
    return _dev_settings(environ)[0]


def _dev_key(environ: Mapping[str, str]) -> tuple[str | None, str]:
    path = Path(_dev_settings(environ)[1]) / "api-key"
    try:
        key = path.read_text().strip()
    except OSError:
        key = ""
    if not key:
        return None, f"none: no --key, no PRESSROOM_API_KEY and no {path}"
    return key.split()[0], str(path)

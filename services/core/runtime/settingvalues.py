"""How a setting's text becomes its value: the parsers `Settings` fields name.

Each parser takes the variable's text and returns the value, or raises `ValueError` with
words that follow the variable's name ("must be between 1 and 10"); `Settings.from_env`
adds the name and where the value came from.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import field
from typing import Any

from services.core.secrets.crypto import read_keyring


def int_in(lo: int, hi: int) -> Callable[[str], int]:
    def parse(raw: str) -> int:
        value = int(raw)
        if not lo <= value <= hi:
            raise ValueError(f"must be between {lo} and {hi}")
        return value

    return parse


def float_in(lo: float, hi: float) -> Callable[[str], float]:
    def parse(raw: str) -> float:
        value = float(raw)
        if not lo <= value <= hi:
            raise ValueError(f"must be between {lo} and {hi}")
        return value

    return parse


def boolean(raw: str) -> bool:
    lowered = raw.strip().lower()
    if lowered in {"1", "true", "yes", "on"}:
        return True
    if lowered in {"0", "false", "no", "off", ""}:
        return False
    raise ValueError("must be 1/0, true/false, yes/no or on/off")


def choice(*options: str) -> Callable[[str], str]:
    def parse(raw: str) -> str:
        if raw not in options:
            raise ValueError(f"must be one of {', '.join(options)}")
        return raw

    return parse


def schedule(raw: str) -> tuple[float, ...]:
    values = tuple(float(part) for part in raw.split(",") if part.strip())
    if not values or any(v < 0 for v in values):
        raise ValueError("must be a comma-separated list of non-negative seconds")
    return values


def text(raw: str) -> str:
    return raw


def server_key(raw: str) -> str:
    """One or more keys of 32 random bytes in base64 (`crypto.read_keyring`)."""
    read_keyring(raw)
    return raw


def http_url(raw: str) -> str:
    if raw and not re.match(r"^https?://[^/\s]+", raw):
        raise ValueError("must be an http:// or https:// URL")
    return raw


_NKEY_SEED = re.compile(r"SU[A-Z2-7]{56}")


def nkey_seed(raw: str) -> str:
    """An NKey user seed as `nk -gen user` or `pressroom bus-keys` prints it."""
    seed = raw.strip()
    if seed and not _NKEY_SEED.fullmatch(seed):
        raise ValueError("must be an NKey user seed: SU followed by 56 base32 characters")
    return seed


def var(name: str, default: Any, parse: Callable[[str], Any] = text, doc: str = "") -> Any:
    return field(default=default, metadata={"env": name, "parse": parse, "doc": doc})

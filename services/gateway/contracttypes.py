"""The types of `contract.py`'s table: a route's parameters, body, answers, and the
README's name of a router path. Apart from the table so that other modules describing
their routes (`gotenberg/docs.py`) use them without importing the table itself."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

_ID_NAMES = re.compile(r"\{(?:job|batch|template|secret|tenant)_id(?::[^}]*)?\}")
_PATTERNS = re.compile(r"\{(\w+):[^}]*\}")


def public_path(canonical: str) -> str:
    """The README's name of a router path: `/jobs/{job_id}` → `/jobs/{id}`,
    `/files/{key:.+}` → `/files/{key}`."""
    return _PATTERNS.sub(r"{\1}", _ID_NAMES.sub("{id}", canonical))


@dataclass(frozen=True)
class Param:
    """A path, query or header parameter, with its JSON Schema."""

    name: str
    where: str  # path, query or header
    schema: dict[str, Any]
    description: str
    required: bool = False


@dataclass(frozen=True)
class Media:
    """A non-JSON answer (a file, a page, an event stream): content types and a schema."""

    types: tuple[str, ...]
    description: str
    schema: dict[str, Any] = field(default_factory=lambda: {"type": "string"})
    example: Any = None


@dataclass(frozen=True)
class Body:
    """A JSON request body: its Struct and an example (and a JSON Lines form, if any)."""

    struct: type
    example: Any
    required: bool = True
    lines_example: str | None = None
    more_examples: tuple[tuple[str, str, Any], ...] = ()
    """Other named examples (name, summary, body): the document then lists `example`
    under the name `default` beside them."""


Answer = type | Media | None  # None: no body (204)


@dataclass(frozen=True)
class Route:
    summary: str
    tag: str
    answers: dict[int, Answer]
    errors: tuple[int, ...] = ()
    params: tuple[Param, ...] = ()
    body: Body | None = None
    description: str = ""

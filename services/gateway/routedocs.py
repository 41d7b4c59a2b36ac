"""The building blocks of the route table (`contract.py`): a route's entry, its
parameters, its bodies and non-JSON answers, and docs/api.md's name of a router path.
Apart from the table so that each table (`contract`, `assetcontract`) can use them."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

_ID_NAMES = re.compile(r"\{(?:job|batch|template|secret|tenant)_id(?::[^}]*)?\}")
_PATTERNS = re.compile(r"\{(\w+):[^}]*\}")


def public_path(canonical: str) -> str:
    """docs/api.md's name of a router path: `/jobs/{job_id}` → `/jobs/{id}`,
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
    """A request body: a JSON one (its Struct and an example, and a JSON Lines form, if
    any), a `multipart/form-data` one (its schema), or both; or a file as it is
    (`raw_types`, `POST /validate`)."""

    struct: type | None
    example: Any
    required: bool = True
    lines_example: str | None = None
    multipart: dict[str, Any] | None = None
    multipart_example: Any = None
    """The multipart form's example (`example` when None: a body that is only multipart)."""
    more_examples: tuple[tuple[str, str, Any], ...] = ()
    """Other named examples of the JSON body (name, summary, body): the document then
    lists `example` under the name `default` beside them."""
    raw_types: tuple[str, ...] = ()
    """With no Struct and no multipart: a file sent as it is, in one of these types."""


def files_schema(description: str, fields: dict[str, Any] | None = None) -> dict[str, Any]:
    """The schema of a multipart body of files (each part's filename is the file's
    name), with the form `fields` besides them."""
    properties: dict[str, Any] = dict(fields or {})
    properties["files"] = {
        "type": "array",
        "items": {"type": "string", "format": "binary"},
        "description": description,
    }
    return {"type": "object", "properties": properties}


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


def path_id(what: str, pattern: re.Pattern[str] | None = None) -> Param:
    schema: dict[str, Any] = {"type": "string"}
    if pattern is not None:
        schema["pattern"] = pattern.pattern
    return Param("id", "path", schema, f"the {what}'s id", required=True)


def query_int(name: str, low: int, high: int, default: int | None, what: str) -> Param:
    schema: dict[str, Any] = {"type": "integer", "minimum": low, "maximum": high}
    if default is not None:
        schema["default"] = default
    return Param(name, "query", schema, what)


def query_enum(name: str, values: list[str], what: str) -> Param:
    return Param(name, "query", {"type": "string", "enum": values}, what)


def page_params(max_limit: int, max_offset: int, default: int = 50) -> tuple[Param, ...]:
    return (
        query_int("limit", 1, max_limit, default, "how many to list"),
        query_int("offset", 0, max_offset, 0, "how many to skip (`next_offset` of a page)"),
    )

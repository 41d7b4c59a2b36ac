"""Template → HTML: a client's template rendered with the client's data.

Templates come from clients, so they run in Jinja2's immutable sandbox (no `__class__`,
no `__globals__`, no mutating methods, bounded `range`), every value is HTML-escaped
unless the template says `|safe`, and a variable the data does not define is an error
rather than an empty string. The sandbox keeps a template away from Python's internals;
it does not bound the time or memory a template may use (`range(100000)` twice,
`'x' * 10**9`): the renderer calls `render_html` in a jail (`core/sandbox/jail.py`) that does.
This module imports only Jinja2, so a jail's workers start fast.
"""

from __future__ import annotations

import functools
import traceback
from typing import Any

import jinja2
from jinja2.sandbox import ImmutableSandboxedEnvironment

from services.core.model.errors import RequestError, TemplateError

_DICT_ATTRIBUTES = frozenset(dir(dict))
"""Every name `getattr` can find on a plain dict: its type's (and `object`'s); a dict
instance has no attributes of its own."""


class _Sandbox(ImmutableSandboxedEnvironment):
    """The immutable sandbox, with `{{ item.name }}` on the data's plain dicts looked up
    as Jinja2 does it, without its cost.

    Jinja2 tries `getattr(item, "name")` first and the key second. On a JSON object
    (a plain dict) the attribute fails unless the name is one of dict's own (`items`,
    `get`, `__class__`…), so every lookup of data raised and caught an `AttributeError`:
    a large part of a typical invoice's render. A plain dict's key is now read directly
    when the name is not one of dict's attributes; every other lookup (such names, other
    objects) goes through the sandbox unchanged, so templates see exactly what they did.
    """

    def getattr(self, obj: Any, attribute: str) -> Any:
        if type(obj) is dict and attribute not in _DICT_ATTRIBUTES:
            try:
                return obj[attribute]
            except KeyError:
                return self.undefined(obj=obj, name=attribute)
        return super().getattr(obj, attribute)


_ENV = _Sandbox(undefined=jinja2.StrictUndefined, autoescape=True)

# Exceptions a template raises by itself while rendering (`{{ 1 / 0 }}`, `{{ "a" + 1 }}`,
# `{{ items[7] }}` on a list): the same template and data fail the same way every time.
_RENDER_ERRORS = (
    jinja2.TemplateError,
    TypeError,
    ValueError,
    ArithmeticError,
    LookupError,
    RecursionError,
)


@functools.lru_cache(maxsize=256)
def _compile(template: str) -> jinja2.Template:
    """Compile once per distinct source; a client sends the same template for many jobs."""
    return _ENV.from_string(template)


def render_html(template: str, data: dict[str, Any], max_chars: int | None = None) -> str:
    """Render `template` with `data` in the sandbox and return the HTML (at most
    `max_chars` characters of it: more is a `TemplateError`).

    The renderer runs this in a jail (`core/sandbox/jail.py`), never on its event loop: the sandbox
    keeps a template away from Python's internals, the jail bounds its time and memory.

    Raises `TemplateError` carrying Jinja2's own message for anything the template gets
    wrong: a syntax error (prefixed "template syntax error at line N: "), an undefined
    variable ("line N: 'name' is undefined"), a sandbox violation, or an error raised
    while evaluating an expression (prefixed "line N: " when the line is known), so an
    editor can point at the line.
    """
    try:
        return _generate(_compile(template), data, max_chars)
    except jinja2.TemplateSyntaxError as exc:
        raise TemplateError(f"template syntax error at line {exc.lineno}: {exc.message}") from exc
    except _RENDER_ERRORS as exc:
        line = template_line(exc)
        raise TemplateError(str(exc) if line is None else f"line {line}: {exc}") from exc


def template_line(exc: BaseException) -> int | None:
    """The template's line a render error was raised at: Jinja2 rewrites the traceback of
    an error it handles so that its innermost template frame (file `<template>` for a
    template from a string) carries the template's own line number."""
    found = None
    for frame, line in traceback.walk_tb(exc.__traceback__):
        if frame.f_code.co_filename == "<template>":
            found = line
    return found


def _generate(template: jinja2.Template, data: dict[str, Any], max_chars: int | None) -> str:
    """The template's output, chunk by chunk, stopped as soon as it passes `max_chars`."""
    parts, size = [], 0
    for chunk in template.generate(data):
        size += len(chunk)
        if max_chars is not None and size > max_chars:
            raise TemplateError(f"the template's output is larger than {max_chars} characters")
        parts.append(chunk)
    return "".join(parts)


def check_jinja(text: str, field: str) -> None:
    """Raise `RequestError` naming `field` if `text` is not a valid Jinja2 template.

    Compiling (not only parsing) also catches unknown filters and tests; nothing runs.
    Compiling can take long (a megabyte of `{{a}}`): the gateway runs this in its jail
    (`core/sandbox/jail.py`), never on its event loop.
    """
    try:
        _ENV.compile(text)
    except jinja2.TemplateSyntaxError as exc:
        raise RequestError(
            f"{field}: template syntax error at line {exc.lineno}: {exc.message}", field=field
        ) from None
    except RecursionError:
        raise RequestError(f"{field}: template is nested too deeply", field=field) from None

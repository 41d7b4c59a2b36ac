"""Template → HTML: a client's Jinja2 template rendered with the client's data.

Templates come from clients, so they run in Jinja2's sandbox (no `__class__`, no
`__globals__`, bounded `range`), every value is HTML-escaped unless the template says
`|safe`, and a variable the data does not define is an error rather than an empty string.

The sandbox stops a template from reaching Python internals; it does not bound the CPU or
memory a template may use (`{% for %}` over `range(100000)` twice, `{{ 9**9**9 }}`).
"""

from __future__ import annotations

import functools
from typing import Any

import jinja2
from jinja2.sandbox import SandboxedEnvironment

from services.core.errors import TemplateError

_ENV = SandboxedEnvironment(undefined=jinja2.StrictUndefined, autoescape=True)

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


def render_html(template: str, data: dict[str, Any]) -> str:
    """Render `template` with `data` in the sandbox and return the HTML.

    Raises `TemplateError` carrying Jinja2's own message for anything the template gets
    wrong: a syntax error (prefixed "template syntax error at line N: "), an undefined
    variable ("'name' is undefined"), a sandbox violation, or an error raised while
    evaluating an expression.
    """
    try:
        return _compile(template).render(data)
    except jinja2.TemplateSyntaxError as exc:
        raise TemplateError(f"template syntax error at line {exc.lineno}: {exc.message}") from exc
    except _RENDER_ERRORS as exc:
        raise TemplateError(str(exc)) from exc

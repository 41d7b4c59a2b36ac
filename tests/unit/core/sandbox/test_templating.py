"""render_html: sandboxed, autoescaped, strict Jinja2 with the engine's own error messages."""

from __future__ import annotations

import re

import jinja2
import pytest
from jinja2.sandbox import ImmutableSandboxedEnvironment

from services.core.model.errors import TemplateError
from services.core.sandbox.templating import render_html


def test_renders_variables_loops_and_filters() -> None:
    template = "<h1>Hi {{ name }}</h1>{% for i in items %}<li>{{ i | upper }}</li>{% endfor %}"
    html = render_html(template, {"name": "Ana", "items": ["a", "b"]})
    assert html == "<h1>Hi Ana</h1><li>A</li><li>B</li>"


def test_data_is_html_escaped() -> None:
    html = render_html("<p>{{ note }}</p>", {"note": "<script>alert(1)</script>"})
    assert html == "<p>&lt;script&gt;alert(1)&lt;/script&gt;</p>"


def test_same_template_renders_with_different_data() -> None:
    template = "{{ n }}"
    assert [render_html(template, {"n": n}) for n in (1, 2)] == ["1", "2"]


def test_undefined_variable_is_a_template_error() -> None:
    with pytest.raises(TemplateError) as info:
        render_html("<p>{{ name }}</p>", {})
    assert info.value.message == "line 1: 'name' is undefined"


def test_an_undefined_variable_names_its_line() -> None:
    """What the console's template editor marks: the line of the template that used it."""
    template = "<p>ok</p>\n{% for i in [1] %}\n  <p>{{ i }} {{ name }}</p>\n{% endfor %}"
    with pytest.raises(TemplateError) as info:
        render_html(template, {})
    assert info.value.message == "line 3: 'name' is undefined"


def test_undefined_attribute_is_a_template_error() -> None:
    with pytest.raises(TemplateError, match="has no attribute 'missing'"):
        render_html("{{ user.missing }}", {"user": {"name": "Ana"}})


def test_syntax_error_names_the_line() -> None:
    with pytest.raises(TemplateError) as info:
        render_html("<p>ok</p>\n<p>{{ name }</p>", {"name": "Ana"})
    assert info.value.message == "template syntax error at line 2: unexpected '}'"


def test_sandbox_refuses_python_internals() -> None:
    with pytest.raises(TemplateError, match="unsafe"):
        render_html("{{ ''.__class__.__mro__ }}", {})


def test_sandbox_refuses_calling_into_internals() -> None:
    with pytest.raises(TemplateError, match="unsafe"):
        render_html("{{ cycler.__init__.__globals__ }}", {})


@pytest.mark.parametrize(
    ("template", "data"),
    [
        ("{{ 1 / 0 }}", {}),  # ZeroDivisionError
        ("{{ 'a' + n }}", {"n": 1}),  # TypeError
        ("{{ items[5] }}", {"items": []}),  # undefined in Jinja, but strict
        ("{{ '%d' % 'x' }}", {}),  # TypeError from str formatting
    ],
)
def test_errors_raised_while_rendering_are_template_errors(
    template: str, data: dict[str, object]
) -> None:
    with pytest.raises(TemplateError):
        render_html(template, data)


# `{{ a.b }}` on the data's dicts takes a fast path (`_Sandbox.getattr`); Jinja2's own
# sandbox is the oracle for what each lookup must give.
LOOKUPS = [
    ("{{ user.name }} {{ user['name'] }}", {"user": {"name": "Ana"}}),
    ("{{ order.items }}", {"order": {"items": 3}}),  # dict's method, as in Jinja2
    ("{% for k, v in order.items() %}{{ k }}={{ v }};{% endfor %}", {"order": {"items": 3}}),
    ("{{ order.get('n') }} {{ order.keys() | list }}", {"order": {"n": 1, "keys": 2}}),
    ("{{ a.b.c }} {{ a.b | length }}", {"a": {"b": {"c": "<deep>"}}}),
    ("{{ rows[1].total }}", {"rows": [{"total": 1}, {"total": 2}]}),
    ("{{ text.upper() }} {{ n.real }}", {"text": "x", "n": 4}),  # not dicts: the sandbox
    ("{% if user.missing is defined %}yes{% else %}no{% endif %}", {"user": {}}),
    ("{{ user.missing | default('none') }}", {"user": {}}),
]


_ADDRESS = re.compile(r" at 0x[0-9a-f]+")
"""A method's address in its repr, which differs between two renders."""


@pytest.mark.parametrize(("template", "data"), LOOKUPS)
def test_attribute_lookups_give_what_jinjas_sandbox_gives(
    template: str, data: dict[str, object]
) -> None:
    oracle = ImmutableSandboxedEnvironment(undefined=jinja2.StrictUndefined, autoescape=True)
    expected = _ADDRESS.sub("", oracle.from_string(template).render(data))
    assert _ADDRESS.sub("", render_html(template, data)) == expected


@pytest.mark.parametrize("template", ["{{ user.__class__ }}", "{{ user.__init__ }}"])
def test_a_dicts_internals_stay_out_of_reach(template: str) -> None:
    with pytest.raises(TemplateError, match="unsafe"):
        render_html(template, {"user": {"name": "Ana"}})


def test_a_key_that_looks_like_an_internal_is_only_a_key() -> None:
    assert render_html("{{ user._private }}", {"user": {"_private": "kept"}}) == "kept"

"""render_html: sandboxed, autoescaped, strict Jinja2 with the engine's own error messages."""

from __future__ import annotations

import pytest

from services.core.errors import TemplateError
from services.core.templating import render_html


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
    assert info.value.message == "'name' is undefined"


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

"""Markdown → HTML: a job's `markdown` made into the document the browser prints.

CommonMark with GitHub's tables, strikethrough and task lists, parsed by markdown-it-py.
Raw HTML inside the Markdown is kept as CommonMark says: it is then an HTML job like any
other (the same tab, the same egress policy, script only as `javascript` decides), since
the renderer loads the result through the one path HTML jobs take.

Without a wrapping template the result is a whole document: the default style, the job's
`stylesheet` after it, the Markdown's HTML in `<main class="markdown-body">`, and the first
heading's text as `<title>` (the PDF's title unless `options.metadata` sets one). With a
template (inline or stored), the template is rendered with the job's `data` and three
more variables: `content` (the Markdown's HTML, written as it is: no `|safe` needed),
`stylesheet` (the job's, or empty) and `title`.

Conversion costs time roughly in proportion to the text, more for pathological input, so
the renderer runs `markdown_document` in its jail (`core/sandbox/jail.py`), as it does templates.
This module imports only the parser and `core/sandbox/templating`, so a jail's workers start fast.
"""

from __future__ import annotations

import functools
import itertools
from typing import Any

from markdown_it import MarkdownIt
from markdown_it.token import Token
from markupsafe import Markup, escape
from mdit_py_plugins.tasklists import tasklists_plugin

from services.core.model.errors import TemplateError
from services.core.sandbox.templating import render_html

RESERVED = ("content", "stylesheet", "title")
"""The variables a wrapping template gets from the job beside its `data`."""

DEFAULT_STYLE = """
html { font: 11pt/1.5 system-ui, -apple-system, "Segoe UI", Roboto, "Noto Sans",
  "DejaVu Sans", sans-serif; color: #1f2328; }
body { margin: 0; }
.markdown-body { max-width: 48em; margin: 0 auto; padding: 0 1em; }
h1, h2, h3, h4, h5, h6 { line-height: 1.25; margin: 1.4em 0 0.5em; break-after: avoid; }
h1 { font-size: 1.9em; } h2 { font-size: 1.45em; } h3 { font-size: 1.2em; }
h1, h2 { border-bottom: 1px solid #d1d9e0; padding-bottom: 0.2em; }
p, ul, ol, table, pre, blockquote { margin: 0 0 1em; }
a { color: #0969da; }
code, pre { font-family: ui-monospace, "DejaVu Sans Mono", Menlo, Consolas, monospace;
  font-size: 0.9em; background: #f6f8fa; border-radius: 4px; }
code { padding: 0.1em 0.3em; }
pre { padding: 0.8em 1em; overflow-wrap: anywhere; white-space: pre-wrap; }
pre code { padding: 0; background: none; }
blockquote { padding: 0 1em; color: #59636e; border-left: 0.25em solid #d1d9e0; }
table { border-collapse: collapse; }
th, td { border: 1px solid #d1d9e0; padding: 0.3em 0.8em; }
th { background: #f6f8fa; }
tr { break-inside: avoid; }
img { max-width: 100%; }
.contains-task-list { list-style: none; padding-left: 1.2em; }
.task-list-item-checkbox { margin: 0 0.4em 0 -1.2em; }
"""
"""Readable defaults for prose, tables and code; the job's `stylesheet` comes after."""

_DOCUMENT = (
    '<!doctype html>\n<html><head><meta charset="utf-8"><title>{title}</title>\n'
    "<style>{default}</style>\n<style>{stylesheet}</style>\n"
    '</head><body><main class="markdown-body">\n{content}</main></body></html>\n'
)


@functools.cache
def _parser() -> MarkdownIt:
    """CommonMark (raw HTML kept, nesting limited to 20 levels), plus GitHub's tables,
    strikethrough and task lists."""
    parser = MarkdownIt("commonmark").enable(["table", "strikethrough"])
    return parser.use(tasklists_plugin)


def to_html(markdown: str) -> tuple[str, str]:
    """The HTML of `markdown`, and the plain text of its first heading ("" if none)."""
    parser = _parser()
    tokens = parser.parse(markdown)
    return parser.renderer.render(tokens, parser.options, {}), _first_heading(tokens)


def _first_heading(tokens: list[Token]) -> str:
    for before, token in itertools.pairwise(tokens):
        if before.type == "heading_open" and token.type == "inline":
            words = (c.content for c in token.children or () if c.type in ("text", "code_inline"))
            return " ".join("".join(words).split())
    return ""


def markdown_document(
    markdown: str,
    template: str | None,
    data: dict[str, Any],
    stylesheet: str | None,
    max_chars: int | None = None,
) -> str:
    """The HTML document the browser loads for a Markdown job (see the module
    docstring). `TemplateError` as `templating.render_html` raises it for a wrapping
    template that fails, or for a document over `max_chars` characters."""
    content, title = to_html(markdown)
    if template:
        extra = {"content": Markup(content), "stylesheet": Markup(stylesheet or ""), "title": title}
        return render_html(template, {**data, **extra}, max_chars)
    document = _DOCUMENT.format(
        title=escape(title),
        default=DEFAULT_STYLE,
        stylesheet=stylesheet or "",
        content=content,
    )
    if max_chars is not None and len(document) > max_chars:
        raise TemplateError(f"the Markdown's document is larger than {max_chars} characters")
    return document

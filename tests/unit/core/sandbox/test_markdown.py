"""Markdown jobs before the browser: what a `markdown` source becomes (`core/sandbox/markdown`) and
which requests the gateway refuses, each naming its field (`gateway/requests`).

The HTML is read back with the standard library's parser, not with markdown-it-py, so a
table or a task list is what a browser would see, not what the parser says it wrote.
"""

from __future__ import annotations

import json
from html.parser import HTMLParser

import pytest

from services.core.model.errors import RequestError, TemplateError
from services.core.sandbox.markdown import markdown_document, to_html
from services.gateway.requests import parse_batch, parse_job

TEXT = """# Quarterly *report* `v2`

| Item | Amount |
|------|-------:|
| Paper | 12.50 |
| ~~Ink~~ | 3.00 |

- [x] printed
- [ ] signed

<div class="raw">kept <b>as HTML</b></div>
"""


class Elements(HTMLParser):
    """Every start tag with its attributes, and the text, in document order."""

    def __init__(self, html: str) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.text: list[str] = []
        self.feed(html)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data: str) -> None:
        self.text.append(data)

    def named(self, tag: str) -> list[dict[str, str | None]]:
        return [attrs for name, attrs in self.tags if name == tag]


def test_tables_strikethrough_task_lists_and_raw_html_come_out_as_html() -> None:
    html, title = to_html(TEXT)
    found = Elements(html)
    assert title == "Quarterly report v2"
    assert len(found.named("th")) == 2 and len(found.named("td")) == 4
    assert found.named("td")[1] == {"style": "text-align:right"}
    assert len(found.named("s")) == 1  # ~~Ink~~
    boxes = found.named("input")
    assert [box.get("type") for box in boxes] == ["checkbox", "checkbox"]
    assert ["checked" in box for box in boxes] == [True, False]
    assert found.named("div") == [{"class": "raw"}]  # raw HTML kept, as CommonMark says


def test_without_a_template_the_document_has_its_style_title_and_the_stylesheet_last() -> None:
    document = markdown_document(TEXT, None, {}, "td { color: rgb(1, 2, 3) }")
    found = Elements(document)
    assert found.named("main") == [{"class": "markdown-body"}]
    assert "Quarterly report v2" in found.text  # the <title>
    styles = [text for text in found.text if "{" in text]
    assert "border-collapse" in styles[0] and styles[-1] == "td { color: rgb(1, 2, 3) }"


def test_a_title_is_escaped_and_a_document_without_heading_has_an_empty_one() -> None:
    assert "<title>a &lt; &amp;b</title>" in markdown_document("# a < &b", None, {}, None)
    assert "<title></title>" in markdown_document("plain", None, {}, None)


def test_a_wrapping_template_gets_content_unescaped_and_its_data_escaped() -> None:
    wrapper = "<header>{{ customer }}</header>{{ content }}<style>{{ stylesheet }}</style>"
    document = markdown_document("# Hi", wrapper, {"customer": "<A&B>"}, "h1 { margin: 0 }")
    assert document == (
        "<header>&lt;A&amp;B&gt;</header><h1>Hi</h1>\n<style>h1 { margin: 0 }</style>"
    )


def test_a_document_over_the_output_limit_is_a_template_error() -> None:
    with pytest.raises(TemplateError, match="larger than 1000 characters"):
        markdown_document("word " * 1000, None, {}, None, max_chars=1000)


def test_nesting_is_bounded_so_a_hostile_quote_is_no_deep_recursion() -> None:
    html, _ = to_html(">" * 100_000 + " deep")
    assert html.count("<blockquote>") <= 20


@pytest.mark.parametrize(
    ("body", "field", "words"),
    [
        ({"markdown": "  "}, "markdown", "must not be empty"),
        ({"markdown": "x", "html": "<p>"}, "markdown", "give exactly one of"),
        ({"markdown": "x", "url": "https://example.com"}, "markdown", "give exactly one of"),
        ({"markdown": "x", "template": "a", "template_id": "0" * 32}, "template_id", "not both"),
        ({"markdown": "x", "data": {"a": 1}}, "data", "only used with template"),
        ({"markdown": "x", "template": "{{ content }}", "data": {"content": 1}}, "data.content",
         "given to the template"),
        ({"markdown": "x", "template": " "}, "template", "must not be empty"),
        ({"markdown": "x", "stylesheet": "p {} </STYLE><script>"}, "stylesheet", "</style"),
        ({"html": "<p>", "stylesheet": "p {}"}, "stylesheet", "only used with markdown"),
        ({"markdown": "x", "template_version": 2}, "template_version", "needs template_id"),
        ({"markdown": 7}, "markdown", "Expected `str | null`"),
    ],
)  # fmt: skip
def test_a_bad_markdown_job_is_refused_naming_the_field(
    body: dict[str, object], field: str, words: str
) -> None:
    with pytest.raises(RequestError) as raised:
        parse_job(json.dumps(body).encode())
    assert raised.value.field == field and words in raised.value.message, raised.value.message


def test_markdown_may_be_wrapped_by_an_inline_or_a_stored_template() -> None:
    inline = parse_job(b'{"markdown": "# x", "template": "{{ content }}", "data": {"a": 1}}')
    assert (inline.markdown, inline.template, inline.data) == ("# x", "{{ content }}", {"a": 1})
    stored = parse_job(b'{"markdown": "x", "template_id": "' + b"a" * 32 + b'", "stylesheet": ""}')
    assert stored.template_id == "a" * 32 and stored.stylesheet == ""


@pytest.mark.parametrize(
    ("body", "field", "words"),
    [
        ({"items": [{"markdown": " "}]}, "items[0].markdown", "must not be empty"),
        ({"items": [{"markdown": "x", "url": "https://example.com"}]}, "items[0].url",
         "not both"),
        ({"items": [{"markdown": "x", "data": {"a": 1}}]}, "items[0].data", "only used with"),
        ({"template": "{{ content }}", "items": [{"markdown": "x", "data": {"title": 1}}]},
         "items[0].data.title", "given to the template"),
        ({"items": [{"markdown": "x"}, {}]}, "items[1].url", "url or markdown"),
        ({"items": [{"markdown": "x"}], "stylesheet": "p {}"}, "stylesheet", "unknown field"),
    ],
)  # fmt: skip
def test_a_bad_markdown_batch_is_refused_naming_the_item(
    body: dict[str, object], field: str, words: str
) -> None:
    with pytest.raises(RequestError) as raised:
        parse_batch(json.dumps(body).encode(), 10)
    assert raised.value.field == field and words in raised.value.message, raised.value.message


def test_a_batch_of_markdown_items_alone_or_wrapped_by_its_template() -> None:
    alone = parse_batch(b'{"items": [{"markdown": "# a"}, {"markdown": "# b"}]}', 10)
    assert [(i.markdown, i.filename) for i in alone.items] == [
        ("# a", "00000.pdf"),
        ("# b", "00001.pdf"),
    ]
    body = {"template": "{{ content }}", "items": [{"markdown": "# a", "data": {"n": 1}}]}
    wrapped = parse_batch(json.dumps(body).encode(), 10)
    assert wrapped.items[0].markdown == "# a" and wrapped.items[0].data == {"n": 1}

"""Module size (docs/development.md, the code layout paragraph): no module under services/
or pressroom/ over `SOFT_LIMIT` lines unless its module docstring says why in a paragraph of
its own starting with "Size:", and none over `HARD_LIMIT` lines at all. A made-up module
just over the soft limit without the paragraph is reported by the same check, so the check
cannot pass by seeing nothing."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("services", "pressroom")
SOFT_LIMIT = 400
HARD_LIMIT = 600


def has_size_reason(text: str) -> bool:
    """Whether the module's docstring has a paragraph starting with "Size:"."""
    docstring = ast.get_docstring(ast.parse(text)) or ""
    return any(part.strip().startswith("Size:") for part in docstring.split("\n\n"))


def problems(name: str, text: str) -> list[str]:
    """What is wrong with module `name` of source `text` by the size rule, if anything."""
    lines = len(text.splitlines())
    if lines > HARD_LIMIT:
        return [f"{name}: {lines} lines, over {HARD_LIMIT}: split it"]
    if lines > SOFT_LIMIT and not has_size_reason(text):
        return [
            f"{name}: {lines} lines, over {SOFT_LIMIT}, and its docstring has no"
            ' "Size:" paragraph saying why'
        ]
    return []


def test_no_module_is_oversized_without_a_reason() -> None:
    found: list[str] = []
    checked = 0
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            checked += 1
            found += problems(str(path.relative_to(ROOT)), path.read_text(encoding="utf-8"))
    assert checked > 0, "no module found: the walk looks in the wrong place"
    assert found == [], "\n".join(found)


def test_a_long_module_without_a_reason_is_reported() -> None:
    body = '"""A module.\n\nIt does one thing."""\n' + "x = 1\n" * (SOFT_LIMIT - 2)
    assert len(body.splitlines()) == SOFT_LIMIT + 1
    assert problems("made_up.py", body) == [
        'made_up.py: 401 lines, over 400, and its docstring has no "Size:" paragraph saying why'
    ]
    with_reason = body.replace("It does one thing.", "It does one thing.\n\nSize: one table.")
    assert problems("made_up.py", with_reason) == []


def test_a_reason_inside_another_paragraph_does_not_count() -> None:
    body = '"""A module. Size: big.\n"""\n' + "x = 1\n" * SOFT_LIMIT
    assert problems("made_up.py", body) != []


def test_a_module_over_the_hard_limit_is_reported_even_with_a_reason() -> None:
    body = '"""A module.\n\nSize: one table.\n"""\n' + "x = 1\n" * HARD_LIMIT
    assert problems("made_up.py", body) == [
        f"made_up.py: {HARD_LIMIT + 4} lines, over {HARD_LIMIT}: split it"
    ]

"""The documentation site (mkdocs.yml, docs/): it builds with `mkdocs build --strict`, where
every warning is an error and mkdocs.yml's `validation` makes a link to a missing page, a
missing anchor (on another page or the same one) and a page left out of the navigation
warnings; a broken link is shown to fail the build, so the check cannot be switched off
unnoticed; every Markdown file under docs/ is in the navigation; no list starts right under
a paragraph's line (GitHub shows a list there, MkDocs' Markdown runs it into the
paragraph); and every relative link of README.md (which the site does not hold) leads to
a file that exists."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from mkdocs.config import load_config

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"


def build(config: Path, site: Path) -> subprocess.CompletedProcess[str]:
    """`mkdocs build --strict` of that configuration into `site`, as `make docs` runs it."""
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}  # the theme's banner, not our warning
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file", str(config),
         "--site-dir", str(site)],
        capture_output=True, text=True, timeout=300, env=env, cwd=config.parent,
    )  # fmt: skip


def nav_pages(nav: list[Any]) -> list[str]:
    """Every page the navigation names, however deep its sections go."""
    pages: list[str] = []
    for entry in nav:
        value = next(iter(entry.values())) if isinstance(entry, dict) else entry
        pages += nav_pages(value) if isinstance(value, list) else [value]
    return pages


def test_the_site_builds_strict_without_a_warning(tmp_path: Path):
    built = build(ROOT / "mkdocs.yml", tmp_path / "site")
    assert built.returncode == 0, built.stderr
    assert "WARNING" not in built.stderr, built.stderr
    assert (tmp_path / "site" / "index.html").is_file()


def test_every_markdown_file_under_docs_is_in_the_navigation():
    config = load_config(str(ROOT / "mkdocs.yml"))
    listed = nav_pages(config["nav"])
    present = sorted(str(path.relative_to(DOCS)) for path in DOCS.rglob("*.md"))
    assert sorted(listed) == present
    assert len(set(listed)) == len(listed), "a page is listed twice"


LIST_ITEM = re.compile(r"^ *(?:[-*+]|\d+\.) ")


def lists_run_into_paragraphs(text: str) -> list[str]:
    """Each list item whose line follows a paragraph's line with no blank line between, as
    `**Look at**` then `- …`; code fences aside."""
    found, fenced, previous = [], False, ""
    for line in text.splitlines():
        fenced = fenced != line.lstrip().startswith("```")
        after_text = previous.strip() and not previous.startswith((" ", "|"))
        if not fenced and LIST_ITEM.match(line) and after_text and not LIST_ITEM.match(previous):
            found.append(line)
        previous = line
    return found


def test_no_list_starts_under_a_paragraph_line():
    assert lists_run_into_paragraphs("**Do**\n- this\n") == ["- this"]  # the check sees one
    for page in sorted(DOCS.rglob("*.md")):
        assert not lists_run_into_paragraphs(page.read_text()), page.name


def test_a_broken_link_or_anchor_fails_the_build(tmp_path: Path):
    """The positive control: the same site with a link to a page that does not exist, to
    an anchor another page lacks, and to one this page lacks does not build."""
    shutil.copytree(DOCS, tmp_path / "docs")
    shutil.copy(ROOT / "mkdocs.yml", tmp_path / "mkdocs.yml")
    shutil.copy(ROOT / "CHANGELOG.md", tmp_path / "CHANGELOG.md")  # docs/changelog.md's
    index = tmp_path / "docs" / "index.md"
    index.write_text(
        index.read_text()
        + "\n[a](no-such-page.md) [b](security.md#no-such-section) [c](#no-such-heading)\n"
    )
    built = build(tmp_path / "mkdocs.yml", tmp_path / "site")
    assert built.returncode != 0
    warnings = [line for line in built.stderr.splitlines() if line.startswith("WARNING")]
    for target in ("no-such-page.md", "security.md#no-such-section", "#no-such-heading"):
        assert any(f"'{target}'" in line for line in warnings), (target, built.stderr)


def test_every_relative_link_of_the_readme_leads_to_a_file_that_exists():
    readme = (ROOT / "README.md").read_text()
    prose = re.sub(r"```.*?```|`[^`\n]*`", "", readme, flags=re.S)  # code is not a link
    targets = re.findall(r"\]\(([^)\s]+)\)", prose)
    relative = [t.partition("#")[0] for t in targets if not re.match(r"[a-z]+:|#", t)]
    assert relative, "no relative link found: the pattern no longer reads the README"
    missing = [target for target in relative if not (ROOT / target).exists()]
    assert not missing, missing

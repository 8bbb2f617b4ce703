"""Every relative link of the README, of docs/*.md and of the examples' READMEs resolves: the file
or folder exists, and an ``#anchor`` names a heading of the target page as GitHub renders it."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest

from tests.support import ROOT

_FENCE = re.compile(r"^ {0,3}(```|~~~).*?^ {0,3}\1[^\n]*$", re.MULTILINE | re.DOTALL)
_CODE_SPAN = re.compile(r"(`+)(?!`).*?(?<!`)\1(?!`)", re.DOTALL)
_LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
_HEADING = re.compile(r"^ {0,3}#{1,6}[ \t]+(.+?)[ \t#]*$", re.MULTILINE)
_SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")


def _prose(markdown: str) -> str:
    """The text outside fenced blocks (kept as blank lines, so line numbers stay)."""
    return _FENCE.sub(lambda m: "\n" * m[0].count("\n"), markdown)


def github_anchors(markdown: str) -> set[str]:
    """The anchors GitHub gives the page's headings: the heading's text without markup,
    lower-cased, every character but letters, digits, ``_``, ``-`` and spaces dropped,
    spaces turned into ``-``; a repeated anchor gets ``-1``, ``-2``, ... appended."""
    seen: Counter[str] = Counter()
    anchors = set()
    for heading in _HEADING.findall(_prose(markdown)):
        text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link shows its text
        text = re.sub(r"<[^>]+>|[`*]", "", text)
        slug = re.sub(r"[^\w\- ]", "", text.strip().lower()).replace(" ", "-")
        anchors.add(f"{slug}-{seen[slug]}" if seen[slug] else slug)
        seen[slug] += 1
    return anchors


def dead_links(page: Path, root: Path) -> list[str]:
    """Each relative link of ``page`` whose file or anchor does not exist, with its line."""
    text = _prose(page.read_text(encoding="utf-8"))
    text = _CODE_SPAN.sub(lambda m: re.sub(r"[^\n]", " ", m[0]), text)
    dead = []
    for match in _LINK.finditer(text):
        target = match[1]
        if _SCHEME.match(target):
            continue  # http(s), mailto: not checked here
        path, _, anchor = target.partition("#")
        where = f"{page.relative_to(root)}:{text.count(chr(10), 0, match.start()) + 1}"
        resolved = (page.parent / path).resolve() if path else page
        if not resolved.exists():
            dead.append(f"{where}: {target!r}: no such file")
            continue
        if anchor and resolved.suffix == ".md":
            if anchor not in github_anchors(resolved.read_text(encoding="utf-8")):
                dead.append(f"{where}: {target!r}: no heading with anchor #{anchor}")
    return dead


DOCS = sorted((ROOT / "docs").glob("*.md"))
PAGES = [ROOT / "README.md", *DOCS, *sorted((ROOT / "examples").glob("**/README.md"))]


def test_the_pages_are_there() -> None:
    names = {p.relative_to(ROOT).as_posix() for p in PAGES}
    assert {"README.md", "docs/cost.md", "docs/runbook.md", "docs/design.md"} <= names


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_relative_link_resolves(page: Path) -> None:
    assert dead_links(page, ROOT) == []


def test_the_readme_stays_a_guide() -> None:
    """Issue 25: about 250 lines at most; reference material goes to docs/."""
    lines = (ROOT / "README.md").read_text(encoding="utf-8").count("\n")
    assert lines <= 250, f"README.md has {lines} lines: move reference material into docs/"


def test_the_readme_links_into_every_page_of_docs() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    linked = {m[1].partition("#")[0] for m in _LINK.finditer(_prose(readme))}
    assert {p.relative_to(ROOT).as_posix() for p in DOCS} <= linked


# --- the checker itself -------------------------------------------------------------------


def test_github_anchors_follow_githubs_rules() -> None:
    page = "\n".join(
        [
            "# `mlp models upload`, `list`, `retire`: versioned, immutable archives",
            "## Try archives locally: `mlp models serve --local`",
            "## aws-cdk-lib's built-in validation",
            "## Notes",
            "## Notes",
            "## A [linked](x.md) **bold** heading_name",
            "```bash",
            "# a shell comment, not a heading",
            "```",
        ]
    )
    assert github_anchors(page) == {
        "mlp-models-upload-list-retire-versioned-immutable-archives",
        "try-archives-locally-mlp-models-serve---local",
        "aws-cdk-libs-built-in-validation",
        "notes",
        "notes-1",
        "a-linked-bold-heading_name",
    }


def test_dead_links_are_found(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "other.md").write_text("# Other\n\n## Its section\n")
    (tmp_path / "src").mkdir()
    page = tmp_path / "README.md"
    page.write_text(
        "\n".join(
            [
                "# Top",
                "[fine](docs/other.md#its-section) [folder](src/) [self](#top)",
                "[web](https://example.com/nowhere) `[in code](missing.md)`",
                "```",
                "[in a fence](missing.md)",
                "```",
                "[gone](docs/missing.md) [bad anchor](docs/other.md#no-such)",
                "[bad self anchor](#nowhere)",
            ]
        )
    )
    assert dead_links(page, tmp_path) == [
        "README.md:7: 'docs/missing.md': no such file",
        "README.md:7: 'docs/other.md#no-such': no heading with anchor #no-such",
        "README.md:8: '#nowhere': no heading with anchor #nowhere",
    ]

"""The command blocks of the README, docs/ and examples/ READMEs, as the tests run them.

Every fenced ``bash``, ``console`` or ``python`` block of the pages carries a marker on the
line above it (an HTML comment, invisible on GitHub):

* ``<!-- doc-block: run NAME -->``: a test runs the block exactly as shown, fetching it with
  :func:`doc_block` ``("NAME")``; tests/app/test_doc_blocks.py checks that the test exists.
* ``<!-- doc-block: not-run REASON -->``: the block cannot run here (it needs an AWS account,
  a Kubernetes cluster, a GPU, the internet, or it is a captured output with generated names);
  the reason says which.
"""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

from tests.support import ROOT

PAGES = [
    ROOT / "README.md",
    *sorted((ROOT / "docs").glob("*.md")),
    ROOT / "examples" / "README.md",
    *sorted((ROOT / "examples").glob("*/README.md")),
]
LANGUAGES = ("bash", "console", "python")

# A fence may be indented up to three spaces (inside a list item); it closes at the same indent.
_FENCE = re.compile(r"^( {0,3})```(\w*)[^\n]*\n(.*?)^\1```[ \t]*$", re.M | re.S)
_MARKER = re.compile(r"<!-- doc-block: (run|not-run) (.+?) -->")


@dataclass(frozen=True)
class Block:
    page: Path
    line: int
    language: str
    text: str
    kind: str | None  # "run", "not-run" or None (no marker)
    name: str  # the run name, or the reason it does not run

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def blocks(pages: list[Path] = PAGES) -> list[Block]:
    """Every command block of ``pages``, with its marker."""
    found = []
    for page in pages:
        markdown = page.read_text(encoding="utf-8")
        for fence in _FENCE.finditer(markdown):
            language = fence[2]
            if language not in LANGUAGES:
                continue
            before = markdown[: fence.start()].rstrip("\n").rsplit("\n", 1)[-1]
            marker = _MARKER.fullmatch(before.strip())
            found.append(
                Block(
                    page=page,
                    line=markdown.count("\n", 0, fence.start()) + 1,
                    language=language,
                    text=re.sub(rf"^{fence[1]}", "", fence[3], flags=re.M),
                    kind=marker[1] if marker else None,
                    name=marker[2] if marker else "",
                )
            )
    return found


def doc_block(name: str) -> Block:
    """The one block marked ``run NAME``."""
    (block,) = [b for b in blocks() if b.kind == "run" and b.name == name]
    return block


def commands(block: Block) -> list[str]:
    """The commands of a ``console`` block (the text after ``$ `` on each prompt line)."""
    return [line[2:] for line in block.text.splitlines() if line.startswith("$ ")]


def transcript(block: Block) -> list[tuple[str, str]]:
    """A ``console`` block as (command, the output shown after it) pairs."""
    pairs: list[tuple[str, list[str]]] = []
    for line in block.text.splitlines():
        if line.startswith("$ "):
            pairs.append((line[2:], []))
        elif pairs:
            pairs[-1][1].append(line)
    return [(command, "\n".join(output)) for command, output in pairs]


def run_console(block: Block, cwd: Path, env: dict[str, str]) -> list[tuple[str, str]]:
    """Run each command of a ``console`` block with bash; (command, stdout and stderr as a
    terminal would interleave them, trailing blanks stripped) per command."""
    seen = []
    for command, _ in transcript(block):
        done = subprocess.run(
            ["bash", "-c", command],
            cwd=cwd,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            timeout=300,
        )
        seen.append((command, "\n".join(line.rstrip() for line in done.stdout.splitlines())))
    return seen

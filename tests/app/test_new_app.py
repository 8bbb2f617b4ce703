"""The test harness builds every CDK app with ``ml_platform.app.new_app()``.

A plain ``cdk.App()`` runs aws-cdk-lib's built-in CloudFormation validation that the platform
app switches off: measured on this repository it cost 1.25x wall, 1.47x CPU and 577 vs 330 MiB
peak memory per synthesis, and it tests an app other than the one ``cdk synth`` builds.
"""

from __future__ import annotations

import io
import re
import tokenize
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
# cdk.App(...), aws_cdk.App(...), or App imported from aws_cdk (cdk8s.App is another library).
PLAIN_APP = re.compile(r"\b(?:cdk|aws_cdk)\.App\(|from aws_cdk import [^\n]*\bApp\b")


def _code(text: str) -> str:
    """``text`` with string literals and comments blanked (a test may name ``cdk.App(`` in
    a string, e.g. to find example apps)."""
    kept = []
    for token in tokenize.generate_tokens(io.StringIO(text).readline):
        if token.type in (tokenize.STRING, tokenize.COMMENT) or (
            token.type == getattr(tokenize, "FSTRING_MIDDLE", -1)
        ):
            continue
        kept.append((token.start[0], token.string))
    lines: dict[int, list[str]] = {}
    for number, string in kept:
        lines.setdefault(number, []).append(string)
    return "\n".join(f"{n}:" + " ".join(parts) for n, parts in sorted(lines.items()))


def plain_apps(text: str) -> list[str]:
    code = _code(text).replace(" . ", ".").replace(" (", "(").replace(" ,", ",")
    return [line for line in code.splitlines() if PLAIN_APP.search(line)]


def test_no_test_builds_a_plain_cdk_app():
    offenders = [
        f"{path.relative_to(TESTS.parent)}:{line}"
        for path in sorted(TESTS.rglob("*.py"))
        if path.name != Path(__file__).name
        for line in plain_apps(path.read_text())
    ]
    assert offenders == [], "use ml_platform.app.new_app() instead:\n" + "\n".join(offenders)


def test_the_check_catches_the_spellings_it_must():
    assert plain_apps("stack = cdk.Stack(cdk.App(), 'S')\n")
    assert plain_apps("app = aws_cdk.App(outdir=out)\n")
    assert plain_apps("from aws_cdk import App, Stack\n")
    assert not plain_apps("app = cdk8s.App()\n")
    assert not plain_apps("app = new_app()\n")
    assert not plain_apps("found = 'cdk.App(' in text  # cdk.App() in a comment\n")

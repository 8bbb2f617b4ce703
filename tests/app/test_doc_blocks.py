"""Every command block of the README, docs/ and examples/ READMEs is either run by a test
exactly as shown or says why it cannot run here (tests/helpers/doc_blocks.py: the markers)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

from tests.helpers.doc_blocks import blocks, doc_block, run_console, transcript
from tests.support import ROOT


def test_every_command_block_is_marked() -> None:
    unmarked = [f"{b.where} ({b.language})" for b in blocks() if b.kind is None]
    assert unmarked == [], "mark each with <!-- doc-block: run NAME --> or not-run REASON"


def test_each_run_block_is_run_by_exactly_one_test() -> None:
    names = Counter(b.name for b in blocks() if b.kind == "run")
    assert [n for n, count in names.items() if count > 1] == []
    sources = {p: p.read_text(encoding="utf-8") for p in (ROOT / "tests").rglob("test_*.py")}
    for name in names:
        callers = [p for p, text in sources.items() if f'doc_block("{name}")' in text]
        assert len(callers) == 1, f"run block {name!r} is run by {callers}"


def test_the_marker_parser(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(
        "<!-- doc-block: run first -->\n```bash\necho one\n```\n\n"
        "<!-- doc-block: not-run needs an AWS account -->\n```console\n$ mlp azs\n```\n\n"
        "```python\nprint()\n```\n\n```text\nnot a command block\n```\n"
    )
    found = [(b.line, b.language, b.kind, b.name, b.text) for b in blocks([page])]
    assert found == [
        (2, "bash", "run", "first", "echo one\n"),
        (7, "console", "not-run", "needs an AWS account", "$ mlp azs\n"),
        (11, "python", None, "", "print()\n"),
    ]


def test_no_credentials_error_as_shown(tmp_path: Path) -> None:
    """docs/runbook.md#errors: `mlp status` with no credentials anywhere (no environment
    variables, no shared files, no instance metadata) prints exactly the line shown."""
    block = doc_block("no-credentials")
    env = {k: v for k, v in os.environ.items() if not re.match(r"AWS_", k)}
    env.update(
        PATH=os.pathsep.join([str(Path(sys.executable).parent), env["PATH"]]),
        AWS_CONFIG_FILE=str(tmp_path / "none"),
        AWS_SHARED_CREDENTIALS_FILE=str(tmp_path / "none"),
        AWS_EC2_METADATA_DISABLED="true",
    )
    assert run_console(block, ROOT, env) == transcript(block)


def test_torchx_dryrun_without_a_cluster_as_shown(tmp_path: Path) -> None:
    """docs/training.md: the TorchX dry run prints the Volcano Job with no kubeconfig at all
    (without validate_spec=False, TorchX asks the API server and tracebacks)."""
    block = doc_block("torchx-dryrun")
    clone = tmp_path / "clone"
    clone.mkdir()
    (clone / ".venv").symlink_to(Path(sys.prefix))
    (clone / "ml_platform").symlink_to(ROOT / "ml_platform")
    (clone / "cdk.json").write_text((ROOT / "cdk.json").read_text())
    env = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"}
    env.update(HOME=str(tmp_path), KUBECONFIG=str(tmp_path / "no-kubeconfig"))
    done = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", block.text],
        cwd=clone,
        env={**env, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    request = done.stdout.split("=== SCHEDULER REQUEST ===", 1)[1]
    assert "apiVersion: batch.volcano.sh/v1alpha1" in request
    assert "queue: training" in request

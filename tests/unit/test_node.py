"""ml_platform._node: which Node binary jsii is told to run (JSII_NODE)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from ml_platform import _node
from tests.support import ROOT


def _fake_node(folder: Path) -> Path:
    node = folder / "node_modules" / ".bin" / "node"
    node.parent.mkdir(parents=True)
    node.write_text("#!/bin/sh\n")
    node.chmod(0o755)
    return node


def test_the_nearest_node_modules_from_the_working_directory_wins(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    outer = _fake_node(tmp_path)
    inner = _fake_node(tmp_path / "app")
    (tmp_path / "app" / "deep").mkdir()
    monkeypatch.delenv("JSII_NODE", raising=False)
    monkeypatch.chdir(tmp_path / "app" / "deep")
    assert _node.prefer_project_node() == inner
    assert os.environ["JSII_NODE"] == str(inner)
    monkeypatch.delenv("JSII_NODE")
    assert _node.project_node(tmp_path) == outer


def test_a_jsii_node_already_set_is_kept(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_node(tmp_path)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("JSII_NODE", "/opt/node22/bin/node")
    assert _node.prefer_project_node() == Path("/opt/node22/bin/node")
    assert os.environ["JSII_NODE"] == "/opt/node22/bin/node"


def test_a_non_executable_file_is_not_a_node(tmp_path: Path) -> None:
    _fake_node(tmp_path).chmod(0o644)
    assert _node.project_node(tmp_path) is None


def test_outside_any_project_the_clone_of_the_package_is_used(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A fresh interpreter started in an empty folder (as `mlp` or `python app.py` would be):
    importing ml_platform sets JSII_NODE to the clone's node_modules/.bin/node."""
    if not (ROOT / "node_modules" / ".bin" / "node").exists():
        pytest.skip("node_modules/.bin/node is missing: run `make install` (or `npm ci`)")
    env = {k: v for k, v in os.environ.items() if k != "JSII_NODE"}
    env["PYTHONPATH"] = str(ROOT)
    done = subprocess.run(
        [sys.executable, "-c", "import os, ml_platform; print(os.environ['JSII_NODE'])"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    assert done.stdout.strip() == str(ROOT / "node_modules" / ".bin" / "node")


def _run_pth_line(cwd: Path, jsii_node: str | None) -> str:
    """What JSII_NODE is after the .pth line runs in a fresh interpreter started without the
    site module (so no installed .pth runs first), in ``cwd``."""
    env = {k: v for k, v in os.environ.items() if k != "JSII_NODE"}
    env["PYTHONPATH"] = str(ROOT)
    if jsii_node is not None:
        env["JSII_NODE"] = jsii_node
    program = f"import os; exec({_node.pth_line()!r}); print(os.environ.get('JSII_NODE'))"
    done = subprocess.run(
        [sys.executable, "-S", "-c", program],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    assert done.stderr == ""
    return done.stdout.strip()


def test_the_pth_line_makes_the_same_choice_as_the_package(tmp_path: Path) -> None:
    """The nearest node_modules/.bin/node of the working directory; a JSII_NODE already set
    is kept; and the line does not import the package (it loads _node.py alone)."""
    node = _fake_node(tmp_path / "app")
    line = _node.pth_line()
    assert line.startswith("import ") and line.endswith("\n") and line.count("\n") == 1
    assert _run_pth_line(tmp_path / "app", None) == str(node)
    assert _run_pth_line(tmp_path / "app", "/opt/node22/bin/node") == "/opt/node22/bin/node"
    # Outside any project: the clone's Node, as the package's own import picks it.
    if (ROOT / "node_modules" / ".bin" / "node").exists():
        (tmp_path / "elsewhere").mkdir()
        assert _run_pth_line(tmp_path / "elsewhere", None) == str(
            ROOT / "node_modules" / ".bin" / "node"
        )


def test_write_pth_writes_the_line_under_its_name(tmp_path: Path) -> None:
    target = _node.write_pth(tmp_path)
    assert target == tmp_path / "ml_platform_node.pth"
    assert target.read_text() == _node.pth_line()

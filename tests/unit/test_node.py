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


def test_the_pth_line_sets_jsii_node_only_when_unset_and_the_binary_runs(tmp_path: Path) -> None:
    """The line Python's site module executes: what it does to an environment, by case."""
    node = _fake_node(tmp_path)
    line = _node.pth_line(node)
    assert line.startswith("import ") and line.endswith("\n") and line.count("\n") == 1

    def run(environ: dict[str, str]) -> dict[str, str]:
        fake_os = type(os)("os")
        fake_os.__dict__.update(access=os.access, X_OK=os.X_OK, environ=environ)
        exec(line.replace("import os; ", "", 1), {"os": fake_os})
        return environ

    assert run({}) == {"JSII_NODE": str(node)}
    assert run({"JSII_NODE": "/opt/node22/bin/node"}) == {"JSII_NODE": "/opt/node22/bin/node"}
    node.unlink()
    assert run({}) == {}


def test_write_pth_writes_the_line_under_its_name(tmp_path: Path) -> None:
    node = _fake_node(tmp_path / "clone")
    target = _node.write_pth(tmp_path, node)
    assert target == tmp_path / "ml_platform_node.pth"
    assert target.read_text() == _node.pth_line(node)

"""`make docs` (scripts/api_docs.py): pdoc gets every public module of ``ml_platform`` once,
and the build fails on a pdoc warning. The full build takes about 30 s, so it runs in
`.ci/run`, not here; these tests run the script on a two-module package."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

from tests.support import ROOT

SCRIPT = ROOT / "scripts" / "api_docs.py"
_spec = importlib.util.spec_from_file_location("api_docs", SCRIPT)
assert _spec and _spec.loader
api_docs = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(api_docs)


def test_every_public_module_of_the_package_is_documented() -> None:
    modules = api_docs.public_modules("ml_platform")
    assert {
        "ml_platform.config",  # the settings
        "ml_platform.app",
        "ml_platform.stacks",
        "ml_platform.stacks.inference",
        "ml_platform.constructs",
        "ml_platform.constructs.eks_cluster",
        "ml_platform.k8s_charts",
        "ml_platform.k8s_charts.triton",
        "ml_platform.triton",
        "ml_platform.triton.repository",  # the Triton builders
        "ml_platform.triton.archive_names",
    } <= set(modules)
    # The reference is the construct library's: the CLI and the cost estimator are tooling
    # beside it (`mlp --help`, docs/cost.md), with no API reference of their own.
    assert not [m for m in modules if m.startswith(("ml_platform_cli", "ml_platform_pricing"))]
    assert not [m for m in modules if any(p.startswith("_") for p in m.split("."))]
    assert "ml_platform.constructs._create_order" not in modules


def test_modules_hidden_by_all_are_passed_to_pdoc_on_their_own() -> None:
    specs = api_docs.specs_for(api_docs.public_modules("ml_platform"))
    # ml_platform has no __all__: pdoc walks it (config, app, k8s_charts.* come with it).
    assert "ml_platform" in specs
    assert "ml_platform.config" not in specs
    assert "ml_platform.k8s_charts.triton" not in specs
    # constructs and triton re-export through __all__, which hides their modules from pdoc.
    assert "ml_platform.constructs.eks_cluster" in specs
    assert "ml_platform.triton.repository" in specs


def _run(package_dir: Path, out: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(package_dir)}
    return subprocess.run(
        [sys.executable, str(SCRIPT), str(out), "docpkg"],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )


def _package(tmp_path: Path, body: str) -> Path:
    package = tmp_path / "src" / "docpkg"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text('"""A package."""\n')
    (package / "mod.py").write_text(body)
    return tmp_path / "src"


def test_a_clean_package_builds(tmp_path: Path) -> None:
    done = _run(
        _package(tmp_path, '"""Fine."""\n\n\ndef f(x: int) -> None:\n    """Doc."""\n'),
        tmp_path / "out",
    )
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "out" / "docpkg" / "mod.html").exists()
    assert "0 pdoc warning(s)" in done.stdout


def test_private_modules_get_no_page(tmp_path: Path) -> None:
    src = _package(tmp_path, '"""Fine."""\n')
    (src / "docpkg" / "_helper.py").write_text('"""Private."""\n\n\ndef f() -> None:\n    pass\n')
    done = _run(src, tmp_path / "out")
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "out" / "docpkg" / "mod.html").exists()
    assert not (tmp_path / "out" / "docpkg" / "_helper.html").exists()


def test_the_build_counts_only_the_names_in_a_modules_all(tmp_path: Path) -> None:
    source = (
        '"""Two functions, one public."""\n\n__all__ = ["shown"]\n\n\n'
        "class Shown:\n    pass\n\n\n"
        'def shown() -> None:\n    """Doc."""\n\n\n'
        'def left_out() -> None:\n    """Doc."""\n'
    )
    done = _run(_package(tmp_path, source), tmp_path / "out")
    assert done.returncode == 0, done.stderr
    assert "documenting 1 names and 0 class members" in done.stdout
    page = (tmp_path / "out" / "docpkg" / "mod.html").read_text()
    assert '<section id="shown"' in page
    assert '<section id="left_out"' not in page and '<section id="Shown"' not in page


def test_a_pdoc_warning_fails_the_build(tmp_path: Path) -> None:
    source = '"""Broken."""\n\n\ndef f(x: "NoSuchName") -> None:\n    """Doc."""\n'
    done = _run(_package(tmp_path, source), tmp_path / "out")
    assert done.returncode == 1
    assert "Error parsing type annotation NoSuchName" in done.stderr

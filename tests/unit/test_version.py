"""One version, from pyproject.toml: ``ml_platform.__version__``, ``mlp --version``, the
changelog and the upgrade baselines agree."""

from __future__ import annotations

import importlib.util
import re
import shutil
import tomllib
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

import pytest
from packaging.version import Version

import ml_platform
from ml_platform_cli.main import main
from tests.support import ROOT


def _pyproject_version() -> str:
    return str(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"])


def test_the_package_version_is_pyprojects(capsys: pytest.CaptureFixture[str]) -> None:
    assert ml_platform.__version__ == _pyproject_version()
    Version(ml_platform.__version__)  # a valid (PEP 440, semantic) version
    with pytest.raises(SystemExit) as done:
        main(["--version"])
    assert done.value.code == 0
    assert capsys.readouterr().out == f"mlp {ml_platform.__version__} (cdk-ml-platform)\n"


def test_outside_a_source_tree_the_metadata_gives_the_version(tmp_path: Path) -> None:
    """An installed package has no pyproject.toml beside it: the distribution's metadata
    (or 0+unknown when it is not installed) gives the version."""
    package = tmp_path / "site" / "ml_platform_copy"
    package.mkdir(parents=True)
    shutil.copy(ROOT / "ml_platform" / "__init__.py", package / "__init__.py")
    spec = importlib.util.spec_from_file_location("ml_platform_copy", package / "__init__.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    try:
        expected = version("cdk-ml-platform")
    except PackageNotFoundError:
        expected = "0+unknown"
    assert module.__version__ == expected


def test_the_changelog_has_this_version_and_the_baselines_are_older_or_equal() -> None:
    current = Version(ml_platform.__version__)
    headings = re.findall(r"^## (\S+)", (ROOT / "CHANGELOG.md").read_text(), re.MULTILINE)
    assert str(current) in headings
    baselines = [Version(p.name) for p in (ROOT / "tests" / "upgrade" / "baseline").iterdir()]
    assert baselines and max(baselines) <= current

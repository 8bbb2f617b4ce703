"""The construct library (``ml_platform``) never imports the tooling beside it: the ``mlp`` CLI
with the local server (``ml_platform_cli``) and the cost estimator (``ml_platform_pricing``).
The tooling imports the library, never the other way round (issue #37 point 6)."""

from __future__ import annotations

import ast
import graphlib

import pytest

from tests.support import ROOT

TOOLING = ("ml_platform_cli", "ml_platform_pricing")


def imported_modules(source: str) -> list[str]:
    """Every absolute import of ``source`` at any depth, ``from a import b`` as ``a`` and
    ``a.b`` (``b`` may be a module)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found += [node.module, *(f"{node.module}.{alias.name}" for alias in node.names)]
    return found


def tooling_imports(source: str) -> list[str]:
    """Every tooling module ``source`` imports, at any depth (a function-local import counts)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        else:
            continue
        found += [n for n in names if n.split(".")[0] in TOOLING]
    return found


def test_no_library_module_imports_the_tooling() -> None:
    offenders = {
        str(path.relative_to(ROOT)): imports
        for path in sorted((ROOT / "ml_platform").rglob("*.py"))
        if (imports := tooling_imports(path.read_text()))
    }
    assert offenders == {}


def test_the_check_sees_top_level_and_function_local_imports() -> None:
    source = (
        "import ml_platform_cli.main\n"
        "def f():\n"
        "    from ml_platform_pricing.annotate import annotate_costs\n"
        "    from ml_platform.app import new_app\n"
    )
    assert tooling_imports(source) == ["ml_platform_cli.main", "ml_platform_pricing.annotate"]


def test_the_tooling_packages_are_top_level_beside_the_library() -> None:
    for package in TOOLING:
        assert (ROOT / package / "__init__.py").is_file()
    # (a checkout may keep an old __pycache__ folder behind: only source files count)
    library = ROOT / "ml_platform"
    assert not list((library / "cli").rglob("*.py"))
    assert not list((library / "pricing").rglob("*.py"))
    assert not list(library.rglob("local_server.py"))


@pytest.mark.parametrize("package", TOOLING)
def test_no_module_of_the_tooling_imports_one_that_imports_it_back(package: str) -> None:
    # Function-local imports count: they are the cycles that stay hidden until a test imports
    # the modules in another order (cli.completion <-> cli.main, cli.images <-> cli.mirror).
    modules = {}
    for path in (ROOT / package).rglob("*.py"):
        parts = path.relative_to(ROOT).with_suffix("").parts
        modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    graph = {
        name: {m for m in imported_modules(path.read_text()) if m in modules and m != name}
        for name, path in modules.items()
    }
    try:
        tuple(graphlib.TopologicalSorter(graph).static_order())
    except graphlib.CycleError as error:
        pytest.fail(f"import cycle: {' -> '.join(error.args[1])}")

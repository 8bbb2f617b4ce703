"""scripts/import_graph.py: the layers read top-down (app, stacks, constructs and charts, then
data modules), no module of ml_platform sits in an import cycle and no two of its packages
import each other."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from tests.support import ROOT

SCRIPT = ROOT / "scripts" / "import_graph.py"
_spec = importlib.util.spec_from_file_location("import_graph", SCRIPT)
assert _spec and _spec.loader
import_graph = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(import_graph)

EDGES = import_graph.import_edges(ROOT)


def test_no_module_imports_a_higher_layer() -> None:
    assert import_graph.upward_imports(EDGES) == []


def test_no_module_is_in_an_import_cycle() -> None:
    assert import_graph.cycles(EDGES) == []


def test_no_two_packages_import_each_other() -> None:
    # k8s_charts <-> training (through the chart names) and sagemaker_images <-> triton (the
    # default release) were the last such pairs.
    assert import_graph.two_way_units(EDGES) == []


def _package(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / "ml_platform" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def test_a_type_checking_import_closes_a_cycle(tmp_path: Path) -> None:
    root = _package(
        tmp_path,
        {
            "__init__.py": "",
            "constructs/__init__.py": "",
            "constructs/a.py": "from ml_platform.constructs.b import B\n",
            "constructs/b.py": (
                "from typing import TYPE_CHECKING\n"
                "if TYPE_CHECKING:\n    from ml_platform.constructs import a\n"
            ),
            "instances.py": "from .constructs.a import X\n",
        },
    )
    edges = import_graph.import_edges(root)
    assert import_graph.cycles(edges) == [["ml_platform.constructs.a", "ml_platform.constructs.b"]]
    assert import_graph.upward_imports(edges) == [
        ("ml_platform.instances", "ml_platform.constructs.a")
    ]

"""The import graph of ``ml_platform``, read from the source (nothing is imported): the cycles
between modules, the top-level units (``ml_platform.<unit>``) that import each other, and the
imports that go up the layers (app, stacks, constructs and charts, then data modules).

Every ``import`` counts, inside functions and under ``TYPE_CHECKING`` too: a lazy import still
ties the two modules together.

Usage: python scripts/import_graph.py [ROOT]   (ROOT: the checkout, default the current folder)
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

#: Layer of each top-level unit that has one; a module may import only its own layer or lower.
LAYERS = {
    "app": 3,
    "stacks": 2,
    "constructs": 1,
    "k8s_charts": 1,
    **dict.fromkeys(
        (
            "instances",
            "versions",
            "regions",
            "image_pins",
            "sagemaker_images",
            "ec2_instance_types",
            "stack_outputs",
            "k8s_names",
            "props",
        ),
        0,
    ),
}


def module_files(root: Path) -> dict[str, Path]:
    """Dotted name -> file, for every module of the package under ``root``."""
    modules = {}
    for path in sorted((root / "ml_platform").rglob("*.py")):
        parts = path.relative_to(root).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        modules[".".join(parts)] = path
    return modules


def import_edges(root: Path) -> dict[str, set[str]]:
    """Module -> the package's modules it imports (a name imported from a module counts as
    that module; from a package, as the package's ``__init__``)."""
    modules = module_files(root)

    def owner(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    edges: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*parts, base] if base else parts)
                targets = [base] + [f"{base}.{alias.name}" for alias in node.names]
            for target in targets:
                found = owner(target) if target.startswith("ml_platform") else None
                if found and found != name:
                    edges[name].add(found)
    return edges


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The groups of modules that reach each other through imports (strongly connected
    components of two or more), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for other in sorted(edges[node]):
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10 * len(edges)))
    for node in sorted(edges):
        if node not in index:
            visit(node)
    return sorted(found)


def unit(module: str) -> str:
    """The top-level unit of ``module``: ``ml_platform.constructs.storage`` -> ``constructs``."""
    return module.split(".")[1] if "." in module else ""


def two_way_units(edges: dict[str, set[str]]) -> list[tuple[str, str]]:
    """Pairs of top-level units each of which imports the other."""
    pairs = {(unit(a), unit(b)) for a in edges for b in edges[a] if unit(a) != unit(b)}
    return sorted((a, b) for a, b in pairs if a < b and (b, a) in pairs)


def upward_imports(edges: dict[str, set[str]]) -> list[tuple[str, str]]:
    """Imports from a module to one of a higher layer (:data:`LAYERS`)."""
    return sorted(
        (a, b)
        for a in edges
        for b in edges[a]
        if unit(a) in LAYERS and unit(b) in LAYERS and LAYERS[unit(b)] > LAYERS[unit(a)]
    )


def main(argv: list[str]) -> int:
    edges = import_edges(Path(argv[0]) if argv else Path.cwd())
    groups = cycles(edges)
    print(f"{len(groups)} import cycles ({sum(map(len, groups))} modules)")
    for group in groups:
        print("  " + ", ".join(group))
    pairs = two_way_units(edges)
    print(f"{len(pairs)} pairs of top-level units importing each other")
    for a, b in pairs:
        print(f"  {a} <-> {b}")
    upward = upward_imports(edges)
    print(f"{len(upward)} imports up the layers")
    for a, b in upward:
        print(f"  {a} -> {b}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

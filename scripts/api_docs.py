"""Write the API reference of every public module with pdoc, and fail on any pdoc warning.

pdoc reports a submodule it cannot import, a docstring it cannot parse or an annotation it cannot
resolve as a warning and renders the rest, so a broken page would pass unnoticed. `make docs`
runs this script instead of pdoc's CLI: the same rendering, exit code 1 when pdoc warned.

pdoc documents a package's submodules only when the package has no ``__all__`` (or names
them in it); ``ml_platform.constructs``, ``ml_platform.triton`` and others re-export their
public names through ``__all__``, so their modules are passed to pdoc one by one: every module
of the package whose dotted name has no part starting with ``_``.

Usage: python scripts/api_docs.py OUTPUT_DIR PACKAGE...
"""

from __future__ import annotations

import importlib
import pkgutil
import re
import sys
import warnings
from pathlib import Path

import pdoc
import pdoc.render


def public_modules(package: str) -> list[str]:
    """``package`` and every module below it with no name part starting with ``_``."""
    root = importlib.import_module(package)
    names = [package]
    for info in pkgutil.walk_packages(root.__path__, prefix=f"{package}."):
        if not any(part.startswith("_") for part in info.name.split(".")):
            names.append(info.name)
    return sorted(names)


def specs_for(modules: list[str]) -> list[str]:
    """The module specifications to pass to pdoc so that each of ``modules`` gets one page:
    pdoc walks a package's submodules unless the package's ``__all__`` leaves them out, so a
    module is passed on its own only when its parent is not in ``modules`` or hides it."""
    wanted = set(modules)
    specs = []
    for name in modules:
        parent, _, leaf = name.rpartition(".")
        if parent not in wanted:
            specs.append(name)
            continue
        hidden_by = getattr(importlib.import_module(parent), "__all__", None)
        if hidden_by is not None and leaf not in hidden_by:
            specs.append(name)
    return specs


#: pdoc's spec that drops, from the modules collected so far, every one with a name part starting
#: with ``_``: pdoc walks all of a package's submodules, ``_`` ones included.
PRIVATE_MODULES = r"!.*\._"


def build(output_directory: Path, modules: list[str]) -> list[str]:
    """Render ``modules`` (and their public submodules) into ``output_directory``; return
    the warnings pdoc gave, one line each."""
    pdoc.render.configure(docformat="google")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        pdoc.pdoc(*modules, PRIVATE_MODULES, output_directory=output_directory)
    return [
        f"{w.filename}:{w.lineno}: {w.message}"
        for w in caught
        if Path(w.filename).resolve().is_relative_to(Path(pdoc.__file__).resolve().parent)
    ]


def rendered_names(output_directory: Path) -> tuple[int, int]:
    """How many names the pages document: module-level ones (pdoc gives each a ``<section>``)
    and class members (a ``classattr`` block each). A module's ``__all__`` decides which of its
    names pdoc renders, so this is the size of the public API as the reference shows it."""
    sections = members = 0
    for page in output_directory.rglob("*.html"):
        text = page.read_text(encoding="utf-8")
        sections += len(re.findall(r'<section id="', text))
        members += len(re.findall(r'class="classattr"', text))
    return sections, members


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print("usage: python scripts/api_docs.py OUTPUT_DIR PACKAGE...", file=sys.stderr)
        return 2
    modules = sorted({m for package in argv[1:] for m in public_modules(package)})
    found = build(Path(argv[0]), specs_for(modules))
    for line in found:
        print(f"pdoc warning: {line}", file=sys.stderr)
    pages = sum(1 for _ in Path(argv[0]).rglob("*.html"))
    names, members = rendered_names(Path(argv[0]))
    print(
        f"{pages} pages in {argv[0]}/ documenting {names} names and {members} class members, "
        f"{len(found)} pdoc warning(s)"
    )
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

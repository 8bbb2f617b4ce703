"""Which Node.js jsii runs: the project's pinned one when there is one.

jsii starts a Node process the first time a jsii library (aws_cdk, cdk8s, constructs) is
imported, with the binary named by ``JSII_NODE`` or else ``node`` from ``PATH``. A machine's
system Node may be an end-of-life line (Node 20 ended 2026-10-30), on which jsii prints an
11-line banner on every import. A clone of this repository installs a supported Node into
``node_modules/.bin/node`` (package.json pins it), and the CDK CLI run with ``npx`` already
puts that folder first on ``PATH``; this module makes ``mlp``, ``python app.py`` and the
examples run directly pick the same binary. ``ml_platform/__init__.py`` calls
:func:`prefer_project_node` before anything imports jsii.

That call comes too late for a program that imports ``aws_cdk`` before ``ml_platform`` (the
examples, most user apps): jsii has started already. So ``make install`` also writes
:data:`PTH_NAME` into the project's virtual environment (``ml_platform._node.main``): a
``.pth`` line, run by Python's ``site`` module at every interpreter start in that environment
(https://docs.python.org/3/library/site.html), that runs :func:`prefer_project_node` of this
file unless ``JSII_NODE`` is set: the same choice as the package's import, made before any
program's first import. It loads this one file, not the package (which reads pyproject.toml),
and does nothing once the package is uninstalled.

Supported Node lines (the CDK's supported LTS lines: Node 22 to 2027-10-30, Node 24 to
2028-10-30, https://docs.aws.amazon.com/cdk/v2/guide/node-versions.html): :data:`SUPPORTED`.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

#: The Node major versions this project supports (package.json pins one of them).
SUPPORTED = (22, 24)

_CHECKOUT = Path(__file__).resolve().parent.parent


def project_node(start: Path) -> Path | None:
    """``node_modules/.bin/node`` in ``start`` or the nearest parent that has one (where
    ``npx`` would look), or None."""
    for folder in (start, *start.parents):
        candidate = folder / "node_modules" / ".bin" / "node"
        if os.access(candidate, os.X_OK):
            return candidate
    return None


def prefer_project_node() -> Path | None:
    """Set ``JSII_NODE`` to the project's Node unless it is set already; returns the binary
    chosen (None: jsii uses ``node`` from ``PATH``). Looks in the working directory and its
    parents, then in the clone this package runs from (an editable install)."""
    if os.environ.get("JSII_NODE"):
        return Path(os.environ["JSII_NODE"])
    try:
        here = Path.cwd()
    except OSError:  # the working directory was deleted
        here = None
    node = (project_node(here) if here else None) or _checkout_node()
    if node is not None:
        os.environ["JSII_NODE"] = str(node)
    return node


def _checkout_node() -> Path | None:
    candidate = _CHECKOUT / "node_modules" / ".bin" / "node"
    # Only a clone (pyproject.toml beside the package), never a site-packages folder.
    if (_CHECKOUT / "pyproject.toml").is_file() and os.access(candidate, os.X_OK):
        return candidate
    return None


PTH_NAME = "ml_platform_node.pth"
"""The file :func:`write_pth` writes into the environment's ``site-packages``."""


def pth_line() -> str:
    """The line of :data:`PTH_NAME`. Python's ``site`` module executes a ``.pth`` line that
    starts with ``import``: unless ``JSII_NODE`` is set, this one finds ``ml_platform`` without
    importing it, loads this file on its own and calls :func:`prefer_project_node`."""
    return (
        "import importlib.util as u, os; "
        "s = 'JSII_NODE' not in os.environ and u.find_spec('ml_platform'); "
        "f = s and u.spec_from_file_location('_ml_platform_node_pth', "
        "os.path.join(s.submodule_search_locations[0], '_node.py')); "
        "m = f and u.module_from_spec(f); "
        "m and (f.loader.exec_module(m), m.prefer_project_node())\n"
    )


def write_pth(site_packages: Path) -> Path:
    """Write :data:`PTH_NAME` into ``site_packages``; returns its path."""
    target = site_packages / PTH_NAME
    target.write_text(pth_line(), encoding="utf-8")
    return target


def main() -> int:
    """Write :data:`PTH_NAME` into this interpreter's ``site-packages`` (``make install`` runs
    it); fails while the clone has no Node (``npm ci`` first)."""
    import sysconfig  # here, not at the top: the .pth loads this file at every interpreter start

    node = _checkout_node()
    if node is None:
        print(
            f"no executable {_CHECKOUT / 'node_modules' / '.bin' / 'node'} in a clone: run npm ci",
            file=sys.stderr,
        )
        return 1
    target = write_pth(Path(sysconfig.get_path("purelib")))
    print(f"    {target.name}: jsii runs the project's Node ({node}) in this environment")
    return 0

"""Which Node.js jsii runs: the project's pinned one when there is one.

jsii starts a Node process the first time a jsii library (aws_cdk, cdk8s, constructs) is
imported, with the binary named by ``JSII_NODE`` or else ``node`` from ``PATH``. A machine's
system Node may be an end-of-life line (Node 20 ended 2026-10-30), on which jsii prints an
11-line banner on every import. A clone of this repository installs a supported Node into
``node_modules/.bin/node`` (package.json pins it), and the CDK CLI run with ``npx`` already
puts that folder first on ``PATH``; this module makes ``mlp``, ``python app.py`` and the
examples run directly pick the same binary. ``ml_platform/__init__.py`` calls
:func:`prefer_project_node` before anything imports jsii.

Supported Node lines (the CDK's supported LTS lines: Node 22 to 2027-10-30, Node 24 to
2028-10-30, https://docs.aws.amazon.com/cdk/v2/guide/node-versions.html): :data:`SUPPORTED`.
"""

from __future__ import annotations

import os
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
